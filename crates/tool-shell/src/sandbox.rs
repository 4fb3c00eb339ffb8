//! The file sandbox of `bash` (§5.3): policy modes, the bubblewrap launcher, and reading a
//! finished run's stderr for denials and runner failures.
//!
//! Only file writes are confined; network and processes never are. `danger-full-access`
//! runs unconfined. The sandboxed tree lives in its own PID namespace and dies with its
//! `bwrap` parent, so killing the process group (or `bwrap` alone) leaves no survivor.

use std::ffi::OsString;
use std::path::Path;
use std::path::PathBuf;

use serde::Deserialize;
use serde::Serialize;

pub use dsh_tools::SandboxMode;

use crate::bash::SandboxPermissions;
use crate::error::ShellError;

impl From<SandboxPermissions> for SandboxMode {
    fn from(value: SandboxPermissions) -> Self {
        match value {
            SandboxPermissions::WorkspaceWrite => Self::WorkspaceWrite,
            SandboxPermissions::DangerFullAccess => Self::DangerFullAccess,
        }
    }
}

/// Whether approval prompts may be raised (`dsh-user-approval` policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
}

/// The bubblewrap program the confining executor launches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxRunner {
    program: PathBuf,
}

impl SandboxRunner {
    /// `bwrap` from `PATH`, else `/usr/bin/bwrap`. A missing program is not an error here:
    /// every confined call then fails closed with `SANDBOX_UNAVAILABLE`.
    pub fn bwrap() -> Self {
        let found = std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("bwrap"))
                .find(|candidate| candidate.is_file())
        });
        Self {
            program: found.unwrap_or_else(|| PathBuf::from("/usr/bin/bwrap")),
        }
    }

    /// A specific `bwrap` binary.
    pub fn at(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
        }
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    /// How to launch `bash -c` under `mode`; `None` runs unconfined.
    pub(crate) fn launch(&self, mode: SandboxMode, root: &Path, cwd: &Path) -> Option<Launch> {
        if mode == SandboxMode::DangerFullAccess {
            return None;
        }
        let mut args: Vec<OsString> = ["--die-with-parent", "--unshare-pid", "--ro-bind", "/", "/"]
            .map(OsString::from)
            .to_vec();
        if mode == SandboxMode::WorkspaceWrite {
            for dir in writable_roots(root) {
                args.push("--bind".into());
                args.push(dir.clone().into());
                args.push(dir.into());
            }
        }
        // A fresh /dev: its null/zero/tty nodes stay writable in every mode; a plain `--bind`
        // of /dev/null would be mounted nodev and refuse writes.
        args.extend(["--dev", "/dev", "--proc", "/proc", "--chdir"].map(OsString::from));
        args.push(cwd.into());
        args.push("--".into());
        Some(Launch {
            program: self.program.clone(),
            args,
        })
    }
}

/// A wrapper program and its arguments, placed before `bash -c <command>`.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

/// The standing (or, for one approved call, escalated) policy of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    /// The session workspace; writable under `workspace-write`.
    pub workspace_root: PathBuf,
    pub approval: ApprovalPolicy,
    pub runner: SandboxRunner,
}

impl SandboxPolicy {
    /// A policy with the `dsh-base` approval default and `bwrap` from `PATH`.
    pub fn new(mode: SandboxMode, workspace_root: impl Into<PathBuf>) -> Self {
        Self {
            mode,
            workspace_root: workspace_root.into(),
            approval: ApprovalPolicy::default_for(mode),
            runner: SandboxRunner::bwrap(),
        }
    }

    pub fn with_approval(mut self, approval: ApprovalPolicy) -> Self {
        self.approval = approval;
        self
    }

    pub fn with_runner(mut self, runner: SandboxRunner) -> Self {
        self.runner = runner;
        self
    }

    /// Whether a denial result should carry the escalation hint.
    pub fn advertises_escalation(&self) -> bool {
        self.approval == ApprovalPolicy::Ask
    }

    pub(crate) fn launch(&self, cwd: &Path) -> Option<Launch> {
        self.runner.launch(self.mode, &self.workspace_root, cwd)
    }

