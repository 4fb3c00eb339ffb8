//! The seam between the bridge and the host that composes agents.
//!
//! The bridge never builds an agent itself: the CLI (or a test) supplies a [`SessionFactory`]
//! that creates, resumes and lists sessions with the real tools, model and policy. The bridge
//! only drives the returned [`AgentHandle`] and renders its session log.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_kernel::BoxFuture;
use dsh_tools::ToolRegistry;
use serde_json::Value;

use crate::error::FactoryError;
use crate::images::ImageInput;
use crate::images::PromptImageStore;

/// What `session/new` asks the host for.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSession {
    /// The fresh session id (UUID v4) the bridge minted; the agent and its log use it.
    pub session_id: String,
    /// Absolute working directory; becomes the workspace of every tool.
    pub cwd: PathBuf,
    /// The client's `mcpServers`, verbatim; non-empty only when
    /// [`SessionFactory::supports_mcp_servers`] is true.
    pub mcp_servers: Vec<Value>,
}

/// One approval preset offered as an ACP session mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeInfo {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
}

/// The session's modes: the current one and every one it may switch to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeState {
    pub current: String,
    pub available: Vec<ModeInfo>,
}

/// Follows the session's mode from its log: given the current mode id and a committed event,
/// the new id when the event moves the mode (for example plan mode's `plan/mode`, logged by
/// `/plan` or an approved `exit_plan_mode`). The bridge then sends `current_mode_update`.
/// Called inside the log's event callback: it must not append to the log.
pub type ModeWatch = Arc<dyn Fn(&str, &dsh_session::Event) -> Option<String> + Send + Sync>;

/// An agent ready to be driven, plus what the bridge needs to render it.
pub struct SessionParts {
    pub agent: AgentHandle,
    /// The registry the agent's tools live in: the bridge asks it for each tool's presenters
    /// (`get(name, agent scope)`). `None` renders every call as a generic card.
    pub tools: Option<Arc<ToolRegistry>>,
    /// Approval presets as ACP modes; `None` when the host composes none.
    pub modes: Option<ModeState>,
    /// Moves `modes.current` when the log says the mode changed; `None`: only
    /// `session/set_mode` changes it.
    pub mode_watch: Option<ModeWatch>,
}

impl std::fmt::Debug for SessionParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionParts")
            .field("agent", &self.agent)
            .field("modes", &self.modes)
            .finish_non_exhaustive()
    }
}

/// Remote MCP transports a host accepts in `mcpServers`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct McpTransports {
    pub http: bool,
    pub sse: bool,
}

/// A stored session as `session/list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    pub session_id: String,
    pub cwd: PathBuf,
    pub title: Option<String>,
    /// Epoch milliseconds of the last activity (or creation), used for newest-first order.
    pub updated_at_ms: Option<u64>,
}

/// One way a user can give the agent model credentials, advertised in `authMethods`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthMethodInfo {
    pub id: String,
    pub name: String,
    /// What the user does (for example which environment variable to set).
    pub description: Option<String>,
}

/// How the host creates, resumes and lists sessions for the bridge.
pub trait SessionFactory: Send + Sync {
    /// A fresh agent for `request.session_id` working in `request.cwd`.
    fn create(&self, request: NewSession)
    -> BoxFuture<'static, Result<SessionParts, FactoryError>>;

    /// Resumes a stored session. The agent must not start any work (it stays idle until the next
    /// prompt). The bridge checks the resumed log's cwd against `cwd` before using it.
    fn load(
        &self,
        session_id: String,
        cwd: PathBuf,
    ) -> BoxFuture<'static, Result<SessionParts, FactoryError>>;

    /// Stored sessions, optionally only those whose cwd equals `cwd`.
    fn list(
        &self,
        cwd: Option<PathBuf>,
    ) -> BoxFuture<'static, Result<Vec<StoredSession>, FactoryError>>;

    /// Whether `create` accepts client-provided MCP servers. Until an MCP plugin exists the
    /// bridge rejects a non-empty `mcpServers` with `mcpServers is not supported`.
    fn supports_mcp_servers(&self) -> bool {
        false
    }

    /// The remote MCP transports `create` accepts besides stdio, advertised as
    /// `agentCapabilities.mcpCapabilities` (clients send only what is advertised).
    fn mcp_transports(&self) -> McpTransports {
        McpTransports::default()
    }

    /// Where inline prompt images are stored; `None` (no attachment store mounted) means image
    /// prompts are never advertised.
    fn prompt_images(&self) -> Option<Arc<dyn PromptImageStore>> {
        None
    }

    /// Whether a model route declares image input: the session's current route for `agent`,
    /// the configured one for `None` (what `initialize` advertises). An `Err` is a lookup
    /// failure (internal for a prompt; not advertised at `initialize`).
    fn image_input(&self, agent: Option<&AgentHandle>) -> Result<ImageInput, FactoryError> {
        let _ = agent;
        Ok(ImageInput::Unresolved)
    }

    /// The models a session may switch to (its `model` config option); empty offers none.
    fn models(&self) -> Vec<String> {
        Vec::new()
    }

    /// The authentication methods `initialize` advertises.
    fn auth_methods(&self) -> Vec<AuthMethodInfo> {
        Vec::new()
    }

    /// Whether the model can be reached with the credentials at hand now. A
    /// [`FactoryError::AuthRequired`] makes `session/new` and `authenticate` answer
    /// `auth_required`.
    fn check_credentials(&self) -> Result<(), FactoryError> {
        Ok(())
    }

    /// Applies the mode `mode_id` (one of [`SessionParts::modes`]) to the agent's session.
    fn set_mode(&self, agent: &AgentHandle, mode_id: &str) -> Result<(), FactoryError> {
        let _ = agent;
        Err(FactoryError::invalid(format!("unknown mode: {mode_id}")))
    }
}

fn last_write_ms(path: &std::path::Path) -> Option<u64> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    let since = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
    u64::try_from(since.as_millis()).ok()
}

/// `list` for hosts whose sessions live in a [`dsh_session::JsonlStore`]: every top-level
/// session with an absolute cwd (optionally only `cwd`), newest first.
pub fn stored_sessions(
    store: &dyn dsh_session::SessionStore,
    cwd: Option<&std::path::Path>,
) -> Result<Vec<StoredSession>, FactoryError> {
    let mut sessions: Vec<StoredSession> = store
        .list()
        .map_err(|e| FactoryError::internal(e.to_string()))?
        .into_iter()
        .filter(|summary| summary.parent_session.is_none())
        .filter_map(|summary| {
            let session_cwd = PathBuf::from(summary.cwd?);
            if !session_cwd.is_absolute() || cwd.is_some_and(|wanted| wanted != session_cwd) {
                return None;
            }
            Some(StoredSession {
                session_id: summary.id,
                cwd: session_cwd,
                title: summary.title,
                // The file's last write is the last activity; creation when unknown.
                updated_at_ms: Some(last_write_ms(&summary.path).unwrap_or(summary.created_at)),
            })
        })
        .collect();
    sessions.sort_by_key(|s| std::cmp::Reverse(s.updated_at_ms));
    Ok(sessions)
}
