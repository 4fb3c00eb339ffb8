//! The single fold of stream chunks into content blocks (spec §3.3). The loop feeds it every
//! chunk of one attempt and commits `blocks()`; on cancel it keeps `interrupted_blocks()`.

use dsh_protocol::ContentBlock;
use dsh_protocol::FinishReason;
use dsh_protocol::StreamChunk;
use dsh_protocol::TokenUsage;
use serde_json::Value;

use crate::LlmError;

#[derive(Debug, Clone)]
enum Partial {
    Text(String),
    Reasoning(String),
    ToolCall {
        id: String,
        name: Option<String>,
        arguments: String,
    },
    /// Opened by `block-start` with a type deltas cannot build; only a `block-end` completes it.
    Unknown(String),
}

#[derive(Debug, Clone)]
struct Slot {
    index: u32,
    partial: Partial,
    closed: Option<ContentBlock>,
}

impl Slot {
    fn block(&self) -> Result<ContentBlock, LlmError> {
        if let Some(block) = &self.closed {
            return Ok(block.clone());
        }
        Ok(match &self.partial {
            Partial::Text(text) => ContentBlock::Text { text: text.clone() },
            Partial::Reasoning(text) => ContentBlock::Reasoning { text: text.clone() },
            Partial::ToolCall {
                id,
                name,
                arguments,
            } => ContentBlock::ToolCall {
                id: if id.is_empty() {
                    format!("call-{}", self.index)
                } else {
                    id.clone()
                },
                name: name.clone().unwrap_or_default(),
                arguments: arguments.clone(),
            },
            Partial::Unknown(block_type) => {
                return Err(LlmError::UnknownBlockType {
                    index: self.index,
                    block_type: block_type.clone(),
                });
            }
        })
    }
}

/// Folds the chunks of one provider attempt into blocks.
#[derive(Debug, Clone, Default)]
pub struct BlockAssembler {
    slots: Vec<Slot>,
    usage: Option<TokenUsage>,
    finish: Option<FinishReason>,
    replay_state: Option<Value>,
}

