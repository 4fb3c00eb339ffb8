//! The live sessions one server shares between its connections (`dsh web`, where several
//! browser tabs watch one session). A `session/load` of a session live here attaches the
//! connection to it as a viewer instead of opening a second writer of its log; a connection
//! that leaves only detaches, and the session keeps running until [`LiveSessions::shutdown`].
//! `dsh acp` on stdio has one connection and no registry: its sessions end with it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::AbortReason;

use crate::session::Session;
use dsh_sync::lock;

#[derive(Default)]
struct Shared {
    sessions: HashMap<String, Arc<Session>>,
    closed: bool,
}

/// The registry of live sessions shared by the connections of one server.
#[derive(Clone, Default)]
pub struct LiveSessions {
    shared: Arc<Mutex<Shared>>,
    /// Serialises opening a stored session, so two connections never load one log twice.
    pub(crate) loading: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for LiveSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSessions")
            .field("sessions", &self.len())
            .finish_non_exhaustive()
    }
}

impl LiveSessions {
    pub fn new() -> Self {
        Self::default()
    }

    /// How many sessions are live.
    pub fn len(&self) -> usize {
        lock(&self.shared).sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many connections watch session `id` (0 when it is not live here).
    pub fn viewers(&self, id: &str) -> usize {
        lock(&self.shared)
            .sessions
            .get(id)
            .map_or(0, |session| session.viewer_count())
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.shared).sessions.get(id).cloned()
    }

    /// Adds a session; false once the registry is shut down (the caller disposes it).
    pub(crate) fn insert(&self, session: Arc<Session>) -> bool {
        let mut shared = lock(&self.shared);
        if shared.closed {
            return false;
        }
        shared.sessions.insert(session.id.clone(), session);
        true
    }

    /// Ends every session: prompts and turns cancelled, agents idle, continuable children
    /// settled, agents disposed (logs written and synced). New sessions are refused after.
    pub async fn shutdown(&self) {
        let sessions: Vec<Arc<Session>> = {
            let mut shared = lock(&self.shared);
            shared.closed = true;
            shared.sessions.drain().map(|(_, s)| s).collect()
        };
        for session in &sessions {
            if let Some(slot) = lock(&session.slot).as_ref() {
                slot.cancelled.cancel();
            }
            session.agent.cancel(AbortReason::User, false);
        }
        for session in &sessions {
            session.agent.when_idle().await;
        }
        crate::bridge::drain_children(&sessions).await;
        let disposals = sessions.iter().map(|session| session.agent.dispose());
        futures::future::join_all(disposals).await;
    }
}
