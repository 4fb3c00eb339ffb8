//! Hooks: waterfall (middleware with `next`), serial (all in order, first error stops) and
//! observe (notification; failures contained). Registration is an effect owned by a scope.
//!
//! Every dispatch snapshots the listener list and runs listeners with no kernel lock held:
//! listeners commonly register or dispose other listeners.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, Weak};

use crate::BoxFuture;
use crate::error::HookError;
use dsh_sync::lock;

use crate::scope::{Disposer, Scope, ScopeId, next_id, panic_message};
use crate::service::visible;

struct Entry<F: ?Sized> {
    id: u64,
    /// The owner's nearest agent: `None` = sees every dispatch.
    agent: Option<ScopeId>,
    f: Arc<F>,
}

/// The listener list shared by the hook and the undo closures (which hold it weakly, so a
/// dropped hook is not kept alive by its registrations).
struct List<F: ?Sized> {
    name: &'static str,
    entries: Arc<Mutex<Vec<Entry<F>>>>,
}

impl<F: ?Sized + Send + Sync + 'static> List<F> {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            entries: Arc::default(),
        }
    }

    fn add(&self, owner: &Scope, f: Arc<F>, front: bool) -> Disposer {
        let id = next_id();
        let entry = Entry {
            id,
            agent: owner.nearest_agent_id(),
            f,
        };
        {
            let mut entries = lock(&self.entries);
            if front {
                entries.insert(0, entry);
            } else {
                entries.push(entry);
            }
        }
        let weak: Weak<Mutex<Vec<Entry<F>>>> = Arc::downgrade(&self.entries);
        if owner.is_disposed() {
            tracing::warn!(
                hook = self.name,
                scope = owner.name(),
                "listener registered on a disposed scope; removed at once"
            );
        }
        // On a disposed owner `defer` runs the removal immediately.
        owner.defer(move || {
            if let Some(entries) = weak.upgrade() {
                lock(&entries).retain(|e| e.id != id);
            }
        })
    }

    /// The listeners that see a dispatch about `subject`, in order.
    fn snapshot(&self, subject: Option<&Scope>) -> Vec<Arc<F>> {
        let chain = subject.map(Scope::ancestor_ids).unwrap_or_default();
        lock(&self.entries)
            .iter()
            .filter(|e| visible(e.agent, &chain))
            .map(|e| e.f.clone())
            .collect()
    }

    fn len(&self) -> usize {
        lock(&self.entries).len()
    }
}

type WaterfallFn<I, O> = dyn Fn(I, Next<I, O>) -> BoxFuture<'static, O> + Send + Sync;
type BaseFn<I, O> = Box<dyn FnOnce(I) -> BoxFuture<'static, O> + Send>;

/// Async middleware chain. The first registered listener is outermost; [`Waterfall::prepend`]
/// makes a listener outermost. A listener either returns `next.run(input).await` (possibly
/// with a changed input or output) or short-circuits by returning its own output.
pub struct Waterfall<I, O> {
    list: List<WaterfallFn<I, O>>,
}

/// The rest of a waterfall chain, ending at the base. Consumed by [`Next::run`], so a listener
/// delegates at most once.
pub struct Next<I, O> {
    chain: Arc<[Arc<WaterfallFn<I, O>>]>,
    pos: usize,
    base: BaseFn<I, O>,
}

impl<I: Send + 'static, O: Send + 'static> Next<I, O> {
    /// Runs the remaining listeners, then the base.
    pub fn run(self, input: I) -> BoxFuture<'static, O> {
        match self.chain.get(self.pos).cloned() {
            Some(listener) => listener(
                input,
                Next {
                    chain: self.chain,
                    pos: self.pos + 1,
                    base: self.base,
                },
            ),
            None => (self.base)(input),
        }
    }
}

impl<I: Send + 'static, O: Send + 'static> Waterfall<I, O> {
    /// An empty chain; `name` appears in logs.
    pub fn new(name: &'static str) -> Self {
        Self {
            list: List::new(name),
        }
    }

    /// Adds `listener` innermost of the current listeners, owned by `owner`.
    pub fn register(
        &self,
        owner: &Scope,
        listener: impl Fn(I, Next<I, O>) -> BoxFuture<'static, O> + Send + Sync + 'static,
    ) -> Disposer {
        self.list.add(owner, Arc::new(listener), false)
    }

