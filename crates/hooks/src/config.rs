//! The hook file (upstream `parseClaudeCodeConfig` / `parseCodexConfig`): lenient — malformed
//! entries are dropped, unsupported events and hook types are skipped with a warning — with
//! one exception: a kept matcher that does not compile rejects the whole file.

use std::path::Path;

use serde_json::Map;
use serde_json::Value;

use crate::Dialect;
use crate::Event;
use crate::matcher::Matcher;

/// One runnable command hook.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandHook {
    /// The shell line, after Claude Code's `${CLAUDE_PLUGIN_ROOT}` / `${CLAUDE_PROJECT_DIR}`
    /// substitution.
    pub command: String,
    /// Any number the file gave (0, negatives and fractions included: the executor judges).
    pub timeout_sec: Option<f64>,
}

/// A matcher group with at least one command hook.
#[derive(Debug, Clone)]
pub struct Group {
    /// The matcher exactly as kept (absent when the group had none, or the event has no
    /// matcher subject).
    pub matcher: Option<String>,
    compiled: Matcher,
    pub hooks: Vec<CommandHook>,
}

impl Group {
    pub fn matches(&self, subject: &str) -> bool {
        self.compiled.matches(subject)
    }
}

/// Claude Code's command substitutions (configured values only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Substitutions {
    pub plugin_root: Option<String>,
    pub project_dir: Option<String>,
}

/// Why a hook file could not be loaded. `Display` is upstream's `String(error)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("Error: ENOENT: no such file or directory, open '{0}'")]
    Missing(String),
    #[error("Error: {0}")]
    Unreadable(String),
    #[error("SyntaxError: {0}")]
    Json(String),
    #[error("SyntaxError: {0}")]
    Matcher(String),
}

/// A parsed hook file: the surviving groups per event, and one warning per skipped hook.
#[derive(Debug, Clone, Default)]
pub struct HookFile {
    pub dialect: Dialect,
    events: Vec<(Event, Vec<Group>)>,
    /// `hooks-…: skipping …` lines, in file order.
    pub skipped: Vec<String>,
}

impl HookFile {
    /// Reads `path` (relative paths resolve against the process cwd) and parses it.
    pub fn load(dialect: Dialect, path: &str, subs: &Substitutions) -> Result<Self, LoadError> {
        let text = match std::fs::read_to_string(Path::new(path)) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(LoadError::Missing(path.to_owned()));
            }
            Err(error) => return Err(LoadError::Unreadable(format!("{error}, open '{path}'"))),
        };
        let root: Value =
            serde_json::from_str(&text).map_err(|e| LoadError::Json(e.to_string()))?;
        Self::from_value(dialect, &root, subs)
    }

    /// Parses an already-decoded document.
    pub fn from_value(
        dialect: Dialect,
        root: &Value,
        subs: &Substitutions,
    ) -> Result<Self, LoadError> {
        let mut file = Self {
            dialect,
            ..Self::default()
        };
        let Value::Object(root) = root else {
            return Ok(file);
        };
        let map: &Map<String, Value> = match root.get("hooks") {
            Some(Value::Object(hooks)) => hooks,
            _ => root,
        };
        for &event in dialect.events() {
            let Some(Value::Array(groups)) = map.get(event.as_str()) else {
                continue;
            };
            let mut kept = Vec::new();
            for group in groups {
                let Value::Object(group) = group else {
                    continue;
                };
                let Some(Value::Array(entries)) = group.get("hooks") else {
                    continue;
                };
                let hooks: Vec<CommandHook> = entries
                    .iter()
                    .filter_map(|entry| file.command(event, entry, subs))
                    .collect();
                if hooks.is_empty() {
                    continue;
                }
                let matcher = if event.has_matcher() {
                    group
                        .get("matcher")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                } else {
                    None
                };
                let compiled = Matcher::compile(matcher.as_deref(), dialect).map_err(|diag| {
                    LoadError::Matcher(format!("{diag} on event {}", Value::from(event.as_str())))
                })?;
                kept.push(Group {
                    matcher,
                    compiled,
                    hooks,
                });
            }
            if !kept.is_empty() {
                file.events.push((event, kept));
            }
        }
        Ok(file)
    }

    fn command(
        &mut self,
        event: Event,
        entry: &Value,
        subs: &Substitutions,
    ) -> Option<CommandHook> {
        let Value::Object(entry) = entry else {
            return None;
        };
        let kind = entry
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("command");
        let plugin = self.dialect.plugin();
        if kind != "command" {
            self.skipped.push(match self.dialect {
                Dialect::ClaudeCode => format!(
                    "{plugin}: skipping unsupported \"{kind}\" hook on {} (only command hooks run)",
                    event.as_str()
                ),
                Dialect::Codex => format!(
                    "{plugin}: skipping unsupported \"{kind}\" hook on {} (only sync command hooks run)",
                    event.as_str()
                ),
            });
            return None;
        }
        if self.dialect == Dialect::Codex && entry.get("async") == Some(&Value::Bool(true)) {
            self.skipped.push(format!(
                "{plugin}: skipping async hook on {} (only sync command hooks run)",
                event.as_str()
            ));
            return None;
        }
        let mut command = entry.get("command")?.as_str()?.to_owned();
        let timeout_sec = match self.dialect {
            Dialect::ClaudeCode => entry.get("timeout").and_then(Value::as_f64),
            Dialect::Codex => entry
                .get("timeout")
                .and_then(Value::as_f64)
                .or_else(|| entry.get("timeoutSec").and_then(Value::as_f64)),
        };
        if self.dialect == Dialect::ClaudeCode {
            if let Some(root) = &subs.plugin_root {
                command = command.replace("${CLAUDE_PLUGIN_ROOT}", root);
            }
            if let Some(dir) = &subs.project_dir {
                command = command.replace("${CLAUDE_PROJECT_DIR}", dir);
            }
        }
        Some(CommandHook {
            command,
            timeout_sec,
        })
    }

    /// The groups of `event`, in file order (empty when none survived).
    pub fn groups(&self, event: Event) -> &[Group] {
        self.events
            .iter()
            .find(|(e, _)| *e == event)
            .map_or(&[], |(_, groups)| groups.as_slice())
    }

    /// Whether any hook of any event survived.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
