//! The one error type of this crate. Its `message` is the exact upstream text; the pipeline's
//! error envelope prefixes it with `Error: `.

use dsh_protocol::ContentBlock;

/// A failed tool call or jobs-runtime operation.
///
/// `code`/`name` are set only for harness errors that upstream reports with `error.info`
/// (`{name:'AbortError', code:'ABORTED'}`); plain argument or policy errors carry neither.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ShellError {
    pub message: String,
    pub code: Option<String>,
    pub name: Option<String>,
}

impl ShellError {
    /// A plain error (no `error.info`).
    pub fn plain(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: None,
            name: None,
        }
    }

    /// A harness error with `error.info = {name, code}`.
    pub fn coded(message: impl Into<String>, name: &str, code: &str) -> Self {
        Self {
            message: message.into(),
            code: Some(code.to_owned()),
            name: Some(name.to_owned()),
        }
    }

    /// The caller cancelled while the body ran.
    pub fn aborted() -> Self {
        Self::coded("tool call aborted", "AbortError", "ABORTED")
    }

    /// What the model sees for this error (the pipeline's envelope, reproduced for tests and
    /// for callers that render errors themselves).
    pub fn to_content(&self) -> Vec<ContentBlock> {
        vec![ContentBlock::text(format!("Error: {}", self.message))]
    }
}

impl From<ShellError> for dsh_tools::ToolError {
    fn from(error: ShellError) -> Self {
        match (error.name, error.code) {
            (Some(name), Some(code)) => Self::coded(name, code, error.message),
            _ => Self::new(error.message),
        }
    }
}

/// Formats a JSON number the way JavaScript's `String(n)` / `JSON.stringify(n)` does for the
/// values that reach our messages: integral values print without a fraction.
pub fn js_number(value: f64) -> String {
    if value.is_finite() && value.fract() == 0.0 && value.abs() < 1e21 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn js_number_matches_javascript() {
        assert_eq!(js_number(100.0), "100");
        assert_eq!(js_number(-5.0), "-5");
        assert_eq!(js_number(0.0), "0");
        assert_eq!(js_number(1.5), "1.5");
    }

    #[test]
    fn envelope_prefixes_error() {
        assert_eq!(
            ShellError::aborted().to_content(),
            vec![ContentBlock::text("Error: tool call aborted")]
        );
    }
}
