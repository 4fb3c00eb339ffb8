//! The terminal service (`ctx.terminals` upstream): session ids, owner isolation, unique names,
//! one active send per session, closing, and the registered backends.

use dsh_sync::lock;
use std::collections::HashMap;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use futures::future::BoxFuture;

use crate::error::TerminalError;
use crate::pty::PtySession;
use crate::pty::SessionStatus;

/// What a backend needs to start one terminal.
#[derive(Debug, Clone)]
pub struct OpenRequest {
    /// The new session's id (`pty-<n>`).
    pub id: String,
    /// The owning agent.
    pub owner: String,
    pub cwd: PathBuf,
    /// The scrubbed child environment (before backend overrides).
    pub env: Vec<(String, String)>,
    /// The sandbox wrapper of the owner's policy, if confined.
    pub wrapper: Option<(PathBuf, Vec<std::ffi::OsString>)>,
}

/// A terminal backend (`terminal-bash` and friends).
pub trait TerminalBackend: Send + Sync {
    /// Starts a terminal; returns it and its start-up output.
    fn open(
        &self,
        request: OpenRequest,
    ) -> BoxFuture<'static, Result<(Arc<PtySession>, String), TerminalError>>;
}

/// One open terminal as the service tracks it.
pub struct TerminalEntry {
    pub id: String,
    pub owner: String,
    pub name: Option<String>,
    pub kind: String,
    pub session: Arc<PtySession>,
    sending: AtomicBool,
}

impl std::fmt::Debug for TerminalEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TerminalEntry")
            .field("id", &self.id)
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

/// Held while a send runs; dropping it frees the session for the next send.
pub struct SendGuard {
    entry: Arc<TerminalEntry>,
}

impl Drop for SendGuard {
    fn drop(&mut self) {
        self.entry.sending.store(false, Ordering::SeqCst);
    }
}

/// The outcome of `close`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseOutcome {
    Closed,
    AlreadyClosing,
}

/// What `list` shows of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalInfo {
    pub id: String,
    pub name: Option<String>,
    pub kind: String,
    pub status: SessionStatus,
    pub pid: Option<u32>,
}

impl TerminalInfo {
    /// `<id>[ (<name>)] [<type>] running|exited code=<c> signal=<s>[ pid=<pid>]`.
    pub fn line(&self) -> String {
        let mut line = self.id.clone();
        if let Some(name) = &self.name {
            line.push_str(&format!(" ({name})"));
        }
        line.push_str(&format!(" [{}] {}", self.kind, self.status.render()));
        if let Some(pid) = self.pid {
            line.push_str(&format!(" pid={pid}"));
        }
        line
    }
}

#[derive(Default)]
struct State {
    next: u64,
    /// Owners whose agent scope already closes their sessions on disposal.
    watched: HashSet<String>,
    sessions: Vec<Arc<TerminalEntry>>,
    /// (owner, name) pairs whose session is still being created.
    creating: HashSet<(String, String)>,
    /// Owners with a session being created (for the sandbox-mode switch check).
    creating_owners: HashMap<String, usize>,
}

/// The service. One per composition; shared by the terminal tools and persistent bash.
#[derive(Default)]
pub struct TerminalService {
    state: Mutex<State>,
    backends: Mutex<HashMap<String, Arc<dyn TerminalBackend>>>,
    disposing: AtomicBool,
}

impl std::fmt::Debug for TerminalService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TerminalService").finish_non_exhaustive()
    }
}

impl TerminalService {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Makes sure `run`'s agent closes its terminals when it is disposed.
    pub fn watch_owner(self: &Arc<Self>, run: &dsh_tools::ToolRun) {
        let Some(agent) = run.agent() else { return };
        let owner = agent.id().to_owned();
        if !lock(&self.state).watched.insert(owner.clone()) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(self);
        agent.scope().defer(move || {
            if let Some(service) = weak.upgrade() {
                lock(&service.state).watched.remove(&owner);
                runtime.spawn(async move { service.dispose_owner(&owner).await });
            }
        });
    }