    /// The confining wrapper for a program started in `cwd` under this policy: the wrapper
    /// program and the arguments placed before the confined argv. `None` runs unconfined.
    /// Terminals use it so a PTY shell gets exactly the confinement `bash` gets.
    pub fn wrapper(&self, cwd: &Path) -> Option<(PathBuf, Vec<OsString>)> {
        self.launch(cwd).map(|launch| (launch.program, launch.args))
    }

    pub fn writable_roots(&self) -> Vec<PathBuf> {
        match self.mode {
            SandboxMode::ReadOnly => Vec::new(),
            SandboxMode::WorkspaceWrite => writable_roots(&self.workspace_root),
            SandboxMode::DangerFullAccess => vec![PathBuf::from("/")],
        }
    }
}

/// The composition's sandbox settings; the per-call [`SandboxPolicy`] adds the session root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// The standing mode.
    pub mode: SandboxMode,
    pub approval: ApprovalPolicy,
    pub runner: SandboxRunner,
}

impl SandboxConfig {
    /// `mode` with the `dsh-base` approval default and `bwrap` from `PATH`.
    pub fn new(mode: SandboxMode) -> Self {
        Self {
            mode,
            approval: ApprovalPolicy::default_for(mode),
            runner: SandboxRunner::bwrap(),
        }
    }

    /// From a `DSH_PERMISSION_MODE` value: unset or empty means `workspace-write`.
    pub fn from_permission_mode(value: Option<&str>) -> Result<Self, ShellError> {
        match value.map(str::trim).filter(|v| !v.is_empty()) {
            None => Ok(Self::new(SandboxMode::WorkspaceWrite)),
            Some(name) => SandboxMode::parse(name).map(Self::new).ok_or_else(|| {
                ShellError::plain(format!(
                    "invalid DSH_PERMISSION_MODE {name:?}: expected read-only, workspace-write or danger-full-access"
                ))
            }),
        }
    }

    /// The policy of a session rooted at `workspace_root` (canonicalized when possible).
    pub fn policy_for(&self, workspace_root: &Path) -> SandboxPolicy {
        let root =
            std::fs::canonicalize(workspace_root).unwrap_or_else(|_| workspace_root.to_path_buf());
        SandboxPolicy {
            mode: self.mode,
            workspace_root: root,
            approval: self.approval,
            runner: self.runner.clone(),
        }
    }
}

/// The `sandbox:policy` runtime-context section for `mode` (§5.3).
pub fn policy_context_text(mode: SandboxMode, workspace_root: &Path) -> String {
    match mode {
        SandboxMode::ReadOnly => "Current DSH file policy: read-only. Any available operation enforced by the DSH file sandbox cannot modify files in the standing mode. Do not refuse a required modification from this policy alone: try an available tool normally and follow any denial and escalation guidance it returns.".to_owned(),
        SandboxMode::WorkspaceWrite => format!(
            "Current DSH file policy: workspace-write. Any available operation enforced by the DSH file sandbox may modify files under the session workspace: \"{}\". Some platform temporary areas may also be writable.",
            workspace_root.display()
        ),
        SandboxMode::DangerFullAccess => "Current DSH file policy: danger-full-access. The DSH file sandbox does not restrict file modifications by available operations.".to_owned(),
    }
}

/// The `approval:policy` runtime-context section (§5.1).
pub fn approval_context_text(policy: ApprovalPolicy) -> &'static str {
    match policy {
        ApprovalPolicy::Ask => {
            "Approval policy: ask. Operations that require approval may ask through the configured answerers; without an available answerer, the request fails closed."
        }
        ApprovalPolicy::Never => {
            "Approval prompts are disabled in this session: actions that require approval are rejected automatically — do not request sandbox escalation (do not set `sandbox_permissions`)."
        }
    }
}

/// Workspace root, `/tmp` and the OS temp dir, as existing canonical paths without repeats.
pub fn writable_roots(root: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    for dir in [
        root.to_path_buf(),
        PathBuf::from("/tmp"),
        std::env::temp_dir(),
    ] {
        if let Ok(real) = std::fs::canonicalize(&dir)
            && real.is_dir()
            && !roots.contains(&real)
        {
            roots.push(real);
        }
    }
    roots
}

