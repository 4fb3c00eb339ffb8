//! The transcript: a fold of committed session events into what the screen shows.
//!
//! The same fold serves live updates (one event at a time from the agent's broadcast) and
//! resume (every event of a loaded log), so a resumed session looks exactly like the live one
//! did. Cards come from the tool registry's presenters through [`CardSource`].

use std::collections::HashMap;
use std::sync::Arc;

use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_protocol::StreamChunk;
use dsh_protocol::TokenUsage;
use dsh_session::Event;
use dsh_session::data;
use dsh_session::data::AbortReason;
use dsh_session::data::TurnEndReason;
use dsh_tools::ResultView;
use dsh_tools::ToolCallView;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolResultView;
use serde_json::Value;

/// How much live output a running card keeps (the bash tool's own in-memory tail).
pub const LIVE_TAIL_BYTES: usize = 64_000;

/// Where the fold gets a tool's cards from.
pub trait CardSource {
    fn call_card(&self, name: &str, arguments: &Value) -> ToolCallView;
    fn result_card(
        &self,
        name: &str,
        arguments: &Value,
        view: &ResultView,
    ) -> Option<ToolResultView>;
}

/// The registry's presenters as seen from one agent scope (agent-scoped tools such as the
/// file tools are registered there, not at the root).
#[derive(Clone, Default)]
pub struct Presenters {
    pub registry: Option<Arc<ToolRegistry>>,
    pub scope: Option<Scope>,
}

impl std::fmt::Debug for Presenters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Presenters").finish_non_exhaustive()
    }
}

impl Presenters {
    pub fn new(registry: Arc<ToolRegistry>, scope: Scope) -> Self {
        Self {
            registry: Some(registry),
            scope: Some(scope),
        }
    }
}

impl CardSource for Presenters {
    fn call_card(&self, name: &str, arguments: &Value) -> ToolCallView {
        let definition = self
            .registry
            .as_ref()
            .and_then(|registry| registry.get(name, self.scope.as_ref()));
        dsh_tools::call_card(definition.as_deref(), name, arguments)
    }

    fn result_card(
        &self,
        name: &str,
        arguments: &Value,
        view: &ResultView,
    ) -> Option<ToolResultView> {
        let definition = self
            .registry
            .as_ref()
            .and_then(|registry| registry.get(name, self.scope.as_ref()));
        dsh_tools::result_card(definition.as_deref(), arguments, view)
    }
}

/// One part of an assistant message, in stream order.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    Reasoning(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct AssistantEntry {
    pub turn: u64,
    pub step: u64,
    pub parts: Vec<Part>,
    /// Still receiving chunks (no `assistant/message` yet).
    pub streaming: bool,
    pub interrupted: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolState {
    Running,
    Done,
    Failed,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    pub call_id: String,
    pub name: String,
    pub arguments: Value,
    pub call: ToolCallView,
    pub result: Option<ToolResultView>,
    /// The model-facing text of the result (shown when the tool has no result card).
    pub output: Option<String>,
    pub state: ToolState,
    pub started_ms: u64,
    pub ended_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeLevel {
    Info,
    Warning,
    Error,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    User(String),
    Assistant(AssistantEntry),
    Tool(Box<ToolEntry>),
    Notice { level: NoticeLevel, text: String },
}

/// Token totals over the session (every provider attempt that reported usage).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageTotals {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// Some attempt reported cache counts (providers without a cache never do).
    pub cache_reported: bool,
}

impl UsageTotals {
    fn add(&mut self, usage: &TokenUsage) {
        // A provider may report any count: saturate, never wrap.
        self.input = self.input.saturating_add(usage.input_tokens);
        self.output = self.output.saturating_add(usage.output_tokens);
        self.cache_read = self
            .cache_read
            .saturating_add(usage.cache_read_tokens.unwrap_or(0));
        self.cache_write = self
            .cache_write
            .saturating_add(usage.cache_write_tokens.unwrap_or(0));
        self.cache_reported |=
            usage.cache_read_tokens.is_some() || usage.cache_write_tokens.is_some();
    }

