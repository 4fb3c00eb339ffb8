//! The `subagent/descriptor` log event (§1.3.4): the versioned identity of a session-backed
//! child and its mode. Log-only, never model history.

use std::sync::Arc;

use dsh_session::Event;
use serde_json::Map;
use serde_json::Value;

/// The event type.
pub const DESCRIPTOR_KIND: &str = "subagent/descriptor";
/// `SUBAGENT_DESCRIPTOR_VERSION`.
pub const DESCRIPTOR_VERSION: u64 = 2;

/// A delegation tool filter (`{allow?, deny?}`, at least one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilterSpec {
    pub allow: Option<Vec<String>>,
    pub deny: Option<Vec<String>>,
}

impl ToolFilterSpec {
    pub fn is_empty(&self) -> bool {
        self.allow.is_none() && self.deny.is_none()
    }

    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        if let Some(allow) = &self.allow {
            map.insert("allow".into(), Value::from(allow.clone()));
        }
        if let Some(deny) = &self.deny {
            map.insert("deny".into(), Value::from(deny.clone()));
        }
        Value::Object(map)
    }

    pub fn to_registry(&self) -> dsh_tools::ToolFilter {
        dsh_tools::ToolFilter {
            allow: self.allow.clone(),
            deny: self.deny.clone(),
        }
    }
}

/// The continuable descriptor's identity fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinuableDescriptor {
    pub provider: String,
    pub label: String,
    pub agent_provider: Option<String>,
    pub agent_model: Option<String>,
    pub persona: Option<String>,
    pub tool_filter: Option<ToolFilterSpec>,
}

/// A parsed descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Descriptor {
    OneShot {
        provider: String,
        label: Option<String>,
    },
    Continuable(ContinuableDescriptor),
}

impl Descriptor {
    pub fn mode(&self) -> &'static str {
        match self {
            Self::OneShot { .. } => "one-shot",
            Self::Continuable(_) => "continuable",
        }
    }

    pub fn provider(&self) -> &str {
        match self {
            Self::OneShot { provider, .. } => provider,
            Self::Continuable(c) => &c.provider,
        }
    }

    pub fn label(&self) -> Option<&str> {
        match self {
            Self::OneShot { label, .. } => label.as_deref(),
            Self::Continuable(c) => Some(&c.label),
        }
    }

    /// The snapshot written to the log: keys in upstream's order, undefined optional keys
    /// omitted (never `null`).
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("version".into(), Value::from(DESCRIPTOR_VERSION));
        map.insert("mode".into(), Value::from(self.mode()));
        map.insert("provider".into(), Value::from(self.provider()));
        match self {
            Self::OneShot { label, .. } => {
                if let Some(label) = label {
                    map.insert("label".into(), Value::from(label.as_str()));
                }
            }
            Self::Continuable(c) => {
                map.insert("label".into(), Value::from(c.label.as_str()));
                for (key, value) in [
                    ("agentProvider", &c.agent_provider),
                    ("agentModel", &c.agent_model),
                    ("persona", &c.persona),
                ] {
                    if let Some(value) = value {
                        map.insert(key.into(), Value::from(value.as_str()));
                    }
                }
                if let Some(filter) = &c.tool_filter {
                    map.insert("toolFilter".into(), filter.to_value());
                }
            }
        }
        Value::Object(map)
    }

    /// Parses a persisted payload. `Ok(None)` = a version this build does not read.
    pub fn parse(value: &Value) -> Result<Option<Self>, String> {
        const P: &str = "persisted subagent descriptor";
        let Value::Object(map) = value else {
            return Err(format!("{P} payload must be an object"));
        };
        let Some(version) = map.get("version").and_then(Value::as_number) else {
            return Err(format!("{P} version must be a number"));
        };
        if version.as_u64() != Some(DESCRIPTOR_VERSION) {
            return Ok(None);
        }
        let mode = map.get("mode").and_then(Value::as_str);
        let allowed: &[&str] = match mode {
            Some("one-shot") => &["version", "mode", "provider", "label"],
            Some("continuable") => &[
                "version",
                "mode",
                "provider",
                "label",
                "agentProvider",
                "agentModel",
                "persona",
                "toolFilter",
            ],
            _ => return Err(format!("{P} mode must be \"one-shot\" or \"continuable\"")),
        };
        if let Some(key) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(format!("{P} payload has unknown field \"{key}\""));
        }
        let Some(provider) = map.get("provider").and_then(Value::as_str) else {
            return Err(format!("{P} provider must be a string"));
        };
        let optional = |key: &str| -> Result<Option<String>, String> {
            match map.get(key) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(format!("{P} {key} must be a string")),
            }
        };
        if mode == Some("one-shot") {
            return Ok(Some(Self::OneShot {
                provider: provider.to_owned(),
                label: optional("label")?,
            }));
        }
        let Some(label) = map.get("label").and_then(Value::as_str) else {
            return Err(format!("{P} label must be a string"));
        };
        let agent_provider = optional("agentProvider")?;
        let agent_model = optional("agentModel")?;
        let persona = optional("persona")?;
        let tool_filter = match map.get("toolFilter") {
            None => None,
            Some(value) => Some(parse_tool_filter(value).map_err(|e| e.to_string())?),
        };
        Ok(Some(Self::Continuable(ContinuableDescriptor {
            provider: provider.to_owned(),
            label: label.to_owned(),
            agent_provider,
            agent_model,
            persona,
            tool_filter,
        })))
    }
}

