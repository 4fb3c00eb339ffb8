//! `dsh exec "task"` after argv: one headless turn. stdout carries only the final answer
//! (text), the session events as JSON lines followed by one `result` line (stream-json), or one
//! JSON object (json). stderr gets the session id, progress notes when asked for, and failures.

use std::io::IsTerminal;
use std::io::Read;
use std::path::Path;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_agent::CancelCause;
use dsh_agent::TurnEndReason;
use dsh_host::Host;
use dsh_host::NewSession;
use dsh_host::SessionHost;
use dsh_protocol::TokenUsage;
use dsh_session::data::AssistantMessage;
use dsh_tools::ApprovalService;
use serde_json::json;
use tokio::sync::mpsc;

use crate::HeadlessError;
use crate::Io;
use crate::children::Tagged;

/// How `dsh exec` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The final assistant text and a newline.
    Text,
    /// One `{"type":"session_event",...}` line per persisted event, then a `result` line.
    StreamJson,
    /// One JSON object at the end: session id, status, final text, usage.
    Json,
}

/// Which session the task goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    New,
    /// `--resume ID` (a full id or a unique prefix).
    Resume(String),
    /// `--continue`: the newest session of the folder.
    Continue,
    /// `--fork ID`: a new session starting from a copy of ID's conversation.
    Fork(String),
}

/// The task: the words given, or stdin for `-` (or no words with stdin piped in). Read before
/// anything is created, so a missing task leaves no session behind.
pub fn task(words: &[String]) -> Result<String, HeadlessError> {
    let from_stdin = match words {
        [] => !std::io::stdin().is_terminal(),
        [dash] => dash == "-",
        _ => false,
    };
    let task = if from_stdin {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| HeadlessError::context("cannot read the task from stdin", e))?;
        text
    } else {
        words.join(" ")
    };
    if task.trim().is_empty() {
        return Err(HeadlessError::Invalid(
            "a task is required, for example: dsh exec \"run the tests\" (or pipe it in: echo \"run the tests\" | dsh exec)".to_owned(),
        ));
    }
    Ok(task)
}

/// `dsh exec` on a started host: opens the target session, runs the turn until it ends or a
/// stop signal (SIGINT, SIGTERM, SIGHUP: tool processes are killed at once, the turn is
/// cancelled, the log closed) and shuts the host down. The exit status is the ending's, or
/// 128 + the signal number.
pub async fn main(
    host: &Host,
    cwd: &Path,
    target: &Target,
    run: ExecRun,
    io: &Io,
) -> Result<ExitCode, HeadlessError> {
    let sessions = host.sessions();
    let ended = async {
        let agent = open(&sessions, cwd, target)?;
        let mut stops = crate::signals::listen().map_err(HeadlessError::Io)?;
        let stop = async move { stops.first().await };
        let fresh = matches!(target, Target::New | Target::Fork(_));
        let ended = self::run(&sessions, agent, run, fresh, io, stop).await?;
        Ok::<_, HeadlessError>(ended)
    }
    .await;
    host.shutdown();
    let ended = ended?;
    Ok(match ended.stopped {
        Some(stop) => stop.exit_code(),
        None => ExitCode::from(ended.code),
    })
}

/// The agent the task goes to.
pub fn open(
    sessions: &SessionHost,
    cwd: &Path,
    target: &Target,
) -> Result<AgentHandle, HeadlessError> {
    let store = sessions.store();
    Ok(match target {
        Target::New => sessions.create(NewSession {
            id: None,
            cwd: cwd.to_path_buf(),
        })?,
        Target::Resume(id) => {
            let id = dsh_host::stored::resolve(store.as_ref(), id)?;
            sessions
                .load(&id)
                .map_err(|e| HeadlessError::context(format!("cannot resume session {id}"), e))?
        }
        Target::Fork(id) => {
            let id = dsh_host::stored::resolve(store.as_ref(), id)?;
            sessions
                .fork(&id)
                .map_err(|e| HeadlessError::context(format!("cannot fork session {id}"), e))?
        }
        Target::Continue => {
            let here = cwd.to_string_lossy();
            let newest = dsh_host::stored::newest_in(store.as_ref(), &here)?.ok_or_else(|| {
                HeadlessError::Invalid(format!("no stored session in {here} to continue"))
            })?;
            sessions.load(&newest.id).map_err(|e| {
                HeadlessError::context(format!("cannot resume session {}", newest.id), e)
            })?
        }
    })
}

