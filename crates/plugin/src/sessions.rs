//! Per-session pieces: a plugin registers an *attacher* from its scope; the host runs it for
//! every live session and every session opened later, each time in a fresh scope under that
//! session's agent scope (so what it registers is visible to that agent only).
//!
//! Each (attacher, session) pair is mounted through `dsh_kernel::mount`, so the three ways a
//! piece goes away are one mechanism: the plugin's scope is disposed (hot reload, unmount) and
//! every piece it attached is unmounted; the agent ends and its scope takes the pieces with it;
//! the session's permissions or agent preset change and every piece is re-applied with
//! `Mounted::reapply`.

use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::AgentHandle;
use dsh_kernel::Disposer;
use dsh_kernel::Mounted;
use dsh_kernel::Plugin;
use dsh_kernel::PluginError;
use dsh_kernel::Scope;
use dsh_session::SessionError;
use serde_json::Value;

use crate::context::Permissions;
use crate::context::PermissionsOrigin;
use crate::context::SessionContext;

/// What an attacher gets for one session.
pub struct AttachedSession<'a> {
    /// A fresh scope under the agent's scope: register the session's tools, listeners, prompt
    /// sections and services here. It is disposed when the piece goes away.
    pub scope: &'a Scope,
    pub agent: &'a AgentHandle,
    pub context: &'a Arc<SessionContext>,
}

type AttachFn = dyn Fn(&AttachedSession<'_>) -> Result<(), PluginError> + Send + Sync;

struct Attacher {
    id: u64,
    name: String,
    run: Arc<AttachFn>,
}

struct Live {
    agent: AgentHandle,
    context: Arc<SessionContext>,
    /// `(attacher id, its piece)`, in attach order.
    pieces: Vec<(u64, Arc<Mounted>)>,
}

#[derive(Default)]
struct Inner {
    next: u64,
    attachers: Vec<Arc<Attacher>>,
    sessions: Vec<Live>,
}

/// The live sessions of a host and the attachers plugins registered.
#[derive(Default)]
pub struct Sessions {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("Sessions")
            .field("attachers", &inner.attachers.len())
            .field("sessions", &inner.sessions.len())
            .finish()
    }
}

/// The kernel plugin one piece is mounted as.
struct Piece {
    attacher: Arc<Attacher>,
    agent: AgentHandle,
    context: Arc<SessionContext>,
}

impl Plugin for Piece {
    type Config = Value;

    fn name(&self) -> &str {
        &self.attacher.name
    }

    fn apply(&self, ctx: &Scope, _config: Value) -> Result<(), PluginError> {
        (self.attacher.run)(&AttachedSession {
            scope: ctx,
            agent: &self.agent,
            context: &self.context,
        })
    }
}

