//! Foreground shell commands in the front-end's client terminals (ACP `terminal/*`).
//!
//! A front-end whose client runs terminals provides a [`ClientTerminals`] on the agent's scope;
//! the shell tool then hands it the exact, already confined command line it would have spawned
//! (sandbox runner, cleared environment, working directory) and the client runs and shows it.
//! Whether the command may run at all, and under which confinement, is still the tool's policy.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_kernel::BoxFuture;
use dsh_kernel::Scope;
use tokio_util::sync::CancellationToken;

use crate::ClientRequestError;
use crate::execution::ToolRun;

/// One command to run in a client terminal.
#[derive(Debug, Clone)]
pub struct TerminalCommand {
    /// The call it belongs to (the terminal is shown on that call's card).
    pub call_id: String,
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// Output kept by the client (it drops the beginning beyond this).
    pub output_byte_limit: u64,
    /// Killed when it runs longer.
    pub timeout: Duration,
    /// Cancels the call: the command is killed.
    pub signal: CancellationToken,
}

/// How a client-run command ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TerminalOutcome {
    /// stdout and stderr as the terminal showed them.
    pub output: String,
    /// The client dropped the beginning to stay within the byte limit.
    pub truncated: bool,
    pub exit_code: Option<i64>,
    pub signal: Option<String>,
    pub timed_out: bool,
    pub aborted: bool,
}

/// Runs commands in the client's terminals.
pub trait ClientTerminals: Send + Sync {
    /// `Err` when the client could not run it at all (the tool reports it as a failure).
    fn run(
        &self,
        command: TerminalCommand,
    ) -> BoxFuture<'static, Result<TerminalOutcome, ClientRequestError>>;
}

/// The client terminals visible from `scope`, if a front-end provided them.
pub fn client_terminals_in(scope: &Scope) -> Option<Arc<dyn ClientTerminals>> {
    scope.service::<dyn ClientTerminals>()
}

/// The client terminals for a top-level call (a call made from inside `run_code` has no card
/// to show a terminal on).
pub fn client_terminals(run: &ToolRun) -> Option<Arc<dyn ClientTerminals>> {
    if run.parent().is_some() {
        return None;
    }
    run.agent()
        .and_then(|agent| client_terminals_in(agent.scope()))
}
