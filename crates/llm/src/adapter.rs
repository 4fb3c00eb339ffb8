//! The adapter seam: what the loop hands a provider and what it gets back.

use dsh_protocol::MessageList;
use dsh_protocol::StreamChunk;
use dsh_protocol::ToolSchema;
use tokio_util::sync::CancellationToken;

use crate::RetryPolicy;

/// A provider stream. It always ends with exactly one [`StreamChunk::Finish`].
pub type ChunkStream = futures::stream::BoxStream<'static, StreamChunk>;

/// Why a request is made, when it is not an ordinary agent-loop step. Adapters may shape the
/// request by purpose (DeepSeek: titles run without thinking, compaction sets a header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestPurpose {
    Compaction,
    SessionTitle,
}

/// One model request, already resolved by the caller (adapter defaults materialized or not).
/// Unset options are omitted from the wire, never sent as null.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelRequest {
    pub model: String,
    /// The rendered system prompt; `None` or empty sends no system entry.
    pub system: Option<String>,
    /// The history, shared with the log it was derived from (cloning a request is cheap, and
    /// adapters may cache each message's encoding by identity; see `wire`).
    pub messages: MessageList,
    pub tools: Vec<ToolSchema>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    pub stop: Vec<String>,
    /// `off`, `low`, `high` or `max`; `None` uses the adapter's configured default.
    pub reasoning_effort: Option<String>,
    pub session_id: Option<String>,
    pub purpose: Option<RequestPurpose>,
}

/// What an adapter knows about one exact model id (advisory: unlisted ids are still sent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    pub context_window: u64,
    /// The `max_tokens` the adapter materializes when a request sets none.
    pub default_max_tokens: Option<u32>,
    /// Accepted reasoning efforts, in the adapter's order.
    pub efforts: Vec<String>,
    /// The effort the adapter materializes when a request sets none.
    pub default_effort: Option<String>,
    pub input_modalities: Vec<String>,
}

/// A model provider, as the agent loop sees it.
pub trait ModelAdapter: Send + Sync {
    /// The provider route id, e.g. `deepseek-official`; it becomes the `provider` of an
    /// assistant message's source.
    fn provider(&self) -> &str;

    /// One provider attempt (never retried inside). The stream ALWAYS ends with exactly one
    /// [`StreamChunk::Finish`]; every failure (HTTP status, transport, idle timeout, cancel) is
    /// a `Finish{Error|Aborted{failure}}` with the canonical code; usage (if any) comes before
    /// the finish, and nothing comes after it. Dropping the stream abandons the request.
    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ChunkStream;

    /// Exact-model facts used to materialize defaults and size the context. `None`: unknown.
    fn model_info(&self, _model: &str) -> Option<ModelInfo> {
        None
    }

    /// The retry policy the loop applies to this provider's failures.
    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy::default()
    }
}
