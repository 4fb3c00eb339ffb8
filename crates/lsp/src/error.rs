//! `LspError`: an exact message and a stable code.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LspError {
    pub code: &'static str,
    pub message: String,
}

impl LspError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn malformed(message: impl Into<String>) -> Self {
        Self::new("LSP_MALFORMED_RESPONSE", message)
    }
}

impl From<LspError> for dsh_tools::ToolError {
    fn from(error: LspError) -> Self {
        dsh_tools::ToolError::coded("LspError", error.code, error.message)
    }
}
