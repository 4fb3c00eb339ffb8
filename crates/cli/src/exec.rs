//! `dsh exec "task"`: argv → configuration → host → the headless front-end
//! (`dsh_headless::exec`, which owns the turn, its outputs and exit statuses).

use std::path::PathBuf;
use std::process::ExitCode;

use dsh_headless::exec::Target;
use dsh_host::Overrides;

/// `--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// The final assistant text and a newline.
    Text,
    /// One `{"type":"session_event",...}` line per persisted event, then a `result` line.
    StreamJson,
    /// One JSON object at the end: session id, status, final text, usage.
    Json,
}

impl From<Output> for dsh_headless::exec::Output {
    fn from(output: Output) -> Self {
        match output {
            Output::Text => Self::Text,
            Output::StreamJson => Self::StreamJson,
            Output::Json => Self::Json,
        }
    }
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

// `dsh exec`'s arguments (its one definition: the doc comments are its `--help`).
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The task (words are joined with spaces; `-` reads it from stdin).
    pub task: Vec<String>,
    /// The working directory of the session (default: the current folder).
    #[arg(long, short = 'C')]
    pub cwd: Option<PathBuf>,
    /// The model id to use (default from config: deepseek-v4-flash). Checked against the
    /// model catalog, as `/model` is; to use an unlisted model on purpose, pass
    /// `-c model.name=NAME` (or add it to `[[model.catalog]]`).
    #[arg(long, short = 'm')]
    pub model: Option<String>,
    /// The sandbox for this run's tool calls.
    #[arg(long, short = 's', value_enum)]
    pub sandbox: Option<Sandbox>,
    /// What a call that needs approval does (nobody can answer headless).
    #[arg(long, short = 'a', value_enum)]
    pub approval: Option<Approval>,
    /// Set any configuration key for this run (`-c model.reasoning_effort=low`).
    #[arg(long = "config", short = 'c', value_name = "KEY=VALUE")]
    pub config: Vec<String>,
    /// Continue the stored session ID.
    #[arg(long, value_name = "ID", conflicts_with_all = ["continue_last", "fork"])]
    pub resume: Option<String>,
    /// Continue the newest session of this folder.
    #[arg(long = "continue", conflicts_with = "fork")]
    pub continue_last: bool,
    /// Start a new session from a copy of session ID's conversation.
    #[arg(long, value_name = "ID")]
    pub fork: Option<String>,
    /// `text` prints the answer; `stream-json` every session event, then a result line;
    /// `json` one object at the end.
    #[arg(long, value_enum, default_value = "text")]
    pub output: Output,
    /// Also write the final answer to FILE.
    #[arg(long = "output-last-message", short = 'o', value_name = "FILE")]
    pub output_last_message: Option<PathBuf>,
}

impl ExecArgs {
    /// A new session's task with every other flag at its default (`dsh --profile headless`).
    pub fn task(task: Vec<String>, cwd: Option<PathBuf>, model: Option<String>) -> Self {
        Self {
            task,
            cwd,
            model,
            sandbox: None,
            approval: None,
            config: Vec::new(),
            resume: None,
            continue_last: false,
            fork: None,
            output: Output::Text,
            output_last_message: None,
        }
    }
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
    let cwd = crate::host::checked_cwd(args.cwd.clone())?;
    let task = dsh_headless::exec::task(&args.task)?;
    let overrides = overrides_of(&args)?;
    let run = dsh_headless::exec::ExecRun {
        task,
        output: args.output.into(),
        last_message: args.output_last_message,
        progress: crate::out::stderr_is_terminal(),
    };
    crate::host::block_on(async move {
        let host = crate::host::start(&cwd, overrides).await?;
        if let Some(model) = &args.model
            && let Err(error) = check_listed(&host.sessions().listed_models(), model)
        {
            host.shutdown();
            return Err(error);
        }
        let io = crate::out::io();
        let target = match (args.resume, args.continue_last, args.fork) {
            (Some(id), _, _) => Target::Resume(id),
            (None, true, _) => Target::Continue,
            (None, false, Some(id)) => Target::Fork(id),
            (None, false, None) => Target::New,
        };
        Ok(dsh_headless::exec::main(&host, &cwd, &target, run, &io).await?)
    })?
}

/// `-m NAME` names a model of the catalog (an embedder's own adapter lists none: anything goes).
fn check_listed(listed: &[String], model: &str) -> anyhow::Result<()> {
    if listed.is_empty() || listed.iter().any(|m| m == model) {
        return Ok(());
    }
    anyhow::bail!(
        "-m {model}: not a model of the catalog (known: {}); to use an unlisted model on purpose, pass `-c model.name={model}` or add it to `[[model.catalog]]` in the config",
        listed.join(", ")
    )
}
