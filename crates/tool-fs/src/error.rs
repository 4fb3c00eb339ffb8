//! The error every file tool returns. The model sees `Error: <message>`; `code` is set only for
//! harness errors (upstream `FsError`/`SearchError` with a code) and absent for plain errors
//! (argument checks, policy denials, escalation refusals, `read_image` gates).

use serde::Deserialize;
use serde::Serialize;

/// Error codes upstream writes to `error.info.code`.
pub mod codes {
    pub const FS_NOT_FOUND: &str = "FS_NOT_FOUND";
    pub const FS_NOT_DIRECTORY: &str = "FS_NOT_DIRECTORY";
    pub const FS_NOT_TEXT: &str = "FS_NOT_TEXT";
    pub const FS_NOT_REGULAR_FILE: &str = "FS_NOT_REGULAR_FILE";
    pub const FS_TOO_LARGE: &str = "FS_TOO_LARGE";
    pub const FS_PERMISSION_DENIED: &str = "FS_PERMISSION_DENIED";
    pub const FS_SANDBOX_DENIED: &str = "FS_SANDBOX_DENIED";
    pub const FS_IO_ERROR: &str = "FS_IO_ERROR";
    pub const FS_STALE_VERSION: &str = "FS_STALE_VERSION";
    pub const FS_NOT_OBSERVED: &str = "FS_NOT_OBSERVED";
    pub const FS_AMBIGUOUS_EDIT: &str = "FS_AMBIGUOUS_EDIT";
    pub const FS_EDIT_NOT_FOUND: &str = "FS_EDIT_NOT_FOUND";
    pub const FS_ABORTED: &str = "FS_ABORTED";
    /// dsh's own: a file operation still blocked at the file-I/O deadline.
    pub const FS_TIMEOUT: &str = "FS_TIMEOUT";
    pub const SEARCH_INVALID_PATTERN: &str = "SEARCH_INVALID_PATTERN";
    pub const SEARCH_FAILED: &str = "SEARCH_FAILED";
    pub const SEARCH_ABORTED: &str = "SEARCH_ABORTED";
    pub const SEARCH_RAW_OUTPUT_OVERFLOW: &str = "SEARCH_RAW_OUTPUT_OVERFLOW";
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct FsError {
    pub message: String,
    pub code: Option<String>,
}

impl FsError {
    /// A plain error: no `error.info` upstream.
    pub fn plain(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: None,
        }
    }

    pub fn coded(code: &str, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: Some(code.to_owned()),
        }
    }

    /// The upstream error class name for `error.info.name`: search codes belong to
    /// `SearchError`, every other coded error to `FsError`.
    pub fn class_name(&self) -> Option<&'static str> {
        let code = self.code.as_deref()?;
        Some(if code.starts_with("SEARCH_") {
            "SearchError"
        } else {
            "FsError"
        })
    }

    /// The model-facing text of the error envelope.
    pub fn model_text(&self) -> String {
        format!("Error: {}", self.message)
    }

    pub(crate) fn io(context: &str, err: &std::io::Error) -> Self {
        let code = match err.kind() {
            std::io::ErrorKind::NotFound => codes::FS_NOT_FOUND,
            std::io::ErrorKind::PermissionDenied => codes::FS_PERMISSION_DENIED,
            _ => codes::FS_IO_ERROR,
        };
        Self::coded(code, format!("{context}: {err}"))
    }

    pub(crate) fn aborted() -> Self {
        Self::coded(codes::FS_ABORTED, "tool call aborted")
    }
}
