//! File sandbox policy (catalog §5.3): which canonical paths a write may touch, and the
//! one-call escalation a mutating tool may request (`sandbox_permissions` + `justification`).
//! Reads always pass. Paths are canonicalized (symlinks and `..` resolved) before deciding.

use std::path::Component;
use std::path::Path;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;
use serde::Serialize;

pub use dsh_tools::SandboxMode;

use crate::error::FsError;
use crate::error::codes;

/// The modes a call may escalate to; the model-facing enum of `sandbox_permissions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum EscalationMode {
    #[serde(rename = "workspace-write")]
    WorkspaceWrite,
    #[serde(rename = "danger-full-access")]
    DangerFullAccess,
}

impl EscalationMode {
    pub fn mode(self) -> SandboxMode {
        match self {
            Self::WorkspaceWrite => SandboxMode::WorkspaceWrite,
            Self::DangerFullAccess => SandboxMode::DangerFullAccess,
        }
    }
}

/// The escalation marker line appended to a denial when escalation is advertised.
pub const ESCALATION_HINT: &str = "[sandbox: escalation available — retry this exact operation once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]";

/// A write the policy refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyDenial {
    pub mode: SandboxMode,
    /// The canonical target that was refused.
    pub target: PathBuf,
    /// True when the tool advertises `sandbox_permissions`, so a retry with escalation may
    /// be approved; the text then carries the escalation hint line.
    pub escalation_available: bool,
}

impl PolicyDenial {
    pub fn message(&self) -> String {
        let mut text = format!(
            "[sandbox: file access denied under {} mode]",
            self.mode.as_str()
        );
        if self.escalation_available {
            text.push('\n');
            text.push_str(ESCALATION_HINT);
        }
        text
    }

    pub fn into_error(self) -> FsError {
        FsError::coded(codes::FS_SANDBOX_DENIED, self.message())
    }
}

/// A path after canonicalization: `display` is the absolute, un-realpathed path the model sees,
/// `real` the canonical target (symlinks resolved, `..` folded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPath {
    pub display: PathBuf,
    pub real: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePolicy {
    pub mode: SandboxMode,
    /// The session workspace root; canonicalized when checking.
    pub workspace_root: PathBuf,
    /// Extra writable roots under `workspace-write` (upstream: `/tmp` and the OS temp dir).
    pub temp_roots: Vec<PathBuf>,
    /// Whether `write`/`edit` advertise `sandbox_permissions` (a confining backend with an
    /// approval policy other than `never`).
    pub escalation_advertised: bool,
}

impl FilePolicy {
    pub fn new(mode: SandboxMode, workspace_root: impl Into<PathBuf>) -> Self {
        Self {
            mode,
            workspace_root: workspace_root.into(),
            temp_roots: vec![PathBuf::from("/tmp"), std::env::temp_dir()],
            escalation_advertised: mode != SandboxMode::DangerFullAccess,
        }
    }

    pub fn danger_full_access(workspace_root: impl Into<PathBuf>) -> Self {
        Self::new(SandboxMode::DangerFullAccess, workspace_root)
    }

    /// Reads always pass; this only resolves the path.
    pub fn check_read(&self, cwd: &Path, path: &str) -> ResolvedPath {
        resolve(cwd, path)
    }

    /// Decides a write under the standing mode.
    pub fn check_write(&self, cwd: &Path, path: &str) -> Result<ResolvedPath, PolicyDenial> {
        self.check_write_as(self.mode, cwd, path)
    }

    /// Decides a write under `mode` (the standing mode, or an approved one-call escalation).
    pub fn check_write_as(
        &self,
        mode: SandboxMode,
        cwd: &Path,
        path: &str,
    ) -> Result<ResolvedPath, PolicyDenial> {
        let resolved = resolve(cwd, path);
        let allowed = match mode {
            SandboxMode::DangerFullAccess => true,
            SandboxMode::ReadOnly => false,
            SandboxMode::WorkspaceWrite => self
                .writable_roots()
                .iter()
                .any(|root| resolved.real.starts_with(root)),
        };
        if allowed {
            Ok(resolved)
        } else {
            Err(PolicyDenial {
                mode,
                target: resolved.real,
                escalation_available: self.escalation_advertised
                    && mode != SandboxMode::DangerFullAccess,
            })
        }
    }

