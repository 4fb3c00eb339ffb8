//! The live agent directory (upstream `ctx.agents`): every live agent by id, with the agent
//! that owns it at runtime. One-shot in-process children are owned by their parent; top-level
//! agents and continuable children (created through the manager's own scope) are roots.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::AgentHandle;

struct Entry {
    handle: AgentHandle,
    owner: Option<String>,
}

/// Live agents by id. A kernel service (`Arc<AgentDirectory>`), one per host.
#[derive(Default)]
pub struct AgentDirectory {
    entries: Mutex<HashMap<String, Entry>>,
}

impl std::fmt::Debug for AgentDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentDirectory")
            .field("live", &dsh_sync::lock(&self.entries).len())
            .finish()
    }
}

impl AgentDirectory {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Registers `handle` (owned by `owner`, if any) until its agent scope is disposed.
    /// Registering an id again replaces the entry (a resumed session is a new agent).
    pub fn register(self: &Arc<Self>, handle: &AgentHandle, owner: Option<&str>) {
        let id = handle.id().to_owned();
        dsh_sync::lock(&self.entries).insert(
            id.clone(),
            Entry {
                handle: handle.clone(),
                owner: owner.map(str::to_owned),
            },
        );
        let me = Arc::downgrade(self);
        let registered = handle.clone();
        handle.scope().defer(move || {
            if let Some(me) = me.upgrade() {
                let mut entries = dsh_sync::lock(&me.entries);
                if entries.get(&id).is_some_and(|e| e.handle.same(&registered)) {
                    entries.remove(&id);
                }
            }
        });
    }

    /// Removes `handle` now (when it is still the registered agent of its id).
    pub fn unregister(&self, handle: &AgentHandle) {
        let mut entries = dsh_sync::lock(&self.entries);
        if entries
            .get(handle.id())
            .is_some_and(|e| e.handle.same(handle))
        {
            entries.remove(handle.id());
        }
    }

    pub fn get(&self, id: &str) -> Option<AgentHandle> {
        dsh_sync::lock(&self.entries)
            .get(id)
            .map(|e| e.handle.clone())
    }

    /// `agents.get(agent.id) === agent`.
    pub fn is_exact(&self, handle: &AgentHandle) -> bool {
        dsh_sync::lock(&self.entries)
            .get(handle.id())
            .is_some_and(|e| e.handle.same(handle))
    }

    /// The id of the live agent that owns `id`, if any.
    pub fn owner_of(&self, id: &str) -> Option<String> {
        let entries = dsh_sync::lock(&self.entries);
        let owner = entries.get(id)?.owner.clone()?;
        entries.contains_key(&owner).then_some(owner)
    }

    /// A runtime root: live and not owned by another live agent.
    pub fn is_root(&self, handle: &AgentHandle) -> bool {
        self.is_exact(handle) && self.owner_of(handle.id()).is_none()
    }

    /// Every live agent, in no particular order.
    pub fn live(&self) -> Vec<AgentHandle> {
        dsh_sync::lock(&self.entries)
            .values()
            .map(|e| e.handle.clone())
            .collect()
    }

    pub fn len(&self) -> usize {
        dsh_sync::lock(&self.entries).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The user-questions seam's view (hooks-and-tools-spec §C.2): a known agent owned by another
/// live agent is `Delegated`; a stale handle under a known id is `NotLive`; an agent this
/// directory never saw (a host that registers only children) is a root.
impl dsh_user_questions::AgentDirectory for AgentDirectory {
    fn standing(&self, caller: &dsh_user_questions::Caller) -> dsh_user_questions::CallerStanding {
        use dsh_user_questions::CallerStanding;
        let known = dsh_sync::lock(&self.entries)
            .get(&caller.agent_id)
            .map(|e| e.handle.scope() == &caller.scope);
        match known {
            None => CallerStanding::Root,
            Some(false) => CallerStanding::NotLive,
            Some(true) if self.owner_of(&caller.agent_id).is_some() => CallerStanding::Delegated,
            Some(true) => CallerStanding::Root,
        }
    }
}
