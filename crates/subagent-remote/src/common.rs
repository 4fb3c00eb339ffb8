//! What the out-of-process providers share (§3 "Common behaviour"): the child's working
//! directory, text-only prompts, and the product failure diagnostics.

use std::path::Path;
use std::path::PathBuf;

use dsh_protocol::ContentBlock;
use dsh_subagent::SubagentError;

/// `MAX_TIMER_DELAY_MS`.
pub const MAX_TIMER_DELAY_MS: u64 = 2_147_483_647;

/// Validates a configured `cwd` at load time: not empty, resolved against the launch
/// directory, an enterable directory.
pub fn configured_cwd(prefix: &str, cwd: Option<&str>) -> Result<Option<PathBuf>, SubagentError> {
    let Some(cwd) = cwd else {
        return Ok(None);
    };
    if cwd.is_empty() {
        return Err(SubagentError::plain(format!(
            "{prefix}: config cwd must not be empty — omit the key to inherit the parent session cwd"
        )));
    }
    let path = Path::new(cwd);
    let path = if path.is_relative() {
        std::env::current_dir()
            .map_err(|e| SubagentError::plain(format!("{prefix}: {e}")))?
            .join(path)
    } else {
        path.to_path_buf()
    };
    if !path.is_absolute() {
        return Err(SubagentError::plain(format!(
            "{prefix}: cwd must be an absolute path: {}",
            path.display()
        )));
    }
    if std::fs::read_dir(&path).is_err() {
        return Err(SubagentError::plain(format!(
            "{prefix}: cwd is not an accessible directory: {}",
            path.display()
        )));
    }
    Ok(Some(path))
}

/// The child's directory: the configured one, else the parent session header's.
pub fn child_cwd(
    prefix: &str,
    configured: Option<&Path>,
    parent_cwd: Option<&str>,
    configurable: bool,
) -> Result<PathBuf, SubagentError> {
    if let Some(cwd) = configured {
        return Ok(cwd.to_path_buf());
    }
    match parent_cwd {
        Some(cwd) => Ok(PathBuf::from(cwd)),
        None if configurable => Err(SubagentError::plain(format!(
            "{prefix}: no working directory for the child — configure `cwd` or delegate from a parent session that has one"
        ))),
        None => Err(SubagentError::plain(format!(
            "{prefix}: no working directory for the child — delegate from a parent session that has one"
        ))),
    }
}

/// Codex and Claude Code take one non-empty, text-only task.
pub fn text_task(prefix: &str, prompt: &[ContentBlock]) -> Result<String, SubagentError> {
    let mut text = String::new();
    for block in prompt {
        match block {
            ContentBlock::Text { text: t } => text.push_str(t),
            _ => {
                return Err(SubagentError::plain(format!(
                    "{prefix}: the one-shot task must contain only text blocks"
                )));
            }
        }
    }
    if text.trim().is_empty() {
        return Err(SubagentError::plain(format!(
            "{prefix}: the one-shot task must not be empty"
        )));
    }
    Ok(text)
}

/// `Product subagent failure (product: …; stage: …; category: …[; HTTP status: n][; exit
/// code: n][; signal: s])`, optionally followed by the unattended-decision line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProductFailure {
    pub product: &'static str,
    pub stage: String,
    pub category: String,
    pub http_status: Option<u16>,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    /// `(mode, request, decision, reason)` of the last unattended decision, if any.
    pub decision: Option<(String, String, String, String)>,
}

impl ProductFailure {
    pub fn render(&self) -> String {
        let mut line = format!(
            "Product subagent failure (product: {}; stage: {}; category: {}",
            self.product, self.stage, self.category
        );
        if let Some(status) = self.http_status {
            line.push_str(&format!("; HTTP status: {status}"));
        }
        if let Some(code) = self.exit_code {
            line.push_str(&format!("; exit code: {code}"));
        }
        if let Some(signal) = &self.signal {
            line.push_str(&format!("; signal: {signal}"));
        }
        line.push(')');
        if let Some((mode, request, decision, reason)) = &self.decision {
            line.push_str(&format!(
                "\n{} unattended decision (mode: {mode}; request: {request}; decision: {decision}): {reason}",
                self.product
            ));
        }
        line
    }
}

pub fn check_grace(prefix: &str, name: &str, value: u64) -> Result<(), SubagentError> {
    if value == 0 || value > MAX_TIMER_DELAY_MS {
        return Err(SubagentError::plain(format!(
            "{prefix}: {name} must be a positive finite number no greater than {MAX_TIMER_DELAY_MS}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn product_tasks_are_text_only_and_non_empty() {
        assert_eq!(
            text_task("subagent-codex", &[ContentBlock::text("  ")])
                .unwrap_err()
                .message,
            "subagent-codex: the one-shot task must not be empty"
        );
        let image = ContentBlock::Image {
            attachment: serde_json::json!({}),
        };
        assert_eq!(
            text_task("subagent-claude-code", &[ContentBlock::text("a"), image])
                .unwrap_err()
                .message,
            "subagent-claude-code: the one-shot task must contain only text blocks"
        );
        assert_eq!(
            text_task("p", &[ContentBlock::text("do it")]).unwrap(),
            "do it"
        );
    }

    #[test]
    fn diagnostics_have_the_fixed_shape() {
        let failure = ProductFailure {
            product: "Codex",
            stage: "turn".into(),
            category: "usageLimitExceeded".into(),
            http_status: Some(429),
            exit_code: None,
            signal: None,
            decision: Some((
                "never".into(),
                "commandExecution".into(),
                "cancel".into(),
                "approvals are disabled".into(),
            )),
        };
        assert_eq!(
            failure.render(),
            "Product subagent failure (product: Codex; stage: turn; category: usageLimitExceeded; HTTP status: 429)\nCodex unattended decision (mode: never; request: commandExecution; decision: cancel): approvals are disabled"
        );
        let exited = ProductFailure {
            product: "Claude Code",
            stage: "process".into(),
            category: "process-exit".into(),
            exit_code: Some(1),
            signal: Some("SIGKILL".into()),
            ..ProductFailure::default()
        };
        assert_eq!(
            exited.render(),
            "Product subagent failure (product: Claude Code; stage: process; category: process-exit; exit code: 1; signal: SIGKILL)"
        );
    }

    #[test]
    fn cwd_and_grace_validation() {
        assert_eq!(
            configured_cwd("subagent-acp", Some(""))
                .unwrap_err()
                .message,
            "subagent-acp: config cwd must not be empty — omit the key to inherit the parent session cwd"
        );
        assert!(
            configured_cwd("subagent-acp", Some("/definitely/not/here"))
                .unwrap_err()
                .message
                .starts_with("subagent-acp: cwd is not an accessible directory: ")
        );
        assert_eq!(
            child_cwd("subagent-codex", None, None, false)
                .unwrap_err()
                .message,
            "subagent-codex: no working directory for the child — delegate from a parent session that has one"
        );
        assert_eq!(
            check_grace("subagent-acp", "disposeGraceMs", 0)
                .unwrap_err()
                .message,
            "subagent-acp: disposeGraceMs must be a positive finite number no greater than 2147483647"
        );
    }
}
