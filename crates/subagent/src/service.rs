//! The `subagents` service (§1.2): the provider registry, one-shot `start`, the lifecycle
//! events, and the continuable-setup contributions. The continuable operations live in
//! `continuation.rs` on the same type.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::Weak;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use dsh_agent::AgentHandle;
use dsh_kernel::Disposer;
use dsh_kernel::KernelError;
use dsh_kernel::Observe;
use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_protocol::ContentBlock;
use indexmap::IndexMap;

use crate::continuation::Manager;
use crate::error::MountError;
use crate::error::SubagentError;
use crate::error::code;
use crate::output::StopReason;
use crate::provider::StartRequest;
use crate::provider::SubagentProvider;
use crate::provider::SubagentRun;
use crate::runtime::ChildRuntime;

/// Identity of one published run (one-shot run or continuable epoch).
#[derive(Clone)]
pub struct RunInfo {
    pub run_id: String,
    pub provider: String,
    /// The child's id.
    pub id: String,
    pub local: bool,
    /// The delegating parent's id.
    pub parent_id: String,
    /// The live child agent (in-process runs), resolvable while `subagent/start` is handled.
    pub child: Option<AgentHandle>,
}

impl std::fmt::Debug for RunInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunInfo")
            .field("run_id", &self.run_id)
            .field("provider", &self.provider)
            .field("id", &self.id)
            .field("local", &self.local)
            .field("parent_id", &self.parent_id)
            .finish_non_exhaustive()
    }
}

/// The live `subagent/*` events (§5.1). Not persisted. `Start`/`End` are dispatched with the
/// delegating parent's agent scope as subject, so a parent-scoped listener sees only its own
/// children.
#[derive(Debug, Clone)]
pub enum SubagentEvent {
    ProviderAdded {
        name: String,
    },
    ProviderRemoved {
        name: String,
    },
    Start(RunInfo),
    End {
        info: RunInfo,
        stop_reason: StopReason,
        /// Absent when the child produced no output.
        last_assistant_message: Option<Vec<ContentBlock>>,
    },
}

impl SubagentEvent {
    pub fn name(&self) -> &'static str {
        match self {
            Self::ProviderAdded { .. } => "subagent/provider-added",
            Self::ProviderRemoved { .. } => "subagent/provider-removed",
            Self::Start(_) => "subagent/start",
            Self::End { .. } => "subagent/end",
        }
    }
}

/// A provider change, delivered synchronously to registry listeners (tool mounts). An `Err`
/// from an `Added` listener rolls the registration back.
pub enum ProviderChange<'a> {
    Added(&'a Arc<dyn SubagentProvider>),
    Removed(&'a str),
}

type ProviderListener = Arc<dyn Fn(&ProviderChange<'_>) -> Result<(), MountError> + Send + Sync>;

/// A contribution run on every continuable child's scope after composition (e.g. `report`).
/// It receives a sub-scope of the child's agent scope; removing the contribution disposes
/// those sub-scopes, revoking it from resident children at once.
pub type ContinuableSetupFn =
    Arc<dyn Fn(&AgentHandle, &Scope) -> Result<(), SubagentError> + Send + Sync>;

pub(crate) struct SetupEntry {
    id: u64,
    pub(crate) setup: ContinuableSetupFn,
    pub(crate) installed: Arc<Mutex<Vec<Scope>>>,
}

fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The service. One per host, shared as `Arc<Subagents>`.
pub struct Subagents {
    pub(crate) me: Weak<Subagents>,
    pub(crate) runtime: Arc<ChildRuntime>,
    providers: Mutex<IndexMap<String, Arc<dyn SubagentProvider>>>,
    listeners: Mutex<Vec<(u64, ProviderListener)>>,
    events: Observe<SubagentEvent>,
    pub(crate) setups: Mutex<Vec<SetupEntry>>,
    pub(crate) manager: Option<Manager>,
}

impl std::fmt::Debug for Subagents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subagents")
            .field("providers", &self.provider_names())
            .finish_non_exhaustive()
    }
}

