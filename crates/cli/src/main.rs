//! The `dsh` binary: the composition root. The only crate that prints to the terminal.

use clap::Parser;
use clap::Subcommand;

mod config;

/// dsh: an agent harness for DeepSeek models, built around one guarded tool runtime.
#[derive(Debug, Parser)]
#[command(name = "dsh", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        None => {
            anyhow::bail!("no command given; try `dsh --help`");
        }
        Some(command) => match command {},
    }
}
