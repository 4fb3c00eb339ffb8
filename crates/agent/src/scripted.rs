//! A scripted in-process model (§6.1 `MockAdapter`) for driving the real loop in tests: a queue
//! of responses yielded as stream chunks, recording every request it receives.

use dsh_sync::lock;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use dsh_llm::ChunkStream;
use dsh_llm::ModelAdapter;
use dsh_llm::ModelInfo;
use dsh_llm::ModelRequest;
use dsh_llm::RetryPolicy;
use dsh_protocol::ContentBlock;
use dsh_protocol::FinishReason;
use dsh_protocol::LlmFailure;
use dsh_protocol::StreamChunk;
use dsh_protocol::TokenUsage;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

/// The message of the failure a drained script produces.
pub const SCRIPT_EXHAUSTED: &str = "MockAdapter: script exhausted";

type Compute = Arc<dyn Fn(&ModelRequest) -> Vec<StreamChunk> + Send + Sync>;

/// One scripted provider attempt.
#[derive(Clone)]
pub enum Script {
    /// Yielded in order; a cancel between chunks ends the stream with an `aborted` finish.
    Chunks(Vec<StreamChunk>),
    /// Computed from the request.
    Computed(Compute),
    /// `block-start(text,0)`, `text-delta "partial"`, then waits for the cancel.
    Hang,
    /// The given chunks, then waits for the cancel.
    HangAfter(Vec<StreamChunk>),
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Chunks(chunks) => f.debug_tuple("Chunks").field(chunks).finish(),
            Self::Computed(_) => f.write_str("Computed(..)"),
            Self::Hang => f.write_str("Hang"),
            Self::HangAfter(chunks) => f.debug_tuple("HangAfter").field(chunks).finish(),
        }
    }
}

/// A [`ModelAdapter`] that plays a script. Cheap to share (`Arc`); tests keep a clone to push
/// responses and read [`ScriptedAdapter::requests`].
pub struct ScriptedAdapter {
    provider: String,
    script: Mutex<VecDeque<Script>>,
    requests: Mutex<Vec<ModelRequest>>,
    model_info: Mutex<Option<ModelInfo>>,
    retry_policy: Mutex<RetryPolicy>,
    chunk_delay: Mutex<Option<Duration>>,
}

impl std::fmt::Debug for ScriptedAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedAdapter")
            .field("provider", &self.provider)
            .finish_non_exhaustive()
    }
}

impl ScriptedAdapter {
    /// An adapter for the provider route `provider` with an empty script.
    pub fn new(provider: impl Into<String>) -> Arc<Self> {
        Arc::new(Self {
            provider: provider.into(),
            script: Mutex::new(VecDeque::new()),
            requests: Mutex::new(Vec::new()),
            model_info: Mutex::new(None),
            retry_policy: Mutex::new(RetryPolicy::default()),
            chunk_delay: Mutex::new(None),
        })
    }

    /// Appends one scripted attempt.
    pub fn push(&self, script: Script) {
        lock(&self.script).push_back(script);
    }

    /// Appends a plain chunk list.
    pub fn push_chunks(&self, chunks: Vec<StreamChunk>) {
        self.push(Script::Chunks(chunks));
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        lock(&self.requests).clone()
    }

    /// Number of script entries not consumed yet.
    pub fn remaining(&self) -> usize {
        lock(&self.script).len()
    }

    /// Advertises exact-model facts (materialized defaults, efforts, context window).
    pub fn set_model_info(&self, info: Option<ModelInfo>) {
        *lock(&self.model_info) = info;
    }

    pub fn set_retry_policy(&self, policy: RetryPolicy) {
        *lock(&self.retry_policy) = policy;
    }

    /// Sleeps this long before each chunk (lets tests cancel mid-stream deterministically).
    pub fn set_chunk_delay(&self, delay: Option<Duration>) {
        *lock(&self.chunk_delay) = delay;
    }
}

