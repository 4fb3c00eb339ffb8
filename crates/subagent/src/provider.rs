//! Providers (§1.1): named child-agent transports, and the one-shot run they hand back.

use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::AgentHandle;
use dsh_protocol::ContentBlock;
use dsh_session::Event;
use futures::FutureExt;
use futures::future::BoxFuture;
use futures::future::Shared;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::descriptor::ToolFilterSpec;
use crate::error::SubagentError;
use crate::error::code;
use crate::output::StopReason;

/// Start-time capabilities, checked by the registry before `start()`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    pub output_schema: bool,
    pub depth_limit: bool,
    pub tool_filter: bool,
    pub persona: bool,
}

impl Capabilities {
    /// What the in-process providers support.
    pub const ALL: Capabilities = Capabilities {
        output_schema: true,
        depth_limit: true,
        tool_filter: true,
        persona: true,
    };
    /// `NO_START_CAPABILITIES` of the out-of-process providers.
    pub const NONE: Capabilities = Capabilities {
        output_schema: false,
        depth_limit: false,
        tool_filter: false,
        persona: false,
    };
}

/// A route override or the inherited route (`{provider, model, maxTokens}`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentOptions {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub max_tokens: Option<u64>,
}

impl AgentOptions {
    /// `resolveChildAgentOptions`: the parent's route, then the request's overrides.
    pub fn inherit(parent: &AgentHandle, overrides: Option<&AgentOptions>) -> AgentOptions {
        let mut options = AgentOptions {
            provider: Some(parent.provider().to_owned()).filter(|p| !p.is_empty()),
            model: Some(parent.model().to_owned()).filter(|m| !m.is_empty()),
            max_tokens: parent.max_tokens(),
        };
        if let Some(overrides) = overrides {
            if overrides.provider.is_some() {
                options.provider.clone_from(&overrides.provider);
            }
            if overrides.model.is_some() {
                options.model.clone_from(&overrides.model);
            }
            if overrides.max_tokens.is_some() {
                options.max_tokens = overrides.max_tokens;
            }
        }
        options
    }
}

/// One piece of a running child's progress, for presentation only (never the model).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildProgress {
    /// The child started a tool call.
    ToolCall { id: String, title: String },
    /// The child committed an answer (or an intermediate message) with this text.
    Text(String),
}

/// Receives a child's progress: `(child id, progress)`. Called inline; must not block.
pub type ProgressFn = Arc<dyn Fn(&str, ChildProgress) + Send + Sync>;

/// A one-shot start request (`subagents.start(name, request)`).
#[derive(Clone)]
pub struct StartRequest {
    pub label: Option<String>,
    pub prompt: Vec<ContentBlock>,
    pub parent: AgentHandle,
    pub agent_options: Option<AgentOptions>,
    pub persona: Option<String>,
    pub tool_filter: Option<ToolFilterSpec>,
    pub max_depth: Option<u64>,
    pub output_schema: Option<Value>,
    pub signal: CancellationToken,
    /// Where the child's progress goes while it runs (the delegating call's live card).
    pub progress: Option<ProgressFn>,
}

impl StartRequest {
    pub fn new(parent: AgentHandle, prompt: Vec<ContentBlock>, signal: CancellationToken) -> Self {
        Self {
            label: None,
            prompt,
            parent,
            agent_options: None,
            persona: None,
            tool_filter: None,
            max_depth: None,
            output_schema: None,
            signal,
            progress: None,
        }
    }
}

/// `prepareContinuable({sessionId, parent, signal})`.
pub struct PrepareRequest {
    pub session_id: String,
    pub parent: AgentHandle,
    pub signal: CancellationToken,
}

/// What a provider contributes to a continuable child: its fork seed, if any.
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    pub seed: Option<Vec<Arc<Event>>>,
}

/// `SubagentResult`.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentResult {
    pub output: Vec<ContentBlock>,
    pub structured: Option<Value>,
    pub diagnostic: Option<String>,
    pub stop_reason: StopReason,
}

