//! `dsh-mock-llm --scenario DIR [--addr 127.0.0.1:0] [--workspace DIR]`: serves a scenario's
//! recorded model responses until SIGINT/SIGTERM, then prints what was left unconsumed or
//! unanswered and exits non-zero if anything was.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use dsh_testkit::{ReplayServer, Scenario};

#[derive(Debug, Parser)]
#[command(
    name = "dsh-mock-llm",
    about = "Replay a conformance scenario's model.jsonl over HTTP (loopback only)"
)]
struct Args {
    /// Scenario directory (holds scenario.json and model.jsonl).
    #[arg(long)]
    scenario: PathBuf,
    /// Loopback address to bind; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: SocketAddr,
    /// Workspace directory where `hang` entries create their ready file (default: cwd).
    #[arg(long)]
    workspace: Option<PathBuf>,
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = term => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let scenario = match Scenario::load(&args.scenario) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("dsh-mock-llm: {e}");
            return ExitCode::from(2);
        }
    };
    let workspace = args.workspace.or_else(|| std::env::current_dir().ok());
    let server = match ReplayServer::start(&scenario, args.addr, workspace).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("dsh-mock-llm: {e}");
            return ExitCode::from(2);
        }
    };
    println!("listening on {}", server.url());
    let _ = std::io::stdout().flush();
    shutdown_signal().await;
    let status = server.status();
    println!("{status}");
    let clean = server.unconsumed().is_empty() && server.unanswered().is_empty();
    if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
