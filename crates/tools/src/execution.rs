//! Execution identity: the immutable facts of one call, minted once by the registry.

use dsh_sync::lock;
use std::fmt;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use dsh_kernel::Scope;
use dsh_protocol::Message;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::definition::FinalizeFn;
use crate::result::ToolResult;

/// The agent a call runs for. Implemented by the agent crate; the registry only reads its scope
/// (visibility, hook filtering, approval lookup) and hands it to bodies.
pub trait AgentHandle: Send + Sync {
    fn id(&self) -> &str;
    fn scope(&self) -> &Scope;
    /// Queues durable context for the agent's next model request without waking it.
    fn inject(&self, message: Message) -> Result<(), AgentGone>;
}

/// The agent was disposed; the injected context is dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("agent is gone")]
pub struct AgentGone;

/// An opaque, unique identity of one execution. Equality only; never serialised.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExecutionToken(u64);

impl ExecutionToken {
    fn mint() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl fmt::Debug for ExecutionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ExecutionToken(#{})", self.0)
    }
}

/// What a caller submits. Every field is consumed exactly once when the execution is created.
pub struct ToolCallInput {
    pub call_id: String,
    pub root_call_id: Option<String>,
    pub name: String,
    pub arguments: Value,
    pub agent: Option<Arc<dyn AgentHandle>>,
    pub parent: Option<ExecutionToken>,
    /// Caller-owned cancellation; required.
    pub signal: CancellationToken,
}

impl ToolCallInput {
    pub fn new(
        call_id: impl Into<String>,
        name: impl Into<String>,
        arguments: Value,
        signal: CancellationToken,
    ) -> Self {
        Self {
            call_id: call_id.into(),
            root_call_id: None,
            name: name.into(),
            arguments,
            agent: None,
            parent: None,
            signal,
        }
    }

    pub fn agent(mut self, agent: Arc<dyn AgentHandle>) -> Self {
        self.agent = Some(agent);
        self
    }

    /// Marks the call as nested inside the transport execution `parent`.
    pub fn parent(mut self, parent: ExecutionToken) -> Self {
        self.parent = Some(parent);
        self
    }

    pub fn root_call_id(mut self, root: impl Into<String>) -> Self {
        self.root_call_id = Some(root.into());
        self
    }
}

/// One execution, shared (`Arc`) by every stage: pre-execute, guards, wrappers, body,
/// post-execute, the finalizer and result observers all see this same object. Its identity
/// fields are immutable by construction; only per-call bookkeeping (deferred contexts, the
/// conclusion mark) changes.
pub struct Execution {
    token: ExecutionToken,
    call_id: String,
    root_call_id: String,
    name: String,
    arguments: Option<Arc<Value>>,
    agent: Option<Arc<dyn AgentHandle>>,
    parent: Option<ExecutionToken>,
    signal: CancellationToken,
    pub(crate) deferred: Mutex<Vec<Message>>,
    pub(crate) concluded: AtomicBool,
    pub(crate) body_invoked: AtomicBool,
    pub(crate) canonical: Mutex<Option<Arc<ToolResult>>>,
    pub(crate) finalizer: Option<FinalizeFn>,
}

impl Execution {
    pub(crate) fn new(
        input_ids: (String, Option<String>, String),
        arguments: Option<Arc<Value>>,
        agent: Option<Arc<dyn AgentHandle>>,
        parent: Option<ExecutionToken>,
        signal: CancellationToken,
        finalizer: Option<FinalizeFn>,
    ) -> Self {
        let (call_id, root_call_id, name) = input_ids;
        Self {
            token: ExecutionToken::mint(),
            root_call_id: root_call_id.unwrap_or_else(|| call_id.clone()),
            call_id,
            name,
            arguments,
            agent,
            parent,
            signal,
            deferred: Mutex::new(Vec::new()),
            concluded: AtomicBool::new(false),
            body_invoked: AtomicBool::new(false),
            canonical: Mutex::new(None),
            finalizer,
        }
    }