    fn writable_roots(&self) -> Vec<PathBuf> {
        std::iter::once(&self.workspace_root)
            .chain(self.temp_roots.iter())
            .map(|root| canonicalize_lenient(root))
            .collect()
    }

    /// The `sandbox:policy` model-context line (§5.3).
    pub fn policy_text(&self) -> String {
        match self.mode {
            SandboxMode::ReadOnly => "Current DSH file policy: read-only. Any available operation enforced by the DSH file sandbox cannot modify files in the standing mode. Do not refuse a required modification from this policy alone: try an available tool normally and follow any denial and escalation guidance it returns.".to_owned(),
            SandboxMode::WorkspaceWrite => format!(
                "Current DSH file policy: workspace-write. Any available operation enforced by the DSH file sandbox may modify files under the session workspace: \"{}\". Some platform temporary areas may also be writable.",
                canonicalize_lenient(&self.workspace_root).display()
            ),
            SandboxMode::DangerFullAccess => "Current DSH file policy: danger-full-access. The DSH file sandbox does not restrict file modifications by available operations.".to_owned(),
        }
    }
}

/// Joins `path` onto `cwd` (display form) and canonicalizes it (real form).
pub fn resolve(cwd: &Path, path: &str) -> ResolvedPath {
    let display = cwd.join(path);
    let real = canonicalize_lenient(&display);
    ResolvedPath { display, real }
}

/// Canonicalizes a path that may not exist yet: the longest existing prefix is realpathed
/// (resolving symlinks and any `..` inside it), the missing tail is appended with `..` and `.`
/// folded lexically.
pub fn canonicalize_lenient(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    let mut tail: Vec<std::ffi::OsString> = Vec::new();
    let mut cursor = path.to_path_buf();
    loop {
        if let Ok(real) = std::fs::canonicalize(&cursor) {
            return append_tail(real, &tail);
        }
        match cursor.file_name() {
            Some(name) => {
                tail.push(name.to_os_string());
                cursor.pop();
            }
            None => {
                // `..`/`.` as the last component, or a bare root: fold lexically.
                let folded = fold_lexically(&cursor);
                if folded == cursor {
                    return append_tail(cursor, &tail);
                }
                cursor = folded;
            }
        }
    }
}

fn append_tail(mut base: PathBuf, tail: &[std::ffi::OsString]) -> PathBuf {
    for name in tail.iter().rev() {
        base.push(name);
    }
    fold_lexically(&base)
}

fn fold_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// A validated escalation request from the tool arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EscalationRequest {
    pub mode: SandboxMode,
    pub justification: String,
}

impl EscalationRequest {
    /// Pairs `sandbox_permissions` with `justification`; either alone is an argument error.
    pub fn from_args(
        sandbox_permissions: Option<EscalationMode>,
        justification: Option<&str>,
    ) -> Result<Option<Self>, FsError> {
        match (sandbox_permissions, justification) {
            (None, None) => Ok(None),
            (Some(_), None) => Err(FsError::plain(
                "invalid escalation: sandbox_permissions requires a justification",
            )),
            (None, Some(_)) => Err(FsError::plain(
                "invalid escalation: justification is only valid together with sandbox_permissions",
            )),
            (Some(mode), Some(text)) => {
                if text.trim().is_empty() {
                    return Err(FsError::plain(
                        "invalid justification: expected a non-empty sentence",
                    ));
                }
                Ok(Some(Self {
                    mode: mode.mode(),
                    justification: text.to_owned(),
                }))
            }
        }
    }

    /// The escalation must be strictly wider than the effective mode; refused without a prompt.
    pub fn check_wider(&self, effective: SandboxMode) -> Result<(), FsError> {
        if self.mode > effective {
            Ok(())
        } else {
            Err(FsError::plain(format!(
                "sandbox escalation to \"{}\" is not strictly wider than this call's current \"{}\" mode",
                self.mode.as_str(),
                effective.as_str()
            )))
        }
    }

    /// The `reason` of the approval request.
    pub fn approval_reason(&self) -> String {
        format!(
            "escalate sandbox to {}: {}",
            self.mode.as_str(),
            self.justification
        )
    }
}

/// Outcome of an approval request (catalog §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalOutcome {
    AllowedOnce,
    Rejected,
    Cancelled,
    Unavailable,
}

