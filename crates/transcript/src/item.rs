//! The display items: what a front-end may show of a session, decoded once.

use std::sync::Arc;

use dsh_protocol::ContentBlock;
use dsh_protocol::TokenUsage;
use dsh_session::data::TurnEndReason;
use dsh_tools::ResultView;
use dsh_tools::ToolCallView;
use dsh_tools::ToolResultView;
use serde_json::Value;

/// One display item and the log event it came from. Folding the events after `seq` (a
/// client's cursor) yields exactly the items after this one.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscriptItem {
    /// The sequence number of the event this item was folded from.
    pub seq: u64,
    /// That event's time (epoch milliseconds).
    pub time: u64,
    pub item: Item,
}

/// Everything a front-end renders. Closed: a plugin presents its events as these items, so a
/// front-end's one exhaustive match covers every plugin.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Item {
    /// A turn began.
    TurnStarted,
    /// A turn ended, and why.
    TurnEnded(TurnEndReason),
    /// A message the person sent (runtime context and plugin notes are not theirs).
    User(UserText),
    /// A delta of the assistant's visible text.
    AssistantText(TextDelta),
    /// A delta of the assistant's reasoning.
    Thought(TextDelta),
    /// The assistant's message of one step, complete: its final parts replace the deltas.
    AssistantDone(AssistantDone),
    /// A tool call with its arguments parsed once and the tool's own card.
    ToolCall(ToolCallItem),
    /// The outcome of a call (replacement results of pruning and compaction are not shown).
    ToolResult(ToolResultItem),
    /// The agent's plan (the whole list; the latest one wins).
    Plan(Vec<PlanEntry>),
    /// The session's title.
    Title(String),
    /// The session's working mode changed (plan mode on or off).
    Mode(ModeChange),
    /// Tokens one provider attempt reported.
    Usage(TokenUsage),
    /// A discarded model attempt that will be retried.
    Retry(RetryNotice),
    /// A line for the person: a plugin's status, a warning.
    Notice(Notice),
    /// A tool call waits for the person's approval.
    ApprovalAsked(ApprovalAsked),
    /// That approval was answered (or settled without one).
    ApprovalSettled(ApprovalSettled),
    /// A question waits for the person's answer.
    QuestionAsked(QuestionAsked),
    /// A child agent's progress.
    Child(ChildProgress),
}

/// What the person typed (text and images), as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct UserText {
    pub content: Vec<ContentBlock>,
    /// The message names the person as its source. Older logs carry no source: they are shown
    /// by a transcript view, but not re-sent to an editor that never saw them as the person's.
    pub attributed: bool,
}

impl UserText {
    /// The text blocks, joined.
    pub fn text(&self) -> String {
        dsh_protocol::text_of(&self.content)
    }
}

/// A piece of streamed text of one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextDelta {
    pub turn: u64,
    pub step: u64,
    pub text: String,
}

/// One part of a finished assistant message, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Text(String),
    Reasoning(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssistantDone {
    pub turn: u64,
    pub step: u64,
    /// Non-empty text and reasoning parts.
    pub parts: Vec<Part>,
    /// The stream was cut (cancel, failure) before the model finished.
    pub interrupted: bool,
}

/// A tool call's arguments: parsed once, for every front-end.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallItem {
    pub call_id: String,
    pub name: String,
    /// Parsed JSON; the raw string when it does not parse (never `Null`); `{}` when empty.
    pub arguments: Arc<Value>,
    /// The tool's own `present_call` card (a generic one when it has none).
    pub card: ToolCallView,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolResultItem {
    pub call_id: String,
    /// The call this result answers, when its `tool/call` was folded (a log cut at a
    /// compaction boundary may hold a result whose call is gone).
    pub call: Option<CallRef>,
    /// The result as the model saw it.
    pub view: ResultView,
    /// The tool's own `present_result` card, `None` when it has none.
    pub card: Option<ToolResultView>,
}

impl ToolResultItem {
    /// The model-facing text of the result.
    pub fn text(&self) -> String {
        dsh_protocol::text_of(&self.view.content)
    }
}

/// The call a result belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRef {
    pub name: String,
    pub arguments: Arc<Value>,
    /// The seq of the `tool/call` event.
    pub seq: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanEntry {
    pub content: String,
    pub status: PlanStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanStatus {
    Pending,
    InProgress,
    Completed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeChange {
    /// The mode's short name (`"plan"`, `"default"`).
    pub mode: String,
    /// A line for the person, when the change has one.
    pub text: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryNotice {
    /// This is the `retry`th retry (from 1).
    pub retry: u64,
    pub max_retries: Option<u64>,
    pub delay_ms: u64,
    /// Why the attempt failed.
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeLevel {
    Info,
    Warning,
    Error,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub level: NoticeLevel,
    /// Who says it (a plugin's name, `"goal"`), so a view may keep one line per source.
    pub source: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalAsked {
    /// The request's id; its [`ApprovalSettled`] carries the same.
    pub id: String,
    /// The tool call it gates, when it gates one.
    pub call_id: Option<String>,
    pub tool: String,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalSettled {
    /// The id of the [`ApprovalAsked`] it answers.
    pub id: String,
    /// A short word for the outcome (`"approved"`, `"rejected"`).
    pub outcome: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionAsked {
    pub id: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildProgress {
    /// The child's session id; `None` for the session whose transcript this is (a child's
    /// own log says what it was delegated as).
    pub session_id: Option<String>,
    /// A line about what it does now.
    pub text: String,
}
