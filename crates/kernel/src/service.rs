//! Typed services: provided by a scope, looked up by type from anywhere the provider is visible.
//!
//! The registry is per tree (shared by every scope of it) because a global provider must be
//! visible from sibling branches, not only from its own descendants.

use std::any::{Any, TypeId};
use std::sync::{Arc, Mutex};

use crate::error::KernelError;
use dsh_sync::lock;

use crate::scope::{Disposer, Scope, ScopeId, next_id};

struct Entry {
    id: u64,
    type_id: TypeId,
    /// The provider's nearest agent: `None` = visible everywhere in the tree.
    agent: Option<ScopeId>,
    /// Holds an `Arc<T>`.
    value: Box<dyn Any + Send + Sync>,
}

#[derive(Default)]
pub(crate) struct ServiceRegistry {
    /// Oldest first; lookup scans from the end ("most recently provided wins").
    entries: Mutex<Vec<Entry>>,
}

/// Whether something owned under `agent` is visible to a subject whose ancestor ids are `chain`.
pub(crate) fn visible(agent: Option<ScopeId>, chain: &[ScopeId]) -> bool {
    agent.is_none_or(|a| chain.contains(&a))
}

impl Scope {
    /// Provides `service` under its type `T` for as long as this scope (or the returned
    /// Disposer) lives. A provider with no Agent ancestor-or-self is visible everywhere in the
    /// tree; one under an agent is visible only within that agent's subtree. Err if this scope
    /// is disposed.
    pub fn provide<T: ?Sized + Send + Sync + 'static>(
        &self,
        service: Arc<T>,
    ) -> Result<Disposer, KernelError> {
        let id = next_id();
        let registry = Arc::downgrade(&self.inner.services);
        let undo = Box::new(move || {
            if let Some(registry) = registry.upgrade() {
                lock(&registry.entries).retain(|e| e.id != id);
            }
        });
        lock(&self.inner.services.entries).push(Entry {
            id,
            type_id: TypeId::of::<T>(),
            agent: self.nearest_agent_id(),
            value: Box::new(service),
        });
        // Inserted first, so a concurrent dispose either sees the undo or we roll back here;
        // a service can never outlive its disposed scope.
        let disposer = self.try_defer(undo).map_err(|undo| {
            undo();
            self.disposed_error()
        })?;
        Ok(disposer)
    }

    /// The most recently provided live `T` visible from this scope.
    pub fn service<T: ?Sized + Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        let chain = self.ancestor_ids();
        let wanted = TypeId::of::<T>();
        lock(&self.inner.services.entries)
            .iter()
            .rev()
            .filter(|e| e.type_id == wanted && visible(e.agent, &chain))
            .find_map(|e| e.value.downcast_ref::<Arc<T>>().cloned())
    }
}