fn mount_piece(
    attacher: &Arc<Attacher>,
    agent: &AgentHandle,
    context: &Arc<SessionContext>,
) -> Result<Arc<Mounted>, PluginError> {
    let piece = Arc::new(Piece {
        attacher: attacher.clone(),
        agent: agent.clone(),
        context: context.clone(),
    });
    dsh_kernel::mount(agent.scope(), piece, Value::Null).map(Arc::new)
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        dsh_sync::lock(&self.inner)
    }

    /// Registers `attach` (named after the plugin, for diagnostics) as owned by `owner` (the
    /// plugin's scope) and runs it for every live session now. Disposing `owner` removes the
    /// attacher and unmounts every piece it attached. An error attaching to a live session is
    /// returned (the caller's `apply` then fails and its scope is disposed).
    pub fn attach(
        self: &Arc<Self>,
        owner: &Scope,
        name: &str,
        attach: impl Fn(&AttachedSession<'_>) -> Result<(), PluginError> + Send + Sync + 'static,
    ) -> Result<Disposer, PluginError> {
        let (attacher, live) = {
            let mut inner = self.lock();
            inner.next += 1;
            let attacher = Arc::new(Attacher {
                id: inner.next,
                name: name.to_owned(),
                run: Arc::new(attach),
            });
            inner.attachers.push(attacher.clone());
            let live: Vec<(AgentHandle, Arc<SessionContext>)> = inner
                .sessions
                .iter()
                .map(|s| (s.agent.clone(), s.context.clone()))
                .collect();
            (attacher, live)
        };
        let weak = Arc::downgrade(self);
        let id = attacher.id;
        let disposer = owner.defer(move || {
            if let Some(sessions) = weak.upgrade() {
                sessions.detach(id);
            }
        });
        for (agent, context) in live {
            let piece = mount_piece(&attacher, &agent, &context)?;
            self.record_piece(context.id(), id, piece);
        }
        Ok(disposer)
    }

    fn record_piece(&self, session: &str, attacher: u64, piece: Arc<Mounted>) {
        let mut inner = self.lock();
        let still_attached = inner.attachers.iter().any(|a| a.id == attacher);
        match inner
            .sessions
            .iter_mut()
            .find(|s| s.context.id() == session)
        {
            Some(live) if still_attached => live.pieces.push((attacher, piece)),
            // The session ended or the attacher went away while it ran: undo the piece.
            _ => {
                drop(inner);
                piece.unmount();
            }
        }
    }

    fn detach(&self, attacher: u64) {
        let pieces: Vec<Arc<Mounted>> = {
            let mut inner = self.lock();
            inner.attachers.retain(|a| a.id != attacher);
            let mut pieces = Vec::new();
            for live in &mut inner.sessions {
                live.pieces.retain(|(id, piece)| {
                    if *id == attacher {
                        pieces.push(piece.clone());
                        false
                    } else {
                        true
                    }
                });
            }
            pieces
        };
        for piece in pieces.iter().rev() {
            piece.unmount();
        }
    }

    /// Opens a session: runs every attacher for it, and forgets it when its agent's scope is
    /// disposed. On an attacher's error the pieces attached so far stay (the agent's scope
    /// owns them) and the error is returned; the caller disposes the agent.
    pub fn open(
        self: &Arc<Self>,
        agent: &AgentHandle,
        context: Arc<SessionContext>,
    ) -> Result<(), PluginError> {
        let attachers = {
            let mut inner = self.lock();
            inner.sessions.push(Live {
                agent: agent.clone(),
                context: context.clone(),
                pieces: Vec::new(),
            });
            inner.attachers.clone()
        };
        let weak = Arc::downgrade(self);
        let id = context.id().to_owned();
        agent.scope().defer(move || {
            if let Some(sessions) = weak.upgrade() {
                sessions.lock().sessions.retain(|s| s.context.id() != id);
            }
        });
        for attacher in attachers {
            let piece = mount_piece(&attacher, agent, &context)?;
            self.record_piece(context.id(), attacher.id, piece);
        }
        Ok(())
    }

    /// The live sessions, oldest first.
    pub fn live(&self) -> Vec<(AgentHandle, Arc<SessionContext>)> {
        self.lock()
            .sessions
            .iter()
            .map(|s| (s.agent.clone(), s.context.clone()))
            .collect()
    }

    /// The live session `id`.
    pub fn get(&self, id: &str) -> Option<(AgentHandle, Arc<SessionContext>)> {
        self.lock()
            .sessions
            .iter()
            .find(|s| s.context.id() == id)
            .map(|s| (s.agent.clone(), s.context.clone()))
    }

    /// Changes a session's permissions (logged) and, when they changed, re-applies every piece
    /// attached to it, so tools whose definitions depend on them (the file tools' escalation
    /// parameters) are rebuilt. The first failing piece's error is returned after the rest
    /// were re-applied.
    pub fn set_permissions(
        &self,
        context: &SessionContext,
        permissions: Permissions,
        origin: PermissionsOrigin,
    ) -> Result<bool, SetPermissionsError> {
        if !context.update_permissions(permissions, origin)? {
            return Ok(false);
        }
        self.reapply(context)
            .map_err(SetPermissionsError::Reattach)?;
        Ok(true)
    }

    /// Re-applies every piece attached to the session of `context`, in attach order, so each
    /// rebuilds from the session's state now (its permissions, its agent preset). The first
    /// failing piece's error is returned after the rest were re-applied.
    pub fn reapply(&self, context: &SessionContext) -> Result<(), PluginError> {
        let pieces: Vec<Arc<Mounted>> = self
            .lock()
            .sessions
            .iter()
            .find(|s| s.context.id() == context.id())
            .map(|s| s.pieces.iter().map(|(_, piece)| piece.clone()).collect())
            .unwrap_or_default();
        let mut first_error = None;
        for piece in pieces {
            if let Err(error) = piece.reapply(Value::Null) {
                tracing::warn!(piece = piece.name(), %error, "cannot re-attach a session's plugin piece");
                first_error.get_or_insert(error);
            }
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

/// Why a permission change did not fully apply.
#[derive(Debug, thiserror::Error)]
pub enum SetPermissionsError {
    #[error("cannot log the permission change: {0}")]
    Log(#[from] SessionError),
    #[error("cannot re-attach the session's plugins: {0}")]
    Reattach(PluginError),
}
