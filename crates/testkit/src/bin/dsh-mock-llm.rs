//! `dsh-mock-llm --scenario DIR [--addr 127.0.0.1:0] [--workspace DIR]`: serves a scenario's
//! recorded model responses until SIGINT/SIGTERM, then prints what was left unconsumed or
//! unanswered and exits non-zero if anything was. `--tool-loop N [--command TEMPLATE]` serves
//! the synthetic N-step shell loop of `dsh_testkit::synthetic` instead of a recorded scenario.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use dsh_testkit::synthetic::ToolLoop;
use dsh_testkit::{ReplayServer, Scenario};

#[derive(Debug, Parser)]
#[command(
    name = "dsh-mock-llm",
    about = "Replay a conformance scenario's model.jsonl over HTTP (loopback only)"
)]
struct Args {
    /// Scenario directory (holds scenario.json and model.jsonl).
    #[arg(
        long,
        required_unless_present = "tool_loop",
        conflicts_with = "tool_loop"
    )]
    scenario: Option<PathBuf>,
    /// Serve a synthetic session of N shell-command steps then `DONE` (prompt:
    /// `dsh_testkit::synthetic::TOOL_LOOP_PROMPT`).
    #[arg(long, value_name = "N")]
    tool_loop: Option<usize>,
    /// The command of each tool-loop step; `{i}` is the step number.
    #[arg(long, requires = "tool_loop", default_value = "echo step-{i}")]
    command: String,
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
    let scenario = match (&args.scenario, args.tool_loop) {
        (_, Some(steps)) => ToolLoop {
            steps,
            command: args.command.clone(),
        }
        .scenario(),
        (Some(dir), None) => match Scenario::load(dir) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("dsh-mock-llm: {e}");
                return ExitCode::from(2);
            }
        },
        (None, None) => {
            eprintln!("dsh-mock-llm: --scenario or --tool-loop is required");
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
