//! `SubagentError`: every service failure, with upstream's class name and code so a tool body
//! that returns it renders `Error: <message>` with `info = {name, code}`.

use dsh_tools::FailureInfo;
use dsh_tools::ToolError;

/// Codes of `SubagentError` (`info.code`).
pub mod code {
    pub const DUPLICATE_PROVIDER: &str = "DUPLICATE_PROVIDER";
    pub const NO_PROVIDER: &str = "NO_PROVIDER";
    pub const UNSUPPORTED_CAPABILITY: &str = "UNSUPPORTED_CAPABILITY";
    pub const CONTINUATION_UNAVAILABLE: &str = "CONTINUATION_UNAVAILABLE";
    pub const PERSISTENCE_UNAVAILABLE: &str = "PERSISTENCE_UNAVAILABLE";
    pub const DUPLICATE_CHILD: &str = "DUPLICATE_CHILD";
    pub const UNAUTHORIZED: &str = "UNAUTHORIZED";
    pub const NOT_RESUMABLE: &str = "NOT_RESUMABLE";
    pub const ACTIVATION_CLOSING: &str = "ACTIVATION_CLOSING";
    pub const ACTIVATION_TEARDOWN_FAILED: &str = "ACTIVATION_TEARDOWN_FAILED";
    pub const DRAINING: &str = "DRAINING";
    pub const PARENT_UNAVAILABLE: &str = "PARENT_UNAVAILABLE";
    pub const PROJECTIONS_UNAVAILABLE: &str = "SUBAGENT_CONTROL_PROJECTIONS_UNAVAILABLE";
    pub const SESSION_STORE_UNAVAILABLE: &str = "SUBAGENT_CONTROL_SESSION_STORE_UNAVAILABLE";
    pub const CANCELLED: &str = "CANCELLED";
}

/// A failure of the subagent service or of a provider. `code` is `None` for the plain
/// JavaScript error classes upstream throws (`TypeError`, `RangeError`, `SubagentDepthError`,
/// `Error`), which carry no `info.code`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SubagentError {
    pub name: String,
    pub code: Option<String>,
    pub message: String,
}

impl SubagentError {
    /// `SubagentError(message, code)`.
    pub fn coded(code: &str, message: impl Into<String>) -> Self {
        Self {
            name: "SubagentError".to_owned(),
            code: Some(code.to_owned()),
            message: message.into(),
        }
    }

    /// A plain `Error` (no code).
    pub fn plain(message: impl Into<String>) -> Self {
        Self::classed("Error", message)
    }

    /// An error of the named class without a code (`TypeError`, `RangeError`, …).
    pub fn classed(name: &str, message: impl Into<String>) -> Self {
        Self {
            name: name.to_owned(),
            code: None,
            message: message.into(),
        }
    }

    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    pub fn is(&self, code: &str) -> bool {
        self.code.as_deref() == Some(code)
    }
}

impl From<SubagentError> for ToolError {
    fn from(error: SubagentError) -> Self {
        ToolError {
            message: error.message,
            info: error.code.map(|code| FailureInfo {
                name: error.name,
                code,
            }),
        }
    }
}

/// Why a tool could not be mounted for a provider (a provider listener's refusal rolls the
/// provider's registration back).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountError {
    #[error(
        "tool-subagent: provider \"{provider}\" cannot enforce maxDepth (no depthLimit capability) — set maxDepth: 'provider-managed' to leave the recursion budget to the provider"
    )]
    NoDepthLimit { provider: String },
    #[error(
        "tool-subagent: provider \"{provider}\" does not support `backgroundMode: continuable`"
    )]
    NoContinuable { provider: String },
    #[error(transparent)]
    Scope(#[from] dsh_kernel::KernelError),
    #[error(transparent)]
    Define(#[from] dsh_tools::DefineError),
    #[error(transparent)]
    Register(#[from] dsh_tools::RegisterError),
}
