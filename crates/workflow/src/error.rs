//! `WorkflowError(message, code, {fatal})`.

use dsh_tools::FailureInfo;
use dsh_tools::ToolError;

/// The engine's error codes.
pub mod code {
    pub const SCRIPT_PARSE: &str = "SCRIPT_PARSE";
    pub const META_INVALID: &str = "META_INVALID";
    pub const INVALID_ARGUMENT: &str = "INVALID_ARGUMENT";
    pub const UNSUPPORTED_OPTION: &str = "UNSUPPORTED_OPTION";
    pub const UNSUPPORTED_SCHEMA: &str = "UNSUPPORTED_SCHEMA";
    pub const AGENT_CAP: &str = "AGENT_CAP";
    pub const ITEM_CAP: &str = "ITEM_CAP";
    pub const AGENT_START: &str = "AGENT_START";
    pub const AGENT_RESULT: &str = "AGENT_RESULT";
    pub const RESULT_UNSERIALIZABLE: &str = "RESULT_UNSERIALIZABLE";
    pub const CANCELLED: &str = "CANCELLED";
}

/// Why `[plugins.ralph]` was refused (the plugin does not load).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RalphConfigError {
    #[error("subagentProvider must be a non-empty normalized string")]
    Provider,
    #[error("{0} must be a positive safe integer")]
    NotPositiveSafe(&'static str),
}

/// A completed Ralph workflow whose terminal value is not a success (the tool's error text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RalphResultError {
    #[error("Ralph workflow returned a malformed terminal result")]
    Malformed,
    #[error("Ralph round {rounds} child failed before producing a structured report.\n{tail}")]
    RoundFailed { rounds: u64, tail: String },
}

/// A workflow failure. Every hook misuse is fatal: it kills the script even inside combinators.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct WorkflowError {
    pub message: String,
    pub code: String,
    pub fatal: bool,
}

impl WorkflowError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: code.to_owned(),
            fatal: true,
        }
    }

    /// `<Name>: <message>`, how a thrown workflow error reads in a run's `error`.
    pub fn rendered(&self) -> String {
        format!("WorkflowError: {}", self.message)
    }
}

impl From<WorkflowError> for ToolError {
    fn from(error: WorkflowError) -> Self {
        ToolError {
            message: error.message,
            info: Some(FailureInfo {
                name: "WorkflowError".to_owned(),
                code: error.code,
            }),
        }
    }
}
