//! `dsh exec "task"`: one headless turn. stdout carries only the final answer (text), the
//! session events as JSON lines followed by one `result` line (stream-json), or one JSON object
//! (json). stderr gets the session id, progress notes when it is a terminal, and failures.

#[path = "exec_headless.rs"]
mod headless;

use std::io::IsTerminal;
use std::io::Read;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use dsh_agent::AgentHandle;
use dsh_agent::CancelCause;
use dsh_agent::TurnEndReason;
use dsh_protocol::TokenUsage;
use dsh_session::data::AssistantMessage;
use dsh_tools::ApprovalService;
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
    /// One JSON object at the end: session id, status, final text, usage.
    Json,
}

/// `-s/--sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Sandbox {
    ReadOnly,
    WorkspaceWrite,
    DangerFullAccess,
}

impl Sandbox {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::WorkspaceWrite => "workspace-write",
            Self::DangerFullAccess => "danger-full-access",
        }
    }
}

/// `-a/--approval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Approval {
    /// Calls that need approval ask (headless there is no one to ask: they fail and say so).
    Ask,
    /// Calls that need approval are refused without asking.
    Never,
}

/// Which session the task goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    New,
    /// `--resume ID`
    Resume(String),
    /// `--continue`: the newest session of the folder.
    Continue,
    /// `--fork ID`: a new session starting from a copy of ID's conversation.
    Fork(String),
}

pub struct ExecArgs {
    pub task: Vec<String>,
    pub cwd: Option<PathBuf>,
    pub model: Option<String>,
    pub output: Output,
    pub sandbox: Option<Sandbox>,
    pub approval: Option<Approval>,
    /// `-c key=value`, any configuration key.
    pub config: Vec<String>,
    pub target: Target,
    /// `-o/--output-last-message FILE`.
    pub last_message: Option<PathBuf>,
}

/// The session's folder: `--cwd` (an existing directory) or the current one, made absolute.
/// Checked before anything is created, so a bad folder leaves no session behind.
pub fn checked_cwd(cwd: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let Some(cwd) = cwd else {
        return std::env::current_dir().context("cannot read the current directory");
    };
    match std::fs::metadata(&cwd) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => anyhow::bail!("--cwd {}: not a directory", cwd.display()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            anyhow::bail!("--cwd {}: no such directory", cwd.display())
        }
        Err(error) => anyhow::bail!("--cwd {}: {error}", cwd.display()),
    }
    cwd.canonicalize()
        .with_context(|| format!("--cwd {}", cwd.display()))
}

/// The task: the words given, or stdin for `-` (or no words with stdin piped in).
fn task_text(words: &[String]) -> anyhow::Result<String> {
    let from_stdin = match words {
        [] => !std::io::stdin().is_terminal(),
        [dash] => dash == "-",
        _ => false,
    };
    let task = if from_stdin {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the task from stdin")?;
        text
    } else {
        words.join(" ")
    };
    if task.trim().is_empty() {
        anyhow::bail!(
            "a task is required, for example: dsh exec \"run the tests\" (or pipe it in: echo \"run the tests\" | dsh exec)"
        );
    }
    Ok(task)
}

/// The command-line overrides as configuration values.
fn overrides_of(args: &ExecArgs) -> anyhow::Result<Overrides> {
    let mut overrides = crate::host::overrides();
    for assignment in &args.config {
        let (key, value) = Overrides::parse_assignment(assignment)
            .map_err(|error| anyhow::anyhow!("-c {assignment}: {error}"))?;
        overrides.values.push((key, value));
    }
    if let Some(model) = &args.model {
        overrides.set("model.name", model.clone());
    }
    if let Some(sandbox) = args.sandbox {
        overrides.set("plugins.sandbox.mode", sandbox.as_str());
    }
    if let Some(approval) = args.approval {
        let policy = match approval {
            Approval::Ask => "ask",
            Approval::Never => "never",
        };
        overrides.set("plugins.approval.policy", policy);
    }
    Ok(overrides)
}

pub fn run(args: ExecArgs) -> anyhow::Result<ExitCode> {
    // Everything that can be wrong with the command line fails here, before a session exists.
    let cwd = checked_cwd(args.cwd.clone())?;
    let task = task_text(&args.task)?;
    let overrides = overrides_of(&args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run_task(overrides, cwd, task, args))
}

/// The agent the task goes to.
fn open(
    sessions: &dsh_host::SessionHost,
    cwd: &Path,
    target: &Target,
) -> anyhow::Result<AgentHandle> {
    Ok(match target {
        Target::New => sessions.create(NewSession {
            id: None,
            cwd: cwd.to_path_buf(),
        })?,
        Target::Resume(id) => {
            let id = crate::sessions::resolve_id(id)?;
            sessions
                .load(&id)
                .with_context(|| format!("cannot resume session {id}"))?
        }
        Target::Fork(id) => {
            let id = crate::sessions::resolve_id(id)?;
            sessions
                .fork(&id)
                .with_context(|| format!("cannot fork session {id}"))?
        }
        Target::Continue => {
            let here = cwd.to_string_lossy();
            let newest = sessions
                .list()?
                .into_iter()
                .filter(|s| s.parent_session.is_none() && s.cwd.as_deref() == Some(&*here))
                .max_by_key(crate::sessions::last_activity)
                .with_context(|| format!("no stored session in {here} to continue"))?;
            sessions
                .load(&newest.id)
                .with_context(|| format!("cannot resume session {}", newest.id))?
        }
    })
}