impl ModelAdapter for ScriptedAdapter {
    fn provider(&self) -> &str {
        &self.provider
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ChunkStream {
        let entry = lock(&self.script).pop_front();
        let (chunks, hang) = match entry {
            Some(Script::Chunks(chunks)) => (chunks, false),
            Some(Script::Computed(compute)) => (compute(&request), false),
            Some(Script::Hang) => (
                vec![
                    StreamChunk::BlockStart {
                        index: 0,
                        block_type: "text".into(),
                    },
                    StreamChunk::TextDelta {
                        index: 0,
                        text: "partial".into(),
                    },
                ],
                true,
            ),
            Some(Script::HangAfter(chunks)) => (chunks, true),
            None => (
                error_response(LlmFailure::new("UNKNOWN", SCRIPT_EXHAUSTED)),
                false,
            ),
        };
        lock(&self.requests).push(request);
        let delay = *lock(&self.chunk_delay);
        let state = (VecDeque::from(chunks), cancel, hang, false);
        futures::stream::unfold(state, move |(mut chunks, cancel, hang, done)| async move {
            if done {
                return None;
            }
            if let Some(delay) = delay {
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = cancel.cancelled() => {}
                }
            } else {
                tokio::task::yield_now().await;
            }
            if cancel.is_cancelled() {
                return Some((aborted_finish(), (chunks, cancel, hang, true)));
            }
            match chunks.pop_front() {
                Some(chunk) => {
                    let finished = matches!(chunk, StreamChunk::Finish { .. });
                    Some((chunk, (chunks, cancel, hang, finished)))
                }
                None if hang => {
                    cancel.cancelled().await;
                    Some((aborted_finish(), (chunks, cancel, hang, true)))
                }
                // A script without a finish still honours the adapter contract.
                None => Some((
                    StreamChunk::Finish {
                        reason: FinishReason::Stop,
                        replay_state: None,
                    },
                    (chunks, cancel, hang, true),
                )),
            }
        })
        .boxed()
    }

    fn model_info(&self, _model: &str) -> Option<ModelInfo> {
        lock(&self.model_info).clone()
    }

    fn retry_policy(&self) -> RetryPolicy {
        lock(&self.retry_policy).clone()
    }
}

fn aborted_finish() -> StreamChunk {
    StreamChunk::Finish {
        reason: FinishReason::Aborted {
            failure: LlmFailure::new("ABORTED", "request aborted"),
        },
        replay_state: None,
    }
}

fn text_chunks(index: u32, text: &str) -> Vec<StreamChunk> {
    let mut chunks = vec![StreamChunk::BlockStart {
        index,
        block_type: "text".into(),
    }];
    chunks.extend(text.chars().map(|c| StreamChunk::TextDelta {
        index,
        text: c.to_string(),
    }));
    chunks.push(StreamChunk::BlockEnd {
        index,
        block: ContentBlock::text(text),
    });
    chunks
}

fn usage(input: u64, output: u64) -> StreamChunk {
    StreamChunk::Usage {
        usage: TokenUsage {
            input_tokens: input,
            output_tokens: output,
            ..TokenUsage::default()
        },
    }
}

fn finish(reason: FinishReason) -> StreamChunk {
    StreamChunk::Finish {
        reason,
        replay_state: None,
    }
}

/// `textResponse(text)`: one delta per character, usage `{10, len}`, finish `stop`.
pub fn text_response(text: &str) -> Vec<StreamChunk> {
    let mut chunks = text_chunks(0, text);
    chunks.push(usage(10, text.chars().count() as u64));
    chunks.push(finish(FinishReason::Stop));
    chunks
}

/// `maxTokensResponse(text)`: as [`text_response`] with finish `max-tokens`.
pub fn max_tokens_response(text: &str) -> Vec<StreamChunk> {
    let mut chunks = text_chunks(0, text);
    chunks.push(usage(10, text.chars().count() as u64));
    chunks.push(finish(FinishReason::MaxTokens));
    chunks
}

