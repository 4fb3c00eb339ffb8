//! File sandbox policy (catalog §5.3): which canonical paths a write may touch, which a read
//! may not, and the one-call escalation a mutating tool may request (`sandbox_permissions` +
//! `justification`). Paths are canonicalized (symlinks and `..` resolved) before deciding.
//!
//! Short of `danger-full-access`, no write touches dsh's own configuration and state (dsh's
//! home, any `.dsh` folder), another agent's project configuration that a later run reads or
//! executes (`.claude`, `.codex`, `.agents`, `.mcp.json`), or anything of git's own (its
//! config and hooks name commands the user's git runs later; its index decides which nested
//! repositories git enters). In every mode, reads refuse what holds secrets: process environments and memory under
//! `/proc`, dsh's own process, dsh's home (but for the session's own spill folder and the
//! skills), and the conventional credential folders of the user's home; a hard link to a
//! secret file is refused like the file.

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
    /// Extra writable roots under `workspace-write`; none by default. Upstream lets the file
    /// tools write `/tmp` and the OS temp dir, but dsh's `bash` sees a private, empty `/tmp` per
    /// command: a file written to the host's would reach nothing of the model's own and only
    /// plant files other programs on the host read. So both follow one rule: the workspace.
    pub temp_roots: Vec<PathBuf>,
    /// Whether `write`/`edit` advertise `sandbox_permissions` (a confining backend with an
    /// approval policy other than `never`).
    pub escalation_advertised: bool,
    /// The approval policy is `never`: a `sandbox_permissions` the model sends anyway goes to
    /// the approval service, which refuses it by policy (and says which setting).
    pub approval_never: bool,
    /// dsh's home: never written short of `danger-full-access`, never read (but `readable`).
    pub dsh_home: Option<PathBuf>,
    /// Conventional credential folders and files: never read.
    pub secret_roots: Vec<PathBuf>,
    /// Readable although inside dsh's home (the session's spill folder, skills).
    pub readable: Vec<PathBuf>,
}

impl FilePolicy {
    pub fn new(mode: SandboxMode, workspace_root: impl Into<PathBuf>) -> Self {
        let secret_roots = std::env::var_os("HOME")
            .filter(|home| !home.is_empty())
            .map(|home| dsh_secrets::secret_paths(Path::new(&home)))
            .unwrap_or_default();
        Self {
            mode,
            workspace_root: workspace_root.into(),
            temp_roots: Vec::new(),
            escalation_advertised: mode != SandboxMode::DangerFullAccess,
            approval_never: false,
            dsh_home: None,
            secret_roots,
            readable: Vec::new(),
        }
    }

    /// Protects dsh's home (canonicalized): no writes short of `danger-full-access`, no reads
    /// but of `readable`.
    pub fn with_dsh_home(mut self, home: &Path) -> Self {
        self.dsh_home = Some(canonicalize_lenient(home));
        self
    }

    /// Keeps `path` readable inside dsh's home.
    pub fn allow_reading(mut self, path: &Path) -> Self {
        self.readable.push(canonicalize_lenient(path));
        self
    }

    pub fn danger_full_access(workspace_root: impl Into<PathBuf>) -> Self {
        Self::new(SandboxMode::DangerFullAccess, workspace_root)
    }

    /// Resolves a read and refuses it when the path holds secrets.
    pub fn check_read(&self, cwd: &Path, path: &str) -> Result<ResolvedPath, FsError> {
        let resolved = resolve(cwd, path);
        match self.read_refusal(&resolved.display, &resolved.real) {
            Some(reason) => Err(read_denied(&resolved.display, reason)),
            None => Ok(resolved),
        }
    }

