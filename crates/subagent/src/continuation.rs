//! Continuable children (§1.8): durable child sessions with at most one resident Activation,
//! started, followed up, cold-resumed, interrupted, reported from, settled and drained.
//!
//! Locking: the manager's state sits behind a std mutex held only for short synchronous
//! sections; per child, deliveries, settlement decisions and disposal are serialised by an
//! async per-child lock. A parent never takes a child's lock while holding its own sync state,
//! and releasing ownership only touches the sync state, so a child settling while its parent
//! disposes it cannot deadlock.

use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use dsh_agent::AbortReason;
use dsh_agent::AgentEvent;
use dsh_agent::AgentHandle;
use dsh_agent::AgentStatus;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_session::Event;
use dsh_session::kind;
use futures::future::BoxFuture;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::depth::check_max_depth;
use crate::depth::delegation_depth_of;
use crate::depth::resolve_child_depth;
use crate::descriptor::ContinuableDescriptor;
use crate::descriptor::DESCRIPTOR_KIND;
use crate::descriptor::Descriptor;
use crate::descriptor::fold_first;
use crate::error::SubagentError;
use crate::error::code;
use crate::host::ChildMeta;
use crate::host::ChildSession;
use crate::host::ChildSpec;
use crate::host::DelegatedPolicy;
use crate::inprocess::ABORTED_BEFORE_PUBLICATION;
use crate::notice::report_message;
use crate::notice::settlement_notice;
use crate::output::epoch_stop_reason;
use crate::output::final_assistant_output;
use crate::provider::AgentOptions;
use crate::provider::PrepareRequest;
use crate::provider::StartRequest;
use crate::runtime::owned_seed;
use crate::service::RunInfo;
use crate::service::SubagentEvent;
use crate::service::Subagents;

pub const UNAVAILABLE: &str = "continuable subagents require the agents service";
pub const PERSISTENCE_REQUIRED: &str =
    "continuable subagents require session persistence (load a dsh-session-persistence backend)";
pub const DRAINING_TEXT: &str =
    "continuable subagents are draining; the operation was not admitted";

/// How a report reaches the parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReportDelivery {
    /// `steer`: wakes an idle parent; a running parent claims it at its next step boundary.
    #[default]
    NextStep,
    /// `inject`: never wakes.
    Quiet,
}

/// Who asks for an interrupt.
#[derive(Clone)]
pub enum InterruptAuthority {
    /// A human client acting for the parent session.
    User { parent_session_id: String },
    /// A live ancestor agent (the `interrupt_agent` tool).
    Ancestor(AgentHandle),
}

/// `startContinuable` input.
pub struct ContinuableStart {
    pub provider: String,
    pub label: String,
    pub child_id: Option<String>,
    pub request: StartRequest,
}

/// Accepted: the child and the id of the prompt its inbox accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub child_id: String,
    pub message_id: String,
}

/// Residency of an Activation (derived, never stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Residency {
    Running,
    Waiting,
    Settled,
}

struct Activation {
    child: AgentHandle,
    run_id: String,
    provider: String,
    parent_id: String,
    /// The resident continuable parent that owns this Activation, if any.
    owner: Option<String>,
    owned: HashSet<String>,
    /// The child itself, then its live lineage at materialization (parent, grandparent, …).
    ancestry: Vec<String>,
    accepted: HashSet<String>,
    disposing: bool,
    announced: bool,
    boundary: u64,
    poke: Arc<Notify>,
}

impl Activation {
    fn residency(&self) -> Residency {
        if self.child.status() == AgentStatus::Running || !self.accepted.is_empty() {
            Residency::Running
        } else if !self.owned.is_empty() {
            Residency::Waiting
        } else {
            Residency::Settled
        }
    }
}

#[derive(Default)]
struct State {
    draining: bool,
    /// Parents whose descendants are being drained (admission below them is closed).
    draining_parents: HashSet<String>,
    /// Top-level parents whose disposal already cascades into their continuable children.
    cascading: HashSet<String>,
    activations: HashMap<String, Activation>,
}

/// The continuation manager's state (present when the host has persistence).
#[derive(Default)]
pub(crate) struct Manager {
    state: Mutex<State>,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    inflight: AtomicUsize,
    inflight_done: Notify,
}

impl Manager {
    fn lock_for(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        dsh_sync::lock(&self.locks)
            .entry(id.to_owned())
            .or_default()
            .clone()
    }
}

struct Inflight<'a>(&'a Manager);

impl Drop for Inflight<'_> {
    fn drop(&mut self) {
        self.0.inflight.fetch_sub(1, Ordering::AcqRel);
        self.0.inflight_done.notify_waiters();
    }
}

