//! `dsh exec "task"`: one headless turn. stdout carries only the final answer (text) or the
//! session events as JSON lines followed by one `result` line (stream-json).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use dsh_agent::AgentHandle;
use dsh_agent::CancelCause;
use dsh_agent::TurnEndReason;
use dsh_protocol::TokenUsage;
use dsh_session::Event;
use dsh_session::data::AssistantMessage;
use serde_json::json;
use tokio::sync::mpsc;

use dsh_host::NewSession;
use dsh_host::Overrides;

/// How `dsh exec` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// The final assistant text and a newline.
    Text,
    /// One `{"type":"session_event",...}` line per persisted event, then a `result` line.
    StreamJson,
}

pub struct ExecArgs {
    pub task: Vec<String>,
    pub cwd: Option<PathBuf>,
    pub model: Option<String>,
    pub output: Output,
}

pub fn run(args: ExecArgs) -> anyhow::Result<ExitCode> {
    let task = args.task.join(" ");
    if task.trim().is_empty() {
        anyhow::bail!("a task is required, for example: dsh exec \"run the tests\"");
    }
    let cwd = crate::host::cwd_or_current(args.cwd)?;
    let mut overrides = crate::host::overrides();
    if let Some(model) = args.model {
        overrides.set("model.name", model);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run_task(overrides, cwd, task, args.output))
}

async fn run_task(
    overrides: Overrides,
    cwd: PathBuf,
    task: String,
    output: Output,
) -> anyhow::Result<ExitCode> {
    let host = crate::host::start(&cwd, overrides).await?;
    let agent = host.sessions().create(NewSession { id: None, cwd })?;
    let session_id = agent.id().to_owned();
    let first_seq = agent.log().len();

    // Events are printed as they commit; an unbounded channel never drops one.
    let (sender, receiver) = mpsc::unbounded_channel::<Arc<Event>>();
    let subscription = agent.log().on_event(move |event| {
        let _ = sender.send(event.clone());
    });
    let printer = (output == Output::StreamJson)
        .then(|| tokio::spawn(print_events(session_id.clone(), receiver)));

    // SIGINT, SIGTERM, SIGHUP: tool processes are killed at once, the turn is cancelled, the
    // log closed below, and the exit code says which signal it was.
    let mut stops = crate::signals::listen()?;
    let cancel_agent = agent.clone();
    let interrupt = tokio::spawn(async move {
        let stop = stops.first().await;
        cancel_agent.cancel(CancelCause::User, false);
        stop
    });
    let outcome = dsh_agent::run_final(&agent, &task).await;
    let stopped = if interrupt.is_finished() {
        interrupt.await.ok()
    } else {
        interrupt.abort();
        None
    };
    drop(subscription);
    if let Some(printer) = printer {
        let _ = printer.await;
    }
    let outcome = outcome.context("the run failed")?;

    let mut stdout = std::io::stdout().lock();
    match output {
        Output::Text => writeln!(stdout, "{}", outcome.text)?,
        Output::StreamJson => {
            let mut result =
                json!({"type": "result", "sessionId": session_id, "output": outcome.text});
            if let Some(usage) = total_usage(&agent, first_seq) {
                result["usage"] = serde_json::to_value(usage)?;
            }
            writeln!(stdout, "{result}")?;
        }
    }
    stdout.flush()?;
    drop(stdout);
    agent.dispose().await;
    host.shutdown();
    if let Some(stop) = stopped {
        return Ok(stop.exit_code());
    }
    Ok(match &outcome.reason {
        Some(TurnEndReason::Completed) => ExitCode::SUCCESS,
        Some(TurnEndReason::Error { error }) => {
            eprintln!("dsh: {}: {}", error.code, error.message);
            ExitCode::FAILURE
        }
        Some(TurnEndReason::Aborted { .. }) => ExitCode::from(130),
        _ => ExitCode::FAILURE,
    })
}

async fn print_events(session_id: String, mut receiver: mpsc::UnboundedReceiver<Arc<Event>>) {
    while let Some(event) = receiver.recv().await {
        let line =
            json!({"type": "session_event", "sessionId": session_id, "event": event.as_ref()});
        let mut stdout = std::io::stdout().lock();
        if writeln!(stdout, "{line}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            return;
        }
    }
}

/// The field-wise sum of each step's usage, as the upstream driver reports it.
fn total_usage(agent: &AgentHandle, first_seq: u64) -> Option<TokenUsage> {
    let mut total: Option<TokenUsage> = None;
    for event in agent.log().events_since(first_seq) {
        let Some(Ok(message)) = event.decode::<AssistantMessage>() else {
            continue;
        };
        let Some(usage) = message.usage else { continue };
        let sum = total.get_or_insert_with(TokenUsage::default);
        sum.input_tokens += usage.input_tokens;
        sum.output_tokens += usage.output_tokens;
        add(&mut sum.cache_read_tokens, usage.cache_read_tokens);
        add(&mut sum.cache_write_tokens, usage.cache_write_tokens);
        add(&mut sum.reasoning_tokens, usage.reasoning_tokens);
    }
    total
}

fn add(slot: &mut Option<u64>, value: Option<u64>) {
    if let Some(value) = value {
        *slot = Some(slot.unwrap_or(0) + value);
    }
}
