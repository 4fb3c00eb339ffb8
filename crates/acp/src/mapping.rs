//! Display items of the session's transcript (`dsh_transcript`) → ACP `session/update`s
//! (§1B). The one fold serves live streaming and `session/load` replay, so a reopened session
//! shows the same conversation and cards; this file only renders items, one exhaustive match.
//!
//! Deliberate differences from the reference: a retry notice is an `agent_thought_chunk` (not
//! message text) and a failed turn adds no notice chunk, so the concatenated
//! `agent_message_chunk` text is exactly the model's visible text.

use std::collections::HashMap;
use std::sync::Arc;

use agent_client_protocol::v1::schema::ContentBlock as AcpBlock;
use agent_client_protocol::v1::schema::ContentChunk;
use agent_client_protocol::v1::schema::ImageContent;
use agent_client_protocol::v1::schema::MessageId;
use agent_client_protocol::v1::schema::Plan;
use agent_client_protocol::v1::schema::PlanEntry;
use agent_client_protocol::v1::schema::PlanEntryPriority;
use agent_client_protocol::v1::schema::PlanEntryStatus;
use agent_client_protocol::v1::schema::SessionInfoUpdate;
use agent_client_protocol::v1::schema::SessionUpdate;
use agent_client_protocol::v1::schema::TextContent;
use base64::Engine;
use dsh_protocol::ContentBlock;
use dsh_session::Event;
use dsh_tools::ImageAttachment;
use dsh_transcript::Fold;
use dsh_transcript::Item;
use dsh_transcript::PlanStatus;
use dsh_transcript::Presentation;
use dsh_transcript::ToolCallItem;
use dsh_transcript::ToolResultItem;
use dsh_transcript::TranscriptItem;
use serde_json::Value;

use crate::cards::RenderContext;
use crate::cards::call_update;
use crate::cards::result_update;
use crate::images::PromptImageStore;
use crate::time::iso_millis;

/// A call the client was shown that has no result yet.
struct ShownCall {
    arguments: Arc<Value>,
    terminal: bool,
    /// The `tool_call` the client was sent (a permission request repeats it).
    shown: agent_client_protocol::v1::schema::ToolCall,
}

/// Per-session renderer: the transcript fold, and what the client was shown of each call
/// until its result.
pub(crate) struct Presenter {
    ctx: RenderContext,
    presentation: Presentation,
    fold: Fold,
    calls: HashMap<String, ShownCall>,
    /// Calls running in a client terminal: their card shows it, and the result keeps it.
    client_terminals: HashMap<String, String>,
    /// Where replayed user images are re-read from.
    images: Option<Arc<dyn PromptImageStore>>,
}

impl Presenter {
    pub(crate) fn new(ctx: RenderContext, presentation: Presentation) -> Self {
        Self {
            ctx,
            presentation,
            fold: Fold::new(),
            calls: HashMap::new(),
            client_terminals: HashMap::new(),
            images: None,
        }
    }

    pub(crate) fn with_images(mut self, images: Option<Arc<dyn PromptImageStore>>) -> Self {
        self.images = images;
        self
    }

    /// A stored user image as ACP content, re-read and verified; `None` (logged) when it is
    /// gone or damaged: a replay never shows a placeholder in its place.
    fn stored_image(&self, attachment: &Value) -> Option<AcpBlock> {
        let record: ImageAttachment = serde_json::from_value(attachment.clone()).ok()?;
        let loaded = match &self.images {
            Some(store) => store.load_image(&record),
            None => Err("no attachment store is mounted".to_owned()),
        };
        match loaded {
            Ok(bytes) => {
                let data = base64::engine::general_purpose::STANDARD.encode(bytes);
                Some(AcpBlock::Image(ImageContent::new(data, record.media_type)))
            }
            Err(reason) => {
                tracing::warn!(id = %record.attachment_id, %reason, "replayed image unavailable");
                None
            }
        }
    }

    /// Whether `call_id` is a call the client was shown and that has no result yet, and if so
    /// whether its card is a client-side terminal.
    pub(crate) fn pending_terminal(&self, call_id: &str) -> Option<bool> {
        self.calls.get(call_id).map(|call| call.terminal)
    }

