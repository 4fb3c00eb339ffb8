//! The terminal error: an exact message and a stable code.

/// A failure of the terminal service or a backend (`TerminalError` upstream).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TerminalError {
    pub code: &'static str,
    pub message: String,
}

impl TerminalError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl From<TerminalError> for dsh_tools::ToolError {
    fn from(error: TerminalError) -> Self {
        dsh_tools::ToolError::coded("TerminalError", error.code, error.message)
    }
}

/// A configuration that cannot be loaded; the message is what the user sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);