/// `toolCallResponse(id, name, args, text?)`.
pub fn tool_call_response(
    id: &str,
    name: &str,
    arguments: &str,
    text: Option<&str>,
) -> Vec<StreamChunk> {
    let mut chunks = Vec::new();
    let mut index = 0;
    if let Some(text) = text {
        chunks.extend(text_chunks(0, text));
        index = 1;
    }
    chunks.extend(tool_call_chunks(index, id, name, arguments));
    chunks.push(usage(10, 5));
    chunks.push(finish(FinishReason::ToolCalls));
    chunks
}

/// Several tool calls in one response, in the given order.
pub fn tool_calls_response(calls: &[(&str, &str, &str)]) -> Vec<StreamChunk> {
    let mut chunks = Vec::new();
    for (index, (id, name, arguments)) in calls.iter().enumerate() {
        chunks.extend(tool_call_chunks(index as u32, id, name, arguments));
    }
    chunks.push(usage(10, 5));
    chunks.push(finish(FinishReason::ToolCalls));
    chunks
}

/// A response whose only chunk is an error finish.
pub fn error_response(failure: LlmFailure) -> Vec<StreamChunk> {
    vec![finish(FinishReason::Error { failure })]
}

/// Arguments split after 5 characters across two deltas (name only on the first).
fn tool_call_chunks(index: u32, id: &str, name: &str, arguments: &str) -> Vec<StreamChunk> {
    let split = arguments
        .char_indices()
        .nth(5)
        .map_or(arguments.len(), |(i, _)| i);
    vec![
        StreamChunk::BlockStart {
            index,
            block_type: "tool-call".into(),
        },
        StreamChunk::ToolCallDelta {
            index,
            id: id.into(),
            name: Some(name.into()),
            arguments_delta: arguments[..split].into(),
        },
        StreamChunk::ToolCallDelta {
            index,
            id: id.into(),
            name: None,
            arguments_delta: arguments[split..].into(),
        },
        StreamChunk::BlockEnd {
            index,
            block: ContentBlock::ToolCall {
                id: id.into(),
                name: name.into(),
                arguments: arguments.into(),
            },
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    async fn collect(adapter: &ScriptedAdapter, cancel: CancellationToken) -> Vec<StreamChunk> {
        adapter
            .stream(
                ModelRequest {
                    model: "m".into(),
                    ..ModelRequest::default()
                },
                cancel,
            )
            .collect()
            .await
    }

    #[tokio::test]
    async fn scripts_play_in_order_and_record_requests() {
        let adapter = ScriptedAdapter::new("mock");
        adapter.push_chunks(text_response("hi"));
        let chunks = collect(&adapter, CancellationToken::new()).await;
        assert_eq!(chunks.len(), 6);
        assert_eq!(
            chunks[1],
            StreamChunk::TextDelta {
                index: 0,
                text: "h".into()
            }
        );
        assert_eq!(adapter.requests()[0].model, "m");
        let drained = collect(&adapter, CancellationToken::new()).await;
        assert_eq!(
            drained,
            error_response(LlmFailure::new("UNKNOWN", SCRIPT_EXHAUSTED))
        );
    }

    #[tokio::test]
    async fn a_hang_ends_with_an_aborted_finish_once_cancelled() {
        let adapter = ScriptedAdapter::new("mock");
        adapter.push(Script::Hang);
        let cancel = CancellationToken::new();
        let mut stream = adapter.stream(ModelRequest::default(), cancel.clone());
        assert!(matches!(
            stream.next().await,
            Some(StreamChunk::BlockStart { .. })
        ));
        assert!(matches!(
            stream.next().await,
            Some(StreamChunk::TextDelta { .. })
        ));
        cancel.cancel();
        assert_eq!(stream.next().await, Some(aborted_finish()));
        assert_eq!(stream.next().await, None);
    }

    #[test]
    fn tool_call_arguments_split_after_five_characters() {
        let chunks = tool_call_response("c1", "bash", r#"{"command":"ls"}"#, None);
        assert_eq!(
            chunks[1],
            StreamChunk::ToolCallDelta {
                index: 0,
                id: "c1".into(),
                name: Some("bash".into()),
                arguments_delta: r#"{"com"#.into()
            }
        );
        assert_eq!(chunks.last(), Some(&finish(FinishReason::ToolCalls)));
    }
}