impl Subagents {
    /// The service over `runtime`. The continuable operations exist because the agent
    /// directory always does; starting a child still needs the host's persistence.
    pub fn new(runtime: Arc<ChildRuntime>) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            manager: Some(Manager::default()),
            runtime,
            providers: Mutex::default(),
            listeners: Mutex::default(),
            events: Observe::new("subagent/event"),
            setups: Mutex::default(),
        })
    }

    /// Provides the service (and its agent directory) on `scope`. Disposing `scope` cancels
    /// every live child.
    pub fn install(scope: &Scope, runtime: Arc<ChildRuntime>) -> Result<Arc<Self>, KernelError> {
        let directory = runtime.directory.clone();
        let service = Self::new(runtime);
        scope.provide(service.clone())?;
        scope.provide::<dyn dsh_plugin::DelegatedChildren>(service.clone())?;
        scope.provide(directory.clone())?;
        scope.provide::<dyn dsh_user_questions::AgentDirectory>(directory)?;
        if let Some(projections) = scope.service::<crate::listing::SessionProjections>() {
            projections.register_unit("subagent", 2);
            projections.register_unit("subagentTiming", 2);
        }
        let weak = Arc::downgrade(&service);
        scope.defer(move || {
            if let Some(service) = weak.upgrade() {
                service.cancel_all();
            }
        });
        Ok(service)
    }

    pub fn runtime(&self) -> &Arc<ChildRuntime> {
        &self.runtime
    }

    /// The lifecycle events (observe-only; each listener is contained).
    pub fn events(&self) -> &Observe<SubagentEvent> {
        &self.events
    }

    pub(crate) fn emit(&self, subject: Option<&Scope>, event: &SubagentEvent) {
        self.events.emit(subject, event);
    }

    /// `registerProvider(p)`; the returned disposer (also owned by `scope`) removes it.
    /// Removing a provider blocks new starts; accepted runs continue.
    pub fn register_provider(
        &self,
        scope: &Scope,
        provider: Arc<dyn SubagentProvider>,
    ) -> Result<Disposer, SubagentError> {
        let name = provider.name().to_owned();
        {
            let mut providers = dsh_sync::lock(&self.providers);
            if providers.contains_key(&name) {
                return Err(SubagentError::coded(
                    code::DUPLICATE_PROVIDER,
                    format!("a subagent provider named \"{name}\" is already registered"),
                ));
            }
            providers.insert(name.clone(), provider.clone());
        }
        let listeners: Vec<ProviderListener> = dsh_sync::lock(&self.listeners)
            .iter()
            .map(|(_, l)| l.clone())
            .collect();
        for listener in listeners {
            if let Err(error) = listener(&ProviderChange::Added(&provider)) {
                dsh_sync::lock(&self.providers).shift_remove(&name);
                self.notify_removed(&name);
                return Err(SubagentError::plain(error.to_string()));
            }
        }
        self.emit(None, &SubagentEvent::ProviderAdded { name: name.clone() });
        let me = self.me.clone();
        Ok(scope.defer(move || {
            if let Some(me) = me.upgrade() {
                let removed = {
                    let mut providers = dsh_sync::lock(&me.providers);
                    let same = providers
                        .get(&name)
                        .is_some_and(|p| Arc::ptr_eq(p, &provider));
                    same && providers.shift_remove(&name).is_some()
                };
                if removed {
                    me.notify_removed(&name);
                    me.emit(None, &SubagentEvent::ProviderRemoved { name: name.clone() });
                }
            }
        }))
    }

    fn notify_removed(&self, name: &str) {
        let listeners: Vec<ProviderListener> = dsh_sync::lock(&self.listeners)
            .iter()
            .map(|(_, l)| l.clone())
            .collect();
        for listener in listeners {
            if let Err(error) = listener(&ProviderChange::Removed(name)) {
                tracing::warn!(provider = name, "provider-removed listener failed: {error}");
            }
        }
    }

    /// Registers a synchronous provider listener owned by `scope`.
    pub fn on_provider_change(
        &self,
        scope: &Scope,
        listener: impl Fn(&ProviderChange<'_>) -> Result<(), MountError> + Send + Sync + 'static,
    ) -> Disposer {
        let id = next_id();
        dsh_sync::lock(&self.listeners).push((id, Arc::new(listener)));
        let me = self.me.clone();
        scope.defer(move || {
            if let Some(me) = me.upgrade() {
                dsh_sync::lock(&me.listeners).retain(|(entry, _)| *entry != id);
            }
        })
    }

    pub fn provider(&self, name: &str) -> Option<Arc<dyn SubagentProvider>> {
        dsh_sync::lock(&self.providers).get(name).cloned()
    }

    /// Providers in insertion order.
    pub fn list(&self) -> Vec<Arc<dyn SubagentProvider>> {
        dsh_sync::lock(&self.providers).values().cloned().collect()
    }

    fn provider_names(&self) -> Vec<String> {
        dsh_sync::lock(&self.providers).keys().cloned().collect()
    }

    /// Steps 1–4 of `start`: the provider, its capabilities, `maxDepth`, the output schema.
    pub(crate) fn admit(
        &self,
        name: &str,
        request: &StartRequest,
    ) -> Result<Arc<dyn SubagentProvider>, SubagentError> {
        let provider = self.provider(name).ok_or_else(|| {
            SubagentError::coded(
                code::NO_PROVIDER,
                format!("no subagent provider registered for \"{name}\""),
            )
        })?;
        let caps = provider.capabilities();
        let needs = [
            (
                "outputSchema",
                request.output_schema.is_some(),
                caps.output_schema,
            ),
            ("depthLimit", request.max_depth.is_some(), caps.depth_limit),
            (
                "toolFilter",
                request.tool_filter.is_some(),
                caps.tool_filter,
            ),
            ("persona", request.persona.is_some(), caps.persona),
        ];
        if let Some((cap, _, _)) = needs.iter().find(|(_, wanted, has)| *wanted && !*has) {
            return Err(SubagentError::coded(
                code::UNSUPPORTED_CAPABILITY,
                format!("subagent provider \"{name}\" does not support the \"{cap}\" capability"),
            ));
        }
        crate::depth::check_max_depth(request.max_depth)?;
        if let Some(schema) = &request.output_schema {
            dsh_schema::assert_object_schema(schema)
                .map_err(|e| SubagentError::classed("TypeError", e.to_string()))?;
        }
        Ok(provider)
    }

    /// `subagents.start(name, request)`: a one-shot run, published with `subagent/start`;
    /// `subagent/end` follows when its result settles.
    pub async fn start(
        &self,
        name: &str,
        request: StartRequest,
    ) -> Result<SubagentRun, SubagentError> {
        let provider = self.admit(name, &request)?;
        let parent = request.parent.clone();
        let mut run = provider.start(request).await?;
        run.run_id = uuid::Uuid::new_v4().to_string();
        let info = RunInfo {
            run_id: run.run_id.clone(),
            provider: name.to_owned(),
            id: run.id.clone(),
            local: run.local_agent.is_some(),
            parent_id: parent.id().to_owned(),
            child: run.local_agent.clone(),
        };
        let result = run.result();
        self.emit(Some(parent.scope()), &SubagentEvent::Start(info.clone()));
        let me = self.me.clone();
        tokio::spawn(async move {
            let (stop_reason, last) = match result.await {
                Ok(result) => (
                    result.stop_reason,
                    (!result.output.is_empty()).then_some(result.output),
                ),
                Err(_) => (StopReason::Error, None),
            };
            if let Some(me) = me.upgrade() {
                let mut info = info;
                info.child = None;
                me.emit(
                    Some(parent.scope()),
                    &SubagentEvent::End {
                        info,
                        stop_reason,
                        last_assistant_message: last,
                    },
                );
            }
        });
        Ok(run)
    }

    /// `registerContinuableSetup(f)`: run on every later continuable child.
    pub fn register_continuable_setup(&self, scope: &Scope, setup: ContinuableSetupFn) -> Disposer {
        let id = next_id();
        let installed: Arc<Mutex<Vec<Scope>>> = Arc::default();
        dsh_sync::lock(&self.setups).push(SetupEntry {
            id,
            setup,
            installed: installed.clone(),
        });
        let me = self.me.clone();
        scope.defer(move || {
            if let Some(me) = me.upgrade() {
                dsh_sync::lock(&me.setups).retain(|entry| entry.id != id);
            }
            for scope in dsh_sync::lock(&installed).drain(..) {
                scope.dispose();
            }
        })
    }

    /// Runs the contributions on a continuable child, each in its own sub-scope.
    pub(crate) fn run_continuable_setups(&self, child: &AgentHandle) -> Result<(), SubagentError> {
        let entries: Vec<(ContinuableSetupFn, Arc<Mutex<Vec<Scope>>>)> =
            dsh_sync::lock(&self.setups)
                .iter()
                .map(|e| (e.setup.clone(), e.installed.clone()))
                .collect();
        for (setup, installed) in entries {
            let scope = child
                .scope()
                .child(ScopeKind::Plugin, "continuable-setup")
                .map_err(|e| SubagentError::plain(e.to_string()))?;
            setup(child, &scope)?;
            let mut list = dsh_sync::lock(&installed);
            list.retain(|s| !s.is_disposed());
            list.push(scope);
        }
        Ok(())
    }

    /// Cancels every live child (the service is going away).
    fn cancel_all(&self) {
        for agent in self.runtime.directory.live() {
            if agent.log().header().origin.as_deref() == Some("subagent") {
                agent.cancel(dsh_agent::AbortReason::Disposed, false);
            }
        }
    }
}

/// The front-ends' view of delegation (`dsh exec` follows children's events, ACP settles them
/// on shutdown) without naming this crate.
impl dsh_plugin::DelegatedChildren for Subagents {
    fn on_start(&self, owner: &AgentHandle, started: dsh_plugin::ChildStarted) -> Disposer {
        self.events.register(owner.scope(), move |event| {
            if let SubagentEvent::Start(info) = event
                && let Some(child) = &info.child
            {
                started(child, &info.parent_id);
            }
            Ok(())
        })
    }

    fn drain<'a>(
        &'a self,
        parents: &'a [AgentHandle],
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<(), dsh_plugin::ChildrenError>> + Send + 'a>>
    {
        Box::pin(async move {
            self.drain_continuable_descendants(parents)
                .await
                .map_err(|error| Box::new(error) as dsh_plugin::ChildrenError)
        })
    }
}
