//! The loop's extension points (§2.12): the `agent/*` waterfalls, the `agent/turn-stopping`
//! serial hook and the observe-only notifications.
//!
//! One [`AgentHooks`] is shared by every agent of a composition (a kernel service); listeners
//! registered from an agent's scope see only that agent's dispatches (kernel filtering).

use std::sync::Arc;

use dsh_kernel::HookError;
use dsh_kernel::KernelError;
use dsh_kernel::Observe;
use dsh_kernel::Scope;
use dsh_kernel::Serial;
use dsh_kernel::Waterfall;
use dsh_llm::RetryPolicy;
use dsh_protocol::LlmFailure;
use dsh_protocol::Message;
use tokio_util::sync::CancellationToken;

use crate::agent::AgentHandle;
use crate::agent::AgentStatus;

/// The call config of one request (`LlmCallConfig`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallConfig {
    pub provider: String,
    pub model: String,
    pub reasoning_effort: Option<String>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u64>,
    pub stop: Option<Vec<String>>,
}

/// `agent/pre-step` payload: the claimed batch of a proposed step.
pub struct PreStepInput {
    pub agent: AgentHandle,
    /// Claimed messages followed by the runtime-context snapshot, when one is due.
    pub messages: Vec<Message>,
    pub turn: u64,
    pub step: u64,
    pub signal: CancellationToken,
}

/// What `agent/pre-step` decides. The built-in default enters the claimed batch.
#[derive(Debug, Clone, PartialEq)]
pub enum PreStepDecision {
    /// Run the step with these messages entered (possibly rewritten, added, or none).
    Enter(Vec<Message>),
    /// End the turn `blocked` without a step.
    Reject,
}

/// `agent/request` payload; listeners return a replacement config to switch route or sampling.
pub struct RequestInput {
    pub agent: AgentHandle,
    pub turn: u64,
    pub step: u64,
    /// The seed config (the base returns it unchanged).
    pub config: CallConfig,
    pub signal: CancellationToken,
}

/// `agent/request-error` payload. The base is the normal-mode retry executor (§3.5).
pub struct RequestErrorInput {
    pub agent: AgentHandle,
    pub turn: u64,
    pub step: u64,
    pub provider: String,
    pub failure: LlmFailure,
    /// `None` for an unprepared route (no adapter): the executor then never retries.
    pub retry_policy: Option<RetryPolicy>,
    pub signal: CancellationToken,
}

/// What a recovery listener may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// A new attempt in the same turn and step.
    Retry,
}

/// `agent/turn-stopping` payload (serial; a listener wanting more work calls `steer`).
pub struct TurnStopping {
    pub agent: AgentHandle,
    pub turn: u64,
    pub signal: CancellationToken,
}

/// Observe-only notifications (`agent/status`, `agent/inbox/*`, `agent/error`, `agent/disposed`).
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// `agent/session-start`: right after creation (`resumed` for [`crate::Agent::resume`]).
    /// Listeners may `inject()` context here to seed the first request.
    SessionStart {
        agent: String,
        resumed: bool,
    },
    Status {
        agent: String,
        status: AgentStatus,
    },
    InboxInserted {
        agent: String,
        message: Message,
    },
    InboxClaimed {
        agent: String,
        message: Message,
        turn: u64,
    },
    InboxDiscarded {
        agent: String,
        message: Message,
    },
    Error {
        agent: String,
        turn: u64,
        step: u64,
        error: LlmFailure,
    },
    Disposed {
        agent: String,
    },
}

/// Where a session came from, for `agent/session-start` listeners (hook matchers use
/// [`SessionSource::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionSource {
    Startup,
    Resume,
}

impl SessionSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Startup => "startup",
            Self::Resume => "resume",
        }
    }
}

/// `agent/session-start` with the live agent, so listeners can `inject` or keep per-agent
/// state (emitted right after [`AgentEvent::SessionStart`], same subject).
pub struct SessionStarted {
    pub agent: AgentHandle,
    pub source: SessionSource,
}

pub type PreStepHook = Waterfall<PreStepInput, Result<PreStepDecision, HookError>>;
pub type RequestHook = Waterfall<RequestInput, Result<CallConfig, HookError>>;
pub type RequestErrorHook = Waterfall<RequestErrorInput, Result<Option<Recovery>, HookError>>;
pub type TurnStoppingHook = Serial<TurnStopping>;
pub type AgentEventHook = Observe<AgentEvent>;
pub type SessionStartHook = Observe<SessionStarted>;

/// The hook set of the agent loop.
pub struct AgentHooks {
    pub pre_step: PreStepHook,
    pub request: RequestHook,
    pub request_error: RequestErrorHook,
    pub turn_stopping: TurnStoppingHook,
    pub events: AgentEventHook,
    pub session_start: SessionStartHook,
}

impl Default for AgentHooks {
    fn default() -> Self {
        Self {
            pre_step: Waterfall::new("agent/pre-step"),
            request: Waterfall::new("agent/request"),
            request_error: Waterfall::new("agent/request-error"),
            turn_stopping: Serial::new("agent/turn-stopping"),
            events: Observe::new("agent/event"),
            session_start: Observe::new("agent/session-start"),
        }
    }
}

impl std::fmt::Debug for AgentHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentHooks").finish_non_exhaustive()
    }
}

impl AgentHooks {
    /// Provides a fresh hook set as a kernel service of `scope`.
    pub fn install(scope: &Scope) -> Result<Arc<Self>, KernelError> {
        let hooks = Arc::new(Self::default());
        scope.provide(hooks.clone())?;
        Ok(hooks)
    }

    /// The hook set visible from `scope`, or a private empty one when none is installed.
    pub fn for_scope(scope: &Scope) -> Arc<Self> {
        scope.service::<Self>().unwrap_or_default()
    }
}