/// `SANDBOX_UNAVAILABLE`: fail closed rather than run unconfined.
pub fn sandbox_unavailable(mode: SandboxMode, runner_failure: Option<&str>) -> ShellError {
    let mut message = format!(
        "sandbox mode \"{}\" is requested but no sandbox backend is usable on this host; refusing to run the command unconfined. Install bubblewrap or run a Landlock-enforcing kernel (Linux), ensure sandbox-exec is usable (macOS), or ensure the ACL restricted-token runner can start (Windows) — otherwise switch the consumer to danger-full-access.",
        mode.as_str()
    );
    if let Some(detail) = runner_failure {
        message.push_str(" Runner failure: ");
        message.push_str(detail);
    }
    ShellError::coded(message, "SandboxUnavailableError", "SANDBOX_UNAVAILABLE")
}

/// The marker of a denied file operation.
pub fn denial_marker(mode: SandboxMode) -> String {
    format!("[sandbox: file access denied under {} mode]", mode.as_str())
}

/// Follows the denial marker when a wider mode may be requested.
pub const ESCALATION_HINT: &str = "[sandbox: escalation available — retry this exact command once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]";

/// The background notice of a runner that failed before the command ran.
pub fn runner_failed_marker(mode: SandboxMode) -> String {
    format!(
        "[sandbox: the sandbox runner itself failed under {} mode — the command did not run; this is a sandbox problem, not a command failure]",
        mode.as_str()
    )
}

/// `bwrap`'s own setup error (it exits 1 having printed `bwrap: …` before the command could
/// write anything); returns that line.
pub fn runner_failure(exit_code: Option<i32>, stderr: &str) -> Option<String> {
    if exit_code != Some(1) {
        return None;
    }
    let first = stderr.lines().next()?;
    first.starts_with("bwrap: ").then(|| first.to_owned())
}

/// Whether stderr shows a write the sandbox refused. `Read-only file system` is always ours
/// (the root is bound read-only); `Permission denied` / `Operation not permitted` count only
/// when the path they name lies outside the writable roots.
pub fn detect_denial(stderr: &str, policy: &SandboxPolicy, cwd: &Path) -> bool {
    if policy.mode == SandboxMode::DangerFullAccess {
        return false;
    }
    let roots = policy.writable_roots();
    stderr.lines().any(|line| {
        if line.contains("Read-only file system") {
            return true;
        }
        if !(line.contains("Permission denied") || line.contains("Operation not permitted"))
            || is_read_failure(line)
        {
            return false;
        }
        named_paths(line).iter().any(|path| {
            let absolute = cwd.join(path);
            path != "/dev/null" && !roots.iter().any(|root| absolute.starts_with(root))
        })
    })
}

/// Reads are never confined, so a refused read is the host's permissions, not ours.
fn is_read_failure(line: &str) -> bool {
    const READERS: [&str; 7] = [
        "cat: ", "head: ", "tail: ", "less: ", "grep: ", "ls: ", "find: ",
    ];
    const READ_VERBS: [&str; 4] = [
        "cannot open directory",
        "cannot access",
        "cannot read",
        "cannot stat",
    ];
    READERS.iter().any(|tool| line.starts_with(tool))
        || READ_VERBS.iter().any(|verb| line.contains(verb))
}

