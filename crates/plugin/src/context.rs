//! The per-session context: who the session is, where it works, what it may do now, and the
//! sink its plugins append durable events through. One per agent, provided as a kernel service
//! on the agent's scope, so anything running for the agent finds it with
//! [`SessionContext::of`] or [`SessionContext::for_run`].

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use dsh_kernel::Scope;
use dsh_session::SessionError;
use dsh_session::SessionLog;
use dsh_session::data::EventData;
use dsh_tools::ApprovalPolicy;
use dsh_tools::SandboxMode;
use dsh_tools::ToolError;
use dsh_tools::ToolRun;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;
use serde_json::json;
use tokio::sync::watch;

/// What a session may do: the standing sandbox mode and the approval policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Permissions {
    pub sandbox: SandboxMode,
    pub approval: ApprovalPolicy,
}

impl Permissions {
    /// `mode` with the `dsh-base` approval default (`never` iff danger-full-access).
    pub fn for_mode(sandbox: SandboxMode) -> Self {
        Self {
            sandbox,
            approval: ApprovalPolicy::default_for(sandbox),
        }
    }

    /// The preset whose knobs match, if any.
    pub fn preset(self) -> Option<&'static Preset> {
        PRESETS.iter().find(|preset| preset.permissions == self)
    }
}

/// The permissions new sessions start with (a service the host's `sandbox` and `approval`
/// plugins provide; definitions that describe the standing policy read it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultPermissions(pub Permissions);

/// Whether confined commands may reach the network (`[plugins.sandbox] network`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxNetwork(pub dsh_tools::NetworkAccess);

/// What one confined command may use (`[plugins.sandbox] max_processes`, `max_memory_mb`,
/// `tmp_size_mb`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxLimits(pub dsh_tools::SandboxLimits);

/// Who set a session's permissions last: the configuration (they follow config reloads) or a
/// client choosing a preset (they stay until the client changes them again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionsOrigin {
    Config,
    Client,
}

/// A named bundle of permissions (ACP session modes, the TUI's `/approval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    pub name: &'static str,
    pub permissions: Permissions,
    pub description: &'static str,
}

/// The presets every session offers, least permissive first.
pub const PRESETS: [Preset; 3] = [
    Preset {
        name: "read-only",
        permissions: Permissions {
            sandbox: SandboxMode::ReadOnly,
            approval: ApprovalPolicy::Ask,
        },
        description: "No file changes; a wider operation asks for approval.",
    },
    Preset {
        name: "workspace-write",
        permissions: Permissions {
            sandbox: SandboxMode::WorkspaceWrite,
            approval: ApprovalPolicy::Ask,
        },
        description: "Changes inside the workspace and temp folders; anything wider asks for approval.",
    },
    Preset {
        name: "danger-full-access",
        permissions: Permissions {
            sandbox: SandboxMode::DangerFullAccess,
            approval: ApprovalPolicy::Never,
        },
        description: "No file confinement and no approval prompts.",
    },
];

/// The runtime-context text of an approval policy.
pub fn approval_text(policy: ApprovalPolicy) -> &'static str {
    match policy {
        ApprovalPolicy::Never => {
            "Approval prompts are disabled in this session: actions that require approval are rejected automatically — do not request sandbox escalation (do not set `sandbox_permissions`)."
        }
        ApprovalPolicy::Ask => {
            "Approval policy: ask. Operations that require approval may ask through the configured answerers; without an available answerer, the request fails closed."
        }
    }
}

/// One session's facts and live permission state, and its durable-event sink.
pub struct SessionContext {
    log: SessionLog,
    cwd: PathBuf,
    home: Option<PathBuf>,
    permissions: watch::Sender<Permissions>,
    origin: std::sync::Mutex<PermissionsOrigin>,
}

impl std::fmt::Debug for SessionContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionContext")
            .field("id", &self.id())
            .field("cwd", &self.cwd)
            .field("permissions", &self.permissions())
            .finish_non_exhaustive()
    }
}

impl SessionContext {
    /// The context of the session whose log is `log`, working in `cwd` (absolute).
    pub fn new(
        log: SessionLog,
        cwd: PathBuf,
        home: Option<PathBuf>,
        permissions: Permissions,
    ) -> Self {
        Self {
            log,
            cwd,
            home,
            permissions: watch::Sender::new(permissions),
            origin: std::sync::Mutex::new(PermissionsOrigin::Config),
        }
    }

    /// The same context with its permissions marked as set by `origin` (a delegated child's
    /// are fixed when it starts: `Client`, so configuration reloads leave them alone).
    pub fn with_origin(self, origin: PermissionsOrigin) -> Self {
        *dsh_sync::lock(&self.origin) = origin;
        self
    }

    /// The context of the agent `scope` belongs to (or any scope under it).
    pub fn of(scope: &Scope) -> Option<Arc<Self>> {
        scope.service::<Self>()
    }