/// Why a persisted descriptor's `toolFilter` is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolFilterError {
    #[error("{TOOL_FILTER} must be an object")]
    NotAnObject,
    #[error("{TOOL_FILTER} has unknown field \"{0}\"")]
    UnknownField(String),
    #[error("{TOOL_FILTER}.{0} must be an array of strings")]
    NotStrings(&'static str),
    #[error("{TOOL_FILTER} must declare allow and/or deny")]
    Empty,
}

const TOOL_FILTER: &str = "persisted subagent descriptor toolFilter";

fn parse_tool_filter(value: &Value) -> Result<ToolFilterSpec, ToolFilterError> {
    let Value::Object(map) = value else {
        return Err(ToolFilterError::NotAnObject);
    };
    if let Some(key) = map.keys().find(|k| *k != "allow" && *k != "deny") {
        return Err(ToolFilterError::UnknownField(key.clone()));
    }
    let list = |key: &'static str| -> Result<Option<Vec<String>>, ToolFilterError> {
        match map.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or(ToolFilterError::NotStrings(key)),
            Some(_) => Err(ToolFilterError::NotStrings(key)),
        }
    };
    let filter = ToolFilterSpec {
        allow: list("allow")?,
        deny: list("deny")?,
    };
    if filter.is_empty() {
        return Err(ToolFilterError::Empty);
    }
    Ok(filter)
}

/// `foldSubagentDescriptor`: parses the **first** descriptor of `events` (cold resume passes
/// the child's own suffix, so an ancestor's descriptor inside a fork prefix never counts).
pub fn fold_first(events: &[Arc<Event>]) -> Result<Option<Descriptor>, String> {
    match events.iter().find(|e| e.kind == DESCRIPTOR_KIND) {
        Some(event) => Descriptor::parse(&event.data),
        None => Ok(None),
    }
}

/// The `subagent` projection's identity: last-wins over the whole log; malformed or unknown
/// versions fold to `None`; never fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub descriptor: Descriptor,
    pub seq: u64,
}