/// Maps an approval outcome to the mode the call runs under, or the refusal the model sees.
pub fn escalation_outcome(
    mode: SandboxMode,
    outcome: ApprovalOutcome,
) -> Result<SandboxMode, FsError> {
    let m = mode.as_str();
    match outcome {
        ApprovalOutcome::AllowedOnce => Ok(mode),
        ApprovalOutcome::Rejected => Err(FsError::plain(format!(
            "the user rejected escalating this operation to \"{m}\""
        ))),
        ApprovalOutcome::Cancelled => Err(FsError::plain(format!(
            "approval for escalating to \"{m}\" was cancelled"
        ))),
        ApprovalOutcome::Unavailable => Err(FsError::plain(format!(
            "sandbox escalation to \"{m}\" requires approval, but no approval channel is available"
        ))),
    }
}

/// Error when escalation was requested but the composition has no approval service.
pub fn escalation_without_service(mode: SandboxMode) -> FsError {
    FsError::plain(format!(
        "sandbox escalation to \"{}\" requires approval, but no approval service is composed",
        mode.as_str()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn lenient_canonicalization_resolves_links_and_dots() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(base.join("ws/sub")).unwrap();
        std::fs::create_dir_all(base.join("other")).unwrap();
        std::os::unix::fs::symlink(base.join("other"), base.join("ws/link")).unwrap();
        assert_eq!(
            canonicalize_lenient(&base.join("ws/new/deeper.txt")),
            base.join("ws/new/deeper.txt")
        );
        assert_eq!(
            canonicalize_lenient(&base.join("ws/sub/../x.txt")),
            base.join("ws/x.txt")
        );
        assert_eq!(
            canonicalize_lenient(&base.join("ws/link/x.txt")),
            base.join("other/x.txt")
        );
        assert_eq!(
            canonicalize_lenient(&base.join("ws/link/../y.txt")),
            base.join("y.txt")
        );
        assert_eq!(
            canonicalize_lenient(&base.join("ws/missing/../../z")),
            base.join("z")
        );
    }

    #[test]
    fn workspace_write_roots_and_denial_texts() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let tmp = dir.path().join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let mut policy = FilePolicy::new(SandboxMode::WorkspaceWrite, &ws);
        policy.temp_roots = vec![tmp.clone()];
        assert!(policy.check_write(&ws, "a/b.txt").is_ok());
        assert!(
            policy
                .check_write(&ws, &tmp.join("t.txt").display().to_string())
                .is_ok()
        );
        let denial = policy.check_write(&ws, "../elsewhere.txt").unwrap_err();
        assert_eq!(denial.mode, SandboxMode::WorkspaceWrite);
        assert!(denial.escalation_available);
        policy.escalation_advertised = false;
        let denial = policy.check_write(&ws, "../elsewhere.txt").unwrap_err();
        assert_eq!(
            denial.message(),
            "[sandbox: file access denied under workspace-write mode]"
        );
        let resolved = policy.check_read(&ws, "../elsewhere.txt");
        assert_eq!(resolved.display, ws.join("../elsewhere.txt"));
        assert!(
            FilePolicy::new(SandboxMode::ReadOnly, &ws)
                .check_write(&ws, "a.txt")
                .is_err()
        );
        assert!(
            FilePolicy::new(SandboxMode::DangerFullAccess, &ws)
                .check_write(&ws, "/anywhere/at/all")
                .is_ok()
        );
    }

    #[test]
    fn escalation_pairing_and_width() {
        assert_eq!(EscalationRequest::from_args(None, None), Ok(None));
        let request =
            EscalationRequest::from_args(Some(EscalationMode::WorkspaceWrite), Some("why"))
                .unwrap()
                .unwrap();
        assert!(request.check_wider(SandboxMode::ReadOnly).is_ok());
        assert!(request.check_wider(SandboxMode::WorkspaceWrite).is_err());
        assert_eq!(
            EscalationRequest::from_args(Some(EscalationMode::WorkspaceWrite), Some("  "))
                .unwrap_err()
                .message,
            "invalid justification: expected a non-empty sentence"
        );
        assert_eq!(
            escalation_outcome(SandboxMode::DangerFullAccess, ApprovalOutcome::Cancelled)
                .unwrap_err()
                .message,
            "approval for escalating to \"danger-full-access\" was cancelled"
        );
        assert_eq!(
            escalation_outcome(SandboxMode::DangerFullAccess, ApprovalOutcome::Unavailable)
                .unwrap_err()
                .message,
            "sandbox escalation to \"danger-full-access\" requires approval, but no approval channel is available"
        );
    }
}
