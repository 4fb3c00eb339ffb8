//! The session header: storage metadata kept outside the event log (§1.9), written as the
//! first JSONL line.

use std::path::Path;

use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;

use crate::error::SessionError;

/// `SESSION_FORMAT_VERSION`: the only header version this build reads and writes.
pub const SESSION_FORMAT_VERSION: u64 = 0;

/// `{type:"session", version:0, id, createdAt, cwd?, parentSession?, seedLength?, origin?,
/// delegationDepth, agentPreset?}` — serialised in exactly that key order.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionHeader {
    pub id: String,
    /// Epoch milliseconds.
    pub created_at: u64,
    /// Absolute working directory (stored verbatim; not checked on load).
    pub cwd: Option<String>,
    pub parent_session: Option<String>,
    /// Number of events inherited from the parent (fork).
    pub seed_length: Option<u64>,
    /// `"subagent"` for delegated children.
    pub origin: Option<String>,
    pub delegation_depth: u64,
    pub agent_preset: Option<Value>,
}

impl SessionHeader {
    /// A top-level header with `createdAt = now`.
    pub fn new(id: impl Into<String>, cwd: Option<String>) -> Self {
        Self {
            id: id.into(),
            created_at: crate::log::now_ms(),
            cwd,
            parent_session: None,
            seed_length: None,
            origin: None,
            delegation_depth: 0,
            agent_preset: None,
        }
    }

    /// The header as its JSONL line (no trailing newline).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(&Line::from(self)).unwrap_or_default()
    }

    /// Parses a header line. A `version` other than 0 is refused before anything else is read.
    pub(crate) fn parse_line(path: &Path, line: &[u8]) -> Result<Self, SessionError> {
        let corrupt = |reason: String| SessionError::Corrupt {
            path: path.to_owned(),
            line: 1,
            reason,
        };
        let value: Value =
            serde_json::from_slice(line).map_err(|e| corrupt(format!("bad header: {e}")))?;
        let version = value.get("version").cloned().unwrap_or(Value::Null);
        if version.as_u64() != Some(SESSION_FORMAT_VERSION) {
            let hint = match version.as_f64() {
                Some(v) if v > 0.0 => "written by a newer harness — upgrade dsh",
                _ => "no upgrade path",
            };
            return Err(SessionError::UnsupportedVersion {
                path: path.to_owned(),
                version: version.to_string(),
                hint,
            });
        }
        let line: OwnedLine =
            serde_json::from_value(value).map_err(|e| corrupt(format!("bad header: {e}")))?;
        if line.kind != "session" {
            return Err(corrupt(format!(
                "first line has type {:?}, expected \"session\"",
                line.kind
            )));
        }
        Ok(Self {
            id: line.id,
            created_at: line.created_at,
            cwd: line.cwd,
            parent_session: line.parent_session,
            seed_length: line.seed_length,
            origin: line.origin,
            delegation_depth: line.delegation_depth,
            agent_preset: line.agent_preset,
        })
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Line<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    version: u64,
    id: &'a str,
    created_at: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    cwd: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_session: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed_length: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    origin: Option<&'a str>,
    delegation_depth: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_preset: Option<&'a Value>,
}

impl<'a> From<&'a SessionHeader> for Line<'a> {
    fn from(h: &'a SessionHeader) -> Self {
        Self {
            kind: "session",
            version: SESSION_FORMAT_VERSION,
            id: &h.id,
            created_at: h.created_at,
            cwd: h.cwd.as_deref(),
            parent_session: h.parent_session.as_deref(),
            seed_length: h.seed_length,
            origin: h.origin.as_deref(),
            delegation_depth: h.delegation_depth,
            agent_preset: h.agent_preset.as_ref(),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnedLine {
    #[serde(rename = "type")]
    kind: String,
    id: String,
    created_at: u64,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    parent_session: Option<String>,
    #[serde(default)]
    seed_length: Option<u64>,
    #[serde(default)]
    origin: Option<String>,
    delegation_depth: u64,
    #[serde(default)]
    agent_preset: Option<Value>,
}
