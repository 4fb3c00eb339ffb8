//! The normalized outcome of one call.

use std::sync::Arc;

use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use serde::Serialize;
use serde::Serializer;
use serde::ser::SerializeMap;
use serde_json::Value;

use crate::error::ToolError;
use crate::error::ToolFailure;

/// One call's final (or intermediate) result. Immutable once shared (`Arc<ToolResult>`).
///
/// Invariants kept by the pipeline: a success has `value` and no `error`; a failure has `error`
/// and no `value`, and never `concludes_turn`. Serialised with upstream's exact keys: absent
/// optional fields are absent, `additionalContexts` only when non-empty, `concludesTurn` only
/// when true.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub is_error: bool,
    pub value: Option<Arc<Value>>,
    pub content: Vec<ContentBlock>,
    pub error: Option<ToolFailure>,
    pub meta: Option<Value>,
    pub additional_contexts: Vec<Message>,
    pub concludes_turn: bool,
}

impl ToolResult {
    /// A success carrying `value` and its rendered `content` (no validation: the pipeline
    /// revalidates every success that did not come from its own dispatch).
    pub fn success(value: Value, content: Vec<ContentBlock>) -> Self {
        Self {
            is_error: false,
            value: Some(Arc::new(value)),
            content,
            error: None,
            meta: None,
            additional_contexts: Vec::new(),
            concludes_turn: false,
        }
    }

    /// The canonical failure of a thrown error: content `Error: <message>`.
    pub fn from_error(error: &ToolError) -> Self {
        Self {
            is_error: true,
            value: None,
            content: vec![ContentBlock::text(format!("Error: {}", error.message))],
            error: Some(error.to_failure()),
            meta: None,
            additional_contexts: Vec::new(),
            concludes_turn: false,
        }
    }

    /// A failure with authored content and message (no `info`), as a wrapper might return.
    pub fn failure(message: impl Into<String>, content: Vec<ContentBlock>) -> Self {
        Self {
            is_error: true,
            value: None,
            content,
            error: Some(ToolFailure {
                message: message.into(),
                info: None,
            }),
            meta: None,
            additional_contexts: Vec::new(),
            concludes_turn: false,
        }
    }

    /// Adds `additionalContexts`.
    pub fn with_contexts(mut self, contexts: Vec<Message>) -> Self {
        self.additional_contexts = contexts;
        self
    }

    /// Adds `meta`.
    pub fn with_meta(mut self, meta: Value) -> Self {
        self.meta = Some(meta);
        self
    }

    /// The failure code (`info.code`), if any.
    pub fn error_code(&self) -> Option<&str> {
        self.error
            .as_ref()
            .and_then(|e| e.info.as_ref())
            .map(|i| i.code.as_str())
    }

    /// The concatenated text of the content's text blocks.
    pub fn text(&self) -> String {
        dsh_protocol::text_of(&self.content)
    }

    /// What a presenter receives: the durable part of the result.
    pub fn view(&self) -> ResultView {
        ResultView {
            content: self.content.clone(),
            is_error: self.is_error,
            meta: self.meta.clone(),
        }
    }

    /// The result as JSON with exact keys (for logs and deep-equal assertions).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// `true` when every JSON payload in the result is lossless.
    pub(crate) fn is_lossless(&self) -> bool {
        content_is_lossless(&self.content)
            && self.meta.as_ref().is_none_or(dsh_schema::is_lossless)
            && self
                .additional_contexts
                .iter()
                .all(|m| content_is_lossless(&m.content))
    }
}

impl Drop for ToolResult {
    // Values may be thousands of levels deep; serde_json's own Drop recurses.
    fn drop(&mut self) {
        if let Some(value) = self.value.take()
            && let Ok(value) = Arc::try_unwrap(value)
        {
            dsh_schema::drop_deep(value);
        }
        if let Some(meta) = self.meta.take() {
            dsh_schema::drop_deep(meta);
        }
    }
}

impl Serialize for ToolResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("content", &self.content)?;
        map.serialize_entry("isError", &self.is_error)?;
        if let Some(value) = &self.value {
            map.serialize_entry("value", value.as_ref())?;
        }
        if let Some(error) = &self.error {
            map.serialize_entry("error", error)?;
        }
        if let Some(meta) = &self.meta {
            map.serialize_entry("meta", meta)?;
        }
        if !self.additional_contexts.is_empty() {
            map.serialize_entry("additionalContexts", &self.additional_contexts)?;
        }
        if self.concludes_turn {
            map.serialize_entry("concludesTurn", &true)?;
        }
        map.end()
    }
}

/// The input of `present_result`: `{content, isError, meta?}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultView {
    pub content: Vec<ContentBlock>,
    pub is_error: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// Lossless check for content blocks: only the JSON-carrying variants can hold a lossy number.
pub(crate) fn content_is_lossless(content: &[ContentBlock]) -> bool {
    content.iter().all(|block| match block {
        ContentBlock::Image { attachment } => dsh_schema::is_lossless(attachment),
        ContentBlock::ToolResult { content, .. } => content_is_lossless(content),
        ContentBlock::Other(map) => map.values().all(dsh_schema::is_lossless),
        ContentBlock::Text { .. }
        | ContentBlock::Reasoning { .. }
        | ContentBlock::ToolCall { .. } => true,
    })
}

/// Derives the error message of a post-execute block from its feedback.
pub(crate) fn feedback_message(feedback: &[ContentBlock]) -> String {
    if feedback.is_empty() {
        return crate::error::messages::BLOCKED.to_owned();
    }
    let parts: Vec<String> = feedback
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => text.clone(),
            other => format!("[{} content]", other.kind()),
        })
        .collect();
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_plain_success_serialises_with_exact_keys() {
        let result = ToolResult::success(json!("x"), vec![ContentBlock::text("x")]);
        assert_eq!(
            result.to_value(),
            json!({"content":[{"type":"text","text":"x"}],"isError":false,"value":"x"})
        );
    }

    #[test]
    fn a_failure_has_no_value_and_info_only_when_structured() {
        let plain = ToolResult::from_error(&ToolError::new("boom"));
        assert_eq!(
            plain.to_value(),
            json!({"content":[{"type":"text","text":"Error: boom"}],"isError":true,"error":{"message":"boom"}})
        );
        let coded = ToolResult::from_error(&ToolError::unknown_tool("nope"));
        assert_eq!(
            coded.to_value()["error"],
            json!({"message":"unknown tool \"nope\"","info":{"name":"ToolNotFoundError","code":"UNKNOWN_TOOL"}})
        );
    }

    #[test]
    fn feedback_derivation() {
        assert_eq!(
            feedback_message(&[]),
            "tool result blocked by post-execute policy"
        );
        let blocks = vec![
            ContentBlock::text("a"),
            ContentBlock::Reasoning { text: "r".into() },
        ];
        assert_eq!(feedback_message(&blocks), "a\n[reasoning content]");
    }
}
