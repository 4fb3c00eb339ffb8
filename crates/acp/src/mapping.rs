//! Committed session events → ACP `session/update`s (§1B). One function serves live streaming
//! and `session/load` replay, so a reopened session shows the same conversation and cards.
//!
//! Deliberate differences from the reference: a retry notice is an `agent_thought_chunk` (not
//! message text) and a failed turn adds no notice chunk, so the concatenated
//! `agent_message_chunk` text is exactly the model's visible text.

use std::collections::HashMap;
use std::sync::Arc;

use agent_client_protocol::v1::schema::ContentBlock as AcpBlock;
use agent_client_protocol::v1::schema::ContentChunk;
use agent_client_protocol::v1::schema::ImageContent;
use agent_client_protocol::v1::schema::Plan;
use agent_client_protocol::v1::schema::PlanEntry;
use agent_client_protocol::v1::schema::PlanEntryPriority;
use agent_client_protocol::v1::schema::PlanEntryStatus;
use agent_client_protocol::v1::schema::SessionInfoUpdate;
use agent_client_protocol::v1::schema::SessionUpdate;
use agent_client_protocol::v1::schema::TextContent;
use base64::Engine;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_protocol::StreamChunk;
use dsh_session::Event;
use dsh_session::SurfaceOp;
use dsh_session::data::AssistantChunk;
use dsh_session::data::LlmRetry;
use dsh_session::data::SessionTitle;
use dsh_session::data::ToolCall;
use dsh_session::data::ToolResult;
use dsh_session::data::UserMessage;
use dsh_tool_todo::TodoStatus;
use dsh_tool_todo::TodoWrite;
use dsh_tools::ImageAttachment;
use dsh_tools::ResultView;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolRegistry;
use serde_json::Value;

use crate::cards::RenderContext;
use crate::cards::call_update;
use crate::cards::result_update;
use crate::images::PromptImageStore;
use crate::time::iso_millis;

/// A call whose result has not arrived yet.
struct PendingCall {
    name: String,
    arguments: Value,
    terminal: bool,
    /// The `tool_call` the client was sent (a permission request repeats it).
    shown: agent_client_protocol::v1::schema::ToolCall,
}

/// Per-session renderer: remembers `callId → (name, parsed args, card kind)` until the result.
pub(crate) struct Presenter {
    ctx: RenderContext,
    tools: Option<Arc<ToolRegistry>>,
    scope: Option<Scope>,
    calls: HashMap<String, PendingCall>,
    /// Calls running in a client terminal: their card shows it, and the result keeps it.
    client_terminals: HashMap<String, String>,
    /// Where replayed user images are re-read from.
    images: Option<Arc<dyn PromptImageStore>>,
}

