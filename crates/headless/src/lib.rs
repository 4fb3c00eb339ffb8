//! `dsh-headless`: the front-ends without a person at a screen.
//!
//! Owns: `dsh exec` after argv ([`exec`]: which session the task goes to, the turn driven to
//! its end, the `text` / `stream-json` / `json` outputs with delegated children's events on the
//! same stream, the usage and context-fill summary, the exit status of each ending), what
//! stands in for a person ([`approval`]: refused approvals with the flag that allows them,
//! one-line progress notes), `dsh mcp list` ([`mcp_list`]: the configured servers probed once),
//! `dsh mcp serve` ([`mcp_serve`]: one session's tools over stdio MCP), stored sessions
//! ([`sessions`]: the `dsh sessions list` table, `show --json`, `rm`, `export`), and the stop
//! signals of `dsh exec` and `dsh acp` ([`signals`]: tool processes killed at the first).
//! Does not own: argv, the configuration, the composition (`dsh-host`).
//! Writes: stdout lines only through the [`Io`] the binary hands in (so a closed pipe is the
//! binary's policy), never `println!`.
//! Must not depend on: `dsh` (the binary), `dsh-tui`, `dsh-acp`, a capability crate
//! (`dsh-tool-*`, `dsh-plan-mode`, `dsh-goal`, `dsh-subagent*`; `scripts/check-deps.py`):
//! delegated children are followed through `dsh_plugin::DelegatedChildren`.

pub mod approval;
pub mod children;
pub mod exec;
pub mod mcp_list;
pub mod mcp_serve;
pub mod sessions;
pub mod signals;

use std::sync::Arc;

/// Writes one line (without its newline) to stdout and flushes it.
pub type LineWriter = Arc<dyn Fn(&str) -> std::io::Result<()> + Send + Sync>;

/// Where a headless front-end writes: the binary decides what a closed stream means.
#[derive(Clone)]
pub struct Io {
    /// stdout, one line at a time.
    pub stdout: LineWriter,
    /// One diagnostic line for stderr.
    pub stderr: Arc<dyn Fn(&str) + Send + Sync>,
}

impl std::fmt::Debug for Io {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io").finish_non_exhaustive()
    }
}

impl Io {
    pub(crate) fn note(&self, line: &str) {
        (self.stderr)(line);
    }

    /// A final line: a reader that went away is not an error, any other failure is.
    pub(crate) fn say(&self, line: &str) -> Result<(), HeadlessError> {
        match (self.stdout)(line) {
            Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => {
                Err(HeadlessError::Io(error))
            }
            _ => Ok(()),
        }
    }
}

/// Why a headless run failed before it could report an ending.
#[derive(Debug, thiserror::Error)]
pub enum HeadlessError {
    #[error(transparent)]
    Host(#[from] dsh_host::HostError),
    #[error(transparent)]
    Kernel(#[from] dsh_kernel::KernelError),
    #[error(transparent)]
    Io(std::io::Error),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
    #[error("{context}")]
    Context {
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl HeadlessError {
    pub(crate) fn context(
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Context {
            context: context.into(),
            source: Box::new(source),
        }
    }
}
