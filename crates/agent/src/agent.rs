//! The agent actor (§2.1–§2.4, §2.10, §2.13): a cloneable [`AgentHandle`] over shared state.
//!
//! State sits behind a std `Mutex` held only for short, synchronous sections (never across an
//! `.await`, never while a listener runs). Inbox mutations are additionally serialised by a
//! `gate` so the durable splice and the live change happen as one step.

use dsh_sync::lock;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::Weak;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_llm::ModelAdapter;
use dsh_protocol::Message;
use dsh_session::Event;
use dsh_session::SessionLog;
use dsh_session::data::AbortReason;
use dsh_session::data::InboxTarget;
use dsh_session::kind;
use dsh_tools::AgentGone;
use dsh_tools::ToolRegistry;
use tokio::sync::broadcast;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::error::AgentError;
use crate::hooks::AgentEvent;
use crate::hooks::AgentHooks;
use crate::hooks::SessionSource;
use crate::hooks::SessionStarted;
use crate::inbox::Inbox;
use crate::prompt::PromptConfig;
use crate::prompt::PromptRegistry;
use crate::prompt::SNAPSHOT_PLUGIN;

/// Why an activity is cancelled (`{user} | {parent} | {hook, reason} | {disposed}`).
pub type CancelCause = AbortReason;

/// Default bound of the parallel tool pool.
pub const DEFAULT_MAX_PARALLEL_TOOL_CALLS: usize = 10;

/// How many tool calls of one model response run by default; the rest are answered with an
/// error. No real model asks for this many at once; a hostile or looping one could ask for
/// thousands.
pub const DEFAULT_MAX_CALLS_PER_RESPONSE: usize = 128;

/// How long one model attempt may stream by default, from the request to its finish. The idle
/// watchdog alone cannot end an answer that keeps sending keepalive comments or tiny deltas.
pub const DEFAULT_MODEL_ATTEMPT_TIMEOUT: std::time::Duration =
    std::time::Duration::from_secs(30 * 60);

/// Everything an agent is built from.
pub struct AgentConfig {
    /// The agent id; equals the session id.
    pub id: String,
    /// Working directory (the `cwd` prompt variable); defaults to the session header's.
    pub cwd: Option<String>,
    pub provider: String,
    pub model: String,
    /// Explicit `maxTokens` (positive safe integer) or `None` for the adapter default.
    pub max_tokens: Option<u64>,
    pub adapter: Arc<dyn ModelAdapter>,
    pub tools: Arc<ToolRegistry>,
    /// The parent scope; the agent makes its own Agent-kind child and disposes it at the end.
    pub scope: Scope,
    pub log: SessionLog,
    pub prompt: PromptConfig,
    pub max_parallel_tool_calls: usize,
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("id", &self.id)
            .field("provider", &self.provider)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// Public status: `running` while a driver activity is live, `idle` otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentStatus {
    Idle,
    Running,
}

#[derive(Debug)]
pub(crate) enum Phase {
    Idle,
    Running {
        abort: CancellationToken,
        cause: Option<CancelCause>,
        latch: bool,
    },
    /// Idle admission reserved by [`AgentHandle::begin_maintenance`]: public status stays idle,
    /// waking sends latch until it ends.
    Maintenance {
        abort: CancellationToken,
        latch: bool,
    },
}

impl Phase {
    pub(crate) fn aborted(&self) -> bool {
        matches!(self, Self::Running { abort, .. } if abort.is_cancelled())
    }
}

#[derive(Debug)]
pub(crate) struct State {
    pub(crate) phase: Phase,
    pub(crate) inbox: Inbox,
    pub(crate) last_turn: u64,
    /// Whether this loop instance already sent a request (the first logs `initial`/`resume`).
    pub(crate) requested: bool,
    pub(crate) disposing: bool,
    /// The id of the final input once accepted: input closes at the first idle after it
    /// left the inbox (claimed by a turn, or discarded).
    pub(crate) final_input: Option<String>,
    /// No more input (sends fail): the final task's activity has ended.
    pub(crate) input_closed: bool,
    /// Whether the log ever held a runtime-context snapshot message.
    pub(crate) snapshot_seen: bool,
}

