//! Scopes (root → plugin → agent) and the disposers they own.
//!
//! Ownership: a parent holds its live children strongly and a child holds its parent strongly
//! (so `ancestors()` always works). Disposal breaks that cycle by unlinking children; an
//! undisposed tree lives until it is disposed, on purpose: dropping a handle must never undo
//! effects silently.

use dsh_sync::lock;
use std::any::Any;
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::error::KernelError;
use crate::service::ServiceRegistry;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// Runs a user callback, containing and logging a panic. Returns false if it panicked.
pub(crate) fn run_contained(what: &str, name: &str, f: impl FnOnce()) -> bool {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => true,
        Err(payload) => {
            tracing::warn!(what, name, panic = %panic_message(payload.as_ref()), "callback panicked; contained");
            false
        }
    }
}

pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_owned()
    }
}

/// Process-unique scope identity.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct ScopeId(u64);

/// What a scope stands for. Agent scopes bound the visibility of services and listeners.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ScopeKind {
    /// The top of a tree.
    Root,
    /// A mounted plugin instance.
    Plugin,
    /// One agent (and its sub-scopes).
    Agent,
}

type Undo = Box<dyn FnOnce() + Send>;

pub(crate) struct Effect {
    id: u64,
    undo: Mutex<Option<Undo>>,
    owner: Weak<ScopeInner>,
}

impl Effect {
    /// Takes and runs the undo if nobody has yet. Exactly-once is decided by the `take`.
    fn run(&self, scope_name: &str) {
        let undo = lock(&self.undo).take();
        if let Some(undo) = undo {
            run_contained("disposer", scope_name, undo);
        }
    }
}

#[derive(Default)]
struct State {
    disposed: bool,
    children: Vec<Scope>,
    /// Keyed by registration sequence, so `pop_last` is "newest first".
    disposers: BTreeMap<u64, Arc<Effect>>,
}

pub(crate) struct ScopeInner {
    id: ScopeId,
    kind: ScopeKind,
    name: String,
    parent: Option<Scope>,
    pub(crate) services: Arc<ServiceRegistry>,
    state: Mutex<State>,
}

impl Drop for ScopeInner {
    /// Unlinks the parent chain iteratively: dropping the last handle to a 10,000-deep leaf
    /// must not recurse 10,000 frames.
    fn drop(&mut self) {
        let mut next = self.parent.take();
        while let Some(parent) = next {
            match Arc::try_unwrap(parent.inner) {
                Ok(mut inner) => next = inner.parent.take(),
                Err(_) => break,
            }
        }
    }
}

/// A node of the scope tree. Cheap to clone (an `Arc`); equality means "same scope".
#[derive(Clone)]
pub struct Scope {
    pub(crate) inner: Arc<ScopeInner>,
}

impl PartialEq for Scope {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}
impl Eq for Scope {}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("id", &self.inner.id)
            .field("kind", &self.inner.kind)
            .field("name", &self.inner.name)
            .field("disposed", &self.is_disposed())
            .finish()
    }
}

impl Scope {
    /// A new tree (with its own service registry).
    pub fn root() -> Scope {
        Scope::new(ScopeKind::Root, "root".to_owned(), None, Arc::default())
    }

    fn new(
        kind: ScopeKind,
        name: String,
        parent: Option<Scope>,
        services: Arc<ServiceRegistry>,
    ) -> Scope {
        Scope {
            inner: Arc::new(ScopeInner {
                id: ScopeId(next_id()),
                kind,
                name,
                parent,
                services,
                state: Mutex::default(),
            }),
        }
    }

    /// A new child scope. Err if `self` is already disposed.
    pub fn child(&self, kind: ScopeKind, name: impl Into<String>) -> Result<Scope, KernelError> {
        let child = Scope::new(
            kind,
            name.into(),
            Some(self.clone()),
            self.inner.services.clone(),
        );
        let mut state = lock(&self.inner.state);
        if state.disposed {
            return Err(self.disposed_error());
        }
        state.children.push(child.clone());
        Ok(child)
    }

    pub(crate) fn disposed_error(&self) -> KernelError {
        KernelError::ScopeDisposed {
            name: self.inner.name.clone(),
        }
    }

    /// This scope's identity.
    pub fn id(&self) -> ScopeId {
        self.inner.id
    }

    /// This scope's kind.
    pub fn kind(&self) -> ScopeKind {
        self.inner.kind
    }

    /// This scope's name (a plugin scope is named after its plugin).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The parent scope (`None` for a root). Still available after disposal.
    pub fn parent(&self) -> Option<Scope> {
        self.inner.parent.clone()
    }

    /// Self first, then parent, ..., root.
    pub fn ancestors(&self) -> Vec<Scope> {
        let mut out = vec![self.clone()];
        let mut cur = self.inner.parent.clone();
        while let Some(s) = cur {
            cur = s.inner.parent.clone();
            out.push(s);
        }
        out
    }

    /// Ids of self, parent, ..., root (no Arc clones; used by visibility checks).
    pub(crate) fn ancestor_ids(&self) -> Vec<ScopeId> {
        let mut out = Vec::new();
        let mut cur = Some(&self.inner);
        while let Some(s) = cur {
            out.push(s.id);
            cur = s.parent.as_ref().map(|p| &p.inner);
        }
        out
    }