pub fn fold_last_wins(events: &[Arc<Event>]) -> Option<Identity> {
    let mut identity = None;
    for event in events.iter().filter(|e| e.kind == DESCRIPTOR_KIND) {
        identity = match Descriptor::parse(&event.data) {
            Ok(Some(descriptor)) => Some(Identity {
                descriptor,
                seq: event.seq,
            }),
            Ok(None) | Err(_) => None,
        };
    }
    identity
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn continuable() -> Descriptor {
        Descriptor::Continuable(ContinuableDescriptor {
            provider: "spawn".into(),
            label: "scan".into(),
            agent_provider: None,
            agent_model: Some("m".into()),
            persona: None,
            tool_filter: Some(ToolFilterSpec {
                allow: None,
                deny: Some(vec!["bash".into()]),
            }),
        })
    }

    #[test]
    fn snapshots_omit_undefined_keys_and_keep_the_order() {
        assert_eq!(
            serde_json::to_string(&continuable().to_value()).unwrap(),
            r#"{"version":2,"mode":"continuable","provider":"spawn","label":"scan","agentModel":"m","toolFilter":{"deny":["bash"]}}"#
        );
        let one = Descriptor::OneShot {
            provider: "fork".into(),
            label: None,
        };
        assert_eq!(
            serde_json::to_string(&one.to_value()).unwrap(),
            r#"{"version":2,"mode":"one-shot","provider":"fork"}"#
        );
        assert_eq!(Descriptor::parse(&one.to_value()).unwrap(), Some(one));
        assert_eq!(
            Descriptor::parse(&continuable().to_value()).unwrap(),
            Some(continuable())
        );
    }

    #[test]
    fn parse_errors_are_upstreams_texts() {
        let cases = [
            (
                json!([]),
                "persisted subagent descriptor payload must be an object",
            ),
            (
                json!({"mode": "one-shot"}),
                "persisted subagent descriptor version must be a number",
            ),
            (
                json!({"version": 2, "mode": "x"}),
                "persisted subagent descriptor mode must be \"one-shot\" or \"continuable\"",
            ),
            (
                json!({"version": 2, "mode": "one-shot", "provider": "p", "persona": "x"}),
                "persisted subagent descriptor payload has unknown field \"persona\"",
            ),
            (
                json!({"version": 2, "mode": "one-shot", "provider": 1}),
                "persisted subagent descriptor provider must be a string",
            ),
            (
                json!({"version": 2, "mode": "continuable", "provider": "p"}),
                "persisted subagent descriptor label must be a string",
            ),
            (
                json!({"version": 2, "mode": "continuable", "provider": "p", "label": "l", "persona": 3}),
                "persisted subagent descriptor persona must be a string",
            ),
            (
                json!({"version": 2, "mode": "continuable", "provider": "p", "label": "l", "toolFilter": 1}),
                "persisted subagent descriptor toolFilter must be an object",
            ),
            (
                json!({"version": 2, "mode": "continuable", "provider": "p", "label": "l", "toolFilter": {"only": []}}),
                "persisted subagent descriptor toolFilter has unknown field \"only\"",
            ),
            (
                json!({"version": 2, "mode": "continuable", "provider": "p", "label": "l", "toolFilter": {"allow": [1]}}),
                "persisted subagent descriptor toolFilter.allow must be an array of strings",
            ),
            (
                json!({"version": 2, "mode": "continuable", "provider": "p", "label": "l", "toolFilter": {}}),
                "persisted subagent descriptor toolFilter must declare allow and/or deny",
            ),
        ];
        for (value, message) in cases {
            assert_eq!(Descriptor::parse(&value).unwrap_err(), message, "{value}");
        }
        assert_eq!(
            Descriptor::parse(&json!({"version": 3, "mode": "?"})).unwrap(),
            None
        );
    }

    fn event(seq: u64, data: Value) -> Arc<Event> {
        Arc::new(Event::new(DESCRIPTOR_KIND, seq, 0, data))
    }

    #[test]
    fn first_fold_reads_the_first_and_projection_the_last() {
        let first = Descriptor::OneShot {
            provider: "a".into(),
            label: None,
        };
        let events = vec![
            event(0, first.to_value()),
            event(5, continuable().to_value()),
        ];
        assert_eq!(fold_first(&events).unwrap(), Some(first));
        assert_eq!(
            fold_last_wins(&events),
            Some(Identity {
                descriptor: continuable(),
                seq: 5
            })
        );
        let broken = vec![event(0, continuable().to_value()), event(1, json!("x"))];
        assert_eq!(fold_last_wins(&broken), None);
        assert!(fold_first(&broken[1..]).is_err());
    }
}