fn unauthorized(message: String) -> SubagentError {
    SubagentError::coded(code::UNAUTHORIZED, message)
}

fn unavailable(id: &str) -> SubagentError {
    SubagentError::coded(
        code::NOT_RESUMABLE,
        format!("subagent \"{id}\" is unavailable"),
    )
}

/// The seed of a fresh continuable child: `[prefix, session/end-seed]` (fork) then the
/// descriptor; the child's constructor appends the final `session/end-seed`.
fn descriptor_seed(prefix: Option<&[Arc<Event>]>, descriptor: &Descriptor) -> Vec<Event> {
    let mut seed = prefix.map(owned_seed).unwrap_or_default();
    let time = dsh_session::SessionHeader::new("", None).created_at;
    if prefix.is_some() {
        seed.push(Event::new(
            kind::END_SEED,
            seed.len() as u64,
            time,
            serde_json::json!({}),
        ));
    }
    seed.push(Event::new(
        DESCRIPTOR_KIND,
        seed.len() as u64,
        time,
        descriptor.to_value(),
    ));
    seed
}

impl Subagents {
    fn manager(&self) -> Result<&Manager, SubagentError> {
        self.manager
            .as_ref()
            .ok_or_else(|| SubagentError::coded(code::CONTINUATION_UNAVAILABLE, UNAVAILABLE))
    }

    /// Whether continuable children can start (the host has persistence).
    pub fn continuable_available(&self) -> bool {
        self.manager.is_some() && self.runtime.host.persistence().is_some()
    }

    /// Admission: closed by `drain()`, or below a parent whose descendants are draining.
    fn admit_below(&self, manager: &Manager, parent: &str) -> Result<(), SubagentError> {
        let state = dsh_sync::lock(&manager.state);
        if state.draining {
            return Err(SubagentError::coded(code::DRAINING, DRAINING_TEXT));
        }
        let lineage = Self::lineage(&state, parent);
        if let Some(blocked) = lineage
            .iter()
            .find(|id| state.draining_parents.contains(*id))
        {
            return Err(SubagentError::coded(
                code::DRAINING,
                format!(
                    "continuable subagents below parent \"{blocked}\" are draining; the operation was not admitted"
                ),
            ));
        }
        Ok(())
    }

    /// `parent` and its resident ancestors.
    fn lineage(state: &State, parent: &str) -> Vec<String> {
        match state.activations.get(parent) {
            Some(activation) => activation.ancestry.clone(),
            None => vec![parent.to_owned()],
        }
    }

    /// `startContinuable`: resolves as soon as the child's inbox accepted the prompt.
    pub async fn start_continuable(
        &self,
        start: ContinuableStart,
    ) -> Result<Accepted, SubagentError> {
        let manager = self.manager()?;
        let ContinuableStart {
            provider: provider_name,
            label,
            child_id,
            request,
        } = start;
        let parent = request.parent.clone();
        // Synchronous checks, in upstream's order (capture-before-await).
        self.admit_below(manager, parent.id())?;
        let Some(store) = self.runtime.host.persistence() else {
            return Err(SubagentError::coded(
                code::PERSISTENCE_UNAVAILABLE,
                PERSISTENCE_REQUIRED,
            ));
        };
        check_max_depth(request.max_depth)?;
        let reserved = child_id.is_some();
        let id = child_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let duplicate = || {
            SubagentError::coded(
                code::DUPLICATE_CHILD,
                format!("subagent \"{id}\" already exists"),
            )
        };
        if self.runtime.directory.get(&id).is_some() {
            return Err(duplicate());
        }
        let depth = resolve_child_depth(delegation_depth_of(&parent), request.max_depth)?;
        let overrides = request.agent_options.clone().unwrap_or_default();
        let descriptor = Descriptor::Continuable(ContinuableDescriptor {
            provider: provider_name.clone(),
            label: label.clone(),
            agent_provider: overrides
                .provider
                .clone()
                .or_else(|| Some(parent.provider().to_owned()).filter(|p| !p.is_empty())),
            agent_model: overrides
                .model
                .clone()
                .or_else(|| Some(parent.model().to_owned()).filter(|m| !m.is_empty())),
            persona: request.persona.clone(),
            tool_filter: request.tool_filter.clone(),
        });
        let policy = self.runtime.capture_policy(&parent);
        let options = AgentOptions::inherit(&parent, request.agent_options.as_ref());
        let header_cwd = parent.log().header().cwd.clone();
        let provider = self.admit(&provider_name, &request)?;
        if !provider.supports_continuable() {
            return Err(SubagentError::coded(
                code::UNSUPPORTED_CAPABILITY,
                format!(
                    "subagent provider \"{provider_name}\" does not support continuable children (no prepareContinuable capability)"
                ),
            ));
        }
        manager.inflight.fetch_add(1, Ordering::AcqRel);
        let _inflight = Inflight(manager);
        let prepared = provider
            .prepare_continuable(PrepareRequest {
                session_id: id.clone(),
                parent: parent.clone(),
                signal: request.signal.clone(),
            })
            .await?;
        if request.signal.is_cancelled() {
            return Err(SubagentError::plain(ABORTED_BEFORE_PUBLICATION));
        }
        self.admit_below(manager, parent.id())?;
        let lock = manager.lock_for(&id);
        let _guard = lock.lock().await;
        if self.runtime.directory.get(&id).is_some() {
            return Err(duplicate());
        }
        if reserved && store.load(&id).is_ok() {
            return Err(duplicate());
        }
        let prefix_len = prepared.seed.as_ref().map(|p| p.len() as u64);
        let spec = ChildSpec {
            session: ChildSession::Fresh {
                id: id.clone(),
                meta: ChildMeta {
                    cwd: header_cwd,
                    agent_preset: None,
                    parent_session: parent.id().to_owned(),
                    delegation_depth: depth,
                    seed_length: prefix_len,
                },
                seed: Some(descriptor_seed(prepared.seed.as_deref(), &descriptor)),
            },
            options,
            policy: policy.clone(),
            owner: self.runtime.scope.clone(),
        };
        let persona = request.persona.clone();
        let tool_filter = request.tool_filter.clone();
        let child = self
            .materialize(spec, Some(policy), persona, tool_filter)
            .await?;
        if request.signal.is_cancelled() {
            self.runtime.host.discard(child).await;
            return Err(SubagentError::plain(ABORTED_BEFORE_PUBLICATION));
        }
        let message = Message::user(request.prompt.clone(), MessageSource::user());
        match self.install_activation(manager, &child, &provider_name, &parent, message) {
            Ok(message_id) => Ok(Accepted {
                child_id: id,
                message_id,
            }),
            Err(error) => {
                self.runtime.host.discard(child).await;
                Err(error)
            }
        }
    }

