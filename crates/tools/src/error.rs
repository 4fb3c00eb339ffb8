//! Errors: what a body or listener "throws", what a failed call carries, and what the
//! authoring/registration APIs reject synchronously.

use serde::Deserialize;
use serde::Serialize;

/// The reserved Code Mode transport name.
pub const RUN_CODE: &str = "run_code";

/// Exact message texts the model or a caller sees. Tests compare them byte for byte.
pub mod messages {
    pub const ABORTED: &str = "tool call aborted";
    pub const ABORTED_BEFORE_DISPATCH: &str = "tool call aborted before dispatch";
    pub const ARGS_NOT_LOSSLESS: &str =
        "tool execution arguments must be losslessly JSON-serializable";
    pub const RESULT_NOT_LOSSLESS: &str = "tool result must be losslessly JSON-serializable";
    pub const BLOCKED: &str = "tool result blocked by post-execute policy";
    pub const POST_BOTH: &str =
        "tools/post-execute accept decision cannot replace both value and content";
    pub const POST_VALUE_ON_FAILURE: &str =
        "tools/post-execute cannot replace the value of a failed result";
    pub const UNPRINTABLE: &str = "<unprintable thrown value>";
    pub const RESERVED: &str = "tool name \"run_code\" is reserved for the Code Mode presentation transport and cannot be registered or shadowed";
}

/// `{name, code}` of a structured failure (upstream `HarnessError` subclasses).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureInfo {
    pub name: String,
    pub code: String,
}

/// The `error` of a failed result. `message` never carries the `Error: ` prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFailure {
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub info: Option<FailureInfo>,
}

/// What a tool body, a hook listener or a finalizer returns as its failure ("throws").
/// `info` is set only for structured errors; a plain message yields `error = {message}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    pub message: String,
    pub info: Option<FailureInfo>,
}

impl ToolError {
    /// A plain failure (no `info`), like a thrown `Error`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            info: None,
        }
    }

    /// A structured failure with an explicit class name and code.
    pub fn coded(
        name: impl Into<String>,
        code: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            message: message.into(),
            info: Some(FailureInfo {
                name: name.into(),
                code: code.into(),
            }),
        }
    }

    /// `HarnessError(message, code)`: `info.name` is `HarnessError`.
    pub fn harness(message: impl Into<String>, code: impl Into<String>) -> Self {
        Self::coded("HarnessError", code, message)
    }

    /// `ToolNotFoundError` for a name that does not resolve.
    pub fn unknown_tool(name: &str) -> Self {
        Self::coded(
            "ToolNotFoundError",
            "UNKNOWN_TOOL",
            format!("unknown tool \"{name}\""),
        )
    }

    /// `ToolNotFoundError` with the code-mode route hint.
    pub fn unknown_tool_code_only(name: &str) -> Self {
        Self::coded(
            "ToolNotFoundError",
            "UNKNOWN_TOOL",
            format!(
                "unknown tool \"{name}\": only `run_code` is callable directly — call `{name}` from inside a `run_code` program instead"
            ),
        )
    }

    /// `ToolArgsError`: `invalid arguments: v1; v2`.
    pub fn invalid_args(violations: &[String]) -> Self {
        Self::coded(
            "ToolArgsError",
            "INVALID_ARGS",
            format!("invalid arguments: {}", violations.join("; ")),
        )
    }

    /// `ToolOutputError`: `tool "<name>" returned invalid output: v1; v2`.
    pub fn invalid_output(name: &str, violations: &[String]) -> Self {
        Self::coded(
            "ToolOutputError",
            "INVALID_TOOL_OUTPUT",
            format!(
                "tool \"{name}\" returned invalid output: {}",
                violations.join("; ")
            ),
        )
    }

    /// The synthetic abort after the body was invoked.
    pub fn aborted() -> Self {
        Self::coded("AbortError", "ABORTED", messages::ABORTED)
    }

    /// The synthetic abort before the body could run.
    pub fn aborted_before_dispatch() -> Self {
        Self::coded(
            "AbortError",
            "ABORTED_BEFORE_DISPATCH",
            messages::ABORTED_BEFORE_DISPATCH,
        )
    }

    /// The code of a structured failure, if any.
    pub fn code(&self) -> Option<&str> {
        self.info.as_ref().map(|info| info.code.as_str())
    }

    /// The failure record a result carries.
    pub fn to_failure(&self) -> ToolFailure {
        ToolFailure {
            message: self.message.clone(),
            info: self.info.clone(),
        }
    }

    /// Turns a caught panic payload into a failure, the way upstream coerces a thrown value:
    /// a string payload is its message, anything else is unprintable.
    pub fn from_panic(payload: &(dyn std::any::Any + Send)) -> Self {
        if let Some(text) = payload.downcast_ref::<&str>() {
            Self::new(*text)
        } else if let Some(text) = payload.downcast_ref::<String>() {
            Self::new(text.clone())
        } else if let Some(err) = payload.downcast_ref::<ToolError>() {
            err.clone()
        } else {
            Self::new(messages::UNPRINTABLE)
        }
    }
}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        Self::new(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}

