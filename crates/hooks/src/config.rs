//! The hook configuration file: `{"hooks": {"<Event>": [{"matcher", "hooks": [{type, command,
//! timeout?}]}]}}`, read once. Only `command` hooks on the two tool events are bridged; other
//! events and hook types are skipped with a log line so a file written for the full Claude Code
//! (or Codex) event set still loads.

use std::path::Path;
use std::time::Duration;

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

use crate::Dialect;
use crate::HooksError;
use crate::Point;

/// Upstream's default per-command timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// One runnable command hook.
#[derive(Debug, Clone)]
pub struct Handler {
    /// `<dialect>:<Point>:<n>`, `n` counting this point's commands from 1 in file order.
    pub id: String,
    pub point: Point,
    /// The matcher as written (absent or empty = every tool).
    pub matcher: Option<String>,
    pattern: Matcher,
    pub command: String,
    pub timeout: Duration,
}

#[derive(Debug, Clone)]
enum Matcher {
    All,
    Regex(Regex),
    /// A matcher that is not a valid regex is compared literally.
    Exact(String),
}

impl Handler {
    pub fn matches(&self, tool: &str) -> bool {
        match &self.pattern {
            Matcher::All => true,
            Matcher::Regex(regex) => regex.is_match(tool),
            Matcher::Exact(name) => name == tool,
        }
    }
}

/// Every bridged command of one configuration file.
#[derive(Debug, Clone, Default)]
pub struct HooksConfig {
    pub dialect: Dialect,
    pub pre_tool_use: Vec<Handler>,
    pub post_tool_use: Vec<Handler>,
}

impl HooksConfig {
    /// Reads `path`; a missing file is `Ok(None)` (the bridge registers nothing).
    pub fn load(dialect: Dialect, path: &Path) -> Result<Option<Self>, HooksError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(HooksError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        Self::parse(dialect, &text)
            .map(Some)
            .map_err(|message| HooksError::Invalid {
                path: path.to_path_buf(),
                message,
            })
    }

    /// Parses a configuration document.
    pub fn parse(dialect: Dialect, text: &str) -> Result<Self, String> {
        let file: FileShape = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut config = Self {
            dialect,
            ..Self::default()
        };
        let Some(events) = file.hooks else {
            return Ok(config);
        };
        for (event, groups) in events {
            let Some(point) = Point::from_event_name(dialect, &event) else {
                tracing::debug!(%event, dialect = dialect.as_str(), "hook event not bridged");
                continue;
            };
            let groups: Vec<GroupShape> =
                serde_json::from_value(groups).map_err(|e| format!("hooks.{event}: {e}"))?;
            let target = match point {
                Point::PreToolUse => &mut config.pre_tool_use,
                Point::PostToolUse => &mut config.post_tool_use,
            };
            for group in groups {
                let matcher = group.matcher.filter(|m| !m.is_empty());
                let pattern = match matcher.as_deref() {
                    None | Some("*") => Matcher::All,
                    Some(text) => match Regex::new(&format!("^(?:{text})$")) {
                        Ok(regex) => Matcher::Regex(regex),
                        Err(error) => {
                            tracing::warn!(matcher = text, %error, "hook matcher is not a regex; comparing literally");
                            Matcher::Exact(text.to_owned())
                        }
                    },
                };
                for hook in group.hooks {
                    if hook.kind != "command" {
                        tracing::debug!(kind = %hook.kind, "hook type not bridged");
                        continue;
                    }
                    let Some(command) = hook.command.filter(|c| !c.trim().is_empty()) else {
                        return Err(format!("hooks.{event}: a command hook has no command"));
                    };
                    let timeout = match hook.timeout {
                        Some(secs) if secs.is_finite() && secs > 0.0 => {
                            Duration::from_secs_f64(secs)
                        }
                        Some(_) => return Err(format!("hooks.{event}: timeout must be positive")),
                        None => DEFAULT_TIMEOUT,
                    };
                    target.push(Handler {
                        id: format!(
                            "{}:{}:{}",
                            dialect.as_str(),
                            point.as_str(),
                            target.len() + 1
                        ),
                        point,
                        matcher: matcher.clone(),
                        pattern: pattern.clone(),
                        command,
                        timeout,
                    });
                }
            }
        }
        Ok(config)
    }

    pub fn is_empty(&self) -> bool {
        self.pre_tool_use.is_empty() && self.post_tool_use.is_empty()
    }
}

#[derive(Deserialize)]
struct FileShape {
    hooks: Option<serde_json::Map<String, Value>>,
}

#[derive(Deserialize)]
struct GroupShape {
    matcher: Option<String>,
    #[serde(default)]
    hooks: Vec<HookShape>,
}

#[derive(Deserialize)]
struct HookShape {
    #[serde(rename = "type")]
    kind: String,
    command: Option<String>,
    timeout: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler(matcher: &str) -> Handler {
        let text = serde_json::json!({"hooks": {"PreToolUse": [
            {"matcher": matcher, "hooks": [{"type": "command", "command": "true", "timeout": 5}]}
        ]}})
        .to_string();
        let mut config = HooksConfig::parse(Dialect::ClaudeCode, &text).unwrap();
        config.pre_tool_use.remove(0)
    }

    #[test]
    fn matchers_are_anchored_regexes_with_match_all_forms() {
        assert!(handler("bash").matches("bash"));
        assert!(!handler("bash").matches("bash_extra"));
        assert!(handler("Edit|Write").matches("Write"));
        assert!(handler("mcp__.*").matches("mcp__fs__read"));
        assert!(handler("*").matches("anything"));
        assert!(handler("").matches("anything"));
        assert_eq!(handler("").matcher, None);
        assert!(handler("(").matches("("));
        assert_eq!(handler("bash").timeout, Duration::from_secs(5));
    }

    #[test]
    fn codex_accepts_snake_case_events_but_claude_code_does_not() {
        let text =
            r#"{"hooks": {"pre_tool_use": [{"hooks": [{"type": "command", "command": "true"}]}]}}"#;
        assert!(
            HooksConfig::parse(Dialect::ClaudeCode, text)
                .unwrap()
                .is_empty()
        );
        let codex = HooksConfig::parse(Dialect::Codex, text).unwrap();
        assert_eq!(codex.pre_tool_use[0].id, "codex:PreToolUse:1");
        assert_eq!(codex.pre_tool_use[0].timeout, DEFAULT_TIMEOUT);
    }

    #[test]
    fn a_command_hook_without_a_command_is_rejected() {
        let text = r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "command"}]}]}}"#;
        assert!(HooksConfig::parse(Dialect::ClaudeCode, text).is_err());
    }
}
