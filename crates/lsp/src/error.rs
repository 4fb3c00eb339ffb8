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

/// Why `[plugins.lsp]` was refused at load (upstream's messages; the plugin does not load).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LspConfigError {
    #[error("lsp-stdio: server ids must be non-empty strings")]
    EmptyServerId,
    #[error(
        "lsp-stdio: servers.{id}.{field} must be a positive integer no greater than 2147483647"
    )]
    Milliseconds { id: String, field: &'static str },
    #[error("lsp-stdio: servers.{id}.{field} must be a positive integer")]
    NotPositive { id: String, field: &'static str },
    #[error("lsp-stdio: servers.{id}.command must be a non-empty string")]
    NoCommand { id: String },
    #[error("tool-lsp: maxLocations must be a positive integer")]
    MaxLocations,
    #[error("tool-lsp: maxResultChars must be a positive integer")]
    MaxResultChars,
    #[error("tool-lsp: timeoutMs must be a positive integer no greater than 2147483647")]
    TimeoutMs,
}