    /// True if `self == other` or `self` is a descendant of `other`.
    pub fn is_within(&self, other: &Scope) -> bool {
        let mut cur = Some(&self.inner);
        while let Some(s) = cur {
            if Arc::ptr_eq(s, &other.inner) {
                return true;
            }
            cur = s.parent.as_ref().map(|p| &p.inner);
        }
        false
    }

    /// Self or the nearest ancestor of kind [`ScopeKind::Agent`].
    pub fn nearest_agent(&self) -> Option<Scope> {
        self.ancestors()
            .into_iter()
            .find(|s| s.kind() == ScopeKind::Agent)
    }

    pub(crate) fn nearest_agent_id(&self) -> Option<ScopeId> {
        let mut cur = Some(&self.inner);
        while let Some(s) = cur {
            if s.kind == ScopeKind::Agent {
                return Some(s.id);
            }
            cur = s.parent.as_ref().map(|p| &p.inner);
        }
        None
    }

    /// Agent-kind scopes on the chain, farthest first, self's own (nearest) last.
    pub fn agent_chain(&self) -> Vec<Scope> {
        let mut chain: Vec<Scope> = self
            .ancestors()
            .into_iter()
            .filter(|s| s.kind() == ScopeKind::Agent)
            .collect();
        chain.reverse();
        chain
    }

    /// Registers `undo` to run when this scope is disposed. If the scope is already disposed,
    /// runs `undo` now (panic contained) and returns a spent Disposer.
    pub fn defer(&self, undo: impl FnOnce() + Send + 'static) -> Disposer {
        match self.try_defer(Box::new(undo)) {
            Ok(d) => d,
            Err(undo) => {
                run_contained("disposer", &self.inner.name, undo);
                Disposer::noop()
            }
        }
    }

    /// Registers `undo` unless disposed; on a disposed scope hands `undo` back unrun.
    pub(crate) fn try_defer(&self, undo: Undo) -> Result<Disposer, Undo> {
        let mut state = lock(&self.inner.state);
        if state.disposed {
            return Err(undo);
        }
        let effect = Arc::new(Effect {
            id: next_id(),
            undo: Mutex::new(Some(undo)),
            owner: Arc::downgrade(&self.inner),
        });
        state.disposers.insert(effect.id, effect.clone());
        Ok(Disposer { effect })
    }

    /// Disposes this scope and its subtree: children first (newest child first, recursively),
    /// then this scope's own disposers newest first; each runs exactly once, a panicking one is
    /// logged and the rest still run. Idempotent. Iterative, so depth is not bounded by the stack.
    pub fn dispose(&self) {
        // (scope, children already expanded)
        let mut stack: Vec<(Scope, bool)> = vec![(self.clone(), false)];
        while let Some((scope, expanded)) = stack.pop() {
            if !expanded {
                let children = {
                    let mut state = lock(&scope.inner.state);
                    if state.disposed {
                        continue;
                    }
                    // Marked first: a disposer that defers onto this scope sees it disposed and
                    // its undo runs immediately instead of being lost.
                    state.disposed = true;
                    std::mem::take(&mut state.children)
                };
                stack.push((scope, true));
                // Last pushed is popped first: the newest child is disposed first.
                stack.extend(children.into_iter().map(|c| (c, false)));
            } else {
                loop {
                    let effect = lock(&scope.inner.state).disposers.pop_last();
                    match effect {
                        Some((_, effect)) => effect.run(&scope.inner.name),
                        None => break,
                    }
                }
                if let Some(parent) = &scope.inner.parent {
                    lock(&parent.inner.state).children.retain(|c| c != &scope);
                }
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn child_count(&self) -> usize {
        lock(&self.inner.state).children.len()
    }

    /// True once [`Scope::dispose`] has started on this scope or an ancestor.
    pub fn is_disposed(&self) -> bool {
        lock(&self.inner.state).disposed
    }
}

/// The exact undo of one effect. Clones share the effect. [`Disposer::dispose`] runs it at most
/// once ever and removes it from the owning scope. Dropping a Disposer does not undo anything:
/// the scope owns the effect.
#[derive(Clone)]
pub struct Disposer {
    effect: Arc<Effect>,
}

impl std::fmt::Debug for Disposer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Disposer")
            .field("disposed", &self.is_disposed())
            .finish()
    }
}

impl Disposer {
    /// Undoes the effect now (if not already undone) and detaches it from its scope.
    /// A panic in the undo is contained and logged, as during scope disposal.
    pub fn dispose(&self) {
        let undo = lock(&self.effect.undo).take();
        let Some(undo) = undo else { return };
        let name = match self.effect.owner.upgrade() {
            Some(owner) => {
                lock(&owner.state).disposers.remove(&self.effect.id);
                owner.name.clone()
            }
            None => String::new(),
        };
        run_contained("disposer", &name, undo);
    }

    /// True once the effect has been undone (or for a [`Disposer::noop`]).
    pub fn is_disposed(&self) -> bool {
        lock(&self.effect.undo).is_none()
    }

    /// A spent Disposer that undoes nothing.
    pub fn noop() -> Disposer {
        Disposer {
            effect: Arc::new(Effect {
                id: 0,
                undo: Mutex::new(None),
                owner: Weak::new(),
            }),
        }
    }
}

#[cfg(test)]
#[path = "scope_tests.rs"]
mod tests;