impl BlockAssembler {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, chunk: &StreamChunk) {
        match chunk {
            StreamChunk::BlockStart { index, block_type } => {
                if self.position(*index).is_none() {
                    let partial = match block_type.as_str() {
                        "text" => Partial::Text(String::new()),
                        "reasoning" => Partial::Reasoning(String::new()),
                        "tool-call" => Partial::ToolCall {
                            id: String::new(),
                            name: None,
                            arguments: String::new(),
                        },
                        other => Partial::Unknown(other.to_owned()),
                    };
                    self.slots.push(Slot {
                        index: *index,
                        partial,
                        closed: None,
                    });
                }
            }
            StreamChunk::TextDelta { index, text } => {
                if let Some(Partial::Text(buffer)) =
                    self.open_slot(*index, || Partial::Text(String::new()))
                {
                    buffer.push_str(text);
                }
            }
            StreamChunk::ReasoningDelta { index, text } => {
                if let Some(Partial::Reasoning(buffer)) =
                    self.open_slot(*index, || Partial::Reasoning(String::new()))
                {
                    buffer.push_str(text);
                }
            }
            StreamChunk::ToolCallDelta {
                index,
                id,
                name: delta_name,
                arguments_delta,
            } => {
                let fresh = || Partial::ToolCall {
                    id: String::new(),
                    name: None,
                    arguments: String::new(),
                };
                if let Some(Partial::ToolCall {
                    id: slot_id,
                    name,
                    arguments,
                }) = self.open_slot(*index, fresh)
                {
                    // Protocols that learn the id late send "" until then; never erase a known id.
                    if !id.is_empty() {
                        slot_id.clone_from(id);
                    }
                    if let Some(delta_name) = delta_name {
                        *name = Some(delta_name.clone());
                    }
                    arguments.push_str(arguments_delta);
                }
            }
            StreamChunk::BlockEnd { index, block } => match self.position(*index) {
                Some(position) => {
                    let slot = &mut self.slots[position];
                    if slot.closed.is_none() {
                        slot.closed = Some(block.clone());
                    }
                }
                None => self.slots.push(Slot {
                    index: *index,
                    partial: Partial::Unknown(block.kind().to_owned()),
                    closed: Some(block.clone()),
                }),
            },
            StreamChunk::Usage { usage } => self.usage = Some(usage.clone()),
            StreamChunk::Finish {
                reason,
                replay_state,
            } => {
                self.finish = Some(reason.clone());
                self.replay_state.clone_from(replay_state);
            }
        }
    }

    /// One block per seen index, in first-seen order; tool calls are dropped when the attempt
    /// finished at the token limit, because a truncated call is unsafe to run.
    pub fn blocks(&self) -> Result<Vec<ContentBlock>, LlmError> {
        let drop_calls = self.drops_tool_calls();
        let mut blocks = Vec::with_capacity(self.slots.len());
        for slot in &self.slots {
            let block = slot.block()?;
            if drop_calls && matches!(block, ContentBlock::ToolCall { .. }) {
                continue;
            }
            blocks.push(block);
        }
        Ok(blocks)
    }

    /// The finish reason; `stop` when no finish chunk arrived.
    pub fn finish(&self) -> FinishReason {
        self.finish.clone().unwrap_or(FinishReason::Stop)
    }

    /// Whether a finish chunk arrived.
    pub fn is_finished(&self) -> bool {
        self.finish.is_some()
    }

    /// The last usage chunk.
    pub fn usage(&self) -> Option<&TokenUsage> {
        self.usage.as_ref()
    }

    /// The finish chunk's replay state, aligned with [`Self::blocks`]: discarded when its
    /// per-block entries do not match the emitted blocks; entries of dropped blocks removed.
    pub fn replay_state(&self) -> Option<Value> {
        let mut state = self.replay_state.clone()?;
        let Some(entries) = state.get_mut("blocks").and_then(Value::as_array_mut) else {
            return Some(state);
        };
        if entries.len() != self.slots.len() {
            return None;
        }
        if self.drops_tool_calls() {
            let mut kept = Vec::with_capacity(entries.len());
            for (slot, entry) in self.slots.iter().zip(entries.drain(..)) {
                if !slot
                    .block()
                    .is_ok_and(|b| matches!(b, ContentBlock::ToolCall { .. }))
                {
                    kept.push(entry);
                }
            }
            *entries = kept;
        }
        Some(state)
    }

    /// What survives an interrupted attempt: text and reasoning blocks (closed or open) with
    /// non-whitespace text, in order.
    pub fn interrupted_blocks(&self) -> Vec<ContentBlock> {
        self.slots
            .iter()
            .filter_map(|slot| slot.block().ok())
            .filter(|block| match block {
                ContentBlock::Text { text } | ContentBlock::Reasoning { text } => {
                    !text.trim().is_empty()
                }
                _ => false,
            })
            .collect()
    }

    fn drops_tool_calls(&self) -> bool {
        matches!(self.finish, Some(FinishReason::MaxTokens))
    }

    fn position(&self, index: u32) -> Option<usize> {
        self.slots.iter().position(|slot| slot.index == index)
    }

    /// The partial at `index` if still open (created lazily for delta-only protocols); `None`
    /// once closed, since deltas after `block-end` are ignored.
    fn open_slot(&mut self, index: u32, fresh: impl FnOnce() -> Partial) -> Option<&mut Partial> {
        let position = match self.position(index) {
            Some(position) => position,
            None => {
                self.slots.push(Slot {
                    index,
                    partial: fresh(),
                    closed: None,
                });
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[position];
        if slot.closed.is_some() {
            None
        } else {
            Some(&mut slot.partial)
        }
    }
}

#[cfg(test)]
#[path = "assembler_tests.rs"]
mod tests;
