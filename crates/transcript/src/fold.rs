//! The one fold of committed events into display items, for live streaming and replay alike.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_protocol::ContentBlock;
use dsh_protocol::StreamChunk;
use dsh_session::Event;
use dsh_session::SurfaceOp;
use dsh_session::data;
use dsh_session::kind;
use dsh_tools::ResultView;
use dsh_tools::parse_arguments;

use crate::AssistantDone;
use crate::CallRef;
use crate::Item;
use crate::Part;
use crate::Presentation;
use crate::RetryNotice;
use crate::TextDelta;
use crate::ToolCallItem;
use crate::ToolResultItem;
use crate::TranscriptItem;
use crate::UserText;

/// The event kinds the fold reads itself; every other kind goes to the plugins' presenters.
pub const CORE_KINDS: [&str; 9] = [
    kind::TURN_START,
    kind::TURN_END,
    kind::USER_MESSAGE,
    kind::ASSISTANT_CHUNK,
    kind::ASSISTANT_MESSAGE,
    kind::TOOL_CALL,
    kind::TOOL_RESULT,
    kind::LLM_RETRY,
    kind::SESSION_TITLE,
];

/// A session's transcript fold. Feed it committed events in order, from the live stream or a
/// stored log: the same events give the same items. An event at or below the last folded seq
/// is skipped, so a subscription opened before a replay may overlap it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fold {
    /// Calls without a result yet: a result's card needs the call's name and arguments.
    calls: HashMap<String, CallRef>,
    last_seq: Option<u64>,
}

impl Fold {
    pub fn new() -> Self {
        Self::default()
    }

    /// A fold that resumes after `cursor` (the seq of the last item a client has).
    pub fn after(cursor: u64) -> Self {
        Self {
            last_seq: Some(cursor),
            ..Self::default()
        }
    }

    /// The seq of the last folded event.
    pub fn cursor(&self) -> Option<u64> {
        self.last_seq
    }

