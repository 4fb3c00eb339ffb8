//! `dsh-long-session-llm --steps N --result-bytes B --context-window T [--addr A] [--report FILE]`:
//! a model that keeps calling `bash` with large outputs (see `dsh_testkit::long_session`).
//! Prints `listening on <url>`; on SIGINT/SIGTERM writes one JSON line per served request to
//! `--report` (or stdout) and exits.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use dsh_testkit::long_session::LongSessionPlan;
use dsh_testkit::long_session::LongSessionServer;

#[derive(Debug, Parser)]
#[command(
    name = "dsh-long-session-llm",
    about = "A tool-calling model for long-session benchmarks (loopback only)"
)]
struct Args {
    #[arg(long, default_value_t = 2000)]
    steps: usize,
    #[arg(long, default_value_t = 20_000)]
    result_bytes: usize,
    /// Requests estimated above this many tokens are refused as context_length_exceeded.
    #[arg(long, default_value_t = 1_000_000)]
    context_window: u64,
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: SocketAddr,
    #[arg(long)]
    report: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let plan = LongSessionPlan {
        steps: args.steps,
        result_bytes: args.result_bytes,
        context_window: args.context_window,
    };
    let server = match LongSessionServer::start(plan, args.addr).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("dsh-long-session-llm: {e}");
            return ExitCode::from(2);
        }
    };
    println!("listening on {}", server.url());
    let _ = std::io::stdout().flush();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("dsh-long-session-llm: {e}");
                    return ExitCode::from(2);
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
    let lines: String = server
        .served()
        .iter()
        .map(|s| serde_json::to_string(s).unwrap_or_default() + "\n")
        .collect();
    let written = match &args.report {
        Some(path) => std::fs::write(path, lines),
        None => std::io::stdout().write_all(lines.as_bytes()),
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dsh-long-session-llm: {e}");
            ExitCode::FAILURE
        }
    }
}
