//! `dsh-conformance [--bin PATH_TO_DSH] [--report FILE] [--verbose] DIR...`: replays
//! conformance scenarios through the `dsh` binary and judges them. Prints one line per scenario
//! and a final `N passed, M failed, K skipped`; exits 0 iff nothing failed.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use dsh_testkit::{RunnerOptions, Status, runner};

#[derive(Debug, Parser)]
#[command(
    name = "dsh-conformance",
    about = "Run conformance scenarios against the dsh binary"
)]
struct Args {
    /// The dsh binary under test (default: `dsh` next to this executable, else on PATH).
    #[arg(long = "bin")]
    bin: Option<PathBuf>,
    /// Write a JSON report (per-scenario status, reason, text parity) to FILE.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Print every finding and the harness's stderr for failing scenarios.
    #[arg(long)]
    verbose: bool,
    /// Default timeout of each ACP wait step, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    wait_ms: u64,
    /// Scenario directories, or folders containing scenarios.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
}

fn default_bin() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("dsh")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("dsh"))
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let mut opts = RunnerOptions::new(args.bin.unwrap_or_else(default_bin));
    opts.wait = Duration::from_millis(args.wait_ms);
    let verbose = args.verbose;
    let report = runner::run_all(&args.dirs, &opts, |r| {
        println!("{}", r.line());
        if verbose && r.status == Status::Fail {
            for f in &r.failures {
                println!("    {f}");
            }
            if let Some(err) = &r.stderr {
                for line in err.lines() {
                    println!("    stderr| {line}");
                }
            }
        }
        if verbose && let Some(p) = r.parity.filter(|p| p.total > 0) {
            println!("    text parity {}/{}", p.matched, p.total);
        }
        let _ = std::io::stdout().flush();
    })
    .await;
    if let Some(path) = &args.report {
        let text = match serde_json::to_string_pretty(&report) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("dsh-conformance: cannot serialise report: {e}");
                return ExitCode::from(2);
            }
        };
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("dsh-conformance: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if report.parity.total > 0 {
        println!(
            "text parity: {}/{} tool results",
            report.parity.matched, report.parity.total
        );
    }
    println!("{}", report.summary_line());
    if report.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