/// One run's task and how it reports.
#[derive(Debug, Clone)]
pub struct ExecRun {
    pub task: String,
    pub output: Output,
    /// `-o/--output-last-message FILE`: the final answer written there too.
    pub last_message: Option<PathBuf>,
    /// One stderr line per tool call, failure and retry (the binary asks for it on a terminal).
    pub progress: bool,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended<S> {
    /// The stop that cancelled the turn, if one came (the binary exits by it).
    pub stopped: Option<S>,
    /// The exit status of the turn's ending: 0 completed, 130 aborted, 1 otherwise (with a
    /// note on stderr).
    pub code: u8,
    /// Whether the model answered anything in this run (an `assistant/message` was logged):
    /// no key, an unreachable or refusing server and every 4xx/5xx leave it `false`.
    pub answered: bool,
}

/// Drives `agent` through one turn on `run.task` and prints it; `stop` (a signal) cancels the
/// turn. The agent is disposed at the end, unless the run itself failed. A `fresh` session (one
/// this run created: new or forked) whose run failed before the model said anything holds
/// nothing worth resuming: it is removed before the result is printed, and the result names no
/// session (the README's promise; `--continue` skips such sessions for the same reason).
pub async fn run<S: Send + 'static>(
    sessions: &SessionHost,
    agent: AgentHandle,
    run: ExecRun,
    fresh: bool,
    io: &Io,
    stop: impl Future<Output = S> + Send + 'static,
) -> Result<Ended<S>, HeadlessError> {
    let output = run.output;
    let session_id = agent.id().to_owned();
    io.note(&format!("session {session_id}"));
    let first_seq = agent.log().len();
    // Headless, no one can answer an approval: say which flag allows the call instead. The
    // session's approval policy still applies first (`-a never` refuses without a note).
    let _approval =
        agent
            .scope()
            .provide::<dyn ApprovalService>(Arc::new(dsh_approval::UserApproval::new(
                Some(Arc::new(crate::approval::Headless::new(io.clone()))),
                agent.scope().service::<dyn dsh_approval::PolicySource>(),
            )))?;

    // Events are printed as they commit; an unbounded channel never drops one.
    let (sender, receiver) = mpsc::unbounded_channel::<Tagged>();
    // stream-json also carries the delegated children's events, tagged with their session.
    let children = (output == Output::StreamJson)
        .then(|| {
            crate::children::follow(
                sessions.service::<dyn dsh_plugin::DelegatedChildren>(),
                &agent,
                sender.clone(),
            )
        })
        .flatten();
    let subscription = {
        let session = session_id.clone();
        agent.log().on_event(move |event| {
            let _ = sender.send(Tagged {
                session: session.clone(),
                parent: None,
                event: event.clone(),
            });
        })
    };
    let progress = run
        .progress
        .then(|| crate::approval::progress(&agent, sessions.presentation(&agent), io.clone()));
    let printer = (output == Output::StreamJson)
        .then(|| tokio::spawn(print_events(receiver, agent.log().clone(), io.clone())));

    let cancel_agent = agent.clone();
    let interrupt = tokio::spawn(async move {
        let stop = stop.await;
        cancel_agent.cancel(CancelCause::User, false);
        stop
    });
    // A task that names a command of the shared registry (`/undo` in a resumed session) runs
    // that command, as the TUI and ACP do: no model request.
    let outcome = match run_command(&agent, &run.task).await {
        Some(outcome) => Ok(outcome),
        None => dsh_agent::run_final(&agent, &run.task).await,
    };
    let stopped = if interrupt.is_finished() {
        interrupt.await.ok()
    } else {
        interrupt.abort();
        // Awaited so its clone of the agent is dropped now: the session's log is released
        // before `main` may remove it.
        let _ = interrupt.await;
        None
    };
    drop(subscription);
    drop(children);
    drop(progress);
    if let Some(printer) = printer {
        let _ = printer.await;
    }
    let outcome = outcome.map_err(|e| HeadlessError::context("the run failed", e))?;
    let usage = total_usage(&agent, first_seq);
    let answered = answered_since(&agent, first_seq);
    let completed = matches!(outcome.reason, Some(TurnEndReason::Completed));
    // A failed run has no answer to print: stdout stays empty (not a lone newline) and `-o`
    // is not created.
    let has_answer = completed || !outcome.text.is_empty();
    let json_error = |e: serde_json::Error| HeadlessError::Invalid(e.to_string());
    let usage = match usage {
        Some(usage) => {
            let mut value = serde_json::to_value(usage).map_err(json_error)?;
            if output == Output::StreamJson {
                add_context_fill(&mut value, sessions, &agent);
            }
            Some(value)
        }
        None => None,
    };
    agent.dispose().await;
    drop(agent);
    let code = match stopped {
        Some(_) => 1,
        None => exit_code(&outcome.reason, io),
    };
    let kept = if fresh && !answered && stopped.is_none() && code != 0 {
        match remove_when_released(sessions, &session_id).await {
            Ok(()) => {
                io.note(&format!(
                    "dsh: session {session_id} was not kept: the run failed before the model answered"
                ));
                false
            }
            Err(error) => {
                tracing::warn!(%error, session = %session_id, "cannot remove the unanswered session");
                true
            }
        }
    } else {
        true
    };
    let result = |mut result: serde_json::Value| {
        if !kept {
            result["sessionId"] = serde_json::Value::Null;
            result["sessionKept"] = json!(false);
        }
        if let Some(TurnEndReason::Error { error }) = &outcome.reason {
            result["error"] = json!({"code": error.code, "message": error.message});
        }
        if let Some(usage) = &usage {
            result["usage"] = usage.clone();
        }
        result
    };
    match output {
        Output::Text => {
            if has_answer {
                io.say(&outcome.text)?;
            }
        }
        Output::StreamJson => {
            let line = result(json!({
                "type": "result",
                "sessionId": session_id,
                "status": status_of(&outcome.reason),
                "output": outcome.text,
            }));
            io.say(&line.to_string())?;
        }
        Output::Json => {
            let line = result(json!({
                "sessionId": session_id,
                "status": status_of(&outcome.reason),
                "output": outcome.text,
            }));
            io.say(&line.to_string())?;
        }
    }
    if let Some(file) = run.last_message.as_ref().filter(|_| has_answer) {
        std::fs::write(file, &outcome.text).map_err(|e| {
            HeadlessError::context(
                format!("cannot write the last message to {}", file.display()),
                e,
            )
        })?;
    }
    Ok(Ended {
        stopped,
        code,
        answered,
    })
}