/// Paths a coreutils/bash error line names: quoted spans, and `: `-separated fields that
/// look like paths (`bash: /etc/x: Permission denied`).
fn named_paths(line: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for (open, close) in [('\'', '\''), ('‘', '’'), ('"', '"'), ('`', '\'')] {
        let mut rest = line;
        while let Some(start) = rest.find(open) {
            let after = &rest[start + open.len_utf8()..];
            let Some(end) = after.find(close) else { break };
            let span = &after[..end];
            if !span.is_empty() && !span.contains(": ") {
                paths.push(span.to_owned());
            }
            rest = &after[end + close.len_utf8()..];
        }
    }
    for field in line.split(": ") {
        let field = field.trim();
        if field.starts_with('/') || field.starts_with("./") || field.starts_with("../") {
            paths.push(field.to_owned());
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mode: SandboxMode, root: &Path) -> SandboxPolicy {
        SandboxConfig::new(mode).policy_for(root)
    }

    #[test]
    fn permission_mode_and_approval_defaults() {
        let ww = SandboxConfig::from_permission_mode(None).unwrap();
        assert_eq!(
            (ww.mode, ww.approval),
            (SandboxMode::WorkspaceWrite, ApprovalPolicy::Ask)
        );
        let dfa = SandboxConfig::from_permission_mode(Some("danger-full-access")).unwrap();
        assert_eq!(dfa.approval, ApprovalPolicy::Never);
        let ro = SandboxConfig::from_permission_mode(Some("read-only")).unwrap();
        assert_eq!(
            (ro.mode, ro.approval),
            (SandboxMode::ReadOnly, ApprovalPolicy::Ask)
        );
        assert!(SandboxConfig::from_permission_mode(Some("yolo")).is_err());
    }

    #[test]
    fn launch_arguments_per_mode() {
        let dir = tempfile::tempdir().unwrap();
        let runner = SandboxRunner::at("/usr/bin/bwrap");
        assert!(
            runner
                .launch(SandboxMode::DangerFullAccess, dir.path(), dir.path())
                .is_none()
        );
        let ro = runner
            .launch(SandboxMode::ReadOnly, dir.path(), dir.path())
            .unwrap();
        let text: Vec<String> = ro
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(!text.contains(&"--bind".to_owned()));
        assert_eq!(text.last().map(String::as_str), Some("--"));
        let ww = runner
            .launch(SandboxMode::WorkspaceWrite, dir.path(), dir.path())
            .unwrap();
        let text: Vec<String> = ww
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let pos = text.iter().position(|a| a == "--bind").unwrap();
        assert_eq!(text[pos + 1], real.to_string_lossy());
        assert!(text.windows(3).any(|w| w == ["--bind", "/tmp", "/tmp"]));
    }

    #[test]
    fn denial_signatures() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let ww = policy(SandboxMode::WorkspaceWrite, &root);
        assert!(detect_denial(
            "bash: /etc/x: Read-only file system\n",
            &ww,
            &root
        ));
        assert!(detect_denial(
            "bash: line 1: /etc/x: Permission denied\n",
            &ww,
            &root
        ));
        assert!(detect_denial(
            "touch: cannot touch '/usr/y': Permission denied\n",
            &ww,
            &root
        ));
        let inside = format!(
            "touch: cannot touch '{}/f': Permission denied",
            root.display()
        );
        assert!(!detect_denial(&inside, &ww, &root));
        assert!(!detect_denial(
            "ls: cannot open directory 'x': Permission denied",
            &ww,
            &root
        ));
        assert!(!detect_denial("all good\n", &ww, &root));
        assert!(!detect_denial(
            "cat: /root/secret: Permission denied",
            &ww,
            &root
        ));
        assert!(!detect_denial(
            "ls: cannot access '/root/x': Permission denied",
            &ww,
            &root
        ));
        let dfa = policy(SandboxMode::DangerFullAccess, &root);
        assert!(!detect_denial("Read-only file system", &dfa, &root));
    }

    #[test]
    fn runner_failure_lines() {
        assert_eq!(
            runner_failure(
                Some(1),
                "bwrap: Can't find source path /x: No such file or directory\n"
            ),
            Some("bwrap: Can't find source path /x: No such file or directory".to_owned())
        );
        assert_eq!(runner_failure(Some(2), "bwrap: x\n"), None);
        assert_eq!(runner_failure(Some(1), "other\nbwrap: x\n"), None);
    }

    #[test]
    fn context_sections() {
        assert_eq!(
            policy_context_text(SandboxMode::WorkspaceWrite, Path::new("/w")),
            "Current DSH file policy: workspace-write. Any available operation enforced by the DSH file sandbox may modify files under the session workspace: \"/w\". Some platform temporary areas may also be writable."
        );
        assert!(
            approval_context_text(ApprovalPolicy::Never)
                .ends_with("(do not set `sandbox_permissions`).")
        );
    }

    #[test]
    fn unavailable_text() {
        let err = sandbox_unavailable(
            SandboxMode::WorkspaceWrite,
            Some("Error: spawn /nope ENOENT"),
        );
        assert_eq!(err.code.as_deref(), Some("SANDBOX_UNAVAILABLE"));
        assert_eq!(err.name.as_deref(), Some("SandboxUnavailableError"));
        assert!(err.message.starts_with("sandbox mode \"workspace-write\" is requested but no sandbox backend is usable on this host; refusing to run the command unconfined. Install bubblewrap"));
        assert!(err.message.ends_with("otherwise switch the consumer to danger-full-access. Runner failure: Error: spawn /nope ENOENT"));
    }
}
