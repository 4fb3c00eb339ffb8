//! The transcript: the session's display items (`dsh_transcript`) as the entries the screen
//! shows.
//!
//! The one transcript fold serves live updates (one event at a time from the agent's
//! broadcast) and resume (every event of a loaded log), so a resumed session looks exactly
//! like the live one did. This file only maps items to entries: cards come from each tool's
//! presenters and plugin events from the plugins' own presenters, through the fold.

use std::collections::HashMap;
use std::sync::Arc;

use dsh_protocol::TokenUsage;
use dsh_session::Event;
use dsh_session::data::AbortReason;
use dsh_session::data::TurnEndReason;
use dsh_tools::ToolCallView;
use dsh_tools::ToolResultView;
use dsh_transcript::AssistantDone;
use dsh_transcript::Fold;
use dsh_transcript::Item;
use dsh_transcript::PlanEntry;
use dsh_transcript::TextDelta;
use dsh_transcript::ToolCallItem;
use dsh_transcript::ToolResultItem;
use serde_json::Value;

pub use dsh_transcript::NoticeLevel;
pub use dsh_transcript::Part;
/// Where a session's cards and plugin items come from (the tool registry seen from the
/// agent's scope, the host's presenters); the default has neither.
pub use dsh_transcript::Presentation as Presenters;

/// How much live output a running card keeps (the bash tool's own in-memory tail).
pub const LIVE_TAIL_BYTES: usize = 64_000;

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
    /// Parsed once by the transcript fold (the raw string when not JSON).
    pub arguments: Arc<Value>,
    pub call: ToolCallView,
    pub result: Option<ToolResultView>,
    /// The model-facing text of the result (shown when the tool has no result card).
    pub output: Option<String>,
    pub state: ToolState,
    pub started_ms: u64,
    pub ended_ms: Option<u64>,
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
    /// The agent's plan (the latest one a plugin presented).
    pub plan: Vec<PlanEntry>,
    pub title: Option<String>,
    /// A turn is open (between `turn/start` and `turn/end`).
    pub turn_open: bool,
    /// The seq of the last folded event (events at or below it are skipped on re-delivery).
    pub last_seq: Option<u64>,
    calls: HashMap<String, usize>,
    fold: Fold,
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
        presenters: &Presenters,
    ) -> Self {
        let mut transcript = Self::new();
        for event in events {
            transcript.apply(event, presenters);
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
    pub fn apply(&mut self, event: &Event, presenters: &Presenters) {
        if self.last_seq.is_some_and(|last| event.seq <= last) {
            return;
        }
        self.last_seq = Some(event.seq);
        for item in self.fold.apply(presenters, event) {
            self.render(item.item, item.time);
        }
    }

    /// One display item as entries. Approvals and questions are asked in their own boxes
    /// (the UI's approval and question services), not from the log.
    fn render(&mut self, item: Item, time: u64) {
        match item {
            Item::TurnStarted => self.turn_open = true,
            Item::TurnEnded(reason) => self.turn_end(reason),
            Item::User(user) => {
                let text = user.text();
                if !text.is_empty() {
                    self.push(Entry::User(text));
                }
            }
            Item::AssistantText(delta) => self.chunk(delta, true),
            Item::Thought(delta) => self.chunk(delta, false),
            Item::AssistantDone(done) => self.assistant(done),
            Item::Usage(usage) => self.usage.add(&usage),
            Item::ToolCall(call) => self.tool_call(call, time),
            Item::ToolResult(result) => self.tool_result(result, time),
            Item::Plan(plan) => self.plan = plan,
            Item::Title(title) => self.title = Some(title),
            Item::Retry(retry) => {
                let of = retry
                    .max_retries
                    .map(|max| format!("/{max}"))
                    .unwrap_or_default();
                let text = format!(
                    "retry {}{of} in {:.1}s: {}",
                    retry.retry,
                    retry.delay_ms as f64 / 1000.0,
                    retry.message
                );
                self.notice(NoticeLevel::Warning, text);
            }
            Item::Notice(notice) => self.notice(notice.level, notice.text),
            Item::Mode(mode) => {
                if let Some(text) = mode.text {
                    self.notice(NoticeLevel::Info, text);
                }
            }
            Item::ApprovalAsked(_)
            | Item::ApprovalSettled(_)
            | Item::QuestionAsked(_)
            | Item::Child(_) => {}
            // A newer item kind: nothing to show until the TUI learns it.
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

    fn chunk(&mut self, delta: TextDelta, visible: bool) {
        let entry = self.live_assistant(delta.turn, delta.step);
        match (entry.parts.last_mut(), visible) {
            (Some(Part::Text(buffer)), true) | (Some(Part::Reasoning(buffer)), false) => {
                buffer.push_str(&delta.text)
            }
            (_, true) => entry.parts.push(Part::Text(delta.text)),
            (_, false) => entry.parts.push(Part::Reasoning(delta.text)),
        }
    }

    fn assistant(&mut self, done: AssistantDone) {
        let position = self.entries.iter().rposition(|entry| {
            matches!(entry, Entry::Assistant(a) if a.streaming && a.turn == done.turn && a.step == done.step)
        });
        let entry = AssistantEntry {
            turn: done.turn,
            step: done.step,
            parts: done.parts,
            streaming: false,
            interrupted: done.interrupted,
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

    fn tool_call(&mut self, call: ToolCallItem, time: u64) {
        self.calls.insert(call.call_id.clone(), self.entries.len());
        self.push(Entry::Tool(Box::new(ToolEntry {
            call_id: call.call_id,
            name: call.name,
            arguments: call.arguments,
            call: call.card,
            result: None,
            output: None,
            state: ToolState::Running,
            started_ms: time,
            ended_ms: None,
        })));
    }

    fn tool_result(&mut self, result: ToolResultItem, time: u64) {
        let Some(index) = self.calls.remove(&result.call_id) else {
            return;
        };
        self.touch(index);
        let Some(Entry::Tool(entry)) = self.entries.get_mut(index) else {
            return;
        };
        entry.output = Some(result.text());
        entry.result = result.card;
        entry.state = if result.view.is_error {
            ToolState::Failed
        } else {
            ToolState::Done
        };
        entry.ended_ms = Some(time);
    }

    fn turn_end(&mut self, reason: TurnEndReason) {
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
        match reason {
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

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