    /// All billed input (the counts are disjoint).
    pub fn prompt_total(&self) -> u64 {
        self.input
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write)
    }

    /// Share of prompt tokens served from the provider cache, in percent.
    pub fn cache_hit_percent(&self) -> Option<u64> {
        let total = self.prompt_total();
        (self.cache_reported && total > 0).then(|| {
            u64::try_from(u128::from(self.cache_read) * 100 / u128::from(total)).unwrap_or(100)
        })
    }
}

/// Everything the screen shows about a session, folded from its events.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transcript {
    pub entries: Vec<Entry>,
    pub usage: UsageTotals,
    pub todos: Vec<dsh_tool_todo::Todo>,
    pub title: Option<String>,
    /// A turn is open (between `turn/start` and `turn/end`).
    pub turn_open: bool,
    /// The seq of the last folded event (events at or below it are skipped on re-delivery).
    pub last_seq: Option<u64>,
    calls: HashMap<String, usize>,
    /// One stamp per entry, replaced whenever the entry changes: what the renderer caches by.
    stamps: Vec<u64>,
}

/// Process-unique entry versions (unique across transcripts, so a rebuilt transcript never
/// reuses a cached rendering of a different entry).
fn fresh_stamp() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Transcript {
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds a whole log (resume replay).
    pub fn from_events<'a>(
        events: impl IntoIterator<Item = &'a Arc<Event>>,
        cards: &dyn CardSource,
    ) -> Self {
        let mut transcript = Self::new();
        for event in events {
            transcript.apply(event, cards);
        }
        transcript
    }

    /// The version of entry `index`: equal stamps mean an unchanged entry. `None` when entries
    /// were changed from outside the fold (then nothing may be cached).
    pub fn stamp(&self, index: usize) -> Option<u64> {
        if self.stamps.len() != self.entries.len() {
            return None;
        }
        self.stamps.get(index).copied()
    }

    fn push(&mut self, entry: Entry) {
        self.sync_stamps();
        self.entries.push(entry);
        self.stamps.push(fresh_stamp());
    }

    fn touch(&mut self, index: usize) {
        self.sync_stamps();
        if let Some(stamp) = self.stamps.get_mut(index) {
            *stamp = fresh_stamp();
        }
    }

    /// Entries pushed from outside the fold get stamps of their own.
    fn sync_stamps(&mut self) {
        if self.stamps.len() != self.entries.len() {
            self.stamps = self.entries.iter().map(|_| fresh_stamp()).collect();
        }
    }

    /// Folds one committed event. Re-delivered events (seq not above the last) are ignored, so
    /// a subscription opened before a replay may overlap it safely.
    pub fn apply(&mut self, event: &Event, cards: &dyn CardSource) {
        if self.last_seq.is_some_and(|last| event.seq <= last) {
            return;
        }
        self.last_seq = Some(event.seq);
        match event.kind.as_str() {
            dsh_session::kind::TURN_START => self.turn_open = true,
            dsh_session::kind::TURN_END => self.turn_end(event),
            dsh_session::kind::USER_MESSAGE => self.user(event),
            dsh_session::kind::ASSISTANT_CHUNK => self.chunk(event),
            dsh_session::kind::ASSISTANT_MESSAGE => self.assistant(event),
            dsh_session::kind::TOOL_CALL => self.tool_call(event, cards),
            dsh_session::kind::TOOL_RESULT => self.tool_result(event, cards),
            dsh_session::kind::TODO_WRITE => {
                if let Some(Ok(todo)) = event.decode::<dsh_tool_todo::TodoWrite>() {
                    self.todos = todo.todos;
                }
            }
            dsh_session::kind::LLM_RETRY => {
                if let Some(Ok(retry)) = event.decode::<data::LlmRetry>() {
                    let of = retry
                        .max_retries
                        .map(|max| format!("/{max}"))
                        .unwrap_or_default();
                    let text = format!(
                        "retry {}{of} in {:.1}s: {}",
                        retry.retry,
                        retry.delay_ms as f64 / 1000.0,
                        retry.failure.message
                    );
                    self.notice(NoticeLevel::Warning, text);
                }
            }
            dsh_session::kind::SESSION_TITLE => {
                if let Some(Ok(title)) = event.decode::<data::SessionTitle>() {
                    self.title = Some(title.title);
                }
            }
            _ => {}
        }
    }

    /// Appends a UI-side notice (not from the log).
    pub fn notice(&mut self, level: NoticeLevel, text: impl Into<String>) {
        self.push(Entry::Notice {
            level,
            text: text.into(),
        });
    }

    /// Live output of a running call (e.g. a terminal's stdout as it arrives), keeping the last
    /// [`LIVE_TAIL_BYTES`]. Ignored once the call has its result: the durable result is the truth.
    pub fn append_output(&mut self, call_id: &str, chunk: &str) {
        let Some(&index) = self.calls.get(call_id) else {
            return;
        };
        self.touch(index);
        let Some(Entry::Tool(entry)) = self.entries.get_mut(index) else {
            return;
        };
        if entry.state == ToolState::Running {
            let output = entry.output.get_or_insert_with(String::new);
            output.push_str(chunk);
            // A card shows the tail; holding more would let a chatty command grow the UI.
            if output.len() > LIVE_TAIL_BYTES {
                let mut cut = output.len() - LIVE_TAIL_BYTES;
                while !output.is_char_boundary(cut) {
                    cut += 1;
                }
                output.drain(..cut);
            }
        }
    }

    /// Call ids of tool calls still running.
    pub fn running_calls(&self) -> impl Iterator<Item = &ToolEntry> {
        self.entries.iter().filter_map(|entry| match entry {
            Entry::Tool(tool) if tool.state == ToolState::Running => Some(tool.as_ref()),
            _ => None,
        })
    }

    fn user(&mut self, event: &Event) {
        let Some(Ok(data::UserMessage(message))) = event.decode::<data::UserMessage>() else {
            return;
        };
        // Runtime context snapshots and job notices are model-facing, not things the user typed.
        let kind = message.source.kind();
        if !kind.is_empty() && kind != "user" {
            return;
        }
        let text = dsh_protocol::text_of(&message.content);
        if !text.is_empty() {
            self.push(Entry::User(text));
        }
    }

    fn live_assistant(&mut self, turn: u64, step: u64) -> &mut AssistantEntry {
        let existing = self.entries.iter().rposition(|entry| {
            matches!(entry, Entry::Assistant(a) if a.streaming && a.turn == turn && a.step == step)
        });
        let index = match existing {
            Some(index) => {
                self.touch(index);
                index
            }
            None => {
                self.push(Entry::Assistant(AssistantEntry {
                    turn,
                    step,
                    parts: Vec::new(),
                    streaming: true,
                    interrupted: false,
                }));
                self.entries.len() - 1
            }
        };
        match &mut self.entries[index] {
            Entry::Assistant(entry) => entry,
            // `index` was found or pushed as an assistant entry just above.
            _ => unreachable!("live assistant index points at an assistant entry"),
        }
    }

    fn chunk(&mut self, event: &Event) {
        let Some(Ok(chunk)) = event.decode::<data::AssistantChunk>() else {
            return;
        };
        let (text, reasoning) = match chunk.chunk {
            StreamChunk::TextDelta { text, .. } => (true, text),
            StreamChunk::ReasoningDelta { text, .. } => (false, text),
            _ => return,
        };
        let entry = self.live_assistant(chunk.turn, chunk.step);
        match (entry.parts.last_mut(), text) {
            (Some(Part::Text(buffer)), true) | (Some(Part::Reasoning(buffer)), false) => {
                buffer.push_str(&reasoning)
            }
            (_, true) => entry.parts.push(Part::Text(reasoning)),
            (_, false) => entry.parts.push(Part::Reasoning(reasoning)),
        }
    }

    fn assistant(&mut self, event: &Event) {
        let Some(Ok(message)) = event.decode::<data::AssistantMessage>() else {
            return;
        };
        if let Some(usage) = &message.usage {
            self.usage.add(usage);
        }
        let parts: Vec<Part> = message
            .message
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text { text } if !text.is_empty() => Some(Part::Text(text.clone())),
                ContentBlock::Reasoning { text } if !text.is_empty() => {
                    Some(Part::Reasoning(text.clone()))
                }
                _ => None,
            })
            .collect();
        let position = self.entries.iter().rposition(|entry| {
            matches!(entry, Entry::Assistant(a) if a.streaming && a.turn == message.turn && a.step == message.step)
        });
        let entry = AssistantEntry {
            turn: message.turn,
            step: message.step,
            parts,
            streaming: false,
            interrupted: message.interrupted,
        };
        match position {
            Some(index) if entry.parts.is_empty() && !entry.interrupted => {
                self.sync_stamps();
                self.entries.remove(index);
                self.stamps.remove(index);
                for slot in self.calls.values_mut() {
                    if *slot > index {
                        *slot -= 1;
                    }
                }
            }
            Some(index) => {
                self.entries[index] = Entry::Assistant(entry);
                self.touch(index);
            }
            None if entry.parts.is_empty() => {}
            None => self.push(Entry::Assistant(entry)),
        }
    }

    fn tool_call(&mut self, event: &Event, cards: &dyn CardSource) {
        let Some(Ok(call)) = event.decode::<data::ToolCall>() else {
            return;
        };
        let arguments = parse_arguments(&call.arguments);
        let card = cards.call_card(&call.name, &arguments);
        self.calls.insert(call.call_id.clone(), self.entries.len());
        self.push(Entry::Tool(Box::new(ToolEntry {
            call_id: call.call_id,
            name: call.name,
            arguments,
            call: card,
            result: None,
            output: None,
            state: ToolState::Running,
            started_ms: event.time,
            ended_ms: None,
        })));
    }

    fn tool_result(&mut self, event: &Event, cards: &dyn CardSource) {
        let Some(Ok(result)) = event.decode::<data::ToolResult>() else {
            return;
        };
        let Some((call_id, content, is_error)) =
            result.message.content.iter().find_map(|block| match block {
                ContentBlock::ToolResult {
                    tool_call_id,
                    content,
                    is_error,
                } => Some((
                    tool_call_id.clone(),
                    content.clone(),
                    *is_error == Some(true),
                )),
                _ => None,
            })
        else {
            return;
        };
        let Some(index) = self.calls.remove(&call_id) else {
            return;
        };
        self.touch(index);
        let Some(Entry::Tool(entry)) = self.entries.get_mut(index) else {
            return;
        };
        let view = ResultView {
            content,
            is_error,
            meta: result.meta,
        };
        entry.result = cards.result_card(&entry.name, &entry.arguments, &view);
        entry.output = Some(dsh_protocol::text_of(&view.content));
        entry.state = if is_error {
            ToolState::Failed
        } else {
            ToolState::Done
        };
        entry.ended_ms = Some(event.time);
    }

    fn turn_end(&mut self, event: &Event) {
        self.turn_open = false;
        // A live entry that never got its message (cancelled mid-stream) stops streaming.
        let mut stopped = Vec::new();
        for (index, entry) in self.entries.iter_mut().enumerate() {
            if let Entry::Assistant(assistant) = entry
                && assistant.streaming
            {
                assistant.streaming = false;
                assistant.interrupted = true;
                stopped.push(index);
            }
        }
        for index in stopped {
            self.touch(index);
        }
        let Some(Ok(end)) = event.decode::<data::TurnEnd>() else {
            return;
        };
        match end.reason {
            TurnEndReason::Completed => {}
            TurnEndReason::Blocked => self.notice(NoticeLevel::Warning, "turn blocked"),
            TurnEndReason::MaxTokens => {
                self.notice(NoticeLevel::Warning, "stopped: output token limit reached")
            }
            TurnEndReason::Aborted { reason } => {
                let who = match reason {
                    AbortReason::User => "by you".to_owned(),
                    AbortReason::Parent => "by the parent agent".to_owned(),
                    AbortReason::Hook { reason } => format!("by a hook: {reason}"),
                    AbortReason::Disposed => "(session closed)".to_owned(),
                    AbortReason::Legacy => String::new(),
                };
                self.notice(
                    NoticeLevel::Warning,
                    format!("turn cancelled {who}").trim_end(),
                );
            }
            TurnEndReason::Error { error } => self.notice(
                NoticeLevel::Error,
                format!("error ({}): {}", error.code, error.message),
            ),
            TurnEndReason::Interrupted => {
                self.notice(NoticeLevel::Warning, "turn interrupted (the process ended)")
            }
        }
    }
}

/// Arguments as presenters see them: parsed JSON, the raw string when unparsable, `{}` when
/// empty.
fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