    /// Adds `listener` outermost, owned by `owner`.
    pub fn prepend(
        &self,
        owner: &Scope,
        listener: impl Fn(I, Next<I, O>) -> BoxFuture<'static, O> + Send + Sync + 'static,
    ) -> Disposer {
        self.list.add(owner, Arc::new(listener), true)
    }

    /// Runs the chain for `input`, ending in `base`. `subject` is the agent scope the event
    /// concerns (`None` = no agent): a listener owned under an agent sees only dispatches whose
    /// subject is within that agent; other listeners see all. The list is snapshotted now.
    pub fn dispatch(
        &self,
        subject: Option<&Scope>,
        input: I,
        base: impl FnOnce(I) -> BoxFuture<'static, O> + Send + 'static,
    ) -> BoxFuture<'static, O> {
        let next = Next {
            chain: self.list.snapshot(subject).into(),
            pos: 0,
            base: Box::new(base),
        };
        next.run(input)
    }

    /// Number of registered listeners (regardless of filtering).
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True if no listener is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name given at construction.
    pub fn name(&self) -> &'static str {
        self.list.name
    }
}

type SerialFn<E> = dyn Fn(Arc<E>) -> BoxFuture<'static, Result<(), HookError>> + Send + Sync;

/// Runs every listener in registration order, awaiting each; the first `Err` stops the rest and
/// is returned.
pub struct Serial<E> {
    list: List<SerialFn<E>>,
}

impl<E: Send + Sync + 'static> Serial<E> {
    /// An empty hook; `name` appears in logs.
    pub fn new(name: &'static str) -> Self {
        Self {
            list: List::new(name),
        }
    }

    /// Adds `listener` last, owned by `owner`.
    pub fn register(
        &self,
        owner: &Scope,
        listener: impl Fn(Arc<E>) -> BoxFuture<'static, Result<(), HookError>> + Send + Sync + 'static,
    ) -> Disposer {
        self.list.add(owner, Arc::new(listener), false)
    }

    /// Runs the listeners that see `subject` (same filtering as [`Waterfall::dispatch`]).
    pub fn dispatch(
        &self,
        subject: Option<&Scope>,
        event: Arc<E>,
    ) -> BoxFuture<'static, Result<(), HookError>> {
        let listeners = self.list.snapshot(subject);
        Box::pin(async move {
            for listener in listeners {
                listener(event.clone()).await?;
            }
            Ok(())
        })
    }

    /// Number of registered listeners.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True if no listener is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

type ObserveFn<E> = dyn Fn(&E) -> Result<(), HookError> + Send + Sync;

/// Notification to synchronous observers. An `Err` or a panic from one observer is logged
/// (`tracing::warn`, with the hook name) and contained; the others still run. Observers cannot
/// change the outcome of anything.
pub struct Observe<E> {
    list: List<ObserveFn<E>>,
}

impl<E: Send + Sync + 'static> Observe<E> {
    /// An empty hook; `name` appears in logs.
    pub fn new(name: &'static str) -> Self {
        Self {
            list: List::new(name),
        }
    }

    /// Adds `listener` last, owned by `owner`.
    pub fn register(
        &self,
        owner: &Scope,
        listener: impl Fn(&E) -> Result<(), HookError> + Send + Sync + 'static,
    ) -> Disposer {
        self.list.add(owner, Arc::new(listener), false)
    }

    /// Notifies the observers that see `subject` (same filtering as [`Waterfall::dispatch`]).
    pub fn emit(&self, subject: Option<&Scope>, event: &E) {
        for listener in self.list.snapshot(subject) {
            match catch_unwind(AssertUnwindSafe(|| listener(event))) {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    tracing::warn!(hook = self.list.name, %error, "observer failed; contained");
                }
                Err(payload) => {
                    tracing::warn!(hook = self.list.name, panic = %panic_message(payload.as_ref()), "observer panicked; contained");
                }
            }
        }
    }

    /// Number of registered listeners.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True if no listener is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
#[path = "hooks_tests.rs"]
mod tests;