impl Presenter {
    pub(crate) fn new(
        ctx: RenderContext,
        tools: Option<Arc<ToolRegistry>>,
        scope: Option<Scope>,
    ) -> Self {
        Self {
            ctx,
            tools,
            scope,
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

    fn definition(&self, name: &str) -> Option<Arc<ToolDefinition>> {
        self.tools
            .as_ref()
            .and_then(|tools| tools.get(name, self.scope.as_ref()))
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
            .map(|call| (&call.shown, &call.arguments))
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
        if let Some(Ok(chunk)) = event.decode::<AssistantChunk>() {
            return match chunk.chunk {
                StreamChunk::TextDelta { text, .. } if !text.is_empty() => {
                    vec![message_chunk(text)]
                }
                StreamChunk::ReasoningDelta { text, .. } if !text.is_empty() => {
                    vec![thought_chunk(text)]
                }
                _ => Vec::new(),
            };
        }
        if let Some(Ok(call)) = event.decode::<ToolCall>() {
            return vec![self.call(call)];
        }
        if let Some(Ok(result)) = event.decode::<ToolResult>() {
            // Replacement results (pruning, compaction) rewrite history, not the call's outcome.
            if event.surface_op().is_some_and(|op| op != SurfaceOp::Append) {
                return Vec::new();
            }
            return self.result(result).into_iter().collect();
        }
        if let Some(Ok(retry)) = event.decode::<LlmRetry>() {
            let of = retry.max_retries.map_or_else(
                || retry.retry.to_string(),
                |max| format!("{}/{max}", retry.retry),
            );
            let notice = format!(
                "\n\n[Previous model attempt discarded; retrying {of} in {}ms: {}]\n\n",
                retry.delay_ms, retry.failure.message
            );
            return vec![thought_chunk(notice)];
        }
        if let Some(Ok(todos)) = event.decode::<TodoWrite>() {
            let entries = todos
                .todos
                .into_iter()
                .map(|todo| {
                    let status = match todo.status {
                        TodoStatus::Pending => PlanEntryStatus::Pending,
                        TodoStatus::InProgress => PlanEntryStatus::InProgress,
                        TodoStatus::Completed => PlanEntryStatus::Completed,
                    };
                    PlanEntry::new(todo.content, PlanEntryPriority::Medium, status)
                })
                .collect();
            return vec![SessionUpdate::Plan(Plan::new(entries))];
        }
        if let Some(Ok(title)) = event.decode::<SessionTitle>() {
            let info = SessionInfoUpdate::new()
                .title(title.title)
                .updated_at(iso_millis(event.time));
            return vec![SessionUpdate::SessionInfoUpdate(info)];
        }
        if replay && let Some(Ok(UserMessage(message))) = event.decode::<UserMessage>() {
            // Only what the user typed: runtime-context snapshots and plugin notes are not theirs.
            if message.source.kind() != "user" {
                return Vec::new();
            }
            return message
                .content
                .iter()
                .filter_map(|block| match block {
                    ContentBlock::Text { text } if !text.is_empty() => {
                        Some(AcpBlock::Text(TextContent::new(text.clone())))
                    }
                    ContentBlock::Image { attachment } => self.stored_image(attachment),
                    _ => None,
                })
                .map(|block| SessionUpdate::UserMessageChunk(ContentChunk::new(block)))
                .collect();
        }
        Vec::new()
    }

    fn call(&mut self, call: ToolCall) -> SessionUpdate {
        let arguments = parse_arguments(&call.arguments);
        let definition = self.definition(&call.name);
        let card = dsh_tools::call_card(definition.as_deref(), &call.name, &arguments);
        let (update, terminal) = call_update(&call.call_id, &card, &arguments, &self.ctx);
        self.calls.insert(
            call.call_id,
            PendingCall {
                name: call.name,
                arguments,
                terminal,
                shown: update.clone(),
            },
        );
        SessionUpdate::ToolCall(update)
    }

    fn result(&mut self, result: ToolResult) -> Option<SessionUpdate> {
        let call_id = tool_call_id(&result.message.content)?;
        let view = ResultView {
            content: result_content(&result.message.content),
            is_error: result_is_error(&result.message.content),
            meta: result.meta.clone(),
        };
        let pending = self.calls.remove(&call_id);
        let card = pending.as_ref().and_then(|pending| {
            let definition = self.definition(&pending.name);
            dsh_tools::result_card(definition.as_deref(), &pending.arguments, &view)
        });
        if self.client_terminals.remove(&call_id).is_some() {
            // The card shows the client's terminal; a content here would replace it.
            return Some(SessionUpdate::ToolCallUpdate(
                crate::cards::client_terminal_result(&call_id, view.is_error),
            ));
        }
        let terminal = pending.as_ref().is_some_and(|p| p.terminal);
        let update = result_update(
            &call_id,
            card,
            &view.content,
            view.is_error,
            terminal,
            &self.ctx,
        );
        Some(SessionUpdate::ToolCallUpdate(update))
    }
}

/// Arguments as the presenter sees them: parsed JSON, the raw string when unparsable, `{}`
/// when empty.
fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// The call id of a tool-result message: its `tool-result` block names it.
fn tool_call_id(content: &[ContentBlock]) -> Option<String> {
    content.iter().find_map(|block| match block {
        ContentBlock::ToolResult { tool_call_id, .. } => Some(tool_call_id.clone()),
        _ => None,
    })
}

fn result_content(content: &[ContentBlock]) -> Vec<ContentBlock> {
    content
        .iter()
        .find_map(|block| match block {
            ContentBlock::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

fn result_is_error(content: &[ContentBlock]) -> bool {
    content.iter().any(|block| {
        matches!(
            block,
            ContentBlock::ToolResult {
                is_error: Some(true),
                ..
            }
        )
    })
}

pub(crate) fn message_chunk(text: String) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(AcpBlock::Text(TextContent::new(text))))
}

pub(crate) fn thought_chunk(text: String) -> SessionUpdate {
    SessionUpdate::AgentThoughtChunk(ContentChunk::new(AcpBlock::Text(TextContent::new(text))))
}

/// The text of an agent message or thought chunk as we build them (plain text, no meta).
fn chunk_text(update: &SessionUpdate) -> Option<(bool, &str)> {
    let (thought, chunk) = match update {
        SessionUpdate::AgentMessageChunk(chunk) => (false, chunk),
        SessionUpdate::AgentThoughtChunk(chunk) => (true, chunk),
        _ => return None,
    };
    match &chunk.content {
        AcpBlock::Text(text)
            if chunk.meta.is_none()
                && chunk.message_id.is_none()
                && text.meta.is_none()
                && text.annotations.is_none() =>
        {
            Some((thought, &text.text))
        }
        _ => None,
    }
}

/// Whether `update` is a plain text chunk that replay may merge with its neighbours.
pub(crate) fn is_text_chunk(update: &SessionUpdate) -> bool {
    chunk_text(update).is_some()
}

/// Appends `next`'s text to `held` when both are plain text chunks of the same kind.
pub(crate) fn extend_text_chunk(held: &mut SessionUpdate, next: &SessionUpdate) -> bool {
    let Some((next_thought, next_text)) = chunk_text(next) else {
        return false;
    };
    if chunk_text(held).map(|(thought, _)| thought) != Some(next_thought) {
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
