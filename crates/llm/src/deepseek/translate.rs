//! `chat.completion.chunk` payloads → harness stream chunks (spec §3.6 "Translation").
//! Deltas stream as they arrive; block-ends, usage and finish are all deferred to `[DONE]`.

use dsh_protocol::ContentBlock;
use dsh_protocol::FinishReason;
use dsh_protocol::LlmFailure;
use dsh_protocol::StreamChunk;
use dsh_protocol::TokenUsage;
use serde_json::Value;

use crate::codes;

#[derive(Debug)]
enum Open {
    Reasoning(String),
    Text(String),
    Call {
        id: String,
        name: Option<String>,
        arguments: String,
    },
}

impl Open {
    fn block(&self, index: usize) -> ContentBlock {
        match self {
            Self::Reasoning(text) => ContentBlock::Reasoning { text: text.clone() },
            Self::Text(text) => ContentBlock::Text { text: text.clone() },
            Self::Call {
                id,
                name,
                arguments,
            } => ContentBlock::ToolCall {
                id: if id.is_empty() {
                    format!("call-{index}")
                } else {
                    id.clone()
                },
                name: name.clone().unwrap_or_default(),
                arguments: arguments.clone(),
            },
        }
    }
}

/// What one SSE payload produced.
#[derive(Debug, PartialEq)]
pub(crate) enum Outcome {
    /// Zero or more chunks; the stream goes on.
    Chunks(Vec<StreamChunk>),
    /// `[DONE]`: the closing chunks, ending with exactly one finish.
    Done(Vec<StreamChunk>),
}

#[derive(Debug, Default)]
pub(crate) struct Translator {
    blocks: Vec<Open>,
    reasoning: Option<usize>,
    text: Option<usize>,
    /// (wire tool-call index, block index), in first-appearance order.
    calls: Vec<(u64, usize)>,
    finish_reason: Option<String>,
    usage: Option<TokenUsage>,
}