/// The exit status of a turn's ending (0 completed, 130 aborted, 1 otherwise), with the note
/// on stderr that says why for a failure.
fn exit_code(reason: &Option<TurnEndReason>, io: &Io) -> u8 {
    match reason {
        Some(TurnEndReason::Completed) => 0,
        Some(TurnEndReason::Error { error }) => {
            io.note(&format!("dsh: {}: {}", error.code, error.message));
            1
        }
        Some(TurnEndReason::Aborted { .. }) => 130,
        Some(TurnEndReason::MaxTokens) => {
            io.note(
                "dsh: MAX_TOKENS: the model stopped at its output token limit before it finished the turn",
            );
            1
        }
        Some(TurnEndReason::Blocked) => {
            io.note("dsh: BLOCKED: the turn was blocked before it completed");
            1
        }
        Some(TurnEndReason::Interrupted) | None => {
            io.note("dsh: INTERRUPTED: the run ended without completing its turn");
            1
        }
    }
}

/// Runs `task` as a slash command when it names one the session's registry knows; `None`
/// otherwise (the task goes to the model). The command's text is the run's output; a failed
/// command ends the run as an error (`COMMAND_FAILED`); a command that continues in another
/// session (`/rewind N conversation`) says how to resume it.
async fn run_command(agent: &AgentHandle, task: &str) -> Option<dsh_agent::RunOutcome> {
    let registry = dsh_commands::CommandRegistry::of(agent.scope())?;
    let line = task.trim();
    let parsed = dsh_commands::parse_command(line)?;
    registry.find(agent.scope(), parsed.name)?;
    let executed = registry
        .execute(
            agent,
            line,
            Vec::new(),
            tokio_util::sync::CancellationToken::new(),
        )
        .await;
    let failed = |message: String| dsh_agent::RunOutcome {
        text: String::new(),
        reason: Some(TurnEndReason::Error {
            error: dsh_protocol::LlmFailure {
                message,
                code: "COMMAND_FAILED".to_owned(),
                status: None,
                provider_retry_after_ms: None,
                request_id: None,
            },
        }),
        session_id: agent.id().to_owned(),
    };
    Some(match executed {
        Ok(Some(executed)) => match executed.result {
            dsh_commands::CommandResult::Error { text } => failed(text),
            result => {
                let mut text = result.display_text().unwrap_or_default();
                if let Some(session) = result.switch_to() {
                    text.push_str(&format!(
                        "\nContinue there with: dsh exec --resume {session} \"…\""
                    ));
                }
                dsh_agent::RunOutcome {
                    text,
                    reason: Some(TurnEndReason::Completed),
                    session_id: agent.id().to_owned(),
                }
            }
        },
        Ok(None) => return None,
        Err(error) => failed(format!("/{} failed: {error}", parsed.name)),
    })
}