pub(crate) struct Inner {
    pub(crate) id: String,
    pub(crate) cwd: Option<String>,
    pub(crate) provider: String,
    pub(crate) model: String,
    pub(crate) max_tokens: Option<u64>,
    pub(crate) adapter: Arc<dyn ModelAdapter>,
    pub(crate) tools: Arc<ToolRegistry>,
    pub(crate) scope: Scope,
    pub(crate) log: SessionLog,
    pub(crate) prompt: PromptConfig,
    pub(crate) prompts: Option<Arc<PromptRegistry>>,
    pub(crate) hooks: Arc<AgentHooks>,
    pub(crate) max_parallel: AtomicUsize,
    pub(crate) max_calls_per_response: AtomicUsize,
    /// [`DEFAULT_MODEL_ATTEMPT_TIMEOUT`] or the configured one, in milliseconds.
    pub(crate) attempt_timeout_ms: std::sync::atomic::AtomicU64,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) gate: Mutex<()>,
    pub(crate) state: Mutex<State>,
    pub(crate) idle: watch::Sender<bool>,
}

/// The agent factory.
#[derive(Debug)]
pub struct Agent;

impl Agent {
    /// Builds an agent over a fresh (or already populated) log. It starts idle: nothing runs
    /// until a waking send. Must be called inside a tokio runtime.
    pub fn create(config: AgentConfig) -> Result<AgentHandle, AgentError> {
        let handle = AgentHandle::build(config)?;
        handle.emit(AgentEvent::SessionStart {
            agent: handle.inner.id.clone(),
            resumed: false,
        });
        handle.started(SessionSource::Startup);
        Ok(handle)
    }

    /// The same over a loaded log: turn numbering continues, the first request logs its header
    /// with reason `resume`, and pending inbox items (spliced after the seed) are restored but
    /// not run until the next waking send.
    pub fn resume(config: AgentConfig) -> Result<AgentHandle, AgentError> {
        let handle = AgentHandle::build(config)?;
        handle.emit(AgentEvent::SessionStart {
            agent: handle.inner.id.clone(),
            resumed: true,
        });
        handle.started(SessionSource::Resume);
        Ok(handle)
    }

    /// [`Agent::create`] (or [`Agent::resume`] when `resumed`) with a `prepare` step between
    /// building the agent and announcing `agent/session-start`: a host attaches the session's
    /// services and per-session plugins to the agent's scope there, so session-start listeners
    /// already see them. If `prepare` fails the agent's scope is disposed and the error returned.
    pub fn start<E: From<AgentError>>(
        config: AgentConfig,
        resumed: bool,
        prepare: impl FnOnce(&AgentHandle) -> Result<(), E>,
    ) -> Result<AgentHandle, E> {
        let handle = AgentHandle::build(config)?;
        if let Err(error) = prepare(&handle) {
            handle.inner.scope.dispose();
            return Err(error);
        }
        handle.emit(AgentEvent::SessionStart {
            agent: handle.inner.id.clone(),
            resumed,
        });
        handle.started(if resumed {
            SessionSource::Resume
        } else {
            SessionSource::Startup
        });
        Ok(handle)
    }
}

/// The weak self-reference an agent provides on its own scope ([`AgentHandle::from_scope`]).
pub(crate) struct AgentRef(Weak<Inner>);

/// A cloneable handle to one agent; all clones address the same actor.
#[derive(Clone)]
pub struct AgentHandle {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for AgentHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentHandle")
            .field("id", &self.inner.id)
            .finish_non_exhaustive()
    }
}

/// A turn opened synchronously (turn/start written, first input claimed).
pub(crate) struct OpenedTurn {
    pub(crate) turn: u64,
    pub(crate) abort: CancellationToken,
    pub(crate) claimed: Result<Vec<Message>, AgentError>,
}

