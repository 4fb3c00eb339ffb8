//! The code-runtime seam (tool-runtime-spec §7.5): what a backend receives and returns.

use std::collections::HashSet;
use std::sync::Arc;

use futures::future::BoxFuture;
use indexmap::IndexMap;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// One host function a program can await. Resolves with a lossless JSON value or rejects
/// with a message (surfaced in the program as the namespace's error class).
pub type BindingFn =
    Arc<dyn Fn(Value) -> BoxFuture<'static, Result<Value, BindingError>> + Send + Sync>;

/// Why a binding call rejected. `Display` is the message of the error the program catches
/// (`new <ErrorClass>(message)`), so each text is model-facing and fixed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BindingError {
    /// The call ran and failed: the tool's (or the host function's) own failure text.
    #[error("{0}")]
    Failed(String),
    /// The program passed arguments with no lossless JSON form.
    #[error("binding arguments must be lossless JSON")]
    ArgumentsNotJson,
    /// A tool binding refused lossy arguments before dispatching.
    #[error("{}", crate::ARGS_LOSSY)]
    ToolArgumentsLossy,
    /// The host function resolved with a value that has no lossless JSON form.
    #[error("binding resolution must be lossless JSON")]
    ResolutionNotJson,
    #[error("unknown binding \"{global}.{name}\"")]
    Unknown { global: String, name: String },
    /// The engine's run ended before the call reached the host.
    #[error("run_code run is over; {name} not dispatched")]
    EngineOver { name: String },
    /// The run ended (`reason`) before the call was dispatched, answered or used.
    #[error("run_code run is over ({reason}); {name} {fate}")]
    RunOver {
        reason: String,
        name: String,
        fate: RunOverFate,
    },
    #[error("binding reply dropped")]
    ReplyDropped,
}

impl From<String> for BindingError {
    fn from(message: String) -> Self {
        Self::Failed(message)
    }
}

/// What became of a call when its run ended under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOverFate {
    NotDispatched,
    Abandoned,
    Discarded,
}

impl std::fmt::Display for RunOverFate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NotDispatched => "not dispatched",
            Self::Abandoned => "tool call abandoned",
            Self::Discarded => "result discarded",
        })
    }
}

/// The error class a failed binding surfaces as: `new <name>(message)` with
/// `<member_name_property> = <binding name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorClass {
    pub name: String,
    pub member_name_property: String,
}

/// One global the program sees (`tools`), mapping binding names to host functions.
#[derive(Clone)]
pub struct CodeBindingNamespace {
    pub global: String,
    pub functions: IndexMap<String, BindingFn>,
    pub error_class: Option<ErrorClass>,
}

/// `runtime.run(request)`.
#[derive(Clone)]
pub struct CodeRunRequest {
    pub program: String,
    pub bindings: Vec<CodeBindingNamespace>,
    pub signal: Option<CancellationToken>,
}

/// Why a program did not complete normally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeErrorKind {
    Exception,
    Timeout,
    Abort,
    WorkerExit,
    InvalidOutput,
    OutputLimit,
}

impl CodeErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exception => "exception",
            Self::Timeout => "timeout",
            Self::Abort => "abort",
            Self::WorkerExit => "worker-exit",
            Self::InvalidOutput => "invalid-output",
            Self::OutputLimit => "output-limit",
        }
    }
}

/// `{kind, message}` of a failed program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeRunError {
    pub kind: CodeErrorKind,
    pub message: String,
}

/// Every program outcome: `value` (absent = `undefined`), the ordered logs, or an error.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CodeRunResult {
    pub value: Option<Value>,
    pub logs: Vec<String>,
    pub error: Option<CodeRunError>,
}

impl CodeRunResult {
    pub fn failed(kind: CodeErrorKind, message: impl Into<String>, logs: Vec<String>) -> Self {
        Self {
            value: None,
            logs,
            error: Some(CodeRunError {
                kind,
                message: message.into(),
            }),
        }
    }
}

/// Seam misuse: the only way `run` fails instead of resolving.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodeRuntimeError {
    #[error("code runtime disposed")]
    Disposed,
    #[error("invalid code bindings: {0}")]
    InvalidBindings(String),
    #[error("code runtime failed: {0}")]
    Crashed(String),
}

/// A code runtime (service `dyn CodeRuntime`). `language` and `isolation` are informational.
pub trait CodeRuntime: Send + Sync {
    fn language(&self) -> &str;
    fn isolation(&self) -> &str;
    fn run(
        &self,
        request: CodeRunRequest,
    ) -> BoxFuture<'static, Result<CodeRunResult, CodeRuntimeError>>;
}

