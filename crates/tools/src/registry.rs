//! The registry: global and per-agent layers, visibility, restrictions, guards, presentation
//! modes and change notification. The pipeline lives in `pipeline.rs`.

use std::collections::HashMap;
use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::panic::catch_unwind;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::RwLock;
use std::sync::Weak;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use dsh_kernel::Disposer;
use dsh_kernel::KernelError;
use dsh_kernel::Scope;
use dsh_kernel::ScopeId;
use dsh_protocol::ToolSchema;
use indexmap::IndexMap;
use serde_json::Value;

use crate::definition::ToolDefinition;
use crate::error::PresentAsError;
use crate::error::RUN_CODE;
use crate::error::RegisterError;
use crate::error::RestrictError;
use crate::error::SchemasError;
use crate::error::ToolError;
use crate::hooks::ChangeFn;
use crate::hooks::CodeModeTransport;
use crate::hooks::ExecuteHook;
use crate::hooks::ExecutionMode;
use crate::hooks::GuardFn;
use crate::hooks::PostExecuteHook;
use crate::hooks::PreExecuteHook;
use crate::hooks::PresentationMode;
use crate::hooks::ResultHook;
use dsh_sync::lock;

/// Registry configuration.
#[derive(Debug, Clone, Copy, Default)]
pub struct RegistryConfig {
    /// The deployment default presentation mode (`native` unless configured).
    pub mode: PresentationMode,
}

/// `allow` and/or `deny` lists of a restriction (compiled into sets at call time).
#[derive(Debug, Clone, Default)]
pub struct ToolFilter {
    pub allow: Option<Vec<String>>,
    pub deny: Option<Vec<String>>,
}

struct Restriction {
    allow: Option<HashSet<String>>,
    deny: Option<HashSet<String>>,
}

impl Restriction {
    fn admits(&self, name: &str) -> bool {
        self.allow.as_ref().is_none_or(|a| a.contains(name))
            && self.deny.as_ref().is_none_or(|d| !d.contains(name))
    }
}

#[derive(Default)]
struct Layer {
    tools: IndexMap<String, (u64, Arc<ToolDefinition>)>,
    restrictions: Vec<(u64, Restriction)>,
    /// Narrowings ([`ToolRegistry::narrow`]): unlike restrictions they also cover the
    /// agent's own tools.
    narrowings: Vec<(u64, Restriction)>,
    guards: Vec<(u64, GuardFn)>,
    mode: Option<(u64, PresentationMode)>,
}

impl Layer {
    fn is_empty(&self) -> bool {
        self.tools.is_empty()
            && self.restrictions.is_empty()
            && self.narrowings.is_empty()
            && self.guards.is_empty()
            && self.mode.is_none()
    }
    fn admits(&self, name: &str) -> bool {
        self.restrictions.iter().all(|(_, r)| r.admits(name))
    }
    fn narrows_out(&self, name: &str) -> bool {
        self.narrowings.iter().any(|(_, r)| !r.admits(name))
    }
}

#[derive(Default)]
struct State {
    global: Layer,
    scoped: HashMap<ScopeId, Layer>,
}

impl State {
    fn layer(&self, key: Option<ScopeId>) -> Option<&Layer> {
        match key {
            None => Some(&self.global),
            Some(id) => self.scoped.get(&id),
        }
    }
    fn layer_mut(&mut self, key: Option<ScopeId>) -> &mut Layer {
        match key {
            None => &mut self.global,
            Some(id) => self.scoped.entry(id).or_default(),
        }
    }
    /// Drops a scoped layer once nothing is left in it.
    /// Whether a narrowing on `chain` hides `name`.
    fn narrowed(&self, chain: &[ScopeId], name: &str) -> bool {
        chain
            .iter()
            .any(|id| self.scoped.get(id).is_some_and(|l| l.narrows_out(name)))
    }
    fn prune(&mut self, key: Option<ScopeId>) {
        if let Some(id) = key
            && self.scoped.get(&id).is_some_and(Layer::is_empty)
        {
            self.scoped.remove(&id);
        }
    }
}

