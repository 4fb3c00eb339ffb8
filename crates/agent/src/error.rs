//! The crate's error type.

use dsh_protocol::LlmFailure;

/// Failures of the agent API itself (creation, sending). Turn failures are not errors of the
/// API: they end the turn and are recorded in `turn/end`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// `max_tokens` must be a positive safe integer.
    #[error("invalid maxTokens {0}: must be a positive safe integer")]
    InvalidMaxTokens(u64),
    /// `max_parallel_tool_calls` must be positive.
    #[error("maxParallelToolCalls must be a positive integer")]
    InvalidParallelism,
    /// The agent was disposed; it accepts no more input.
    #[error("agent {0:?} is disposed")]
    Disposed(String),
    /// The agent's final task has run (a one-shot run): it takes no more input.
    #[error("agent {0:?} takes no more input: its final task has run")]
    InputClosed(String),
    /// A pending inbox item already has this message id.
    #[error("message id {0:?} is already pending in the inbox")]
    DuplicateMessageId(String),
    /// The agent must be created inside a tokio runtime (its driver is a task).
    #[error("an agent needs a tokio runtime")]
    NoRuntime,
    /// The session log refused a write.
    #[error(transparent)]
    Session(#[from] dsh_session::SessionError),
    /// The kernel refused (the parent scope is disposed).
    #[error(transparent)]
    Kernel(#[from] dsh_kernel::KernelError),
    /// Maintenance needs an idle agent with no queued prompt.
    #[error("agent {0:?} is not idle or has queued work")]
    NotIdle(String),
    /// A persisted inbox splice does not apply to the restored inbox.
    #[error("inconsistent persisted inbox at seq {seq}: {reason}")]
    InconsistentInbox { seq: u64, reason: String },
}

/// Why a turn stopped early inside the driver.
#[derive(Debug)]
pub(crate) enum TurnError {
    /// The activity's cancellation token fired.
    Aborted,
    /// A non-abort failure: the turn ends `error` with these facts.
    Failed(LlmFailure),
}

impl TurnError {
    /// A failure that carries no provider code (`UNKNOWN`).
    pub(crate) fn unknown(message: impl Into<String>) -> Self {
        Self::Failed(LlmFailure::new("UNKNOWN", message))
    }
}

impl From<dsh_session::SessionError> for TurnError {
    fn from(error: dsh_session::SessionError) -> Self {
        Self::unknown(error_chain(&error))
    }
}

/// `errorChain(e)`: the message, then each distinct `source` appended as `: <cause>`.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut seen = vec![out.clone()];
    let mut cause = error.source();
    while let Some(current) = cause {
        let text = current.to_string();
        if !seen.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
            seen.push(text);
        }
        cause = current.source();
    }
    out
}