    /// Why reading `real` (canonical; `lexical` as given, absolute) is refused, if it is.
    pub fn read_refusal(&self, lexical: &Path, real: &Path) -> Option<&'static str> {
        for path in [real, &fold_lexically(lexical)] {
            if let Some(reason) = proc_refusal(path) {
                return Some(reason);
            }
        }
        if self.readable.iter().any(|ok| real.starts_with(ok)) {
            return None;
        }
        if self
            .dsh_home
            .as_ref()
            .is_some_and(|home| real.starts_with(home))
        {
            return Some("dsh's home holds its credentials, configuration and sessions");
        }
        if self.secret_roots.iter().any(|root| real.starts_with(root)) {
            return Some("it is a credential folder");
        }
        None
    }

    /// Whether an opened file is a hard link to a secret file (same device and inode).
    pub fn is_secret_file(&self, file: &std::fs::File) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = file.metadata() else {
            return false;
        };
        if meta.nlink() < 2 || !meta.is_file() {
            return false;
        }
        let mut roots: Vec<&PathBuf> = self.secret_roots.iter().collect();
        roots.extend(self.dsh_home.iter());
        let mut budget = SECRET_SCAN_ENTRIES;
        roots
            .into_iter()
            .any(|root| holds_inode(root, meta.dev(), meta.ino(), 4, &mut budget))
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
            SandboxMode::WorkspaceWrite => {
                self.writable_roots()
                    .iter()
                    .any(|root| resolved.real.starts_with(root))
                    && !self.is_protected(&resolved.real)
            }
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

    /// dsh's home; any folder a later run reads as configuration or executes (`.dsh`,
    /// `.claude`, `.codex`, `.agents`), at any depth; any `.mcp.json`; and anything of git's
    /// own (a `.git` folder or pointer file, nested repositories' and `.git/modules/*`
    /// included). Refused whether or not the path exists yet.
    pub fn is_protected(&self, real: &Path) -> bool {
        if self
            .dsh_home
            .as_ref()
            .is_some_and(|home| real.starts_with(home))
        {
            return true;
        }
        let names: Vec<&std::ffi::OsStr> = real
            .components()
            .filter_map(|c| match c {
                Component::Normal(name) => Some(name),
                _ => None,
            })
            .collect();
        names.iter().any(|name| {
            *name == dsh_tools::GIT_DIR_NAME
                || dsh_tools::PROTECTED_PROJECT_DIRS
                    .iter()
                    .any(|dir| *name == std::ffi::OsStr::new(dir))
        }) || names.last().is_some_and(|name| {
            dsh_tools::PROTECTED_PROJECT_FILES
                .iter()
                .any(|file| *name == std::ffi::OsStr::new(file))
        })
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

/// The refusal of a read.
fn read_denied(display: &Path, reason: &str) -> FsError {
    FsError::coded(
        codes::FS_SANDBOX_DENIED,
        format!(
            "[sandbox: reading \"{}\" is refused in every mode: {reason}]",
            display.display()
        ),
    )
}

/// Files under `/proc/<pid>/` (and `/proc/<pid>/task/<tid>/`) that expose a process's
/// secrets: its environment (the provider key), memory, and the files it has open.
const PROC_SECRETS: [&str; 6] = ["environ", "mem", "pagemap", "auxv", "map_files", "syscall"];

fn proc_refusal(path: &Path) -> Option<&'static str> {
    let mut parts = path
        .strip_prefix("/proc")
        .ok()?
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => name.to_str(),
            _ => None,
        });
    let first = parts.next()?;
    let rest: Vec<&str> = parts.collect();
    let pid_dir = first == "self" || first == "thread-self" || first.parse::<u32>().is_ok();
    if !pid_dir {
        return None;
    }
    if first == "self" || first == "thread-self" || is_own_task(first) {
        return Some("it is part of dsh's own process");
    }
    let rest = match rest.as_slice() {
        ["task", tid, ..] if is_own_task(tid) => return Some("it is part of dsh's own process"),
        ["task", _tid, tail @ ..] => tail,
        tail => tail,
    };
    rest.first()
        .filter(|name| PROC_SECRETS.contains(name))
        .map(|_| "a process's environment, memory and open files hold secrets")
}

/// Whether `id` (a `/proc` entry's name) is dsh's process or one of its threads: every thread
/// id is also a `/proc/<tid>` entry (hidden from listings, open to a path) with the whole
/// process behind it. A thread that is not running at the check cannot be opened either.
fn is_own_task(id: &str) -> bool {
    if id.parse::<u32>().is_err() {
        return false;
    }
    id == std::process::id().to_string()
        || Path::new("/proc/self/task")
            .join(id)
            .symlink_metadata()
            .is_ok()
}

const SECRET_SCAN_ENTRIES: usize = 4096;

fn holds_inode(dir: &Path, dev: u64, ino: u64, depth: usize, budget: &mut usize) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return false;
    };
    if meta.is_file() {
        return meta.dev() == dev && meta.ino() == ino;
    }
    if !meta.is_dir() || depth == 0 {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    for entry in entries.flatten() {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        if holds_inode(&entry.path(), dev, ino, depth - 1, budget) {
            return true;
        }
    }
    false
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
    /// The approval policy `never` refused it without asking anyone.
    #[serde(skip)]
    RefusedByPolicy(dsh_tools::NeverBy),
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
        ApprovalOutcome::RefusedByPolicy(by) => Err(FsError::plain(dsh_tools::refused_by_policy(
            &format!("sandbox escalation to \"{m}\""),
            by,
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
    fn workspace_write_leaves_the_hosts_temp_areas_alone_by_default() {
        let ws = tempfile::tempdir().unwrap();
        let policy = FilePolicy::new(SandboxMode::WorkspaceWrite, ws.path());
        for temp in [PathBuf::from("/tmp"), std::env::temp_dir()] {
            let target = temp.join("planted.txt").display().to_string();
            let denial = policy.check_write(ws.path(), &target).unwrap_err();
            assert_eq!(denial.mode, SandboxMode::WorkspaceWrite);
        }
        assert!(policy.check_write(ws.path(), "inside.txt").is_ok());
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
        let resolved = policy.check_read(&ws, "../elsewhere.txt").unwrap();
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