/// The agent-kind scopes of `subject`, farthest first (empty = the global view).
pub(crate) fn chain_of(subject: Option<&Scope>) -> Vec<ScopeId> {
    subject
        .map(|s| s.agent_chain().iter().map(Scope::id).collect())
        .unwrap_or_default()
}

fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The tool registry, a kernel service (`Arc<ToolRegistry>`). See the crate docs.
pub struct ToolRegistry {
    pub(crate) me: Weak<ToolRegistry>,
    state: RwLock<State>,
    default_mode: PresentationMode,
    transport: RwLock<Option<(u64, Arc<dyn CodeModeTransport>)>>,
    home: Mutex<Option<Scope>>,
    change: Mutex<Vec<(u64, ChangeFn)>>,
    pub(crate) pre_execute: PreExecuteHook,
    pub(crate) execute_hook: ExecuteHook,
    pub(crate) post_execute: PostExecuteHook,
    pub(crate) results: ResultHook,
}

impl ToolRegistry {
    /// A free-standing registry (tests, embedding). Prefer [`ToolRegistry::install`].
    pub fn new(config: RegistryConfig) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            state: RwLock::new(State::default()),
            default_mode: config.mode,
            transport: RwLock::new(None),
            home: Mutex::new(None),
            change: Mutex::new(Vec::new()),
            pre_execute: PreExecuteHook::new("tools/pre-execute"),
            execute_hook: ExecuteHook::new("tools/execute"),
            post_execute: PostExecuteHook::new("tools/post-execute"),
            results: ResultHook::new("tools/result"),
        })
    }

    /// Creates a registry and provides it as a kernel service on `scope`; services an agent-less
    /// call needs (approval) are looked up from `scope`.
    pub fn install(scope: &Scope, config: RegistryConfig) -> Result<Arc<Self>, KernelError> {
        let registry = Self::new(config);
        *lock(&registry.home) = Some(scope.clone());
        scope.provide::<ToolRegistry>(registry.clone())?;
        Ok(registry)
    }

    pub(crate) fn home(&self) -> Option<Scope> {
        lock(&self.home).clone()
    }

    /// `tools/pre-execute` (waterfall; first registered is outermost).
    pub fn pre_execute(&self) -> &PreExecuteHook {
        &self.pre_execute
    }
    /// `tools/execute` (around-dispatch waterfall).
    pub fn execute_hook(&self) -> &ExecuteHook {
        &self.execute_hook
    }
    /// `tools/post-execute` (waterfall).
    pub fn post_execute(&self) -> &PostExecuteHook {
        &self.post_execute
    }
    /// `tools/result` (observe).
    pub fn results(&self) -> &ResultHook {
        &self.results
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        dsh_sync::read(&self.state)
    }
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        dsh_sync::write(&self.state)
    }

    /// Registers `definition` in the layer of `scope`'s nearest agent (or globally). The
    /// returned disposer (also owned by `scope`) unregisters it.
    pub fn register(
        &self,
        scope: &Scope,
        definition: ToolDefinition,
    ) -> Result<Disposer, RegisterError> {
        self.register_arc(scope, Arc::new(definition))
    }

    /// [`ToolRegistry::register`] for an already shared definition (kept by identity).
    pub fn register_arc(
        &self,
        scope: &Scope,
        definition: Arc<ToolDefinition>,
    ) -> Result<Disposer, RegisterError> {
        let name = definition.name().to_owned();
        if name == RUN_CODE {
            return Err(RegisterError::Reserved);
        }
        let key = scope.nearest_agent().map(|s| s.id());
        let id = next_id();
        {
            let mut state = self.write();
            let layer = state.layer_mut(key);
            if layer.tools.contains_key(&name) {
                state.prune(key);
                return Err(match key {
                    None => RegisterError::DuplicateGlobal { name },
                    Some(_) => RegisterError::DuplicateScoped { name },
                });
            }
            layer.tools.insert(name.clone(), (id, definition));
        }
        if let Err(error) = self.notify() {
            self.remove_tool(key, &name, id);
            return Err(RegisterError::ChangeListener(error));
        }
        let me = self.me.clone();
        Ok(scope.defer(move || {
            if let Some(registry) = me.upgrade()
                && registry.remove_tool(key, &name, id)
            {
                registry.notify_logged();
            }
        }))
    }

    fn remove_tool(&self, key: Option<ScopeId>, name: &str, id: u64) -> bool {
        let mut state = self.write();
        let Some(layer) = (match key {
            None => Some(&mut state.global),
            Some(k) => state.scoped.get_mut(&k),
        }) else {
            return false;
        };
        let removed = layer.tools.get(name).is_some_and(|(entry, _)| *entry == id);
        if removed {
            layer.tools.shift_remove(name);
        }
        state.prune(key);
        removed
    }

    /// Hides inherited tools from `scope`'s agent layer (and its descendants).
    pub fn restrict(&self, scope: &Scope, filter: ToolFilter) -> Result<Disposer, RestrictError> {
        let Some(agent) = scope.nearest_agent() else {
            return Err(RestrictError::Unscoped);
        };
        if filter.allow.is_none() && filter.deny.is_none() {
            return Err(RestrictError::Empty);
        }
        let named: Vec<&String> = filter
            .allow
            .iter()
            .chain(filter.deny.iter())
            .flatten()
            .collect();
        if named.iter().any(|n| n.as_str() == RUN_CODE) {
            return Err(RestrictError::Reserved);
        }
        let key = Some(agent.id());
        let chain = chain_of(Some(scope));
        let id = next_id();
        {
            let mut state = self.write();
            let known = restrictable_names(&state, &chain);
            let mut unknown: Vec<String> = Vec::new();
            for name in named {
                if !known.contains(name.as_str()) && !unknown.contains(name) {
                    unknown.push(name.clone());
                }
            }
            if !unknown.is_empty() {
                let mut known: Vec<&str> = known.into_iter().collect();
                known.sort_unstable();
                let known = if known.is_empty() {
                    "(none)".to_owned()
                } else {
                    known.join(", ")
                };
                let quoted: Vec<String> = unknown.iter().map(|n| format!("\"{n}\"")).collect();
                let message = if unknown.len() == 1 {
                    format!(
                        "tools.restrict() names unknown global tool {}; known global tools: {known}",
                        quoted.join(", ")
                    )
                } else {
                    format!(
                        "tools.restrict() names unknown global tools {}; known global tools: {known}",
                        quoted.join(", ")
                    )
                };
                return Err(RestrictError::UnknownNames {
                    names: unknown,
                    message,
                });
            }
            let compiled = Restriction {
                allow: filter.allow.map(|a| a.into_iter().collect()),
                deny: filter.deny.map(|d| d.into_iter().collect()),
            };
            state.layer_mut(key).restrictions.push((id, compiled));
        }
        self.filter_installed(scope, agent.id(), id, |layer| &mut layer.restrictions)
    }

    /// The common end of [`Self::restrict`] and [`Self::narrow`]: entry `id` was pushed onto
    /// the list `list` picks in `agent`'s layer. Tells the change listeners (undoing the entry
    /// if one fails) and returns the disposer that removes it again.
    fn filter_installed(
        &self,
        scope: &Scope,
        agent: ScopeId,
        id: u64,
        list: fn(&mut Layer) -> &mut Vec<(u64, Restriction)>,
    ) -> Result<Disposer, RestrictError> {
        let undo = move |registry: &ToolRegistry| {
            let mut state = registry.write();
            let removed = state.scoped.get_mut(&agent).is_some_and(|layer| {
                let entries = list(layer);
                let before = entries.len();
                entries.retain(|(entry, _)| *entry != id);
                before != entries.len()
            });
            state.prune(Some(agent));
            removed
        };
        if let Err(error) = self.notify() {
            undo(self);
            return Err(RestrictError::ChangeListener(error));
        }
        let me = self.me.clone();
        Ok(scope.defer(move || {
            if let Some(registry) = me.upgrade()
                && undo(&registry)
            {
                registry.notify_logged();
            }
        }))
    }

    /// Narrows what `scope`'s agent (and its descendants) is offered and may call to `filter`,
    /// over every tool it would see, its own agent-layer tools included (an agent preset's
    /// tool list). Names it does not know are not an error: a preset is written for many
    /// compositions. `run_code` cannot be named.
    pub fn narrow(&self, scope: &Scope, filter: ToolFilter) -> Result<Disposer, RestrictError> {
        let Some(agent) = scope.nearest_agent() else {
            return Err(RestrictError::Unscoped);
        };
        if filter.allow.is_none() && filter.deny.is_none() {
            return Err(RestrictError::Empty);
        }
        if filter
            .allow
            .iter()
            .chain(filter.deny.iter())
            .flatten()
            .any(|n| n.as_str() == RUN_CODE)
        {
            return Err(RestrictError::Reserved);
        }
        let key = Some(agent.id());
        let id = next_id();
        self.write().layer_mut(key).narrowings.push((
            id,
            Restriction {
                allow: filter.allow.map(|a| a.into_iter().collect()),
                deny: filter.deny.map(|d| d.into_iter().collect()),
            },
        ));
        self.filter_installed(scope, agent.id(), id, |layer| &mut layer.narrowings)
    }

    /// A final, monotonic deny. Global from an agent-less scope; otherwise it applies to the
    /// agent's scope and its descendants. Does not notify `tools/change`.
    pub fn guard(
        &self,
        scope: &Scope,
        guard: impl Fn(&crate::Execution) -> Option<String> + Send + Sync + 'static,
    ) -> Disposer {
        let key = scope.nearest_agent().map(|s| s.id());
        let id = next_id();
        self.write()
            .layer_mut(key)
            .guards
            .push((id, Arc::new(guard)));
        let me = self.me.clone();
        scope.defer(move || {
            if let Some(registry) = me.upgrade() {
                let mut state = registry.write();
                if let Some(layer) = match key {
                    None => Some(&mut state.global),
                    Some(k) => state.scoped.get_mut(&k),
                } {
                    layer.guards.retain(|(entry, _)| *entry != id);
                }
                state.prune(key);
            }
        })
    }

    /// Declares how `scope`'s agent (and its descendants) reach tools.
    pub fn present_as(
        &self,
        scope: &Scope,
        mode: PresentationMode,
    ) -> Result<Disposer, PresentAsError> {
        let Some(agent) = scope.nearest_agent() else {
            return Err(PresentAsError::Unscoped);
        };
        let key = Some(agent.id());
        let id = next_id();
        {
            let mut state = self.write();
            let layer = state.layer_mut(key);
            if let Some((_, existing)) = layer.mode {
                return Err(PresentAsError::Conflict {
                    requested: mode.as_str().to_owned(),
                    existing: existing.as_str().to_owned(),
                });
            }
            layer.mode = Some((id, mode));
        }
        let agent_id = agent.id();
        let undo = move |registry: &ToolRegistry| {
            let mut state = registry.write();
            let removed = state.scoped.get_mut(&agent_id).is_some_and(|layer| {
                let ours = layer.mode.is_some_and(|(entry, _)| entry == id);
                if ours {
                    layer.mode = None;
                }
                ours
            });
            state.prune(key);
            removed
        };
        if let Err(error) = self.notify() {
            undo(self);
            return Err(PresentAsError::ChangeListener(error));
        }
        let me = self.me.clone();
        Ok(scope.defer(move || {
            if let Some(registry) = me.upgrade()
                && undo(&registry)
            {
                registry.notify_logged();
            }
        }))
    }

    /// Installs the Code Mode transport that supplies `run_code` (owned by `scope`).
    pub fn set_code_mode_transport(
        &self,
        scope: &Scope,
        transport: Arc<dyn CodeModeTransport>,
    ) -> Disposer {
        let id = next_id();
        *dsh_sync::write(&self.transport) = Some((id, transport));
        let me = self.me.clone();
        scope.defer(move || {
            if let Some(registry) = me.upgrade() {
                let mut slot = dsh_sync::write(&registry.transport);
                if slot.as_ref().is_some_and(|(entry, _)| *entry == id) {
                    *slot = None;
                }
            }
        })
    }

    fn run_code(&self) -> Option<Arc<ToolDefinition>> {
        let slot = dsh_sync::read(&self.transport);
        slot.as_ref().map(|(_, t)| t.definition())
    }

    /// Subscribes to `tools/change` (unfiltered; every scope's changes).
    pub fn on_change(
        &self,
        scope: &Scope,
        listener: impl Fn() -> Result<(), ToolError> + Send + Sync + 'static,
    ) -> Disposer {
        let id = next_id();
        lock(&self.change).push((id, Arc::new(listener)));
        let me = self.me.clone();
        scope.defer(move || {
            if let Some(registry) = me.upgrade() {
                lock(&registry.change).retain(|(entry, _)| *entry != id);
            }
        })
    }

    /// Runs the change listeners; the first failure (or panic) stops and is returned.
    fn notify(&self) -> Result<(), ToolError> {
        let listeners: Vec<ChangeFn> = lock(&self.change).iter().map(|(_, f)| f.clone()).collect();
        for listener in listeners {
            match catch_unwind(AssertUnwindSafe(|| listener())) {
                Ok(Ok(())) => {}
                Ok(Err(error)) => return Err(error),
                Err(payload) => return Err(ToolError::from_panic(payload.as_ref())),
            }
        }
        Ok(())
    }

    fn notify_logged(&self) {
        if let Err(error) = self.notify() {
            tracing::warn!(%error, "tools/change listener failed after unregistration");
        }
    }

    /// The effective presentation mode of `subject` (nearest declaration, else the default).
    pub fn mode_for(&self, subject: Option<&Scope>) -> PresentationMode {
        let chain = chain_of(subject);
        self.mode_in(&chain)
    }

    pub(crate) fn mode_in(&self, chain: &[ScopeId]) -> PresentationMode {
        let state = self.read();
        chain
            .iter()
            .rev()
            .find_map(|id| state.scoped.get(id).and_then(|l| l.mode.map(|(_, m)| m)))
            .unwrap_or(self.default_mode)
    }

    /// The visible definition of `name` for `subject` (identity of the registered `Arc`).
    pub fn get(&self, name: &str, subject: Option<&Scope>) -> Option<Arc<ToolDefinition>> {
        self.resolve_in(name, &chain_of(subject))
    }

    pub(crate) fn resolve_in(&self, name: &str, chain: &[ScopeId]) -> Option<Arc<ToolDefinition>> {
        if name == RUN_CODE {
            return (self.mode_in(chain) != PresentationMode::Native)
                .then(|| self.run_code())
                .flatten();
        }
        let state = self.read();
        let Some((own, ancestors)) = chain.split_last() else {
            return state.global.tools.get(name).map(|(_, d)| d.clone());
        };
        if state.narrowed(chain, name) {
            return None;
        }
        if let Some((_, def)) = state.scoped.get(own).and_then(|l| l.tools.get(name)) {
            return Some(def.clone());
        }
        let inherited = ancestors
            .iter()
            .rev()
            .find_map(|id| state.scoped.get(id).and_then(|l| l.tools.get(name)))
            .or_else(|| state.global.tools.get(name))?;
        let admitted = chain
            .iter()
            .all(|id| state.scoped.get(id).is_none_or(|l| l.admits(name)));
        admitted.then(|| inherited.1.clone())
    }

    /// Every visible definition for `subject`, in view order (`run_code` last when non-native).
    pub fn view(&self, subject: Option<&Scope>) -> Vec<Arc<ToolDefinition>> {
        let chain = chain_of(subject);
        let mut visible: IndexMap<String, Arc<ToolDefinition>> = IndexMap::new();
        {
            let state = self.read();
            let (own, ancestors) = match chain.split_last() {
                Some((own, ancestors)) => (state.scoped.get(own), ancestors),
                None => (None, &[][..]),
            };
            let mut inherited: IndexMap<&str, &Arc<ToolDefinition>> = IndexMap::new();
            for layer in std::iter::once(Some(&state.global))
                .chain(ancestors.iter().map(|id| state.scoped.get(id)))
                .flatten()
            {
                for (name, (_, def)) in &layer.tools {
                    inherited.insert(name.as_str(), def);
                }
            }
            for (name, def) in inherited {
                if chain
                    .iter()
                    .all(|id| state.scoped.get(id).is_none_or(|l| l.admits(name)))
                {
                    visible.insert(name.to_owned(), def.clone());
                }
            }
            if let Some(own) = own {
                for (name, (_, def)) in &own.tools {
                    visible.insert(name.clone(), def.clone());
                }
            }
            visible.retain(|name, _| !state.narrowed(&chain, name));
        }
        let mut out: Vec<Arc<ToolDefinition>> = visible.into_values().collect();
        if self.mode_in(&chain) != PresentationMode::Native
            && let Some(run_code) = self.run_code()
        {
            out.push(run_code);
        }
        out
    }

    /// The model-facing schemas for `subject`: exactly name/description/parameters, detached.
    pub fn schemas(&self, subject: Option<&Scope>) -> Result<Vec<ToolSchema>, SchemasError> {
        self.view(subject)
            .iter()
            .map(|def| {
                if dsh_schema::is_lossless(def.parameters()) {
                    Ok(def.schema())
                } else {
                    Err(SchemasError::LossyParameters {
                        name: def.name().to_owned(),
                    })
                }
            })
            .collect()
    }

    /// `Parallel` only when the tool resolves for execution (code-mode collapse applied) and its
    /// classifier says exactly `true` for `arguments`.
    pub fn execution_mode(
        &self,
        name: &str,
        arguments: &Value,
        subject: Option<&Scope>,
    ) -> ExecutionMode {
        let chain = chain_of(subject);
        if self.collapses(name, &chain, false) {
            return ExecutionMode::Exclusive;
        }
        match self.resolve_in(name, &chain) {
            Some(def) if def.is_concurrency_safe(arguments) => ExecutionMode::Parallel,
            _ => ExecutionMode::Exclusive,
        }
    }

    /// A top-level call naming a native tool under `code` mode is rejected before policy.
    pub(crate) fn collapses(&self, name: &str, chain: &[ScopeId], nested: bool) -> bool {
        !nested && name != RUN_CODE && self.mode_in(chain) == PresentationMode::Code
    }

    /// The guards a call from `chain` sees: global first, then farthest ancestor to own.
    pub(crate) fn guards_for(&self, chain: &[ScopeId]) -> Vec<GuardFn> {
        let state = self.read();
        let mut out: Vec<GuardFn> = state.global.guards.iter().map(|(_, g)| g.clone()).collect();
        for id in chain {
            if let Some(layer) = state.scoped.get(id) {
                out.extend(layer.guards.iter().map(|(_, g)| g.clone()));
            }
        }
        out
    }
}

/// Names a restriction in the chain's own layer may name: inherited tools (global and ancestor
/// layers), never the own layer's.
fn restrictable_names<'a>(state: &'a State, chain: &[ScopeId]) -> HashSet<&'a str> {
    let ancestors = chain.split_last().map(|(_, a)| a).unwrap_or(&[]);
    let mut names: HashSet<&str> = state.global.tools.keys().map(String::as_str).collect();
    for id in ancestors {
        if let Some(layer) = state.layer(Some(*id)) {
            names.extend(layer.tools.keys().map(String::as_str));
        }
    }
    names
}
