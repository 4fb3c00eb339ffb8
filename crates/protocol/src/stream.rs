//! The model stream protocol: what an adapter yields and `assistant/chunk` logs.

use serde::Deserialize;
use serde::Serialize;

use crate::ContentBlock;

/// Token counts of one provider attempt. Counts are disjoint: billed input is
/// `input_tokens + cache_read_tokens + cache_write_tokens`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

impl TokenUsage {
    /// Adds `other` field by field. A provider may report any count, so sums saturate at
    /// `u64::MAX` instead of wrapping (or panicking in a debug build).
    pub fn accumulate(&mut self, other: &TokenUsage) {
        fn add(slot: &mut Option<u64>, value: Option<u64>) {
            if let Some(value) = value {
                *slot = Some(slot.unwrap_or(0).saturating_add(value));
            }
        }
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        add(&mut self.cache_read_tokens, other.cache_read_tokens);
        add(&mut self.cache_write_tokens, other.cache_write_tokens);
        add(&mut self.reasoning_tokens, other.reasoning_tokens);
    }

    /// Billed input plus output, saturating.
    pub fn total(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.cache_read_tokens.unwrap_or(0))
            .saturating_add(self.cache_write_tokens.unwrap_or(0))
            .saturating_add(self.output_tokens)
    }
}

/// A provider failure with its canonical code (`AUTH`, `RATE_LIMIT`, `SERVER`, `TIMEOUT`,
/// `TRANSPORT`, `EMPTY_RESPONSE`, `CONTEXT_WINDOW_EXCEEDED`, `INVALID_REQUEST`, `ABORTED`, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmFailure {
    pub message: String,
    pub code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_retry_after_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl LlmFailure {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: code.into(),
            status: None,
            provider_retry_after_ms: None,
            request_id: None,
        }
    }
}

/// Why a provider call ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FinishReason {
    Stop,
    ToolCalls,
    MaxTokens,
    Aborted { failure: LlmFailure },
    Error { failure: LlmFailure },
}

/// One chunk of a model stream, as logged in `assistant/chunk`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum StreamChunk {
    #[serde(rename_all = "camelCase")]
    BlockStart {
        index: u32,
        block_type: String,
    },
    TextDelta {
        index: u32,
        text: String,
    },
    ReasoningDelta {
        index: u32,
        text: String,
    },
    #[serde(rename_all = "camelCase")]
    ToolCallDelta {
        index: u32,
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        arguments_delta: String,
    },
    BlockEnd {
        index: u32,
        block: ContentBlock,
    },
    Usage {
        usage: TokenUsage,
    },
    #[serde(rename_all = "camelCase")]
    Finish {
        reason: FinishReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replay_state: Option<serde_json::Value>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn chunks_serialize_as_upstream_logs_them() {
        let chunk = StreamChunk::BlockStart {
            index: 0,
            block_type: "reasoning".into(),
        };
        assert_eq!(
            serde_json::to_string(&chunk).unwrap(),
            r#"{"type":"block-start","index":0,"blockType":"reasoning"}"#
        );
        let finish = StreamChunk::Finish {
            reason: FinishReason::ToolCalls,
            replay_state: None,
        };
        assert_eq!(
            serde_json::to_string(&finish).unwrap(),
            r#"{"type":"finish","reason":{"kind":"tool-calls"}}"#
        );
        let usage = StreamChunk::Usage {
            usage: TokenUsage {
                input_tokens: 2877,
                output_tokens: 90,
                cache_read_tokens: Some(0),
                cache_write_tokens: None,
                reasoning_tokens: Some(18),
            },
        };
        assert_eq!(
            serde_json::to_string(&usage).unwrap(),
            r#"{"type":"usage","usage":{"inputTokens":2877,"outputTokens":90,"cacheReadTokens":0,"reasoningTokens":18}}"#
        );
        let error = FinishReason::Error {
            failure: LlmFailure::new("EMPTY_RESPONSE", "empty"),
        };
        assert_eq!(
            serde_json::to_string(&error).unwrap(),
            r#"{"kind":"error","failure":{"message":"empty","code":"EMPTY_RESPONSE"}}"#
        );
    }
}

#[cfg(test)]
mod usage_tests {
    use super::TokenUsage;

    #[test]
    fn sums_saturate() {
        let huge = TokenUsage {
            input_tokens: u64::MAX - 1,
            output_tokens: 1,
            cache_read_tokens: Some(u64::MAX),
            cache_write_tokens: None,
            reasoning_tokens: Some(2),
        };
        let mut total = TokenUsage::default();
        total.accumulate(&huge);
        total.accumulate(&huge);
        assert_eq!(total.input_tokens, u64::MAX);
        assert_eq!(total.output_tokens, 2);
        assert_eq!(total.cache_read_tokens, Some(u64::MAX));
        assert_eq!(total.cache_write_tokens, None);
        assert_eq!(total.reasoning_tokens, Some(4));
        assert_eq!(total.total(), u64::MAX);
    }
}