async fn run_task(
    overrides: Overrides,
    cwd: PathBuf,
    task: String,
    args: ExecArgs,
) -> anyhow::Result<ExitCode> {
    let output = args.output;
    let host = crate::host::start(&cwd, overrides).await?;
    let sessions = host.sessions();
    let agent = match open(&sessions, &cwd, &args.target) {
        Ok(agent) => agent,
        Err(error) => {
            host.shutdown();
            return Err(error);
        }
    };
    let session_id = agent.id().to_owned();
    note!("session {session_id}");
    let first_seq = agent.log().len();
    // Headless, no one can answer an approval: say which flag allows the call instead.
    let _approval = agent
        .scope()
        .provide::<dyn ApprovalService>(Arc::new(headless::Headless))?;

    // Events are printed as they commit; an unbounded channel never drops one.
    let (sender, receiver) = mpsc::unbounded_channel::<crate::children::Tagged>();
    // stream-json also carries the delegated children's events, tagged with their session.
    let children = (output == Output::StreamJson)
        .then(|| {
            crate::children::follow(
                sessions.service::<dsh_subagent::Subagents>(),
                &agent,
                sender.clone(),
            )
        })
        .flatten();
    let subscription = {
        let session = session_id.clone();
        agent.log().on_event(move |event| {
            let _ = sender.send(crate::children::Tagged {
                session: session.clone(),
                parent: None,
                event: event.clone(),
            });
        })
    };
    let progress =
        crate::out::stderr_is_terminal().then(|| headless::progress(&agent, sessions.registry()));
    let printer = (output == Output::StreamJson).then(|| tokio::spawn(print_events(receiver)));

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
    drop(children);
    drop(progress);
    if let Some(printer) = printer {
        let _ = printer.await;
    }
    let outcome = outcome.context("the run failed")?;
    let usage = total_usage(&agent, first_seq);
    match output {
        Output::Text => say!("{}", outcome.text)?,
        Output::StreamJson => {
            let mut result =
                json!({"type": "result", "sessionId": session_id, "output": outcome.text});
            if let Some(usage) = &usage {
                result["usage"] = serde_json::to_value(usage)?;
                add_context_fill(&mut result["usage"], &host, &agent);
            }
            say!("{result}")?;
        }
        Output::Json => {
            let mut result = json!({
                "sessionId": session_id,
                "status": status_of(&outcome.reason),
                "output": outcome.text,
            });
            if let Some(TurnEndReason::Error { error }) = &outcome.reason {
                result["error"] = json!({"code": error.code, "message": error.message});
            }
            if let Some(usage) = &usage {
                result["usage"] = serde_json::to_value(usage)?;
            }
            say!("{result}")?;
        }
    }
    if let Some(file) = &args.last_message {
        std::fs::write(file, &outcome.text)
            .with_context(|| format!("cannot write the last message to {}", file.display()))?;
    }
    agent.dispose().await;
    host.shutdown();
    if let Some(stop) = stopped {
        return Ok(stop.exit_code());
    }
    Ok(match &outcome.reason {
        Some(TurnEndReason::Completed) => ExitCode::SUCCESS,
        Some(TurnEndReason::Error { error }) => {
            note!("dsh: {}: {}", error.code, error.message);
            ExitCode::FAILURE
        }
        Some(TurnEndReason::Aborted { .. }) => ExitCode::from(130),
        Some(TurnEndReason::MaxTokens) => {
            eprintln!(
                "dsh: MAX_TOKENS: the model stopped at its output token limit before it finished the turn"
            );
            ExitCode::FAILURE
        }
        Some(TurnEndReason::Blocked) => {
            eprintln!("dsh: BLOCKED: the turn was blocked before it completed");
            ExitCode::FAILURE
        }
        Some(TurnEndReason::Interrupted) | None => {
            eprintln!("dsh: INTERRUPTED: the run ended without completing its turn");
            ExitCode::FAILURE
        }
    })
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

async fn print_events(mut receiver: mpsc::UnboundedReceiver<crate::children::Tagged>) {
    while let Some(tagged) = receiver.recv().await {
        let mut line = json!({"type": "session_event", "sessionId": tagged.session, "event": tagged.event.as_ref()});
        if let Some(parent) = tagged.parent {
            line["parentSessionId"] = json!(parent);
        }
        let mut stdout = std::io::stdout().lock();
        if writeln!(stdout, "{line}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            return;
        }
    }
}

/// The context fill after the run (`contextTokens`: the newest prompt size plus the estimated
/// change since, so a compaction shows at once; `contextWindow`), from the token meter.
fn add_context_fill(usage: &mut serde_json::Value, host: &dsh_host::Host, agent: &AgentHandle) {
    let Some(meter) = host.sessions().service::<dsh_token_meter::TokenMeter>() else {
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
    for event in agent.log().events_since(first_seq) {
        let Some(Ok(message)) = event.decode::<AssistantMessage>() else {
            continue;
        };
        let Some(usage) = message.usage else { continue };
        total
            .get_or_insert_with(TokenUsage::default)
            .accumulate(&usage);
    }
    total
}
