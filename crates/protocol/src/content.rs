//! Content blocks: the units of every message and tool result.

use serde::Deserialize;
use serde::Deserializer;
use serde::Serialize;
use serde::Serializer;
use serde::ser::SerializeMap;
use serde_json::Map;
use serde_json::Value;

/// One block of message content. The set is merge-extensible upstream, so a block of a type
/// this crate does not know is kept verbatim in [`ContentBlock::Other`] and written back as-is.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentBlock {
    /// `{type:"text", text}`
    Text { text: String },
    /// `{type:"reasoning", text}`: thinking, distinct from visible text.
    Reasoning { text: String },
    /// `{type:"image", attachment}`: a durable, content-addressed attachment reference.
    Image { attachment: Value },
    /// `{type:"tool-call", id, name, arguments}`: `arguments` is the raw model string.
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
    /// `{type:"tool-result", toolCallId, content, isError?}`
    ToolResult {
        tool_call_id: String,
        content: Vec<ContentBlock>,
        is_error: Option<bool>,
    },
    /// Any other block (must carry a string `type`), preserved losslessly.
    Other(Map<String, Value>),
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// The block's `type` discriminant.
    pub fn kind(&self) -> &str {
        match self {
            Self::Text { .. } => "text",
            Self::Reasoning { .. } => "reasoning",
            Self::Image { .. } => "image",
            Self::ToolCall { .. } => "tool-call",
            Self::ToolResult { .. } => "tool-result",
            Self::Other(map) => map.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }

    /// The block as a JSON value (key order as upstream writes it).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Reads a block from a JSON value; `None` when it is not an object with a string `type`
    /// or a known type lacks its fields.
    pub fn from_value(value: &Value) -> Option<Self> {
        let map = value.as_object()?;
        let kind = map.get("type")?.as_str()?;
        let string = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_owned);
        Some(match kind {
            "text" => Self::Text {
                text: string("text")?,
            },
            "reasoning" => Self::Reasoning {
                text: string("text")?,
            },
            "image" => Self::Image {
                attachment: map.get("attachment")?.clone(),
            },
            "tool-call" => Self::ToolCall {
                id: string("id")?,
                name: string("name")?,
                arguments: string("arguments")?,
            },
            "tool-result" => {
                let content = map
                    .get("content")?
                    .as_array()?
                    .iter()
                    .map(Self::from_value)
                    .collect::<Option<Vec<_>>>()?;
                let is_error = match map.get("isError") {
                    None => None,
                    Some(v) => Some(v.as_bool()?),
                };
                Self::ToolResult {
                    tool_call_id: string("toolCallId")?,
                    content,
                    is_error,
                }
            }
            _ => Self::Other(map.clone()),
        })
    }
}

/// Concatenates the text of every `text` block (the "model-facing text" of a result).
pub fn text_of(blocks: &[ContentBlock]) -> String {
    let mut out = String::new();
    for block in blocks {
        if let ContentBlock::Text { text } = block {
            out.push_str(text);
        }
    }
    out
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Text { text } | Self::Reasoning { text } => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("type", self.kind())?;
                map.serialize_entry("text", text)?;
                map.end()
            }
            Self::Image { attachment } => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("type", "image")?;
                map.serialize_entry("attachment", attachment)?;
                map.end()
            }
            Self::ToolCall {
                id,
                name,
                arguments,
            } => {
                let mut map = serializer.serialize_map(Some(4))?;
                map.serialize_entry("type", "tool-call")?;
                map.serialize_entry("id", id)?;
                map.serialize_entry("name", name)?;
                map.serialize_entry("arguments", arguments)?;
                map.end()
            }
            Self::ToolResult {
                tool_call_id,
                content,
                is_error,
            } => {
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("type", "tool-result")?;
                map.serialize_entry("toolCallId", tool_call_id)?;
                map.serialize_entry("content", content)?;
                if let Some(is_error) = is_error {
                    map.serialize_entry("isError", is_error)?;
                }
                map.end()
            }
            Self::Other(fields) => fields.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_value(&value).ok_or_else(|| {
            serde::de::Error::custom(
                "content block must be an object with a string \"type\" and its fields",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn known_blocks_round_trip_in_upstream_key_order() {
        let raw = r#"[{"type":"text","text":"hi"},{"type":"tool-call","id":"c1","name":"bash","arguments":"{}"},{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"ok"}],"isError":false}]"#;
        let blocks: Vec<ContentBlock> = serde_json::from_str(raw).unwrap();
        assert_eq!(serde_json::to_string(&blocks).unwrap(), raw);
    }

    #[test]
    fn unknown_blocks_are_kept_verbatim() {
        let value = json!({"type":"audio","z":1,"a":[1,2]});
        let block = ContentBlock::from_value(&value).unwrap();
        assert_eq!(block.kind(), "audio");
        assert_eq!(block.to_value(), value);
    }

    #[test]
    fn blocks_without_type_are_rejected() {
        assert!(ContentBlock::from_value(&json!({"text":"x"})).is_none());
        assert!(serde_json::from_value::<ContentBlock>(json!({"type":"text"})).is_err());
    }
}
