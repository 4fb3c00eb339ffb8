//! `dsh exec "task"`: argv → configuration → host → the headless front-end
//! (`dsh_headless::exec`, which owns the turn, its outputs and exit statuses).

use std::io::IsTerminal;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

pub use dsh_headless::exec::Target;
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
    runtime.block_on(async move {
        let host = crate::host::start(&cwd, overrides).await?;
        let sessions = host.sessions();
        let agent = match dsh_headless::exec::open(&sessions, &cwd, &args.target) {
            Ok(agent) => agent,
            Err(error) => {
                host.shutdown();
                return Err(error.into());
            }
        };
        let run = dsh_headless::exec::ExecRun {
            task,
            output: args.output.into(),
            last_message: args.last_message,
            progress: crate::out::stderr_is_terminal(),
        };
        // SIGINT, SIGTERM, SIGHUP: tool processes are killed at once, the turn is cancelled,
        // the log closed, and the exit code says which signal it was.
        let mut stops = dsh_headless::signals::listen()?;
        let stop = async move { stops.first().await };
        let ended = dsh_headless::exec::run(&sessions, agent, run, &crate::out::io(), stop).await?;
        host.shutdown();
        Ok(match ended.stopped {
            Some(stop) => stop.exit_code(),
            None => ExitCode::from(ended.code),
        })
    })
}