impl SubagentResult {
    pub fn new(output: Vec<ContentBlock>, stop_reason: StopReason) -> Self {
        Self {
            output,
            structured: None,
            diagnostic: None,
            stop_reason,
        }
    }
}

pub type RunResult = Result<SubagentResult, SubagentError>;
type DisposeFn = Box<dyn FnOnce() -> BoxFuture<'static, Result<(), SubagentError>> + Send>;

/// A one-shot run. Holder-owned: it must always be disposed (`dispose` is idempotent).
pub struct SubagentRun {
    /// The child's id (its session id in process; a fresh id in the parent's namespace for
    /// remote providers).
    pub id: String,
    /// Minted by the registry when the run is published (`subagent/start.runId`).
    pub run_id: String,
    pub local_agent: Option<AgentHandle>,
    result: Shared<BoxFuture<'static, RunResult>>,
    dispose: Mutex<Option<DisposeFn>>,
    disposed: Shared<BoxFuture<'static, Result<(), SubagentError>>>,
    disposed_tx: Mutex<Option<futures::channel::oneshot::Sender<Result<(), SubagentError>>>>,
}

impl std::fmt::Debug for SubagentRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentRun")
            .field("id", &self.id)
            .field("run_id", &self.run_id)
            .field("local", &self.local_agent.is_some())
            .finish_non_exhaustive()
    }
}

impl SubagentRun {
    /// `result` settles once; `dispose` runs at most once (later calls await the first).
    pub fn new(
        id: String,
        local_agent: Option<AgentHandle>,
        result: BoxFuture<'static, RunResult>,
        dispose: impl FnOnce() -> BoxFuture<'static, Result<(), SubagentError>> + Send + 'static,
    ) -> Self {
        let (tx, rx) = futures::channel::oneshot::channel();
        let disposed: BoxFuture<'static, Result<(), SubagentError>> = Box::pin(async move {
            rx.await
                .unwrap_or_else(|_| Err(SubagentError::plain("subagent run dropped")))
        });
        Self {
            id,
            run_id: String::new(),
            local_agent,
            result: result.shared(),
            dispose: Mutex::new(Some(Box::new(dispose))),
            disposed: disposed.shared(),
            disposed_tx: Mutex::new(Some(tx)),
        }
    }

    /// The run's outcome (shareable; every caller sees the same value).
    pub fn result(&self) -> Shared<BoxFuture<'static, RunResult>> {
        self.result.clone()
    }

    /// Disposes the run (idempotent in effect).
    pub async fn dispose(&self) -> Result<(), SubagentError> {
        let first = dsh_sync::lock(&self.dispose).take();
        if let Some(dispose) = first {
            let outcome = dispose().await;
            if let Some(tx) = dsh_sync::lock(&self.disposed_tx).take() {
                let _ = tx.send(outcome.clone());
            }
            return outcome;
        }
        self.disposed.clone().await
    }
}

/// A named child-agent transport.
pub trait SubagentProvider: Send + Sync + 'static {
    fn name(&self) -> &str;
    fn capabilities(&self) -> Capabilities;
    /// Descriptive only: whether the child sees the parent's completed turns.
    fn inherits_parent_context(&self) -> bool;
    /// Starts one one-shot child. A rejection means the provider already cleaned up.
    fn start(
        &self,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentRun, SubagentError>>;
    /// Whether `prepare_continuable` is implemented.
    fn supports_continuable(&self) -> bool {
        false
    }
    /// The seed of a continuable child (spawn: none; fork: the completed-turn prefix).
    fn prepare_continuable(
        &self,
        _request: PrepareRequest,
    ) -> BoxFuture<'static, Result<Prepared, SubagentError>> {
        let name = self.name().to_owned();
        Box::pin(async move {
            Err(SubagentError::coded(
                code::UNSUPPORTED_CAPABILITY,
                format!(
                    "subagent provider \"{name}\" does not support continuable children (no prepareContinuable capability)"
                ),
            ))
        })
    }
}