    /// Builds (fresh or resumed) the child agent through the manager's own scope, with the
    /// delegated policy events (fresh only), the composition and the continuable setups.
    async fn materialize(
        &self,
        spec: ChildSpec,
        fresh_policy: Option<DelegatedPolicy>,
        persona: Option<String>,
        tool_filter: Option<crate::descriptor::ToolFilterSpec>,
    ) -> Result<AgentHandle, SubagentError> {
        let me = self.me.clone();
        let runtime = self.runtime.clone();
        let setup = Box::new(move |child: &AgentHandle| {
            if let Some(policy) = &fresh_policy {
                runtime.append_policy_events(child.log(), policy)?;
            }
            runtime.apply_composition(child, persona.as_deref(), tool_filter.as_ref())?;
            match me.upgrade() {
                Some(me) => me.run_continuable_setups(child),
                None => Err(SubagentError::plain("the subagent service is gone")),
            }
        });
        self.runtime.host.build(spec, setup).await
    }

    /// Installs the Activation (ownership, inbox accounting, `subagent/start`, the settlement
    /// watcher) and submits `message`. Caller holds the child's lock. Atomic with respect to
    /// settlement: the message id is accounted before the inbox can claim it.
    fn install_activation(
        &self,
        manager: &Manager,
        child: &AgentHandle,
        provider: &str,
        parent: &AgentHandle,
        message: Message,
    ) -> Result<String, SubagentError> {
        let id = child.id().to_owned();
        let poke = Arc::new(Notify::new());
        let run_id = uuid::Uuid::new_v4().to_string();
        {
            let mut state = dsh_sync::lock(&manager.state);
            let owner = match state.activations.get_mut(parent.id()) {
                Some(owner) if owner.disposing => {
                    return Err(SubagentError::coded(
                        code::ACTIVATION_CLOSING,
                        format!(
                            "subagent parent \"{}\" is being disposed; the child was not established",
                            parent.id()
                        ),
                    ));
                }
                Some(owner) => {
                    owner.owned.insert(id.clone());
                    Some(parent.id().to_owned())
                }
                None => None,
            };
            let mut ancestry = vec![id.clone()];
            ancestry.extend(Self::lineage(&state, parent.id()));
            state.activations.insert(
                id.clone(),
                Activation {
                    child: child.clone(),
                    run_id: run_id.clone(),
                    provider: provider.to_owned(),
                    parent_id: parent.id().to_owned(),
                    owner: owner.clone(),
                    owned: HashSet::new(),
                    ancestry,
                    accepted: HashSet::new(),
                    disposing: false,
                    announced: false,
                    boundary: child.log().len(),
                    poke: poke.clone(),
                },
            );
            if owner.is_none() && state.cascading.insert(parent.id().to_owned()) {
                let me = self.me.clone();
                let parent_id = parent.id().to_owned();
                let handle = tokio::runtime::Handle::try_current().ok();
                parent.scope().defer(move || {
                    let (Some(me), Some(handle)) = (me.upgrade(), handle) else {
                        return;
                    };
                    handle.spawn(async move {
                        if let Some(manager) = &me.manager {
                            dsh_sync::lock(&manager.state).cascading.remove(&parent_id);
                        }
                        if let Err(error) = me.drain_below(&[parent_id]).await {
                            tracing::warn!(%error, "continuable children of a disposed parent did not tear down cleanly");
                        }
                    });
                });
            }
        }
        self.runtime.directory.register(child, None);
        self.watch_inbox(child);
        let info = RunInfo {
            run_id,
            provider: provider.to_owned(),
            id: id.clone(),
            local: true,
            parent_id: parent.id().to_owned(),
            child: Some(child.clone()),
        };
        self.emit(Some(parent.scope()), &SubagentEvent::Start(info));
        if let Some(me) = self.me.upgrade() {
            let id = id.clone();
            tokio::spawn(async move { me.settlement_watcher(id).await });
        }
        match self.submit(manager, &id, child, message) {
            Ok(message_id) => Ok(message_id),
            Err(error) => {
                // Not announced: the teardown that follows sends no notice.
                poke.notify_one();
                Err(error)
            }
        }
    }