/// The abort reason a program and its late bindings see when the outer call is cancelled
/// (`String(reason)` of a default `AbortSignal`).
pub const ABORT_REASON: &str = "AbortError: This operation was aborted";

/// ECMAScript reserved words plus Python keywords and soft keywords.
pub const PORTABLE_RESERVED_WORDS: &[&str] = &[
    // ECMAScript (including strict-mode and contextual restrictions)
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "import",
    "in",
    "instanceof",
    "new",
    "null",
    "return",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "var",
    "void",
    "while",
    "with",
    "yield",
    "let",
    "static",
    "implements",
    "interface",
    "package",
    "private",
    "protected",
    "public",
    "arguments",
    "eval",
    // Python keywords
    "False",
    "None",
    "True",
    "and",
    "as",
    "assert",
    "async",
    "def",
    "del",
    "elif",
    "except",
    "from",
    "global",
    "is",
    "lambda",
    "nonlocal",
    "not",
    "or",
    "pass",
    "raise",
    // Python soft keywords
    "match",
    "type",
    "_",
];

/// Globals a binding can never claim.
pub const RESERVED_BINDING_GLOBALS: &[&str] = &[
    "console",
    "__dsh_main__",
    "__builtins__",
    "__name__",
    "__debug__",
];

const RESERVED_MEMBER_PROPERTIES: &[&str] = &[
    "name",
    "message",
    "stack",
    "args",
    "with_traceback",
    "add_note",
];

fn portable_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn check_name(what: &str, name: &str) -> Result<(), CodeRuntimeError> {
    if !portable_identifier(name) {
        return Err(CodeRuntimeError::InvalidBindings(format!(
            "{what} \"{name}\" must match [A-Za-z_][A-Za-z0-9_]*"
        )));
    }
    if PORTABLE_RESERVED_WORDS.contains(&name) || RESERVED_BINDING_GLOBALS.contains(&name) {
        return Err(CodeRuntimeError::InvalidBindings(format!(
            "{what} \"{name}\" is reserved"
        )));
    }
    Ok(())
}

/// The portable name rules every backend enforces at `run()`.
pub fn validate_bindings(bindings: &[CodeBindingNamespace]) -> Result<(), CodeRuntimeError> {
    let mut seen: HashSet<&str> = HashSet::new();
    for namespace in bindings {
        check_name("binding global", &namespace.global)?;
        if !seen.insert(&namespace.global) {
            return Err(CodeRuntimeError::InvalidBindings(format!(
                "duplicate binding name \"{}\"",
                namespace.global
            )));
        }
        if let Some(class) = &namespace.error_class {
            check_name("error class", &class.name)?;
            if !seen.insert(&class.name) {
                return Err(CodeRuntimeError::InvalidBindings(format!(
                    "duplicate binding name \"{}\"",
                    class.name
                )));
            }
            let member = class.member_name_property.as_str();
            let dunder = member.len() > 4 && member.starts_with("__") && member.ends_with("__");
            if member.is_empty() || RESERVED_MEMBER_PROPERTIES.contains(&member) || dunder {
                return Err(CodeRuntimeError::InvalidBindings(format!(
                    "error class \"{}\" cannot carry the binding name in \"{member}\"",
                    class.name
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namespace(global: &str, class: Option<(&str, &str)>) -> CodeBindingNamespace {
        CodeBindingNamespace {
            global: global.into(),
            functions: IndexMap::new(),
            error_class: class.map(|(name, member)| ErrorClass {
                name: name.into(),
                member_name_property: member.into(),
            }),
        }
    }

    #[test]
    fn portable_names_are_enforced() {
        assert!(
            validate_bindings(&[namespace("tools", Some(("ToolCallError", "toolName")))]).is_ok()
        );
        for bad in [
            "$tools",
            "9x",
            "type",
            "_",
            "match",
            "console",
            "__dsh_main__",
            "class",
            "None",
        ] {
            assert!(validate_bindings(&[namespace(bad, None)]).is_err(), "{bad}");
        }
        for member in ["", "name", "message", "stack", "args", "__x__"] {
            assert!(
                validate_bindings(&[namespace("tools", Some(("E", member)))]).is_err(),
                "{member}"
            );
        }
        assert!(validate_bindings(&[namespace("tools", Some(("tools", "toolName")))]).is_err());
        assert!(validate_bindings(&[namespace("a", None), namespace("a", None)]).is_err());
    }
}
