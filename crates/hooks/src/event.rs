//! `hook/invoked` and `hook/result`: the bridges' durable events, recorded through the
//! session's `SessionContext`.

use serde_json::Map;
use serde_json::Value;

use crate::Dialect;
use crate::Point;

/// One durable hook event.
#[derive(Debug, Clone, PartialEq)]
pub enum HookEvent {
    Invoked {
        point: Point,
        dialect: Dialect,
        handler_id: String,
        matcher: Option<String>,
    },
    Result {
        point: Point,
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

    /// The event data in upstream's key order, with `turn` first.
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
                map.insert("durationMs".into(), (*duration_ms).into());
            }
        }
        Value::Object(map)
    }
}
