//! `exec --output stream-json`: the events of delegated in-process children (and theirs), on the
//! same stream as the parent's, each tagged with the child's session id and its parent's.

use dsh_sync::lock;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::Weak;

use dsh_agent::AgentHandle;
use dsh_kernel::Disposer;
use dsh_plugin::DelegatedChildren;
use dsh_session::Event;
use dsh_session::Subscription;
use tokio::sync::mpsc::UnboundedSender;

/// One event of one session of the run.
pub struct Tagged {
    pub session: String,
    /// The delegating session, for a child's events.
    pub parent: Option<String>,
    pub event: Arc<Event>,
}

#[derive(Default)]
struct Shared {
    sender: Mutex<Option<UnboundedSender<Tagged>>>,
    subscriptions: Mutex<Vec<Subscription>>,
    disposers: Mutex<Vec<Disposer>>,
}

impl Shared {
    fn send(&self, tagged: Tagged) {
        if let Some(sender) = lock(&self.sender).as_ref() {
            let _ = sender.send(tagged);
        }
    }
}

/// Follows every child `root` delegates to while it lives; dropping it stops following and
/// releases the sender.
pub struct Children {
    shared: Arc<Shared>,
}

impl Drop for Children {
    fn drop(&mut self) {
        lock(&self.shared.sender).take();
        for disposer in std::mem::take(&mut *lock(&self.shared.disposers)) {
            disposer.dispose();
        }
        lock(&self.shared.subscriptions).clear();
    }
}

/// Starts following `root`'s children; `None` when no plugin delegates to children.
pub fn follow(
    subagents: Option<Arc<dyn DelegatedChildren>>,
    root: &AgentHandle,
    sender: UnboundedSender<Tagged>,
) -> Option<Children> {
    let subagents = subagents?;
    let shared = Arc::new(Shared {
        sender: Mutex::new(Some(sender)),
        ..Shared::default()
    });
    watch(&shared, &subagents, root);
    Some(Children { shared })
}

/// Observes the starts of `owner`'s children (the lifecycle events' subject is the parent's
/// scope, so an observer owned by `owner`'s scope sees exactly its own children).
fn watch(shared: &Arc<Shared>, subagents: &Arc<dyn DelegatedChildren>, owner: &AgentHandle) {
    let weak = Arc::downgrade(shared);
    let service = Arc::downgrade(subagents);
    let disposer = subagents.on_start(
        owner,
        Arc::new(move |child: &AgentHandle, parent_id: &str| {
            let Some(shared) = weak.upgrade() else {
                return;
            };
            follow_log(&shared, child, parent_id.to_owned());
            if let Some(subagents) = service.upgrade() {
                watch(&shared, &subagents, child);
            }
        }),
    );
    lock(&shared.disposers).push(disposer);
}

/// Sends the child's whole log so far, then each event it commits, each exactly once.
fn follow_log(shared: &Arc<Shared>, child: &AgentHandle, parent: String) {
    let session = child.id().to_owned();
    // The next seq to send; `None` until the snapshot is taken (a listener call before that
    // commits an event the snapshot will contain).
    let next: Arc<Mutex<Option<u64>>> = Arc::default();
    let weak: Weak<Shared> = Arc::downgrade(shared);
    let subscription = {
        let next = next.clone();
        let (session, parent) = (session.clone(), parent.clone());
        child.log().on_event(move |event| {
            let mut next = lock(&next);
            let Some(n) = next.as_mut() else { return };
            if event.seq < *n {
                return;
            }
            *n = event.seq + 1;
            if let Some(shared) = weak.upgrade() {
                shared.send(Tagged {
                    session: session.clone(),
                    parent: Some(parent.clone()),
                    event: event.clone(),
                });
            }
        })
    };
    {
        let mut next = lock(&next);
        let snapshot = match child.log().events_since(0) {
            Ok(snapshot) => {
                *next = Some(snapshot.len() as u64);
                snapshot
            }
            Err(error) => {
                tracing::warn!(%error, "cannot read a child's history; showing its events from now on");
                *next = Some(child.log().len());
                Vec::new()
            }
        };
        for event in snapshot {
            shared.send(Tagged {
                session: session.clone(),
                parent: Some(parent.clone()),
                event,
            });
        }
    }
    lock(&shared.subscriptions).push(subscription);
}