impl Translator {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Handles one SSE event's data. `Err` is a terminal failure (`MALFORMED_RESPONSE`).
    pub(crate) fn on_data(&mut self, data: &str) -> Result<Outcome, LlmFailure> {
        if data.trim() == "[DONE]" {
            return Ok(Outcome::Done(self.finish()));
        }
        if data.trim().is_empty() {
            return Ok(Outcome::Chunks(Vec::new()));
        }
        let payload: Value = serde_json::from_str(data).map_err(|_| {
            let head: String = data.chars().take(120).collect();
            LlmFailure::new(
                codes::MALFORMED_RESPONSE,
                format!("malformed SSE payload: {head}"),
            )
        })?;
        let mut out = Vec::new();
        if let Some(usage) = payload.get("usage").and_then(map_usage) {
            self.usage = Some(usage);
        }
        for choice in payload
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(delta) = choice.get("delta") {
                self.delta(delta, &mut out);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(reason.to_owned());
            }
        }
        Ok(Outcome::Chunks(out))
    }

    fn delta(&mut self, delta: &Value, out: &mut Vec<StreamChunk>) {
        if let Some(text) = non_empty_str(delta.get("reasoning_content")) {
            let index = self.open_single(Kind::Reasoning, out);
            if let Some(Open::Reasoning(buffer)) = self.blocks.get_mut(index) {
                buffer.push_str(text);
            }
            out.push(StreamChunk::ReasoningDelta {
                index: index as u32,
                text: text.to_owned(),
            });
        }
        if let Some(text) = non_empty_str(delta.get("content")) {
            let index = self.open_single(Kind::Text, out);
            if let Some(Open::Text(buffer)) = self.blocks.get_mut(index) {
                buffer.push_str(text);
            }
            out.push(StreamChunk::TextDelta {
                index: index as u32,
                text: text.to_owned(),
            });
        }
        let calls = delta.get("tool_calls").and_then(Value::as_array);
        for (position, call) in calls.into_iter().flatten().enumerate() {
            let wire = call
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(position as u64);
            let index = match self.calls.iter().find(|(w, _)| *w == wire) {
                Some((_, index)) => *index,
                None => {
                    let index = self.blocks.len();
                    self.blocks.push(Open::Call {
                        id: String::new(),
                        name: None,
                        arguments: String::new(),
                    });
                    self.calls.push((wire, index));
                    out.push(StreamChunk::BlockStart {
                        index: index as u32,
                        block_type: "tool-call".into(),
                    });
                    index
                }
            };
            let function = call.get("function");
            let fragment = function
                .and_then(|f| f.get("arguments"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            if let Some(Open::Call {
                id,
                name,
                arguments,
            }) = self.blocks.get_mut(index)
            {
                if let Some(new_id) = non_empty_str(call.get("id")) {
                    *id = new_id.to_owned();
                }
                if let Some(new_name) = non_empty_str(function.and_then(|f| f.get("name"))) {
                    *name = Some(new_name.to_owned());
                }
                arguments.push_str(fragment);
                out.push(StreamChunk::ToolCallDelta {
                    index: index as u32,
                    id: id.clone(),
                    name: name.clone(),
                    arguments_delta: fragment.to_owned(),
                });
            }
        }
    }

    fn open_single(&mut self, kind: Kind, out: &mut Vec<StreamChunk>) -> usize {
        let slot = match kind {
            Kind::Reasoning => &mut self.reasoning,
            Kind::Text => &mut self.text,
        };
        if let Some(index) = *slot {
            return index;
        }
        let index = self.blocks.len();
        *slot = Some(index);
        let (block, block_type) = match kind {
            Kind::Reasoning => (Open::Reasoning(String::new()), "reasoning"),
            Kind::Text => (Open::Text(String::new()), "text"),
        };
        self.blocks.push(block);
        out.push(StreamChunk::BlockStart {
            index: index as u32,
            block_type: block_type.into(),
        });
        index
    }

    fn finish(&mut self) -> Vec<StreamChunk> {
        let mut out: Vec<StreamChunk> = self
            .blocks
            .iter()
            .enumerate()
            .map(|(index, open)| StreamChunk::BlockEnd {
                index: index as u32,
                block: open.block(index),
            })
            .collect();
        if let Some(usage) = self.usage.take() {
            out.push(StreamChunk::Usage { usage });
        }
        let reason = match self.finish_reason.as_deref() {
            None | Some("stop") if self.blocks.is_empty() => FinishReason::Error {
                failure: LlmFailure::new(
                    codes::EMPTY_RESPONSE,
                    "model returned a completed response with no content",
                ),
            },
            None | Some("stop") => FinishReason::Stop,
            Some("tool_calls") => FinishReason::ToolCalls,
            Some("length") => FinishReason::MaxTokens,
            Some(other) => FinishReason::Error {
                failure: LlmFailure::new(other.to_uppercase(), format!("model stopped: {other}")),
            },
        };
        out.push(StreamChunk::Finish {
            reason,
            replay_state: None,
        });
        out
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Reasoning,
    Text,
}

fn non_empty_str(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Wire usage → disjoint harness counts. Cache hits are taken out of `inputTokens`; a reported
/// zero is kept, an unreported field stays absent.
pub(crate) fn map_usage(usage: &Value) -> Option<TokenUsage> {
    let usage = usage.as_object()?;
    let count = |value: Option<&Value>| value.and_then(Value::as_u64);
    let prompt = count(usage.get("prompt_tokens")).unwrap_or(0);
    let cache_read = count(
        usage
            .get("prompt_tokens_details")
            .and_then(|d| d.get("cached_tokens")),
    )
    .or_else(|| count(usage.get("prompt_cache_hit_tokens")));
    let reasoning = count(
        usage
            .get("completion_tokens_details")
            .and_then(|d| d.get("reasoning_tokens")),
    );
    Some(TokenUsage {
        input_tokens: prompt.saturating_sub(cache_read.unwrap_or(0)),
        output_tokens: count(usage.get("completion_tokens")).unwrap_or(0),
        cache_read_tokens: cache_read,
        cache_write_tokens: None,
        reasoning_tokens: reasoning,
    })
}

#[cfg(test)]
#[path = "translate_tests.rs"]
mod tests;