    /// The call the client was shown for `call_id` and its arguments, while it has no result.
    pub(crate) fn shown_call(
        &self,
        call_id: &str,
    ) -> Option<(&agent_client_protocol::v1::schema::ToolCall, &Value)> {
        self.calls
            .get(call_id)
            .map(|call| (&call.shown, call.arguments.as_ref()))
    }

    /// Puts a client terminal on a shown call's card; the update to send, `None` when the call
    /// is not (or no longer) shown.
    pub(crate) fn attach_terminal(
        &mut self,
        call_id: &str,
        terminal_id: &str,
    ) -> Option<agent_client_protocol::v1::schema::ToolCallUpdate> {
        let call = self.calls.get(call_id)?;
        self.client_terminals
            .insert(call_id.to_owned(), terminal_id.to_owned());
        Some(crate::cards::terminal_attached(
            call_id,
            &call.shown,
            terminal_id,
        ))
    }

    /// The updates one committed event produces. `replay` adds the user's own messages, which a
    /// live client already shows.
    pub(crate) fn map(&mut self, event: &Event, replay: bool) -> Vec<SessionUpdate> {
        let mut updates = Vec::new();
        for item in self.fold.apply(&self.presentation, event) {
            self.render(item, replay, &mut updates);
        }
        updates
    }

    /// One item as `session/update`s. Items ACP has no update for render nothing.
    fn render(&mut self, item: TranscriptItem, replay: bool, out: &mut Vec<SessionUpdate>) {
        match item.item {
            Item::AssistantText(delta) if !delta.text.is_empty() => out.push(message_chunk_of(
                delta.text,
                message_id("message", delta.turn, delta.step),
            )),
            Item::Thought(delta) if !delta.text.is_empty() => out.push(thought_chunk_of(
                delta.text,
                message_id("thought", delta.turn, delta.step),
            )),
            Item::ToolCall(call) => out.push(self.call(call)),
            Item::ToolResult(result) => out.push(self.result(result)),
            Item::Retry(retry) => {
                let of = retry.max_retries.map_or_else(
                    || retry.retry.to_string(),
                    |max| format!("{}/{max}", retry.retry),
                );
                out.push(thought_chunk_of(
                    format!(
                        "\n\n[Previous model attempt discarded; retrying {of} in {}ms: {}]\n\n",
                        retry.delay_ms, retry.message
                    ),
                    format!("notice-{}", item.seq),
                ));
            }
            Item::Plan(entries) => {
                let entries = entries
                    .into_iter()
                    .map(|entry| {
                        let status = match entry.status {
                            PlanStatus::Pending => PlanEntryStatus::Pending,
                            PlanStatus::InProgress => PlanEntryStatus::InProgress,
                            PlanStatus::Completed => PlanEntryStatus::Completed,
                        };
                        PlanEntry::new(entry.content, PlanEntryPriority::Medium, status)
                    })
                    .collect();
                out.push(SessionUpdate::Plan(Plan::new(entries)));
            }
            Item::Title(title) => {
                let info = SessionInfoUpdate::new()
                    .title(title)
                    .updated_at(iso_millis(item.time));
                out.push(SessionUpdate::SessionInfoUpdate(info));
            }
            // Only what the person typed, and only on replay: a live client already shows it.
            Item::User(user) if replay && user.attributed => {
                for block in &user.content {
                    let block = match block {
                        ContentBlock::Text { text } if !text.is_empty() => {
                            Some(AcpBlock::Text(TextContent::new(text.clone())))
                        }
                        ContentBlock::Image { attachment } => self.stored_image(attachment),
                        _ => None,
                    };
                    if let Some(block) = block {
                        out.push(SessionUpdate::UserMessageChunk(ContentChunk::new(block)));
                    }
                }
            }
            // The mode follows the log through the session's mode watch (`current_mode_update`);
            // usage goes out as `usage_update` from the token meter; approvals and questions are
            // asked live (`session/request_permission`, elicitation), never replayed.
            Item::User(_)
            | Item::AssistantText(_)
            | Item::Thought(_)
            | Item::AssistantDone(_)
            | Item::TurnStarted
            | Item::TurnEnded(_)
            | Item::Mode(_)
            | Item::Usage(_)
            | Item::Notice(_)
            | Item::ApprovalAsked(_)
            | Item::ApprovalSettled(_)
            | Item::QuestionAsked(_)
            | Item::Child(_) => {}
            // A newer item kind: nothing to show until ACP learns it.
            _ => {}
        }
    }

