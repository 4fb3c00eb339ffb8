//! Messages: what the inbox holds, the log stores and requests carry.

use serde::Deserialize;
use serde::Deserializer;
use serde::Serialize;
use serde::Serializer;
use serde::ser::SerializeMap;
use serde_json::Map;
use serde_json::Value;

use crate::ContentBlock;

/// Who speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

/// Where a message came from. Upstream's source union is merge-extensible on `kind`
/// (`user`, `model`, `tool`, `plugin`, and plugin-owned kinds), and a port must store and replay
/// unknown kinds verbatim, so the source is kept as its JSON object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MessageSource(Map<String, Value>);

impl MessageSource {
    /// `{kind:"user"}`: typed by a person.
    pub fn user() -> Self {
        let mut map = Map::new();
        map.insert("kind".into(), "user".into());
        Self(map)
    }

    /// `{kind:"model", provider, model}`.
    pub fn model(provider: &str, model: &str) -> Self {
        let mut map = Map::new();
        map.insert("kind".into(), "model".into());
        map.insert("provider".into(), provider.into());
        map.insert("model".into(), model.into());
        Self(map)
    }

    /// `{kind:"tool", callId}`.
    pub fn tool(call_id: &str) -> Self {
        let mut map = Map::new();
        map.insert("kind".into(), "tool".into());
        map.insert("callId".into(), call_id.into());
        Self(map)
    }

    /// `{kind:"plugin", plugin}`.
    pub fn plugin(plugin: &str) -> Self {
        let mut map = Map::new();
        map.insert("kind".into(), "plugin".into());
        map.insert("plugin".into(), plugin.into());
        Self(map)
    }

    /// Any source given as a JSON object (must carry a string `kind`).
    pub fn from_map(map: Map<String, Value>) -> Option<Self> {
        map.get("kind")?.as_str()?;
        Some(Self(map))
    }

    /// Adds or replaces a field, keeping the order of existing keys.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.0.insert(key.into(), value.into());
        self
    }

    pub fn kind(&self) -> &str {
        self.0.get("kind").and_then(Value::as_str).unwrap_or("")
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    pub fn as_map(&self) -> &Map<String, Value> {
        &self.0
    }
}

/// An immutable message. Tool results are user-role messages with one `tool-result` block
/// and a `{kind:"tool"}` source.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: String,
    pub role: Role,
    pub content: Vec<ContentBlock>,
    pub source: MessageSource,
}

/// A fresh message id (UUID v4), minted once at construction and stable from inbox to log.
pub fn new_message_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

impl Message {
    /// A user-role message with a fresh id.
    pub fn user(content: Vec<ContentBlock>, source: MessageSource) -> Self {
        Self {
            id: new_message_id(),
            role: Role::User,
            content,
            source,
        }
    }

    /// A person's prompt: one text block, `{kind:"user"}`.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::user(vec![ContentBlock::text(text)], MessageSource::user())
    }

    /// An assistant message from `provider`/`model`.
    pub fn assistant(content: Vec<ContentBlock>, source: MessageSource) -> Self {
        Self {
            id: new_message_id(),
            role: Role::Assistant,
            content,
            source,
        }
    }

    /// The user-role message carrying one tool result. `is_error` is always written, as the
    /// loop does upstream.
    pub fn tool_result(call_id: &str, content: Vec<ContentBlock>, is_error: bool) -> Self {
        Self {
            id: new_message_id(),
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_call_id: call_id.to_owned(),
                content,
                is_error: Some(is_error),
            }],
            source: MessageSource::tool(call_id),
        }
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Serialize for Message {
    // Key order follows what upstream writes, so logs and stream-json compare byte for byte:
    // assistant `role, content, source, id`; tool results `source, content, role, id`;
    // other user-role messages `content, source, role, id`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4))?;
        match (self.role, self.source.kind()) {
            (Role::Assistant, _) | (Role::System, _) => {
                map.serialize_entry("role", &self.role)?;
                map.serialize_entry("content", &self.content)?;
                map.serialize_entry("source", &self.source)?;
            }
            (Role::User, "tool") => {
                map.serialize_entry("source", &self.source)?;
                map.serialize_entry("content", &self.content)?;
                map.serialize_entry("role", &self.role)?;
            }
            (Role::User, _) => {
                map.serialize_entry("content", &self.content)?;
                map.serialize_entry("source", &self.source)?;
                map.serialize_entry("role", &self.role)?;
            }
        }
        map.serialize_entry("id", &self.id)?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            id: String,
            role: Role,
            content: Vec<ContentBlock>,
            source: Map<String, Value>,
        }
        let raw = Raw::deserialize(deserializer)?;
        let source = MessageSource::from_map(raw.source).ok_or_else(|| {
            serde::de::Error::custom("message source must carry a string \"kind\"")
        })?;
        Ok(Self {
            id: raw.id,
            role: raw.role,
            content: raw.content,
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn key_order_follows_the_message_kind() {
        let mut user = Message::user_text("hi");
        user.id = "u".into();
        assert_eq!(
            serde_json::to_string(&user).unwrap(),
            r#"{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"u"}"#
        );
        let mut result = Message::tool_result("c1", vec![ContentBlock::text("ok")], false);
        result.id = "t".into();
        assert_eq!(
            serde_json::to_string(&result).unwrap(),
            r#"{"source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"ok"}],"isError":false}],"role":"user","id":"t"}"#
        );
        let mut assistant = Message::assistant(vec![], MessageSource::model("deepseek", "m"));
        assistant.id = "a".into();
        assert_eq!(
            serde_json::to_string(&assistant).unwrap(),
            r#"{"role":"assistant","content":[],"source":{"kind":"model","provider":"deepseek","model":"m"},"id":"a"}"#
        );
    }

    #[test]
    fn unknown_source_kinds_round_trip() {
        let raw = r#"{"content":[],"source":{"kind":"subagent-report","form":"relay","x":[1]},"role":"user","id":"m"}"#;
        let message: Message = serde_json::from_str(raw).unwrap();
        assert_eq!(message.source.kind(), "subagent-report");
        assert_eq!(serde_json::to_string(&message).unwrap(), raw);
    }
}