    /// Registers a backend for `kind`; the returned closure unregisters it.
    pub fn register_backend(
        self: &Arc<Self>,
        kind: &str,
        backend: Arc<dyn TerminalBackend>,
    ) -> impl FnOnce() + Send + 'static {
        lock(&self.backends).insert(kind.to_owned(), backend);
        let weak = Arc::downgrade(self);
        let kind = kind.to_owned();
        move || {
            if let Some(service) = weak.upgrade() {
                lock(&service.backends).remove(&kind);
            }
        }
    }

    fn check_live(&self) -> Result<(), TerminalError> {
        if self.disposing.load(Ordering::SeqCst) {
            return Err(TerminalError::new(
                "SERVICE_DISPOSING",
                "PTY service is disposing",
            ));
        }
        Ok(())
    }

    /// Opens a terminal of backend `kind` for `owner`. `prepare` fills in the cwd, env and
    /// wrapper once the id is known.
    pub async fn open(
        &self,
        owner: &str,
        kind: &str,
        name: Option<&str>,
        prepare: impl FnOnce(&str) -> Result<OpenRequest, TerminalError>,
    ) -> Result<(Arc<TerminalEntry>, String), TerminalError> {
        self.check_live()?;
        let backend = lock(&self.backends).get(kind).cloned().ok_or_else(|| {
            TerminalError::new(
                "NO_BACKEND",
                format!("no PTY backend registered for \"{kind}\""),
            )
        })?;
        let name = match name {
            Some(name) if name.trim().is_empty() => {
                return Err(TerminalError::new(
                    "INVALID_NAME",
                    "PTY session name must be non-empty",
                ));
            }
            other => other.map(str::to_owned),
        };
        let id = {
            let mut state = lock(&self.state);
            if let Some(name) = &name {
                let taken = state
                    .sessions
                    .iter()
                    .any(|e| e.owner == owner && e.name.as_deref() == Some(name.as_str()));
                if taken {
                    return Err(TerminalError::new(
                        "DUPLICATE_NAME",
                        format!("PTY session name \"{name}\" already exists for this owner"),
                    ));
                }
                if !state.creating.insert((owner.to_owned(), name.clone())) {
                    return Err(TerminalError::new(
                        "DUPLICATE_NAME",
                        format!("PTY session name \"{name}\" is already being created"),
                    ));
                }
            }
            *state.creating_owners.entry(owner.to_owned()).or_default() += 1;
            state.next += 1;
            format!("pty-{}", state.next)
        };
        let opened = async {
            let request = prepare(&id)?;
            backend.open(request).await
        }
        .await;
        {
            let mut state = lock(&self.state);
            if let Some(name) = &name {
                state.creating.remove(&(owner.to_owned(), name.clone()));
            }
            if let Some(count) = state.creating_owners.get_mut(owner) {
                *count -= 1;
                if *count == 0 {
                    state.creating_owners.remove(owner);
                }
            }
        }
        let (session, motd) = opened?;
        let entry = Arc::new(TerminalEntry {
            id,
            owner: owner.to_owned(),
            name,
            kind: kind.to_owned(),
            session,
            sending: AtomicBool::new(false),
        });
        let accepted = {
            let mut state = lock(&self.state);
            let live = !self.disposing.load(Ordering::SeqCst);
            if live {
                state.sessions.push(entry.clone());
            }
            live
        };
        if !accepted {
            entry.session.close().await;
            return Err(TerminalError::new(
                "SERVICE_DISPOSING",
                "PTY service is disposing",
            ));
        }
        Ok((entry, motd))
    }

    /// The caller's session `id`.
    pub fn get(&self, owner: &str, id: &str) -> Result<Arc<TerminalEntry>, TerminalError> {
        let state = lock(&self.state);
        let entry =
            state.sessions.iter().find(|e| e.id == id).ok_or_else(|| {
                TerminalError::new("NO_SESSION", format!("unknown PTY session {id}"))
            })?;
        if entry.owner != owner {
            return Err(TerminalError::new(
                "FOREIGN_SESSION",
                format!("PTY session {id} belongs to another agent"),
            ));
        }
        Ok(entry.clone())
    }

    /// Claims the single send slot of `id`.
    pub fn begin_send(
        &self,
        owner: &str,
        id: &str,
    ) -> Result<(Arc<TerminalEntry>, SendGuard), TerminalError> {
        let entry = self.get(owner, id)?;
        if entry.session.is_closing() {
            return Err(TerminalError::new(
                "CLOSING",
                format!("PTY session {id} is closing"),
            ));
        }
        if entry.sending.swap(true, Ordering::SeqCst) {
            return Err(TerminalError::new(
                "SEND_ACTIVE",
                format!("PTY session {id} already has an active send"),
            ));
        }
        let guard = SendGuard {
            entry: entry.clone(),
        };
        Ok((entry, guard))
    }

    /// Closes `id` and waits until its process tree is gone.
    pub async fn close(&self, owner: &str, id: &str) -> Result<CloseOutcome, TerminalError> {
        let entry = self.get(owner, id)?;
        if !entry.session.begin_close() {
            return Ok(CloseOutcome::AlreadyClosing);
        }
        entry.session.close().await;
        lock(&self.state).sessions.retain(|e| e.id != entry.id);
        Ok(CloseOutcome::Closed)
    }

    /// The caller's sessions, oldest first.
    pub fn list(&self, owner: &str) -> Vec<TerminalInfo> {
        lock(&self.state)
            .sessions
            .iter()
            .filter(|e| e.owner == owner)
            .map(|e| TerminalInfo {
                id: e.id.clone(),
                name: e.name.clone(),
                kind: e.kind.clone(),
                status: e.session.status(),
                pid: e.session.pid(),
            })
            .collect()
    }

    /// Whether `owner` has terminals open or being created (a sandbox-mode switch is refused
    /// then).
    pub fn owner_busy(&self, owner: &str) -> bool {
        let state = lock(&self.state);
        state.creating_owners.contains_key(owner) || state.sessions.iter().any(|e| e.owner == owner)
    }

    /// The error a sandbox-mode switch gets while `owner` has terminals.
    pub fn check_mode_switch(
        &self,
        owner: &str,
        from: &str,
        to: &str,
    ) -> Result<(), TerminalError> {
        if from != to && self.owner_busy(owner) {
            return Err(TerminalError::new(
                "SANDBOX_MODE_LOCKED",
                format!(
                    "cannot change sandbox mode from \"{from}\" to \"{to}\" while persistent terminal sessions are open or being created; wait for creation to settle and close them first"
                ),
            ));
        }
        Ok(())
    }

    /// Closes every session of `owner` (its agent is gone).
    pub async fn dispose_owner(&self, owner: &str) {
        let entries: Vec<_> = {
            let mut state = lock(&self.state);
            let (mine, rest): (Vec<_>, Vec<_>) =
                state.sessions.drain(..).partition(|e| e.owner == owner);
            state.sessions = rest;
            mine
        };
        for entry in entries {
            entry.session.begin_close();
            entry.session.close().await;
        }
    }

    /// Closes everything; later opens fail.
    pub async fn dispose(&self) {
        self.disposing.store(true, Ordering::SeqCst);
        let entries: Vec<_> = lock(&self.state).sessions.drain(..).collect();
        for entry in entries {
            entry.session.begin_close();
            entry.session.close().await;
        }
    }
}
