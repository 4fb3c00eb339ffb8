//! Typed data of the core events (§1.4), field order as upstream writes it.
//!
//! The log stores `data` as JSON; these types are the typed way in (`SessionLog::append_data`)
//! and out (`Event::decode`). Plugins with their own events implement [`EventData`] in their
//! crate.

use dsh_protocol::LlmFailure;
use dsh_protocol::Message;
use dsh_protocol::StreamChunk;
use dsh_protocol::TokenUsage;
use dsh_protocol::ToolSchema;
use serde::Deserialize;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::event::kind;

/// A typed event payload bound to its `type` name.
pub trait EventData: Serialize + DeserializeOwned {
    /// The event `type`, e.g. `"turn/start"`.
    const KIND: &'static str;
}

macro_rules! event_data {
    ($($ty:ty => $kind:expr),* $(,)?) => {
        $(impl EventData for $ty { const KIND: &'static str = $kind; })*
    };
}

event_data! {
    TurnStart => kind::TURN_START,
    TurnEnd => kind::TURN_END,
    StepStart => kind::STEP_START,
    StepEnd => kind::STEP_END,
    UserMessage => kind::USER_MESSAGE,
    AssistantChunk => kind::ASSISTANT_CHUNK,
    AssistantMessage => kind::ASSISTANT_MESSAGE,
    ToolCall => kind::TOOL_CALL,
    ToolResult => kind::TOOL_RESULT,
    RequestHeader => kind::REQUEST_HEADER,
    RequestContext => kind::REQUEST_CONTEXT,
    EndSeed => kind::END_SEED,
    InboxSpliced => kind::INBOX_SPLICED,
    LlmRetry => kind::LLM_RETRY,
    LlmRetryStarted => kind::LLM_RETRY_STARTED,
    SessionTitle => kind::SESSION_TITLE,
}

/// `turn/start {turn}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnStart {
    pub turn: u64,
}

/// `turn/end {turn, reason}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnEnd {
    pub turn: u64,
    pub reason: TurnEndReason,
}

/// Why a turn ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TurnEndReason {
    Completed,
    Blocked,
    MaxTokens,
    Aborted {
        reason: AbortReason,
    },
    /// LlmError facts verbatim, else `{message, code:"UNKNOWN"}`.
    Error {
        error: LlmFailure,
    },
    /// Written only by crash repair.
    Interrupted,
}

/// Who aborted a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum AbortReason {
    User,
    Parent,
    Hook { reason: String },
    Disposed,
    Legacy,
}

/// `step/start {turn, step}`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepStart {
    pub turn: u64,
    pub step: u64,
}

/// `step/end {turn, step}`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepEnd {
    pub turn: u64,
    pub step: u64,
}

/// `user/message`: the message itself, not wrapped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UserMessage(pub Message);

/// `assistant/chunk {turn, step, chunk}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantChunk {
    pub turn: u64,
    pub step: u64,
    pub chunk: StreamChunk,
}

/// `assistant/message {turn, step, message, interrupted?: true, usage?}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    pub turn: u64,
    pub step: u64,
    pub message: Message,
    /// A cancelled prefix (§2.10); written only when `true`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
}

/// `tool/call {turn, step, callId, name, arguments}`; `arguments` is the raw model string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub turn: u64,
    pub step: u64,
    pub call_id: String,
    pub name: String,
    pub arguments: String,
}

/// `tool/result {turn, step, message, error?, meta?}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub turn: u64,
    pub step: u64,
    pub message: Message,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolErrorId>,
    /// Tool-private presentation payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// The internal failure identity of a tool result: `{name, code}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolErrorId {
    pub name: String,
    pub code: String,
}

/// `request/header {header, reason}` (§1.8).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestHeader {
    pub header: EpochHeader,
    pub reason: HeaderReason,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HeaderReason {
    Initial,
    Resume,
    Change,
}

/// The full request envelope snapshot. Canonical form: empty `system`/`tools` and an all-false
/// `adapter_defaults` are `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochHeader {
    pub config: HeaderConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter_defaults: Option<AdapterDefaults>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ToolSchema>>,
}

/// Call config of a header. Field order follows the captured run (adapter-materialized
/// `maxTokens` before `reasoningEffort`, both after the route).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeaderConfig {
    pub provider: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
}

/// Which config fields the adapter materialized (written only when `true`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdapterDefaults {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reasoning_effort: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub max_tokens: bool,
}

/// `request/context {provider, model, contextWindow?}`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestContext {
    pub provider: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
}

/// `session/end-seed {}`
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndSeed {}

/// `agent/inbox/spliced {target, start, removedCount?, inserted, outcome?}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxSpliced {
    pub target: InboxTarget,
    pub start: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed_count: Option<u64>,
    pub inserted: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<SpliceOutcome>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InboxTarget {
    NextTurn,
    NextStep,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpliceOutcome {
    Canceled,
}

/// `llm/retry {retryId, turn, step, provider, mode, policyKey, retry, maxRetries?, delayMs, failure}`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmRetry {
    pub retry_id: String,
    pub turn: u64,
    pub step: u64,
    pub provider: String,
    pub mode: RetryMode,
    /// A JSON *string*, e.g. `["normal",1,["RATE_LIMIT"],1,1,0]`.
    pub policy_key: String,
    pub retry: u64,
    /// Normal mode only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u64>,
    pub delay_ms: u64,
    pub failure: LlmFailure,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RetryMode {
    Normal,
    Always,
}

/// `llm/retry-started {retryId, turn, step, retry}`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LlmRetryStarted {
    pub retry_id: String,
    pub turn: u64,
    pub step: u64,
    pub retry: u64,
}

/// `session/title {title, messageSeqs, source}`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionTitle {
    pub title: String,
    pub message_seqs: Vec<u64>,
    pub source: TitleSource,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TitleSource {
    Fallback,
    Provider {
        provider: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<Route>,
    },
    User,
}

/// `{provider, model}`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    pub provider: String,
    pub model: String,
}
