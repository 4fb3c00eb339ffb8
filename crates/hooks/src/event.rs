//! The durable `hook/invoked` / `hook/result` events (log-only, never model context).

use serde_json::Map;
use serde_json::Value;

use crate::Dialect;
use crate::Event;

/// One durable hook event, before its `turn` is known.
#[derive(Debug, Clone, PartialEq)]
pub enum HookEvent {
    Invoked {
        point: Event,
        dialect: Dialect,
        handler_id: String,
        matcher: Option<String>,
    },
    Result {
        point: Event,
        handler_id: String,
        decision: &'static str,
        exit_code: Option<i32>,
        stderr_summary: Option<String>,
        duration_ms: f64,
    },
}

impl HookEvent {
    pub fn event_type(&self) -> &'static str {
        match self {
            Self::Invoked { .. } => "hook/invoked",
            Self::Result { .. } => "hook/result",
        }
    }

    /// The event data in upstream's key order, `turn` first.
    pub fn data(&self, turn: u64) -> Value {
        let mut map = Map::new();
        map.insert("turn".into(), turn.into());
        match self {
            Self::Invoked {
                point,
                dialect,
                handler_id,
                matcher,
            } => {
                map.insert("point".into(), point.as_str().into());
                map.insert("dialect".into(), dialect.as_str().into());
                map.insert("handlerId".into(), handler_id.as_str().into());
                if let Some(matcher) = matcher {
                    map.insert("matcher".into(), matcher.as_str().into());
                }
            }
            Self::Result {
                point,
                handler_id,
                decision,
                exit_code,
                stderr_summary,
                duration_ms,
            } => {
                map.insert("point".into(), point.as_str().into());
                map.insert("handlerId".into(), handler_id.as_str().into());
                map.insert("decision".into(), (*decision).into());
                if let Some(code) = exit_code {
                    map.insert("exitCode".into(), (*code).into());
                }
                if let Some(summary) = stderr_summary {
                    map.insert("stderrSummary".into(), summary.as_str().into());
                }
                let duration = if duration_ms.is_finite() {
                    *duration_ms
                } else {
                    0.0
                };
                map.insert("durationMs".into(), duration.into());
            }
        }
        Value::Object(map)
    }
}

/// Upstream `summarizeStderr`: trimmed; `None` when blank; over `cap` UTF-16 units, the first
/// `cap` units and `…`. A cut inside a surrogate pair keeps the whole character (JS would
/// keep a lone high surrogate, which JSON text cannot carry losslessly).
pub fn summarize_stderr(stderr: &str, cap: usize) -> Option<String> {
    let trimmed = stderr.trim();
    if trimmed.is_empty() {
        return None;
    }
    if trimmed.encode_utf16().count() <= cap {
        return Some(trimmed.to_owned());
    }
    let mut units = 0;
    let mut out = String::new();
    for ch in trimmed.chars() {
        if units >= cap {
            break;
        }
        units += ch.len_utf16();
        out.push(ch);
    }
    out.push('…');
    Some(out)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn item_44_summary_is_trimmed_capped_and_ellipsized() {
        assert_eq!(summarize_stderr("  \n ", 500), None);
        assert_eq!(summarize_stderr(" abc ", 3).as_deref(), Some("abc"));
        assert_eq!(summarize_stderr("abcdef", 3).as_deref(), Some("abc…"));
        let long = "x".repeat(600);
        assert_eq!(summarize_stderr(&long, 500).unwrap().chars().count(), 501);
        // UTF-16 units: an astral character counts 2.
        assert_eq!(summarize_stderr("😀😀ab", 6).as_deref(), Some("😀😀ab"));
        assert_eq!(summarize_stderr("😀😀ab", 4).as_deref(), Some("😀😀…"));
        assert_eq!(summarize_stderr("a😀😀b", 2).as_deref(), Some("a😀…"));
    }

    #[test]
    fn item_45_48_optional_fields_are_omitted() {
        let invoked = HookEvent::Invoked {
            point: Event::PreToolUse,
            dialect: Dialect::Codex,
            handler_id: "codex:PreToolUse:1".into(),
            matcher: None,
        };
        assert_eq!(
            invoked.data(3),
            json!({"turn": 3, "point": "PreToolUse", "dialect": "codex", "handlerId": "codex:PreToolUse:1"})
        );
        let with = HookEvent::Invoked {
            point: Event::PreToolUse,
            dialect: Dialect::ClaudeCode,
            handler_id: "claude-code:PreToolUse:2".into(),
            matcher: Some(String::new()),
        };
        assert_eq!(with.data(1)["matcher"], "");
        let result = HookEvent::Result {
            point: Event::Stop,
            handler_id: "h".into(),
            decision: "pass",
            exit_code: None,
            stderr_summary: None,
            duration_ms: 1.5,
        };
        let keys: Vec<String> = result
            .data(2)
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(
            keys,
            ["turn", "point", "handlerId", "decision", "durationMs"]
        );
    }
}