impl AgentHandle {
    fn build(config: AgentConfig) -> Result<Self, AgentError> {
        if let Some(max) = config.max_tokens
            && (max == 0 || max > (1u64 << 53) - 1)
        {
            return Err(AgentError::InvalidMaxTokens(max));
        }
        if config.max_parallel_tool_calls == 0 {
            return Err(AgentError::InvalidParallelism);
        }
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| AgentError::NoRuntime)?;
        let inbox = crate::inbox::restore_inbox(&config.log)?;
        let last_turn = config.log.turn_state().last_turn;
        let snapshot_seen = config
            .log
            .events()?
            .iter()
            .any(|e| e.kind == kind::USER_MESSAGE && is_snapshot(&e.data));
        let scope = config
            .scope
            .child(ScopeKind::Agent, format!("agent:{}", config.id))?;
        let hooks = AgentHooks::for_scope(&scope);
        let prompts = scope.service::<PromptRegistry>();
        let cwd = config.cwd.or_else(|| config.log.header().cwd.clone());
        let (idle, _) = watch::channel(true);
        let handle = Self {
            inner: Arc::new(Inner {
                id: config.id,
                cwd,
                provider: config.provider,
                model: config.model,
                max_tokens: config.max_tokens,
                adapter: config.adapter,
                tools: config.tools,
                scope,
                log: config.log,
                prompt: config.prompt,
                prompts,
                hooks,
                max_parallel: AtomicUsize::new(config.max_parallel_tool_calls),
                max_calls_per_response: AtomicUsize::new(DEFAULT_MAX_CALLS_PER_RESPONSE),
                attempt_timeout_ms: std::sync::atomic::AtomicU64::new(
                    u64::try_from(DEFAULT_MODEL_ATTEMPT_TIMEOUT.as_millis()).unwrap_or(u64::MAX),
                ),
                runtime,
                gate: Mutex::new(()),
                state: Mutex::new(State {
                    phase: Phase::Idle,
                    inbox,
                    last_turn,
                    requested: false,
                    disposing: false,
                    final_input: None,
                    input_closed: false,
                    snapshot_seen,
                }),
                idle,
            }),
        };
        // Weak, so the scope's service table does not keep the agent alive.
        handle
            .inner
            .scope
            .provide(Arc::new(AgentRef(Arc::downgrade(&handle.inner))))?;
        Ok(handle)
    }

    /// The agent whose scope is `scope` or an ancestor of it (e.g. a tool call's subject),
    /// while it lives.
    pub fn from_scope(scope: &Scope) -> Option<AgentHandle> {
        let agent = scope.nearest_agent()?;
        agent
            .service::<AgentRef>()?
            .0
            .upgrade()
            .map(|inner| AgentHandle { inner })
    }

    fn started(&self, source: SessionSource) {
        let event = SessionStarted {
            agent: self.clone(),
            source,
        };
        self.inner
            .hooks
            .session_start
            .emit(Some(&self.inner.scope), &event);
    }

    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The agent's own (Agent-kind) scope: register agent-scoped tools, hooks and sections here.
    pub fn scope(&self) -> &Scope {
        &self.inner.scope
    }

    pub fn log(&self) -> &SessionLog {
        &self.inner.log
    }

    /// The explicit `maxTokens` it was built with (`None` = adapter default).
    pub fn max_tokens(&self) -> Option<u64> {
        self.inner.max_tokens
    }

    /// `true` when both handles address the same agent.
    pub fn same(&self, other: &AgentHandle) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// `true` once disposal has begun (later sends fail).
    pub fn is_disposing(&self) -> bool {
        lock(&self.inner.state).disposing
    }

    pub fn hooks(&self) -> &Arc<AgentHooks> {
        &self.inner.hooks
    }

    /// The route of the agent options (what the first request uses unless a listener changes it).
    pub fn provider(&self) -> &str {
        &self.inner.provider
    }

    pub fn model(&self) -> &str {
        &self.inner.model
    }

    /// The adapter serving the agent's provider (side requests such as summaries use it).
    pub fn adapter(&self) -> &Arc<dyn ModelAdapter> {
        &self.inner.adapter
    }

    /// The working directory (the agent option, else the session header's).
    pub fn cwd(&self) -> Option<&str> {
        self.inner.cwd.as_deref()
    }

    /// Whether sends are accepted: not disposing and the final task (see
    /// [`AgentHandle::followup_final`]) has not finished. Producers that start work on their
    /// own (goal rounds, notices) check it so a one-shot run ends with its task.
    pub fn accepts_input(&self) -> bool {
        let state = lock(&self.inner.state);
        !state.disposing && !state.input_closed
    }

    pub fn status(&self) -> AgentStatus {
        match lock(&self.inner.state).phase {
            Phase::Idle | Phase::Maintenance { .. } => AgentStatus::Idle,
            Phase::Running { .. } => AgentStatus::Running,
        }
    }

    /// Live session events (delegates to the log).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.inner.log.subscribe()
    }

    /// Pending `(next_turn, next_step)` inbox items.
    pub fn pending(&self) -> (Vec<Message>, Vec<Message>) {
        let state = lock(&self.inner.state);
        (state.inbox.next_turn.clone(), state.inbox.next_step.clone())
    }

    /// Changes the parallel tool pool bound for later scheduling decisions.
    pub fn set_max_parallel_tool_calls(&self, max: usize) -> Result<(), AgentError> {
        if max == 0 {
            return Err(AgentError::InvalidParallelism);
        }
        self.inner.max_parallel.store(max, Ordering::Relaxed);
        Ok(())
    }

    /// Changes how many tool calls of one model response run (from the next response); the
    /// calls past it are answered with a `TOO_MANY_TOOL_CALLS` error.
    pub fn set_max_calls_per_response(&self, max: usize) -> Result<(), AgentError> {
        if max == 0 {
            return Err(AgentError::InvalidParallelism);
        }
        self.inner
            .max_calls_per_response
            .store(max, Ordering::Relaxed);
        Ok(())
    }

    /// Changes how long one model attempt may stream (from the next attempt); past it the
    /// attempt ends with [`crate::MODEL_ATTEMPT_TIMEOUT`].
    pub fn set_model_attempt_timeout(&self, timeout: std::time::Duration) {
        let ms = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        self.inner.attempt_timeout_ms.store(ms, Ordering::Relaxed);
    }

    /// `cancel(cause, {keepInbox})` (§2.10). Idle: only the inbox is cleared (unless kept).
    pub fn cancel(&self, cause: CancelCause, keep_inbox: bool) {
        if !keep_inbox {
            if let Err(error) = self.clear_inbox() {
                tracing::warn!(agent = %self.inner.id, %error, "cancel could not clear the inbox");
            }
            if let Phase::Running { latch, .. } | Phase::Maintenance { latch, .. } =
                &mut lock(&self.inner.state).phase
            {
                *latch = false;
            }
        }
        let mut state = lock(&self.inner.state);
        if let Phase::Running {
            abort,
            cause: current,
            ..
        } = &mut state.phase
        {
            // First cause wins for an activity.
            if current.is_none() {
                *current = Some(cause);
            }
            abort.cancel();
        } else if let Phase::Maintenance { abort, .. } = &state.phase {
            abort.cancel();
        }
    }

    /// Resolves once no activity is live (following replacement activities).
    pub async fn when_idle(&self) {
        let mut rx = self.inner.idle.subscribe();
        // The sender lives in `inner`, which `self` keeps alive: this cannot be closed.
        let _ = rx.wait_for(|idle| *idle).await;
    }

    /// Disposal (memoized): cancel `disposed` → wait for idle → unwind the agent scope →
    /// `AgentEvent::Disposed`. Queued work never starts; later sends fail.
    pub async fn dispose(&self) {
        let first = {
            let mut state = lock(&self.inner.state);
            !std::mem::replace(&mut state.disposing, true)
        };
        if first {
            self.cancel(AbortReason::Disposed, false);
        }
        self.when_idle().await;
        if first {
            self.inner.scope.dispose();
            self.emit(AgentEvent::Disposed {
                agent: self.inner.id.clone(),
            });
        }
    }

    pub(crate) fn emit(&self, event: AgentEvent) {
        self.inner
            .hooks
            .events
            .emit(Some(&self.inner.scope), &event);
    }

    /// The cause of the current activity's abort (`user` if none was recorded).
    pub(crate) fn abort_cause(&self) -> CancelCause {
        match &lock(&self.inner.state).phase {
            Phase::Running {
                cause: Some(cause), ..
            } => cause.clone(),
            Phase::Running { .. } | Phase::Idle | Phase::Maintenance { .. } => AbortReason::User,
        }
    }

    /// Idle → running and start a driver; running-but-aborted → latch the wake.
    pub(crate) fn wake(&self) {
        let start = {
            let mut state = lock(&self.inner.state);
            let disposing = state.disposing || state.input_closed;
            match &mut state.phase {
                Phase::Idle if !disposing => {
                    state.phase = Phase::Running {
                        abort: CancellationToken::new(),
                        cause: None,
                        latch: false,
                    };
                    true
                }
                Phase::Idle => false,
                Phase::Maintenance { latch, .. } => {
                    if !disposing {
                        *latch = true;
                    }
                    false
                }
                Phase::Running {
                    abort,
                    cause,
                    latch,
                } => {
                    if abort.is_cancelled() && *cause != Some(AbortReason::Disposed) {
                        *latch = true;
                    }
                    false
                }
            }
        };
        if start {
            self.inner.idle.send_replace(false);
            self.emit(AgentEvent::Status {
                agent: self.inner.id.clone(),
                status: AgentStatus::Running,
            });
            let first = self.open_turn();
            let this = self.clone();
            self.inner
                .runtime
                .spawn(async move { this.drive(first).await });
        }
    }

    /// The synchronous head of a turn: abort check, `turn/start`, first claim.
    pub(crate) fn open_turn(&self) -> Option<OpenedTurn> {
        let (abort, turn) = {
            let state = lock(&self.inner.state);
            match &state.phase {
                Phase::Running { abort, .. } if !abort.is_cancelled() => {
                    (abort.clone(), state.last_turn + 1)
                }
                Phase::Running { .. } | Phase::Idle | Phase::Maintenance { .. } => return None,
            }
        };
        if let Err(error) = self
            .inner
            .log
            .append_data(&dsh_session::data::TurnStart { turn }, None)
        {
            tracing::error!(agent = %self.inner.id, %error, "cannot open a turn");
            return None;
        }
        lock(&self.inner.state).last_turn = turn;
        let claimed = self.claim(InboxTarget::NextTurn, turn);
        Some(OpenedTurn {
            turn,
            abort,
            claimed,
        })
    }

    /// The end of a turn, decided atomically with the inbox check so a send racing the end
    /// of an activity is never stranded: continue with a fresh token when the turn ended
    /// normally (`more`) and work is pending, or when a latched wake has pending work;
    /// otherwise go idle. Returns whether another turn should open.
    pub(crate) fn finish_turn(&self, more: bool) -> bool {
        let next = {
            let mut state = lock(&self.inner.state);
            let pending = !state.inbox.is_empty();
            let disposing = state.disposing;
            let latched = matches!(&state.phase, Phase::Running { latch: true, cause, .. } if *cause != Some(AbortReason::Disposed));
            if pending && !disposing && (more || latched) {
                state.phase = Phase::Running {
                    abort: CancellationToken::new(),
                    cause: None,
                    latch: false,
                };
                true
            } else {
                state.phase = Phase::Idle;
                // Closed before anyone hears of the idle: a listener reacting to it (a goal
                // round, a background-job notice) finds the agent closed, never half-started.
                if let Some(id) = &state.final_input {
                    state.input_closed |= !state.inbox.contains_id(id);
                }
                false
            }
        };
        if !next {
            self.emit(AgentEvent::Status {
                agent: self.inner.id.clone(),
                status: AgentStatus::Idle,
            });
            // Decided under the lock: a send that woke the agent, or a maintenance phase begun,
            // since the phase went idle (from a status listener or another thread) must not be
            // reported idle.
            let state = lock(&self.inner.state);
            if matches!(state.phase, Phase::Idle) {
                self.inner.idle.send_replace(true);
            }
        }
        next
    }

    /// `true` when the retained runtime-context snapshot source was ever logged.
    pub(crate) fn snapshot_ever_logged(&self) -> bool {
        lock(&self.inner.state).snapshot_seen
    }

    /// Records that a runtime-context snapshot was entered (so emptying contexts later yields
    /// the "none" marker).
    pub(crate) fn note_entered(&self, message: &Message) {
        if is_snapshot_source(&message.source) {
            lock(&self.inner.state).snapshot_seen = true;
        }
    }
}

/// `true` for a message source of the system-prompt snapshot plugin.
pub(crate) fn is_snapshot_source(source: &dsh_protocol::MessageSource) -> bool {
    source.kind() == "plugin"
        && source.get("plugin").and_then(serde_json::Value::as_str) == Some(SNAPSHOT_PLUGIN)
}

/// `true` for a `user/message` data value whose source is the system-prompt snapshot plugin.
fn is_snapshot(data: &serde_json::Value) -> bool {
    data.get("source")
        .and_then(|s| s.get("plugin"))
        .and_then(serde_json::Value::as_str)
        == Some(SNAPSHOT_PLUGIN)
        && data
            .get("source")
            .and_then(|s| s.get("kind"))
            .and_then(serde_json::Value::as_str)
            == Some("plugin")
}

impl dsh_tools::AgentHandle for AgentHandle {
    fn id(&self) -> &str {
        &self.inner.id
    }

    fn scope(&self) -> &Scope {
        &self.inner.scope
    }

    fn inject(&self, message: Message) -> Result<(), AgentGone> {
        AgentHandle::inject(self, message).map_err(|_| AgentGone)
    }
}