impl From<std::io::Error> for ToolError {
    fn from(err: std::io::Error) -> Self {
        Self::new(err.to_string())
    }
}

impl From<serde_json::Error> for ToolError {
    fn from(err: serde_json::Error) -> Self {
        Self::new(err.to_string())
    }
}

/// A definition the builder refuses (upstream: thrown by `defineTool` / `register`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DefineError {
    #[error("tool \"{name}\" must declare output {{ schema, render, presentationMeta? }}")]
    MissingOutput { name: String },
    #[error("tool \"{name}\" must declare a body (.run)")]
    MissingBody { name: String },
    #[error("defineTool({name}): timeoutMs must be a positive finite number")]
    InvalidTimeout { name: String },
    /// An output or parameter schema outside the supported subset, or a bad author form.
    #[error(transparent)]
    Schema(#[from] dsh_schema::SchemaError),
}

/// A registration the registry refuses. Nothing is left registered.
/// Why a tool crate could not set up its tools: building a definition or registering it.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Define(#[from] DefineError),
    #[error(transparent)]
    Register(#[from] RegisterError),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    #[error(
        "tool name \"run_code\" is reserved for the Code Mode presentation transport and cannot be registered or shadowed"
    )]
    Reserved,
    #[error(
        "tool \"{name}\" is already registered (for a per-agent variant, register through that agent's `agent.ctx` instead)"
    )]
    DuplicateGlobal { name: String },
    #[error("tool \"{name}\" is already registered in this scope")]
    DuplicateScoped { name: String },
    /// A `tools/change` listener failed; the registration was rolled back.
    #[error(transparent)]
    ChangeListener(ToolError),
}

/// `restrict()` misuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RestrictError {
    #[error(
        "tools.restrict() requires a scoped context (agent.ctx): a context-global restriction would mask every agent — deny the tool for the intended agent instead"
    )]
    Unscoped,
    #[error(
        "tools.restrict({{}}) is a no-op: pass `allow` and/or `deny` (an empty filter is almost always a materialized-empty-config bug)"
    )]
    Empty,
    #[error(
        "tools.restrict() cannot name reserved Code Mode presentation transport \"run_code\"; restrict end-capability tools instead"
    )]
    Reserved,
    /// Names that are not currently inherited (message built by the registry).
    #[error("{message}")]
    UnknownNames { names: Vec<String>, message: String },
    #[error(transparent)]
    ChangeListener(ToolError),
}

/// `present_as()` misuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PresentAsError {
    #[error(
        "tools.presentAs() requires a scoped context (agent.ctx): a context-global presentation is the `mode` config field on the tools row"
    )]
    Unscoped,
    #[error(
        "tools.presentAs(\"{requested}\") conflicts with \"{existing}\" already declared for this scope; one composition selects one presentation"
    )]
    Conflict { requested: String, existing: String },
    #[error(transparent)]
    ChangeListener(ToolError),
}

/// `schemas()` refused to project a tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemasError {
    #[error("tool \"{name}\" parameters must be lossless JSON before schema projection")]
    LossyParameters { name: String },
}

/// Why a front-end client did not serve a request a tool made of it (editor file access, a
/// terminal). `Display` is the client's own text; the tool decides whether to fall back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientRequestError {
    /// The client answered with an error, or the connection failed.
    #[error("{0}")]
    Refused(String),
}

/// Why the attachment store did not keep an image. `Display` reaches the model unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AttachmentStoreError {
    #[error("{0}")]
    Refused(String),
}