    /// The context of the session a tool call runs in; a call without one (no owning agent)
    /// fails with `<tool> requires an owning agent session`.
    pub fn for_run(run: &ToolRun, tool: &str) -> Result<Arc<Self>, ToolError> {
        run.agent()
            .and_then(|agent| Self::of(agent.scope()))
            .ok_or_else(|| ToolError::new(format!("{tool} requires an owning agent session")))
    }

    pub fn id(&self) -> &str {
        self.log.id()
    }

    /// The session's working directory (absolute).
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// `$DSH_HOME`, when the host has one.
    pub fn home(&self) -> Option<&Path> {
        self.home.as_deref()
    }

    /// The stored log's location, when the store keeps files.
    pub fn log_path(&self) -> Option<PathBuf> {
        self.log.path()
    }

    /// The parent session of a child (subagent or fork), if any.
    pub fn parent(&self) -> Option<&str> {
        self.log.header().parent_session.as_deref()
    }

    pub fn delegation_depth(&self) -> u64 {
        self.log.header().delegation_depth
    }

    /// The session's log, for reading (plugins append through [`SessionContext::record`]).
    pub fn log(&self) -> &SessionLog {
        &self.log
    }

    /// The permissions now.
    pub fn permissions(&self) -> Permissions {
        *self.permissions.borrow()
    }

    /// Who set the permissions last.
    pub fn permissions_origin(&self) -> PermissionsOrigin {
        *dsh_sync::lock(&self.origin)
    }

    /// Wakes whenever the permissions change.
    pub fn watch_permissions(&self) -> watch::Receiver<Permissions> {
        self.permissions.subscribe()
    }

    /// Changes the permissions and logs what changed (`permission/preset` when they match a
    /// preset, `sandbox/mode`, `approval/policy`). Returns whether anything changed. The host
    /// calls this, then re-attaches the session's per-session pieces
    /// ([`crate::Sessions::set_permissions`]).
    pub(crate) fn update_permissions(
        &self,
        next: Permissions,
        origin: PermissionsOrigin,
    ) -> Result<bool, SessionError> {
        *dsh_sync::lock(&self.origin) = origin;
        let old = self.permissions();
        if origin == PermissionsOrigin::Client
            && let Some(preset) = next.preset()
        {
            self.record_raw("permission/preset", json!({ "preset": preset.name }))?;
        }
        if old == next {
            return Ok(false);
        }
        if old.sandbox != next.sandbox {
            self.record_raw("sandbox/mode", json!({ "mode": next.sandbox.as_str() }))?;
        }
        if old.approval != next.approval {
            self.record_raw(
                "approval/policy",
                json!({ "policy": next.approval.as_str() }),
            )?;
        }
        self.permissions.send_replace(next);
        Ok(true)
    }

    /// Appends a plugin's typed event payload to the session log; returns its seq.
    pub fn record<E: EventData>(&self, data: &E) -> Result<u64, SessionError> {
        Ok(self.log.append_data(data, None)?.seq)
    }

    /// Appends an event given as `type` and JSON data (for payloads built dynamically).
    pub fn record_raw(&self, kind: &str, data: Value) -> Result<u64, SessionError> {
        Ok(self.log.append(kind, data, None)?.seq)
    }

    /// The turn events belong to now: the open turn, else the last one.
    pub fn turn(&self) -> u64 {
        let turns = self.log.turn_state();
        turns.open_turn.unwrap_or(turns.last_turn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_session::SessionHeader;
    use pretty_assertions::assert_eq;

    fn context() -> SessionContext {
        let log = SessionLog::in_memory(SessionHeader::new("s", Some("/w".into())));
        SessionContext::new(
            log,
            PathBuf::from("/w"),
            None,
            Permissions::for_mode(SandboxMode::WorkspaceWrite),
        )
    }

    #[test]
    fn a_preset_switch_logs_each_changed_knob_once() {
        let context = context();
        let watch = context.watch_permissions();
        let full = PRESETS[2].permissions;
        assert!(
            context
                .update_permissions(full, PermissionsOrigin::Client)
                .unwrap()
        );
        assert!(watch.has_changed().unwrap());
        let kinds: Vec<String> = context
            .log()
            .events()
            .unwrap()
            .iter()
            .map(|e| format!("{} {}", e.kind, e.data))
            .collect();
        assert_eq!(
            kinds,
            [
                r#"permission/preset {"preset":"danger-full-access"}"#,
                r#"sandbox/mode {"mode":"danger-full-access"}"#,
                r#"approval/policy {"policy":"never"}"#,
            ]
        );
        assert_eq!(context.permissions_origin(), PermissionsOrigin::Client);
        assert!(
            !context
                .update_permissions(full, PermissionsOrigin::Config)
                .unwrap(),
            "no change, nothing but the origin moves"
        );
        assert_eq!(context.log().events().unwrap().len(), 3);
    }

    #[test]
    fn presets_match_their_permissions() {
        assert_eq!(
            Permissions::for_mode(SandboxMode::DangerFullAccess)
                .preset()
                .map(|p| p.name),
            Some("danger-full-access")
        );
        let custom = Permissions {
            sandbox: SandboxMode::DangerFullAccess,
            approval: ApprovalPolicy::Ask,
        };
        assert_eq!(custom.preset(), None);
    }
}
