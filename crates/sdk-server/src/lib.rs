//! `dsh-sdk-server`: the SDK runtime protocol, so the SDK clients upstream publishes
//! (`deepseek-harness-sdk` on PyPI and its TypeScript twin) drive dsh as `dsh --profile sdk`.
//!
//! Owns: the wire ([`wire`]: newline-delimited JSON-RPC 2.0 frames, classification, the
//! error and notification shapes), and the server ([`serve`]): `initialize` (the host is
//! launched then, from the client's cwd, provider, model, effort and output cap),
//! `session/prompt` (a durable enqueue receipt), `session/resume`,
//! `session/working-directory/get|set` and `shutdown`; the notifications `session.event` (the
//! full log envelope of every event of every session the runtime runs, children included),
//! `session.status`, `subagent.started` and `subagent.finished`; approvals refused as `dsh
//! exec` refuses them (the note names the setting that allows the call).
//! Does not own: argv, the configuration and how the host is built (the binary hands in a
//! launcher), signals (the binary hands in a stop future), the session vocabulary (the log's
//! own envelopes are the wire).
//! Writes: frames only to the output it is handed, in emission order from one writer task;
//! diagnostics go through `tracing` and the `note` callback (stderr), never to the output.
//! Must not depend on: `dsh` (the binary), other front-ends (`dsh-headless`, `dsh-acp`,
//! `dsh-tui`), capability crates (`dsh-tool-*`, `dsh-subagent`, …): it drives
//! `dsh_host::SessionHost` only.

mod approval;
mod server;
pub mod wire;

use std::path::PathBuf;
use std::sync::Arc;

pub use server::Ended;
pub use server::serve;

/// What `initialize` asked for, checked: the host is launched from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Initialize {
    /// The workspace of SDK-created sessions (an existing directory, absolute).
    pub cwd: PathBuf,
    /// The provider route (`[model] provider`).
    pub provider: String,
    /// The model id (`[model] name`).
    pub model: String,
    /// `[model] reasoning_effort`, when the client chose one.
    pub reasoning_effort: Option<String>,
    /// The output cap per model request of SDK-created sessions and their children.
    pub max_tokens: Option<u64>,
}

/// Builds the host for an `initialize` (configuration layers, plugins, start-up work such as
/// MCP servers); `Err` is what the client is told.
pub type Launch = Arc<
    dyn Fn(Initialize) -> dsh_kernel::BoxFuture<'static, Result<dsh_host::Host, LaunchError>>
        + Send
        + Sync,
>;

/// Why the host for an `initialize` could not be built (the launcher's whole error chain, as
/// the client's error message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LaunchError(pub String);

/// One diagnostic line for stderr.
pub type Note = Arc<dyn Fn(&str) + Send + Sync>;

/// Why serving failed (the output could not be written).
#[derive(Debug, thiserror::Error)]
pub enum SdkError {
    #[error("cannot write to the SDK client: {0}")]
    Output(#[source] std::io::Error),
}
