//! The standing sandbox mode and approval policy shared by every tool that confines file writes
//! (`bash`, the file tools): one definition so the host hands the same values to each of them.

use serde::Deserialize;
use serde::Serialize;

/// What file writes a call may perform, ordered from narrowest to widest.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    ReadOnly,
    WorkspaceWrite,
    DangerFullAccess,
}

impl SandboxMode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::WorkspaceWrite => "workspace-write",
            Self::DangerFullAccess => "danger-full-access",
        }
    }

    /// Parses the wire name (`read-only` | `workspace-write` | `danger-full-access`).
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "read-only" => Some(Self::ReadOnly),
            "workspace-write" => Some(Self::WorkspaceWrite),
            "danger-full-access" => Some(Self::DangerFullAccess),
            _ => None,
        }
    }

    /// `read-only` < `workspace-write` < `danger-full-access`.
    pub fn is_strictly_wider_than(self, other: Self) -> bool {
        self > other
    }
}

/// Whether approval prompts may be raised (`dsh-user-approval` policy): `ask` routes an
/// operation that needs approval to the session's answerers, `never` rejects it at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalPolicy {
    Ask,
    Never,
}

impl ApprovalPolicy {
    /// The `dsh-base` rule: `never` iff `danger-full-access`, else `ask`.
    pub fn default_for(mode: SandboxMode) -> Self {
        if mode == SandboxMode::DangerFullAccess {
            Self::Never
        } else {
            Self::Ask
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::Never => "never",
        }
    }
}

/// Whether confined commands may reach the network. `read-only` never does; this decides
/// `workspace-write` (`danger-full-access` is never confined).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum NetworkAccess {
    #[default]
    Allow,
    Deny,
}

/// Folders of a project that a later run reads as configuration or executes: dsh's own
/// (`config.toml`, skills, plugins), the hook and settings folders of the agents whose hook
/// files dsh runs (Claude Code, codex), and the shared skills folder. Short of
/// `danger-full-access` no tool writes them: the file tools refuse any path through one, and a
/// confined command sees the workspace's own read-only (see `docs/security.md`).
pub const PROTECTED_PROJECT_DIRS: [&str; 4] = [".dsh", ".claude", ".codex", ".agents"];

/// Files of a project that another agent the person runs reads as its server list.
pub const PROTECTED_PROJECT_FILES: [&str; 1] = [".mcp.json"];

/// git's own folder (or, in a linked worktree or a submodule, the file that points at it):
/// its config names commands (`core.fsmonitor`, `core.hooksPath`, filters) and its hooks are
/// commands that the person's git runs later, unconfined. Its index decides which nested
/// repositories git enters.
pub const GIT_DIR_NAME: &str = ".git";

/// What one confined command may use (`[plugins.sandbox]`): its processes (threads count),
/// the memory each of its processes may allocate, and the size of its private `/tmp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SandboxLimits {
    pub max_processes: u64,
    pub max_memory_mb: u64,
    pub tmp_size_mb: u64,
}

impl SandboxLimits {
    pub const DEFAULT_MAX_PROCESSES: u64 = 1024;
    pub const DEFAULT_MAX_MEMORY_MB: u64 = 4096;
    pub const DEFAULT_TMP_SIZE_MB: u64 = 1024;
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            max_processes: Self::DEFAULT_MAX_PROCESSES,
            max_memory_mb: Self::DEFAULT_MAX_MEMORY_MB,
            tmp_size_mb: Self::DEFAULT_TMP_SIZE_MB,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn widening_order() {
        use SandboxMode::*;
        assert!(WorkspaceWrite.is_strictly_wider_than(ReadOnly));
        assert!(DangerFullAccess.is_strictly_wider_than(ReadOnly));
        assert!(DangerFullAccess.is_strictly_wider_than(WorkspaceWrite));
        assert!(!WorkspaceWrite.is_strictly_wider_than(WorkspaceWrite));
        assert!(!ReadOnly.is_strictly_wider_than(WorkspaceWrite));
    }

    #[test]
    fn wire_names_round_trip() {
        for mode in [
            SandboxMode::ReadOnly,
            SandboxMode::WorkspaceWrite,
            SandboxMode::DangerFullAccess,
        ] {
            assert_eq!(SandboxMode::parse(mode.as_str()), Some(mode));
            assert_eq!(
                serde_json::to_value(mode).unwrap(),
                serde_json::Value::String(mode.as_str().to_owned())
            );
        }
        assert_eq!(SandboxMode::parse("full"), None);
    }
}