/// Removes the stored session `id` once this process has let go of its log. The agent's last
/// holders (tasks that were aborted, the host's bookkeeping) drop it asynchronously after
/// `dispose`, so the store may still see it live for a moment; the wait is bounded.
async fn remove_when_released(
    sessions: &SessionHost,
    id: &str,
) -> Result<(), dsh_session::SessionError> {
    let store = sessions.store();
    let mut attempts = 0;
    loop {
        match store.remove(id) {
            Err(dsh_session::SessionError::AlreadyExists { .. }) if attempts < 100 => {
                attempts += 1;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

/// Whether an `assistant/message` was logged at or after `first_seq`.
fn answered_since(agent: &AgentHandle, first_seq: u64) -> bool {
    let mut answered = false;
    let read = agent.log().visit_since(first_seq, |event| {
        answered |= event.kind == dsh_session::kind::ASSISTANT_MESSAGE;
    });
    // Unreadable: count it as answered, so nothing is removed on a guess.
    read.is_err() || answered
}

/// The turn's ending in one word (`--output json`).
fn status_of(reason: &Option<TurnEndReason>) -> &'static str {
    match reason {
        Some(TurnEndReason::Completed) => "completed",
        Some(TurnEndReason::Error { .. }) => "error",
        Some(TurnEndReason::Aborted { .. }) => "aborted",
        Some(TurnEndReason::MaxTokens) => "max-tokens",
        Some(TurnEndReason::Blocked) => "blocked",
        Some(TurnEndReason::Interrupted) => "interrupted",
        None => "unknown",
    }
}

/// Prints the events as they become durable: a batch of the session's own events is printed
/// only once the log's writer has written all of it, so an event a full disk kept out of the
/// file is never printed (crash repair would give its sequence number to another event). One
/// write barrier covers every event queued meanwhile.
async fn print_events(
    mut receiver: mpsc::UnboundedReceiver<Tagged>,
    log: dsh_session::SessionLog,
    io: Io,
) {
    let mut batch = Vec::new();
    while receiver.recv_many(&mut batch, 1024).await > 0 {
        if batch.iter().any(|tagged| tagged.parent.is_none())
            && let Err(error) = log.written().await
        {
            io.note(&format!(
                "dsh: the session log could not be written ({error}); events after it are not printed"
            ));
            return;
        }
        for tagged in batch.drain(..) {
            let mut line = json!({"type": "session_event", "sessionId": tagged.session, "event": tagged.event.as_ref()});
            if let Some(parent) = tagged.parent {
                line["parentSessionId"] = json!(parent);
            }
            if (io.stdout)(&line.to_string()).is_err() {
                return;
            }
        }
    }
}

/// The context fill after the run (`contextTokens`: the newest prompt size plus the estimated
/// change since, so a compaction shows at once; `contextWindow`), from the token meter.
fn add_context_fill(usage: &mut serde_json::Value, sessions: &SessionHost, agent: &AgentHandle) {
    let Some(meter) = sessions.service::<dsh_token_meter::TokenMeter>() else {
        return;
    };
    let pressure = meter.pressure(agent.log());
    if let Some(tokens) = pressure.projected_tokens {
        usage["contextTokens"] = json!(tokens);
    }
    if let Some(window) = pressure.context_window {
        usage["contextWindow"] = json!(window);
    }
}

/// The field-wise sum of each step's usage, as the upstream driver reports it (saturating).
fn total_usage(agent: &AgentHandle, first_seq: u64) -> Option<TokenUsage> {
    let mut total: Option<TokenUsage> = None;
    let read = agent.log().visit_since(first_seq, |event| {
        let Some(Ok(message)) = event.decode::<AssistantMessage>() else {
            return;
        };
        let Some(usage) = message.usage else { return };
        total
            .get_or_insert_with(TokenUsage::default)
            .accumulate(&usage);
    });
    if let Err(error) = read {
        // The total then covers only what could be read; say so rather than fail the run.
        tracing::warn!(%error, "usage: cannot read the whole turn back from the session log");
    }
    total
}