    fn call(&mut self, call: ToolCallItem) -> SessionUpdate {
        let (update, terminal) = call_update(&call.call_id, &call.card, &call.arguments, &self.ctx);
        self.calls.insert(
            call.call_id,
            ShownCall {
                arguments: call.arguments,
                terminal,
                shown: update.clone(),
            },
        );
        SessionUpdate::ToolCall(update)
    }

    fn result(&mut self, result: ToolResultItem) -> SessionUpdate {
        let call_id = result.call_id;
        let shown = self.calls.remove(&call_id);
        if self.client_terminals.remove(&call_id).is_some() {
            // The card shows the client's terminal; a content here would replace it.
            return SessionUpdate::ToolCallUpdate(crate::cards::client_terminal_result(
                &call_id,
                result.view.is_error,
            ));
        }
        let terminal = shown.as_ref().is_some_and(|shown| shown.terminal);
        let update = result_update(
            &call_id,
            result.card,
            &result.view.content,
            result.view.is_error,
            terminal,
            &self.ctx,
        );
        SessionUpdate::ToolCallUpdate(update)
    }
}

/// The `messageId` of a model message or of its reasoning: derived from the turn and step the
/// log records, so a live session and its `session/load` replay name each message alike.
fn message_id(kind: &str, turn: u64, step: u64) -> String {
    format!("{kind}-{turn}-{step}")
}

/// An agent message chunk outside the model's own messages (a command's output): a message
/// of its own.
pub(crate) fn message_chunk(text: String) -> SessionUpdate {
    message_chunk_of(text, format!("command-{}", uuid::Uuid::new_v4()))
}

fn message_chunk_of(text: String, id: String) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(
        ContentChunk::new(AcpBlock::Text(TextContent::new(text))).message_id(MessageId::new(id)),
    )
}

fn thought_chunk_of(text: String, id: String) -> SessionUpdate {
    SessionUpdate::AgentThoughtChunk(
        ContentChunk::new(AcpBlock::Text(TextContent::new(text))).message_id(MessageId::new(id)),
    )
}

/// The text of an agent message or thought chunk as we build them (plain text, no meta),
/// with its kind and message id.
fn chunk_text(update: &SessionUpdate) -> Option<(bool, Option<&str>, &str)> {
    let (thought, chunk) = match update {
        SessionUpdate::AgentMessageChunk(chunk) => (false, chunk),
        SessionUpdate::AgentThoughtChunk(chunk) => (true, chunk),
        _ => return None,
    };
    match &chunk.content {
        AcpBlock::Text(text)
            if chunk.meta.is_none() && text.meta.is_none() && text.annotations.is_none() =>
        {
            let id = chunk.message_id.as_ref().map(|id| &*id.0);
            Some((thought, id, &text.text))
        }
        _ => None,
    }
}

/// Whether `update` is a plain text chunk that replay may merge with its neighbours.
pub(crate) fn is_text_chunk(update: &SessionUpdate) -> bool {
    chunk_text(update).is_some()
}

/// Appends `next`'s text to `held` when both are plain text chunks of the same message.
pub(crate) fn extend_text_chunk(held: &mut SessionUpdate, next: &SessionUpdate) -> bool {
    let Some((next_thought, next_id, next_text)) = chunk_text(next) else {
        return false;
    };
    if chunk_text(held).map(|(thought, id, _)| (thought, id)) != Some((next_thought, next_id)) {
        return false;
    }
    match held {
        SessionUpdate::AgentMessageChunk(chunk) | SessionUpdate::AgentThoughtChunk(chunk) => {
            match &mut chunk.content {
                AcpBlock::Text(text) => {
                    text.text.push_str(next_text);
                    true
                }
                _ => false,
            }
        }
        _ => false,
    }
}

#[cfg(test)]
#[path = "mapping_tests.rs"]
mod tests;