    /// The items of a whole log, in order.
    pub fn items_of<'a>(
        presentation: &Presentation,
        events: impl IntoIterator<Item = &'a Arc<Event>>,
    ) -> Vec<TranscriptItem> {
        let mut fold = Self::new();
        let mut items = Vec::new();
        for event in events {
            fold.apply_into(presentation, event, &mut items);
        }
        items
    }

    /// The items one committed event yields; `presentation` gives the tools' cards and the
    /// plugins' items.
    pub fn apply(&mut self, presentation: &Presentation, event: &Event) -> Vec<TranscriptItem> {
        let mut out = Vec::new();
        self.apply_into(presentation, event, &mut out);
        out
    }

    /// [`Fold::apply`], appending to `out`.
    pub fn apply_into(
        &mut self,
        presentation: &Presentation,
        event: &Event,
        out: &mut Vec<TranscriptItem>,
    ) {
        if self.last_seq.is_some_and(|last| event.seq <= last) {
            return;
        }
        self.last_seq = Some(event.seq);
        let mut push = |item: Item| {
            out.push(TranscriptItem {
                seq: event.seq,
                time: event.time,
                item,
            })
        };
        match event.kind.as_str() {
            kind::TURN_START => push(Item::TurnStarted),
            kind::TURN_END => {
                if let Some(Ok(end)) = event.decode::<data::TurnEnd>() {
                    push(Item::TurnEnded(end.reason));
                }
            }
            kind::USER_MESSAGE => {
                if let Some(item) = user(event) {
                    push(item);
                }
            }
            kind::ASSISTANT_CHUNK => {
                if let Some(item) = chunk(event) {
                    push(item);
                }
            }
            kind::ASSISTANT_MESSAGE => {
                let Some(Ok(message)) = event.decode::<data::AssistantMessage>() else {
                    return;
                };
                let parts = message
                    .message
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::Text { text } if !text.is_empty() => {
                            Some(Part::Text(text.clone()))
                        }
                        ContentBlock::Reasoning { text } if !text.is_empty() => {
                            Some(Part::Reasoning(text.clone()))
                        }
                        _ => None,
                    })
                    .collect();
                push(Item::AssistantDone(AssistantDone {
                    turn: message.turn,
                    step: message.step,
                    parts,
                    interrupted: message.interrupted,
                }));
                if let Some(usage) = message.usage {
                    push(Item::Usage(usage));
                }
            }
            kind::TOOL_CALL => {
                let Some(Ok(call)) = event.decode::<data::ToolCall>() else {
                    return;
                };
                let arguments = Arc::new(parse_arguments(&call.arguments));
                let card = presentation.call_card(&call.name, &arguments);
                self.calls.insert(
                    call.call_id.clone(),
                    CallRef {
                        name: call.name.clone(),
                        arguments: arguments.clone(),
                        seq: event.seq,
                    },
                );
                push(Item::ToolCall(ToolCallItem {
                    call_id: call.call_id,
                    name: call.name,
                    arguments,
                    card,
                }));
            }
            kind::TOOL_RESULT => {
                // Replacement results (pruning, compaction) rewrite history, not the outcome.
                if event.surface_op().is_some_and(|op| op != SurfaceOp::Append) {
                    return;
                }
                let Some(Ok(result)) = event.decode::<data::ToolResult>() else {
                    return;
                };
                let Some(item) = self.result(presentation, result) else {
                    return;
                };
                push(Item::ToolResult(item));
            }
            kind::LLM_RETRY => {
                if let Some(Ok(retry)) = event.decode::<data::LlmRetry>() {
                    push(Item::Retry(RetryNotice {
                        retry: retry.retry,
                        max_retries: retry.max_retries,
                        delay_ms: retry.delay_ms,
                        message: retry.failure.message,
                    }));
                }
            }
            kind::SESSION_TITLE => {
                if let Some(Ok(title)) = event.decode::<data::SessionTitle>() {
                    push(Item::Title(title.title));
                }
            }
            _ => {
                for item in presentation.present(event) {
                    push(item);
                }
            }
        }
    }

    fn result(
        &mut self,
        presentation: &Presentation,
        result: data::ToolResult,
    ) -> Option<ToolResultItem> {
        let (call_id, content, is_error) =
            result
                .message
                .content
                .into_iter()
                .find_map(|block| match block {
                    ContentBlock::ToolResult {
                        tool_call_id,
                        content,
                        is_error,
                    } => Some((tool_call_id, content, is_error == Some(true))),
                    _ => None,
                })?;
        let view = ResultView {
            content,
            is_error,
            meta: result.meta,
        };
        let call = self.calls.remove(&call_id);
        let card = call
            .as_ref()
            .and_then(|call| presentation.result_card(&call.name, &call.arguments, &view));
        Some(ToolResultItem {
            call_id,
            call,
            view,
            card,
        })
    }
}

fn user(event: &Event) -> Option<Item> {
    let Some(Ok(data::UserMessage(message))) = event.decode::<data::UserMessage>() else {
        return None;
    };
    // Runtime-context snapshots, job notices and plugin notes are model-facing, not typed.
    let source = message.source.kind();
    if !source.is_empty() && source != "user" {
        return None;
    }
    Some(Item::User(UserText {
        attributed: source == "user",
        content: message.content,
    }))
}

fn chunk(event: &Event) -> Option<Item> {
    let Some(Ok(chunk)) = event.decode::<data::AssistantChunk>() else {
        return None;
    };
    match chunk.chunk {
        StreamChunk::TextDelta { text, .. } => Some(Item::AssistantText(TextDelta {
            turn: chunk.turn,
            step: chunk.step,
            text,
        })),
        StreamChunk::ReasoningDelta { text, .. } => Some(Item::Thought(TextDelta {
            turn: chunk.turn,
            step: chunk.step,
            text,
        })),
        _ => None,
    }
}