    pub fn token(&self) -> ExecutionToken {
        self.token
    }
    pub fn call_id(&self) -> &str {
        &self.call_id
    }
    pub fn root_call_id(&self) -> &str {
        &self.root_call_id
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The frozen arguments; `None` only when materialization failed.
    pub fn arguments(&self) -> Option<&Arc<Value>> {
        self.arguments.as_ref()
    }
    pub fn agent(&self) -> Option<&Arc<dyn AgentHandle>> {
        self.agent.as_ref()
    }
    /// The scope hooks are filtered by (the agent's scope).
    pub fn subject(&self) -> Option<&Scope> {
        self.agent.as_ref().map(|a| a.scope())
    }
    pub fn parent(&self) -> Option<ExecutionToken> {
        self.parent
    }
    /// The caller's own cancellation token (never a wrapper's replacement).
    pub fn signal(&self) -> &CancellationToken {
        &self.signal
    }
    /// Whether the body has been invoked for this execution.
    pub fn body_invoked(&self) -> bool {
        self.body_invoked.load(Ordering::Acquire)
    }

    /// Attaches context to this call's own result (injected after the `tool/result`).
    pub fn defer_context(&self, message: Message) {
        lock(&self.deferred).push(message);
    }

    /// Marks the execution: a success produced for it carries `concludesTurn: true`.
    pub fn conclude_turn(&self) {
        self.concluded.store(true, Ordering::Release);
    }

    pub(crate) fn take_deferred(&self) -> Vec<Message> {
        lock(&self.deferred).clone()
    }
}

impl Drop for Execution {
    // The last owner of deep arguments takes them apart without recursion.
    fn drop(&mut self) {
        if let Some(arguments) = self.arguments.take()
            && let Ok(value) = Arc::try_unwrap(arguments)
        {
            dsh_schema::drop_deep(value);
        }
    }
}

impl fmt::Debug for Execution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Execution")
            .field("token", &self.token)
            .field("call_id", &self.call_id)
            .field("name", &self.name)
            .field("arguments", &self.arguments)
            .field("parent", &self.parent)
            .finish_non_exhaustive()
    }
}

/// The run context a tool body receives: the shared execution plus the fused signal.
#[derive(Clone)]
pub struct ToolRun {
    exec: Arc<Execution>,
    signal: CancellationToken,
}

impl ToolRun {
    pub(crate) fn new(exec: Arc<Execution>, signal: CancellationToken) -> Self {
        Self { exec, signal }
    }
    /// The cancellation the body must honour (caller's, fused with any wrapper's).
    pub fn signal(&self) -> &CancellationToken {
        &self.signal
    }
    pub fn execution(&self) -> &Arc<Execution> {
        &self.exec
    }
    pub fn token(&self) -> ExecutionToken {
        self.exec.token
    }
    pub fn call_id(&self) -> &str {
        &self.exec.call_id
    }
    pub fn root_call_id(&self) -> &str {
        &self.exec.root_call_id
    }
    pub fn name(&self) -> &str {
        &self.exec.name
    }
    pub fn arguments(&self) -> Option<&Arc<Value>> {
        self.exec.arguments.as_ref()
    }
    pub fn agent(&self) -> Option<&Arc<dyn AgentHandle>> {
        self.exec.agent.as_ref()
    }
    pub fn parent(&self) -> Option<ExecutionToken> {
        self.exec.parent
    }
    pub fn defer_context(&self, message: Message) {
        self.exec.defer_context(message);
    }
    pub fn conclude_turn(&self) {
        self.exec.conclude_turn();
    }
}

/// The around-dispatch (`tools/execute`) payload. A wrapper may replace only the signal; the
/// execution itself is shared and immutable.
#[derive(Clone)]
pub struct Dispatch {
    exec: Arc<Execution>,
    signal: CancellationToken,
    replaced: bool,
}

impl Dispatch {
    pub(crate) fn new(exec: Arc<Execution>) -> Self {
        let signal = exec.signal.clone();
        Self {
            exec,
            signal,
            replaced: false,
        }
    }
    pub fn execution(&self) -> &Arc<Execution> {
        &self.exec
    }
    /// The signal currently installed for downstream stages.
    pub fn signal(&self) -> &CancellationToken {
        &self.signal
    }
    /// Installs a derived signal (deadline, cancellation scope) for the rest of the chain.
    pub fn set_signal(&mut self, signal: CancellationToken) {
        self.signal = signal;
        self.replaced = true;
    }
    pub(crate) fn into_parts(self) -> (Arc<Execution>, Option<CancellationToken>) {
        let replaced = self.replaced.then_some(self.signal);
        (self.exec, replaced)
    }
}