    /// Enqueues `message` as the child's next turn, accounting it first.
    fn submit(
        &self,
        manager: &Manager,
        id: &str,
        child: &AgentHandle,
        message: Message,
    ) -> Result<String, SubagentError> {
        let message_id = message.id.clone();
        if let Some(activation) = dsh_sync::lock(&manager.state).activations.get_mut(id) {
            activation.accepted.insert(message_id.clone());
        }
        match child.followup(message) {
            Ok(()) => {
                if let Some(activation) = dsh_sync::lock(&manager.state).activations.get_mut(id) {
                    activation.announced = true;
                }
                Ok(message_id)
            }
            Err(error) => {
                let poke = {
                    let mut state = dsh_sync::lock(&manager.state);
                    state.activations.get_mut(id).map(|a| {
                        a.accepted.remove(&message_id);
                        a.poke.clone()
                    })
                };
                if let Some(poke) = poke {
                    poke.notify_one();
                }
                Err(unavailable_delivery(id, &error))
            }
        }
    }

    /// Clears accepted ids as the child claims or discards them.
    fn watch_inbox(&self, child: &AgentHandle) {
        let me = self.me.clone();
        let id = child.id().to_owned();
        child.hooks().events.register(child.scope(), move |event| {
            let message = match event {
                AgentEvent::InboxClaimed { agent, message, .. }
                | AgentEvent::InboxDiscarded { agent, message }
                    if *agent == id =>
                {
                    message
                }
                _ => return Ok(()),
            };
            if let Some(me) = me.upgrade()
                && let Some(manager) = &me.manager
            {
                let poke = {
                    let mut state = dsh_sync::lock(&manager.state);
                    state
                        .activations
                        .get_mut(&id)
                        .and_then(|a| a.accepted.remove(&message.id).then(|| a.poke.clone()))
                };
                if let Some(poke) = poke {
                    poke.notify_one();
                }
            }
            Ok(())
        });
    }

    /// One task per Activation: waits for quiescence and disposes it when settled.
    async fn settlement_watcher(self: Arc<Self>, id: String) {
        let Some(manager) = &self.manager else { return };
        let lock = manager.lock_for(&id);
        loop {
            let (child, poke) = match dsh_sync::lock(&manager.state).activations.get(&id) {
                Some(a) => (a.child.clone(), a.poke.clone()),
                None => return,
            };
            let poked = poke.notified();
            tokio::pin!(poked);
            poked.as_mut().enable();
            let guard = lock.lock().await;
            let residency = {
                let mut state = dsh_sync::lock(&manager.state);
                match state.activations.get_mut(&id) {
                    None => return,
                    Some(a) if a.disposing => return,
                    Some(a) => {
                        let residency = a.residency();
                        if residency == Residency::Settled {
                            a.disposing = true;
                        }
                        residency
                    }
                }
            };
            match residency {
                Residency::Settled => {
                    if let Err(error) = self.finish_disposal(&id).await {
                        tracing::warn!("subagent \"{id}\" activation teardown failed: {error}");
                    }
                    drop(guard);
                    return;
                }
                Residency::Running => {
                    drop(guard);
                    tokio::select! {
                        () = child.when_idle() => {}
                        () = &mut poked => {}
                    }
                }
                Residency::Waiting => {
                    drop(guard);
                    poked.await;
                }
            }
        }
    }

