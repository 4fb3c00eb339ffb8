//! `dsh-checkpoints`: undo for anything the agent did to the workspace's files.
//!
//! Owns: the shadow store (a bare git object store per workspace under
//! `$DSH_HOME/checkpoints/<hash>.git`, the workspace as its work tree, its own index; never the
//! user's `.git`), a checkpoint before every step of a session that is not a delegated child
//! and at the end of each turn (`checkpoint/created`), restores logged before and after they
//! touch a file (`checkpoint/restore-started`, `checkpoint/restored`) so a crash in between
//! is finished on the next use, the fold of those events ([`Timeline`]), conflict handling (a
//! file the person changed after the agent is left alone, the other version put beside it),
//! the disk budget, and `/undo`, `/redo`, `/rewind` (the files; the conversation as a fork
//! before the prompt, made in the host's `dyn SessionStore`, which the command hands to the
//! front-end as [`dsh_commands::CommandResult::Switch`]).
//! Does not own: how a front-end switches to the fork, the
//! `dsh sessions checkpoints|restore` argv (the binary calls [`list`] and
//! [`Checkpoints::restore_to`]).
//! Must not depend on: front-ends, the host, concrete tool crates.

pub mod command;
pub mod engine;
mod runtime;
pub mod store;
pub mod timeline;

pub use runtime::Checkpoints;
pub use runtime::list;
pub use store::Limits;
pub use store::Store;
pub use timeline::Action;
pub use timeline::CheckpointCreated;
pub use timeline::RestorePlan;
pub use timeline::RestoreStarted;
pub use timeline::Restored;
pub use timeline::Timeline;

/// Files larger than this are not snapshotted by default (10 MiB).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
/// How long one git run of the store may take (20 s): past it, that checkpoint is skipped.
pub const DEFAULT_GIT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);
/// The default disk budget of one workspace's store (1 GiB).
pub const DEFAULT_DISK_BUDGET_BYTES: u64 = 1024 * 1024 * 1024;

/// Trees never snapshotted by default, beside what `.gitignore` says.
pub fn default_ignore() -> Vec<String> {
    [
        "node_modules/",
        "target/",
        ".venv/",
        "__pycache__/",
        ".mypy_cache/",
        ".pytest_cache/",
        ".next/",
        ".gradle/",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("git {command} failed: {message}")]
    Git { command: String, message: String },
    #[error(
        "git was not found in PATH: checkpoints need it (install git, or turn them off with [plugins.checkpoints] enabled = false)"
    )]
    NoGit,
    #[error(
        "git {command} did not finish within {millis} ms and was stopped (a file system in the workspace that does not answer?); raise [plugins.checkpoints] git_timeout_ms, or turn checkpoints off with [plugins.checkpoints] enabled = false"
    )]
    Timeout { command: String, millis: u64 },
    #[error("checkpoints are off here: {0}")]
    Refused(String),
    #[error("cannot log the checkpoint: {0}")]
    Log(#[from] dsh_session::SessionError),
    #[error("{0}")]
    Missing(String),
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// `[plugins.checkpoints]` (on by default).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointSettings {
    /// Files larger than this many bytes are not snapshotted.
    #[serde(default = "default_max_file_bytes")]
    pub max_file_bytes: u64,
    /// Ignore rules (`.gitignore` syntax) on top of the workspace's own `.gitignore`.
    #[serde(default = "default_ignore")]
    pub ignore: Vec<String>,
    /// Disk budget of one workspace's store, in bytes; the oldest checkpoints go first.
    #[serde(default = "default_budget")]
    pub disk_budget_bytes: u64,
    /// How long one git run may take, in milliseconds, before it is killed and that
    /// checkpoint (or restore) gives up.
    #[serde(default = "default_git_timeout_ms")]
    pub git_timeout_ms: u64,
}

impl CheckpointSettings {
    /// The store's limits these settings ask for.
    pub fn limits(&self) -> Limits {
        Limits {
            max_file_bytes: self.max_file_bytes,
            ignore: self.ignore.clone(),
            git_deadline: std::time::Duration::from_millis(self.git_timeout_ms.max(1)),
        }
    }
}

fn default_git_timeout_ms() -> u64 {
    u64::try_from(DEFAULT_GIT_DEADLINE.as_millis()).unwrap_or(u64::MAX)
}

fn default_max_file_bytes() -> u64 {
    DEFAULT_MAX_FILE_BYTES
}

fn default_budget() -> u64 {
    DEFAULT_DISK_BUDGET_BYTES
}

impl Default for CheckpointSettings {
    fn default() -> Self {
        Self {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            ignore: default_ignore(),
            disk_budget_bytes: DEFAULT_DISK_BUDGET_BYTES,
            git_timeout_ms: default_git_timeout_ms(),
        }
    }
}

/// Checkpoints as a host plugin: the service, the pre-step and turn-end checkpoints, the
/// commands.
#[derive(Debug, Default)]
pub struct CheckpointsPlugin;

impl dsh_plugin::Plugin for CheckpointsPlugin {
    type Config = CheckpointSettings;

    fn name(&self) -> &str {
        <Self as dsh_plugin::HostPlugin>::NAME
    }

    fn apply(
        &self,
        ctx: &dsh_kernel::Scope,
        config: CheckpointSettings,
    ) -> Result<(), dsh_plugin::PluginError> {
        let host = dsh_plugin::HostServices::of(ctx)?;
        let checkpoints = std::sync::Arc::new(Checkpoints::new(
            host.info.home.clone(),
            config.limits(),
            config.disk_budget_bytes,
        ));
        ctx.provide(checkpoints.clone())?;
        runtime::install(&checkpoints, &host, ctx);
        if let Some(commands) = dsh_commands::CommandRegistry::of(ctx) {
            let undo = command::Undo {
                checkpoints,
                sessions: ctx.service::<dyn dsh_session::SessionStore>(),
            };
            command::register(&commands, ctx, undo, host.sessions.clone())
                .map_err(dsh_plugin::PluginError::other)?;
        }
        Ok(())
    }
}

impl dsh_plugin::HostPlugin for CheckpointsPlugin {
    const NAME: &'static str = "checkpoints";
    const ENABLED_BY_DEFAULT: bool = true;
}
