//! The crate's error type; registration texts are upstream's exactly.

/// Why a registration or an execution failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    #[error("command name \"{0}\" must match /^[a-z][a-z0-9_-]*$/u")]
    InvalidName(String),
    #[error("command \"{0}\" needs a non-empty description")]
    InvalidDescription(String),
    #[error("command \"{0}\" needs a non-empty input hint")]
    InvalidHint(String),
    #[error(
        "command \"{0}\" is already registered (for a per-agent variant, mount a command-injected plugin under that agent's `agent.ctx`)"
    )]
    Duplicate(String),
    #[error("command \"{0}\" is already registered in this scope")]
    DuplicateInScope(String),
    #[error("cannot register command \"{0}\": its scope is disposed")]
    Disposed(String),
    /// The handler failed (its message is also the logged `command/done` error text).
    #[error("{0}")]
    Failed(String),
    /// The caller's signal fired while the handler ran.
    #[error("the command was cancelled")]
    Cancelled,
    /// The command's durable record could not be written.
    #[error("cannot log the command: {0}")]
    Log(String),
}