    /// Disposes the Activation `id` (already marked disposing; caller holds its lock): cancel,
    /// release the children first, capture the epoch, dispose, notify the parent, release
    /// ownership, emit `subagent/end`.
    fn finish_disposal<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), SubagentError>> {
        Box::pin(async move {
            let manager = self.manager()?;
            let (child, owned) = {
                let state = dsh_sync::lock(&manager.state);
                let Some(a) = state.activations.get(id) else {
                    return Ok(());
                };
                (a.child.clone(), a.owned.iter().cloned().collect::<Vec<_>>())
            };
            child.cancel(AbortReason::Parent, false);
            let mut failures = Vec::new();
            for owned in owned {
                if let Err(error) = self.dispose_activation(&owned).await {
                    failures.push(error.to_string());
                }
            }
            child.when_idle().await;
            if let Err(error) = child.log().sync().await {
                tracing::warn!(
                    "subagent \"{id}\" best-effort final session flush failed; the persisted state may be unavailable or stale on resume: {error}"
                );
            }
            let boundary = dsh_sync::lock(&manager.state)
                .activations
                .get(id)
                .map_or(0, |a| a.boundary);
            let own = child.log().events_since(boundary);
            let (output, stop) = match own {
                Ok(own) if failures.is_empty() => {
                    (final_assistant_output(&own), epoch_stop_reason(&own))
                }
                Ok(_) => (Vec::new(), crate::output::StopReason::Error),
                Err(error) => {
                    tracing::warn!(%error, "cannot read the child's history; its run is reported failed");
                    (Vec::new(), crate::output::StopReason::Error)
                }
            };
            child.dispose().await;
            self.runtime.directory.unregister(&child);
            let removed = dsh_sync::lock(&manager.state).activations.remove(id);
            let Some(activation) = removed else {
                return Ok(());
            };
            if activation.announced {
                self.send_notice(manager, &activation, &stop, &output);
            }
            let owner_poke = {
                let mut state = dsh_sync::lock(&manager.state);
                activation
                    .owner
                    .as_ref()
                    .and_then(|owner| state.activations.get_mut(owner))
                    .map(|owner| {
                        owner.owned.remove(id);
                        owner.poke.clone()
                    })
            };
            if let Some(poke) = owner_poke {
                poke.notify_one();
            }
            let parent_scope = self
                .runtime
                .directory
                .get(&activation.parent_id)
                .map(|p| p.scope().clone());
            self.emit(
                parent_scope.as_ref(),
                &SubagentEvent::End {
                    info: RunInfo {
                        run_id: activation.run_id.clone(),
                        provider: activation.provider.clone(),
                        id: id.to_owned(),
                        local: true,
                        parent_id: activation.parent_id.clone(),
                        child: None,
                    },
                    stop_reason: stop,
                    last_assistant_message: (!output.is_empty()).then_some(output),
                },
            );
            if failures.is_empty() {
                Ok(())
            } else {
                Err(SubagentError::coded(
                    code::ACTIVATION_TEARDOWN_FAILED,
                    failures.join("; "),
                ))
            }
        })
    }

    /// Takes the child's lock and disposes its Activation, if still resident.
    fn dispose_activation<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), SubagentError>> {
        Box::pin(async move {
            let manager = self.manager()?;
            let lock = manager.lock_for(id);
            let _guard = lock.lock().await;
            let proceed = match dsh_sync::lock(&manager.state).activations.get_mut(id) {
                Some(a) if !a.disposing => {
                    a.disposing = true;
                    true
                }
                _ => false,
            };
            if proceed {
                self.finish_disposal(id).await
            } else {
                Ok(())
            }
        })
    }

    /// The settlement notice (only for announced epochs and a live parent; a failure is logged
    /// and never fails teardown).
    fn send_notice(
        &self,
        manager: &Manager,
        activation: &Activation,
        stop: &crate::output::StopReason,
        output: &[ContentBlock],
    ) {
        let id = activation.child.id();
        let Some(parent) = self.runtime.directory.get(&activation.parent_id) else {
            return;
        };
        let notice = settlement_notice(id, stop, output);
        let draining = {
            let state = dsh_sync::lock(&manager.state);
            state.draining
                || Self::lineage(&state, parent.id())
                    .iter()
                    .any(|p| state.draining_parents.contains(p))
                || state
                    .activations
                    .get(parent.id())
                    .is_some_and(|a| a.disposing)
        };
        let sent = if draining || parent.is_disposing() {
            parent.inject(notice)
        } else {
            self.account_waking_send(manager, parent.id(), &notice.id);
            if parent.status() == AgentStatus::Idle {
                parent.followup(notice)
            } else {
                parent.steer(notice)
            }
        };
        if let Err(error) = sent {
            tracing::warn!(
                "subagent \"{id}\" settlement notice was not delivered to its parent: {error}"
            );
        }
    }

    /// A waking send to a resident continuable parent keeps it from being judged quiescent.
    fn account_waking_send(&self, manager: &Manager, parent: &str, message_id: &str) {
        if let Some(a) = dsh_sync::lock(&manager.state).activations.get_mut(parent) {
            a.accepted.insert(message_id.to_owned());
        }
    }

    /// `followup(parent, childId, content)`: one ordinary later turn of the child, delivered to
    /// the resident Activation or after a cold resume. Only the direct parent may deliver.
    pub async fn followup(
        &self,
        parent: &AgentHandle,
        child_id: &str,
        content: Vec<ContentBlock>,
        source: MessageSource,
        signal: CancellationToken,
    ) -> Result<String, SubagentError> {
        let manager = self.manager()?;
        self.admit_below(manager, parent.id())?;
        self.authorize_parent(parent, child_id)?;
        let lock = manager.lock_for(child_id);
        let _guard = lock.lock().await;
        self.admit_below(manager, parent.id())?;
        let message = Message::user(content, source);
        let resident = dsh_sync::lock(&manager.state)
            .activations
            .get(child_id)
            .filter(|a| !a.disposing)
            .map(|a| a.child.clone());
        if let Some(child) = resident {
            if child.log().header().parent_session.as_deref() != Some(parent.id()) {
                return Err(foreign(child_id));
            }
            self.acquire_ownership(manager, parent, child_id)?;
            return self.submit(manager, child_id, &child, message);
        }
        self.cold_resume(manager, parent, child_id, message, signal)
            .await
    }

    fn authorize_parent(&self, parent: &AgentHandle, child_id: &str) -> Result<(), SubagentError> {
        if !self.runtime.directory.is_exact(parent) {
            return Err(unauthorized(format!(
                "subagent \"{child_id}\" delivery requires the exact live parent agent"
            )));
        }
        Ok(())
    }

    /// A resident continuable parent delivering to a child comes to own it.
    fn acquire_ownership(
        &self,
        manager: &Manager,
        parent: &AgentHandle,
        child_id: &str,
    ) -> Result<(), SubagentError> {
        let mut state = dsh_sync::lock(&manager.state);
        let Some(owner) = state.activations.get_mut(parent.id()) else {
            return Ok(());
        };
        if owner.disposing {
            return Err(SubagentError::coded(
                code::ACTIVATION_CLOSING,
                format!(
                    "subagent parent \"{}\" is being disposed; the child was not established",
                    parent.id()
                ),
            ));
        }
        owner.owned.insert(child_id.to_owned());
        if let Some(child) = state.activations.get_mut(child_id) {
            child.owner = Some(parent.id().to_owned());
        }
        Ok(())
    }

    async fn cold_resume(
        &self,
        manager: &Manager,
        parent: &AgentHandle,
        child_id: &str,
        message: Message,
        signal: CancellationToken,
    ) -> Result<String, SubagentError> {
        let Some(store) = self.runtime.host.persistence() else {
            return Err(unavailable(child_id));
        };
        let loaded = store.load(child_id).map_err(|_| unavailable(child_id))?;
        if loaded.header.parent_session.as_deref() != Some(parent.id()) {
            return Err(foreign(child_id));
        }
        let own_from = loaded.header.seed_length.unwrap_or(0) as usize;
        let events: Vec<Arc<Event>> = loaded.events;
        let own = events.get(own_from..).unwrap_or_default();
        let descriptor = match fold_first(own) {
            Ok(Some(Descriptor::Continuable(descriptor))) => descriptor,
            Ok(_) => {
                return Err(SubagentError::coded(
                    code::NOT_RESUMABLE,
                    format!(
                        "subagent \"{child_id}\" has no supported continuation state and cannot be resumed; do not retry send_message with this id"
                    ),
                ));
            }
            Err(_) => return Err(unavailable(child_id)),
        };
        if signal.is_cancelled() {
            return Err(SubagentError::plain(ABORTED_BEFORE_PUBLICATION));
        }
        let policy = DelegatedPolicy {
            sandbox: events
                .iter()
                .rev()
                .find(|e| e.kind == "sandbox/mode")
                .and_then(|e| {
                    e.data
                        .get("mode")
                        .and_then(|m| m.as_str())
                        .map(str::to_owned)
                }),
            approval_never: self.runtime.approval_composed,
        };
        let spec = ChildSpec {
            session: ChildSession::Resume {
                id: child_id.to_owned(),
            },
            options: AgentOptions {
                provider: descriptor.agent_provider.clone(),
                model: descriptor.agent_model.clone(),
                max_tokens: None,
            },
            policy,
            owner: self.runtime.scope.clone(),
        };
        let child = self
            .materialize(
                spec,
                None,
                descriptor.persona.clone(),
                descriptor.tool_filter.clone(),
            )
            .await
            .map_err(|error| {
                if error.name == "SubagentError" {
                    error
                } else {
                    unavailable(child_id)
                }
            })?;
        // Authority re-checked in the final no-await span.
        if !self.runtime.directory.is_exact(parent) {
            child.dispose().await;
            return Err(unauthorized(format!(
                "subagent \"{child_id}\" delivery requires the exact live parent agent"
            )));
        }
        match self.install_activation(manager, &child, &descriptor.provider, parent, message) {
            Ok(id) => Ok(id),
            Err(error) => {
                child.dispose().await;
                Err(error)
            }
        }
    }

    /// `interrupt(target, authority)`: cancels the target's current turn, keeping its inbox.
    /// Returns without waiting.
    pub fn interrupt(
        &self,
        target: &str,
        authority: &InterruptAuthority,
    ) -> Result<(), SubagentError> {
        if let InterruptAuthority::Ancestor(caller) = authority {
            if !self.runtime.directory.is_exact(caller) {
                return Err(unauthorized(format!(
                    "interrupting \"{target}\" requires the exact live ancestor agent"
                )));
            }
            if caller.id() == target {
                return Err(unauthorized(format!(
                    "agent \"{target}\" cannot interrupt itself"
                )));
            }
        }
        let Some(manager) = &self.manager else {
            return Ok(());
        };
        let (child, cause) = {
            let state = dsh_sync::lock(&manager.state);
            let Some(activation) = state.activations.get(target) else {
                return Ok(());
            };
            let cause = match authority {
                InterruptAuthority::User { parent_session_id } => {
                    if activation.child.log().header().parent_session.as_deref()
                        != Some(parent_session_id.as_str())
                    {
                        return Err(foreign(target));
                    }
                    AbortReason::User
                }
                InterruptAuthority::Ancestor(caller) => {
                    if !activation.ancestry.iter().any(|a| a == caller.id()) {
                        return Err(unauthorized(format!(
                            "subagent \"{target}\" is not a live descendant of agent \"{}\"",
                            caller.id()
                        )));
                    }
                    AbortReason::Parent
                }
            };
            if activation.disposing {
                return Ok(());
            }
            (activation.child.clone(), cause)
        };
        child.cancel(cause, true);
        Ok(())
    }

    /// `reportFrom(child, content)`: relays content to the direct parent without ending the
    /// child's turn. Synchronous up to acceptance.
    pub fn report_from(
        &self,
        child: &AgentHandle,
        content: Vec<ContentBlock>,
        delivery: ReportDelivery,
        signal: &CancellationToken,
    ) -> Result<String, SubagentError> {
        if signal.is_cancelled() {
            return Err(SubagentError::classed("AbortError", "tool call aborted"));
        }
        let manager = self.manager()?;
        let parent_id = child
            .log()
            .header()
            .parent_session
            .clone()
            .unwrap_or_default();
        self.admit_below(manager, &parent_id)?;
        {
            let state = dsh_sync::lock(&manager.state);
            match state.activations.get(child.id()) {
                Some(a) if a.child.same(child) => {
                    if a.disposing {
                        return Err(SubagentError::coded(
                            code::ACTIVATION_CLOSING,
                            format!(
                                "subagent \"{}\" activation is being disposed; the report was not delivered",
                                child.id()
                            ),
                        ));
                    }
                }
                _ => {
                    return Err(unauthorized(format!(
                        "agent \"{}\" is not a live continuable subagent and cannot report",
                        child.id()
                    )));
                }
            }
        }
        let not_live = || {
            SubagentError::coded(
                code::PARENT_UNAVAILABLE,
                "direct parent is not live; report was not delivered",
            )
        };
        let parent = self
            .runtime
            .directory
            .get(&parent_id)
            .ok_or_else(not_live)?;
        let message = report_message(child.id(), content);
        let message_id = message.id.clone();
        let sent = match delivery {
            ReportDelivery::NextStep => {
                self.account_waking_send(manager, &parent_id, &message_id);
                parent.steer(message)
            }
            ReportDelivery::Quiet => parent.inject(message),
        };
        sent.map_err(|_| not_live())?;
        Ok(message_id)
    }

    /// `drain()`: closes admission, waits for in-flight materializations and disposes every
    /// root Activation child-first.
    pub async fn drain(&self) -> Result<(), SubagentError> {
        let Some(manager) = &self.manager else {
            return Ok(());
        };
        dsh_sync::lock(&manager.state).draining = true;
        loop {
            let done = manager.inflight_done.notified();
            if manager.inflight.load(Ordering::Acquire) == 0 {
                break;
            }
            done.await;
        }
        let roots: Vec<String> = dsh_sync::lock(&manager.state)
            .activations
            .iter()
            .filter(|(_, a)| a.owner.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        self.dispose_all(roots, "activation(s)").await
    }

    async fn dispose_all(&self, ids: Vec<String>, subject: &str) -> Result<(), SubagentError> {
        let mut failures = Vec::new();
        for id in ids {
            if let Err(error) = self.dispose_activation(&id).await {
                failures.push(error.to_string());
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(SubagentError::coded(
                code::ACTIVATION_TEARDOWN_FAILED,
                format!(
                    "continuable subagent teardown failed for {} {subject}: {}",
                    failures.len(),
                    failures.join("; ")
                ),
            ))
        }
    }

    /// `drainContinuableDescendants(parents)`: closes admission below exactly these parents
    /// until each leaves the registry, and disposes their strict descendants.
    pub async fn drain_continuable_descendants(
        &self,
        parents: &[AgentHandle],
    ) -> Result<(), SubagentError> {
        let ids: Vec<String> = parents.iter().map(|p| p.id().to_owned()).collect();
        if let Some(manager) = &self.manager {
            let mut state = dsh_sync::lock(&manager.state);
            for parent in parents {
                if state.draining_parents.insert(parent.id().to_owned()) {
                    let me = self.me.clone();
                    let id = parent.id().to_owned();
                    parent.scope().defer(move || {
                        if let Some(me) = me.upgrade()
                            && let Some(manager) = &me.manager
                        {
                            dsh_sync::lock(&manager.state).draining_parents.remove(&id);
                        }
                    });
                }
            }
        }
        self.drain_below(&ids).await
    }

    async fn drain_below(&self, parents: &[String]) -> Result<(), SubagentError> {
        let Some(manager) = &self.manager else {
            return Ok(());
        };
        // The topmost Activations below the parents; disposal releases their subtrees.
        let ids: Vec<String> = {
            let state = dsh_sync::lock(&manager.state);
            state
                .activations
                .iter()
                .filter(|(id, a)| {
                    !parents.contains(id)
                        && a.ancestry.iter().skip(1).any(|p| parents.contains(p))
                        && a.owner.as_ref().is_none_or(|o| {
                            !state.activations.contains_key(o) || parents.contains(o)
                        })
                })
                .map(|(id, _)| id.clone())
                .collect()
        };
        self.dispose_all(ids, "scoped activation(s)").await
    }

    /// `drainContinuableChildren(parent, ids)`: releases selected resident direct children,
    /// discarding their pending inbox work.
    pub async fn drain_continuable_children(
        &self,
        parent: &AgentHandle,
        ids: &[String],
    ) -> Result<(), SubagentError> {
        if !self.runtime.directory.is_exact(parent) {
            return Err(unauthorized(
                "selected child teardown requires the exact live parent agent".to_owned(),
            ));
        }
        let Some(manager) = &self.manager else {
            return Ok(());
        };
        {
            let state = dsh_sync::lock(&manager.state);
            for id in ids {
                if let Some(a) = state.activations.get(id)
                    && a.parent_id != parent.id()
                {
                    return Err(unauthorized(format!(
                        "subagent \"{id}\" is not a direct child of agent \"{}\"",
                        parent.id()
                    )));
                }
            }
        }
        self.dispose_all(ids.to_vec(), "selected activation(s)")
            .await
    }

    /// Ids of resident Activations (diagnostics and tests).
    pub fn resident(&self) -> Vec<String> {
        self.manager.as_ref().map_or_else(Vec::new, |m| {
            let mut ids: Vec<String> = dsh_sync::lock(&m.state)
                .activations
                .keys()
                .cloned()
                .collect();
            ids.sort();
            ids
        })
    }
}

fn foreign(id: &str) -> SubagentError {
    unauthorized(format!(
        "subagent \"{id}\" belongs to another parent session"
    ))
}

fn unavailable_delivery(id: &str, error: &dsh_agent::AgentError) -> SubagentError {
    tracing::debug!(child = id, %error, "delivery refused by the child");
    unavailable(id)
}
