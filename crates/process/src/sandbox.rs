//! The sandbox of `bash` (§5.3): policy modes, the bubblewrap launcher, and reading a
//! finished run's stderr for denials and runner failures.
//!
//! A confined command (`read-only`, `workspace-write`) runs under bubblewrap with no
//! capabilities, in a user namespace where the kernel allows one, in a session of its own (no
//! controlling terminal, so nothing can be pushed into the user's terminal), and in its own PID
//! namespace that dies with its `bwrap` parent, so killing the runner leaves no survivor. It
//! sees the host read-only except: a private `/tmp` (and `$TMPDIR`) per command, the workspace
//! (writable under `workspace-write`, minus dsh's project configuration and the git hooks and
//! config, which stay read-only), and the hidden areas (dsh's home, conventional credential
//! folders, daemon control sockets), which it cannot see at all. The network is unshared under
//! `read-only`, and under `workspace-write` when the policy says so. `danger-full-access`
//! runs unconfined.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

pub use dsh_tools::ApprovalPolicy;
pub use dsh_tools::NetworkAccess;
pub use dsh_tools::SandboxLimits;
pub use dsh_tools::SandboxMode;

use crate::error::ShellError;
use crate::placeholders::WorkspaceLease;

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

    /// How to launch `bash -c` under `policy`; `None` runs unconfined.
    pub fn launch(&self, policy: &SandboxPolicy, cwd: &Path) -> Option<Launch> {
        if policy.mode == SandboxMode::DangerFullAccess {
            return None;
        }
        let mut args = Args::default();
        args.flags(&[
            "--die-with-parent",
            "--unshare-pid",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--unshare-user-try",
        ]);
        // SysV shared memory, semaphores and queues are guarded by uid alone: as root, a
        // command left in the host's IPC namespace could attach to root's segments.
        args.flags(&["--unshare-ipc"]);
        if !policy.network_allowed() {
            args.flags(&["--unshare-net"]);
        }
        // Recursive and read-only on every submount: `/sys` (cgroupfs, debugfs, tracefs,
        // securityfs included) stays read-only whoever runs the command.
        args.pair("--ro-bind", "/", "/");
        // A fresh /dev: its null/zero/tty nodes stay writable in every mode; a plain `--bind`
        // of /dev/null would be mounted nodev and refuse writes. `/dev/tty` there names no
        // terminal: the command has none.
        args.one("--dev", Path::new("/dev"));
        // That `/dev` is a tmpfs with no size (half the host's memory), writable to a command
        // that runs as root, and its `shm` folder to everyone: read-only (device nodes still
        // open for writing), with a `/dev/shm` bounded like `/tmp`.
        let tmp_bytes = policy.limits.tmp_size_mb.saturating_mul(1024 * 1024);
        args.one("--remount-ro", Path::new("/dev"));
        args.flags(&["--perms", "1777", "--size", &tmp_bytes.to_string()]);
        args.one("--tmpfs", Path::new("/dev/shm"));
        args.one("--proc", Path::new("/proc"));
        for (flag, source, dest) in kernel_masks() {
            args.pair(flag, source, dest);
        }
        let temps = temp_areas();
        for temp in &temps {
            args.flags(&["--size", &tmp_bytes.to_string()]);
            args.one("--tmpfs", temp);
        }
        let root = &policy.workspace_root;
        let bind = if policy.mode == SandboxMode::WorkspaceWrite {
            "--bind"
        } else {
            "--ro-bind"
        };
        args.pair(bind, root, root);
        // Decided on canonical paths: a symlinked workdir must not bind a hidden area unseen.
        let cwd = &std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
        // A workdir outside the workspace stays visible (read-only) even inside a private area.
        let bound_cwd = (!cwd.starts_with(root) && cwd.is_dir()).then_some(cwd);
        if let Some(cwd) = bound_cwd {
            args.pair("--ro-bind", cwd, cwd);
        }
        // Hidden areas are masked after every bind that could show them: the workspace and a
        // workdir bound above may lie inside a temp area, or hold a hidden area, or lie in one.
        let mut cwd_hidden = false;
        for hidden in &policy.hidden {
            let hidden = &std::fs::canonicalize(hidden).unwrap_or_else(|_| hidden.clone());
            // An area holding the workspace cannot be hidden without hiding the workspace.
            if root.starts_with(hidden) {
                continue;
            }
            // Under a private temp area a hidden path shows only through a bind.
            let in_temp = temps.iter().any(|temp| hidden.starts_with(temp));
            let shown = hidden.starts_with(root)
                || bound_cwd.is_some_and(|cwd| hidden.starts_with(cwd) || cwd.starts_with(hidden));
            if in_temp && !shown {
                continue;
            }
            match std::fs::symlink_metadata(hidden) {
                Ok(meta) if meta.is_dir() => {
                    args.one("--tmpfs", hidden);
                    cwd_hidden |= cwd.starts_with(hidden);
                }
                Ok(_) => args.pair("--ro-bind", Path::new("/dev/null"), hidden),
                Err(_) => {}
            }
        }
        for socket in control_sockets() {
            if !socket.starts_with(root) {
                args.pair("--ro-bind", Path::new("/dev/null"), &socket);
            }
        }
        for exposed in &policy.exposed {
            // `-try`: a folder removed between this check and bwrap's mount (a spill folder
            // another session's retention sweep just deleted) must not fail the command.
            if exposed.exists() {
                args.pair("--ro-bind-try", exposed, exposed);
            }
        }
        let mut lease = None;
        if policy.mode == SandboxMode::WorkspaceWrite {
            // Held from before the placeholders are made or checked until the command ends,
            // so no other launch removes one while this one mounts or uses it.
            let mut held = WorkspaceLease::take(policy.lock_dir.as_deref(), root);
            let protected = protect(root);
            for path in &protected.paths {
                args.pair("--ro-bind", path, path);
            }
            if held.holds_lock() {
                held.set_placeholders(protected.placeholders);
            }
            lease = Some(Arc::new(held));
        }
        if cwd_hidden {
            // A workdir inside a hidden area is an empty folder, like the rest of the area.
            args.one("--dir", cwd);
        }
        args.one("--chdir", cwd);
        args.flags(&["--"]);
        let mut launch = confined_launch(&self.program, args.0, policy.limits);
        launch.lease = lease;
        Some(launch)
    }
}

/// bubblewrap with `bwrap_args`, started through the guard executable's confinement step
/// (`dsh-tool-guard __dsh-confine`), which sets the process and memory limits and then
/// becomes bubblewrap. bubblewrap has no option for either, and setting them in dsh's own
/// spawn would need a `pre_exec` hook (fork instead of `posix_spawn`). Without a guard
/// program (a library user that never set one) bubblewrap starts directly: only the `/tmp`
/// size applies.
fn confined_launch(bwrap: &Path, bwrap_args: Vec<OsString>, limits: SandboxLimits) -> Launch {
    // A missing runner fails at dsh's own spawn, with the spawn error the model is told about.
    let Some(guard) = crate::guard::program().filter(|_| bwrap.is_file()) else {
        tracing::debug!(
            "no guard program: confined commands run without process and memory limits"
        );
        return Launch {
            program: bwrap.to_path_buf(),
            args: bwrap_args,
            lease: None,
        };
    };
    let mut args: Vec<OsString> = vec![
        dsh_tool_guard::CONFINE_ARG.into(),
        limits.max_processes.to_string().into(),
        limits
            .max_memory_mb
            .saturating_mul(1024 * 1024)
            .to_string()
            .into(),
        "--".into(),
        bwrap.into(),
    ];
    args.extend(bwrap_args);
    Launch {
        program: guard.to_path_buf(),
        args,
        lease: None,
    }
}

#[derive(Default)]
struct Args(Vec<OsString>);

impl Args {
    fn flags(&mut self, flags: &[&str]) {
        self.0.extend(flags.iter().map(OsString::from));
    }
    fn one(&mut self, flag: &str, path: &Path) {
        self.0.push(flag.into());
        self.0.push(path.into());
    }
    fn pair(&mut self, flag: &str, src: impl AsRef<Path>, dest: impl AsRef<Path>) {
        self.0.push(flag.into());
        self.0.push(src.as_ref().into());
        self.0.push(dest.as_ref().into());
    }
}

/// Mounts that keep the kernel's tunables and triggers out of reach, whatever uid the command
/// runs as. bubblewrap's `--proc` leaves `/proc/sys` writable when the command is (host) root:
/// its "already read-only" check asks `access()`, which root passes. So every folder at the top
/// of `/proc` that is not a process (`sys`, `irq`, `bus`, `fs`, `acpi`, `driver`, `tty`,
/// `sysvipc`, `pressure`, …) is bound read-only over itself, and every top-level file that root
/// alone may write or read (`sysrq-trigger`, `mtrr`, `kmsg`, `kpage*`, `timer_list`, …), and
/// the kernel's memory and symbols (`kcore`, `kallsyms`), is masked by `/dev/null`: it reads
/// as empty, never blocks, and a write reaches nothing. The list is read from the host's
/// `/proc` once: the same kernel serves the sandbox's.
fn kernel_masks() -> &'static [(&'static str, PathBuf, PathBuf)] {
    static MASKS: std::sync::OnceLock<Vec<(&'static str, PathBuf, PathBuf)>> =
        std::sync::OnceLock::new();
    MASKS.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        const ALWAYS_MASKED: [&str; 3] = ["kcore", "kallsyms", "kmsg"];
        let mut masks = Vec::new();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return masks;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
                continue;
            };
            let path = Path::new("/proc").join(name);
            let mode = meta.permissions().mode();
            if meta.is_dir() {
                masks.push(("--ro-bind", path.clone(), path));
            } else if meta.is_file()
                && (mode & 0o222 != 0 || mode & 0o004 == 0 || ALWAYS_MASKED.contains(&name))
            {
                masks.push(("--ro-bind", PathBuf::from("/dev/null"), path));
            }
        }
        masks
    })
}

/// `/tmp` and the OS temp dir, canonical and without repeats: each confined command gets a
/// private, empty one (nothing of the host's shows through, nothing written survives).
fn temp_areas() -> Vec<PathBuf> {
    let mut areas: Vec<PathBuf> = Vec::new();
    for dir in [PathBuf::from("/tmp"), std::env::temp_dir()] {
        if let Ok(real) = std::fs::canonicalize(&dir)
            && real.is_dir()
            && real != Path::new("/")
            && !areas.iter().any(|area| real.starts_with(area))
        {
            areas.push(real);
        }
    }
    areas
}

/// Paths inside the workspace that stay read-only under `workspace-write`: what a later run
/// reads as configuration or executes.
///
/// - dsh's and other agents' project folders ([`dsh_tools::PROTECTED_PROJECT_DIRS`]) and
///   files ([`dsh_tools::PROTECTED_PROJECT_FILES`]) at the workspace's top;
/// - git's own folder, whole: its config, hooks, index (which nested repositories git enters),
///   `modules/` and `worktrees/`; or, when `.git` is a pointer file, the file and the folders
///   it points at;
/// - the `.git` of every submodule the index lists (a gitlink), so a nested repository the
///   person's `git status` enters cannot be given a config.
///
/// A folder that does not exist cannot be bind-mounted, so a missing protected folder (and a
/// missing `.git` at the top, or in a listed submodule) is created first, empty and marked as
/// dsh's placeholder; a launch removes it again once no confined command can see it (see
/// [`crate::placeholders`]). While it is there, git treats an empty `.git` as no repository
/// (and `git init` fills it), and each agent treats an empty folder as no configuration. A
/// missing protected file is left missing (a confined command can create it; the file tools
/// refuse it).
pub fn protected_paths(root: &Path) -> Vec<PathBuf> {
    protect(root).paths
}

/// What [`protected_paths`] found, and which of those paths are dsh's empty placeholders.
#[derive(Debug, Default)]
struct Protected {
    paths: Vec<PathBuf>,
    placeholders: Vec<PathBuf>,
}

impl Protected {
    fn push_folder(&mut self, dir: &Path) {
        if let Some((dir, placeholder)) = existing_or_placeholder(dir) {
            if placeholder {
                self.placeholders.push(dir.clone());
            }
            self.paths.push(dir);
        }
    }
}

fn protect(root: &Path) -> Protected {
    let mut protected = Protected::default();
    for name in dsh_tools::PROTECTED_PROJECT_DIRS {
        protected.push_folder(&root.join(name));
    }
    let paths = &mut protected.paths;
    for name in dsh_tools::PROTECTED_PROJECT_FILES {
        let file = root.join(name);
        if std::fs::symlink_metadata(&file).is_ok_and(|meta| meta.is_file()) {
            paths.push(file);
        }
    }
    let git = root.join(dsh_tools::GIT_DIR_NAME);
    let git_dirs = protect_git_entry(root, &git, &mut protected);
    for dir in git_dirs {
        for submodule in gitlinks(&dir.join("index")) {
            let entry = root.join(&submodule);
            // A submodule path that is not a folder (not checked out and removed) is left
            // alone rather than created.
            if entry.is_dir() && !entry.is_symlink() {
                protect_git_entry(root, &entry.join(dsh_tools::GIT_DIR_NAME), &mut protected);
            }
        }
    }
    protected
}

/// Protects one `.git` entry (a folder, a pointer file, or missing: a placeholder folder) and
/// returns the git dirs it stands for that lie in the workspace.
fn protect_git_entry(root: &Path, git: &Path, protected: &mut Protected) -> Vec<PathBuf> {
    match std::fs::symlink_metadata(git) {
        Ok(meta) if meta.is_dir() => {
            protected.push_folder(git);
            vec![git.to_path_buf()]
        }
        Ok(meta) if meta.is_file() => {
            let paths = &mut protected.paths;
            paths.push(git.to_path_buf());
            let linked: Vec<PathBuf> = linked_git_dirs(git)
                .into_iter()
                .filter(|dir| dir.starts_with(root))
                .collect();
            paths.extend(linked.iter().cloned());
            linked
        }
        // A symlink is resolved by git; its target is protected only if it is in the
        // workspace's own `.git` (already covered) or outside the workspace (read-only).
        Ok(_) => Vec::new(),
        Err(_) => {
            protected.push_folder(git);
            Vec::new()
        }
    }
}

/// `dir` when it is a folder (or after creating it empty); `None` when something else is
/// there or it cannot be created (then a confined command, same user, cannot create it
/// either, unless the folder's owner differs: see `docs/security.md`).
fn existing_or_placeholder(dir: &Path) -> Option<(PathBuf, bool)> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => Some((
            dir.to_path_buf(),
            meta.mtime() == crate::placeholders::PLACEHOLDER_MTIME,
        )),
        Ok(_) => None,
        Err(_) => match crate::placeholders::create(dir) {
            Ok(()) => Some((dir.to_path_buf(), true)),
            Err(error) => {
                tracing::debug!(path = %dir.display(), %error, "cannot create a placeholder to protect");
                None
            }
        },
    }
}

/// An index larger than this is not read for gitlinks (its submodules are then not protected;
/// see `docs/security.md`).
const MAX_INDEX_BYTES: u64 = 64 * 1024 * 1024;

/// The paths of the gitlinks (mode 160000: submodules, and nested repositories staged with
/// `git add`) in a git index (versions 2 to 4). Unreadable or unknown formats yield none.
fn gitlinks(index: &Path) -> Vec<String> {
    let Ok(meta) = std::fs::metadata(index) else {
        return Vec::new();
    };
    if meta.len() > MAX_INDEX_BYTES {
        tracing::warn!(index = %index.display(), "git index too large to read for submodules");
        return Vec::new();
    }
    let Ok(bytes) = std::fs::read(index) else {
        return Vec::new();
    };
    parse_gitlinks(&bytes).unwrap_or_default()
}

fn parse_gitlinks(bytes: &[u8]) -> Option<Vec<String>> {
    let be32 = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
    };
    if bytes.get(0..4)? != b"DIRC" {
        return None;
    }
    let version = be32(4)?;
    let count = be32(8)? as usize;
    if !(2..=4).contains(&version) {
        return None;
    }
    // SHA-1 or SHA-256: an entry's fixed part is 40 bytes of stat data, the object id and
    // 2 bytes of flags. The id length is found from the first entry's shape below.
    let mut links = Vec::new();
    for hash_len in [20usize, 32] {
        links.clear();
        let mut at = 12;
        let mut previous = Vec::<u8>::new();
        let mut ok = true;
        for _ in 0..count {
            let start = at;
            let Some(mode) = be32(start + 24) else {
                ok = false;
                break;
            };
            let flags_at = start + 40 + hash_len;
            let Some(flags) = bytes.get(flags_at..flags_at + 2) else {
                ok = false;
                break;
            };
            let flags = u16::from_be_bytes([flags[0], flags[1]]);
            at = flags_at + 2;
            if version >= 3 && flags & 0x4000 != 0 {
                at += 2;
            }
            let path = if version == 4 {
                // A varint of bytes to drop from the previous path, then the new suffix.
                let mut strip: usize = 0;
                loop {
                    let byte = *bytes.get(at)?;
                    at += 1;
                    strip = (strip << 7) | usize::from(byte & 0x7f);
                    if byte & 0x80 == 0 {
                        break;
                    }
                    strip += 1;
                }
                let end = at + bytes.get(at..)?.iter().position(|&b| b == 0)?;
                let keep = previous.len().checked_sub(strip)?;
                let mut path = previous[..keep].to_vec();
                path.extend_from_slice(&bytes[at..end]);
                at = end + 1;
                path
            } else {
                let Some(len) = bytes
                    .get(at..)
                    .and_then(|rest| rest.iter().position(|&b| b == 0))
                else {
                    ok = false;
                    break;
                };
                let path = bytes[at..at + len].to_vec();
                // NUL-padded so that the entry is a multiple of 8 bytes.
                let entry_len = at + len - start;
                at = start + (entry_len + 8) / 8 * 8;
                path
            };
            if mode & 0o170000 == 0o160000 {
                match String::from_utf8(path.clone()) {
                    Ok(text) if !text.split('/').any(|part| part == ".." || part.is_empty()) => {
                        links.push(text);
                    }
                    _ => {}
                }
            }
            previous = path;
        }
        if ok && at <= bytes.len() {
            return Some(links);
        }
    }
    None
}

/// The git dirs a `.git` file points at (`gitdir: …`, and a worktree's `commondir`).
fn linked_git_dirs(file: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(file) else {
        return Vec::new();
    };
    let Some(target) = text.lines().find_map(|line| line.strip_prefix("gitdir: ")) else {
        return Vec::new();
    };
    let base = file.parent().unwrap_or_else(|| Path::new("/"));
    let dir = base.join(target.trim());
    let mut dirs = vec![dir.clone()];
    if let Ok(common) = std::fs::read_to_string(dir.join("commondir")) {
        dirs.push(dir.join(common.trim()));
    }
    dirs.into_iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect()
}

/// Where daemons keep their control sockets. A read-only bind does not stop `connect()`, so a
/// socket left visible (Docker, D-Bus, systemd, an agent) would let a confined command ask a
/// daemon to act for it; each one found is masked by an empty file.
const SOCKET_AREAS: [&str; 3] = ["/run", "/var/run", "/var/lib"];
const SOCKET_SCAN_DEPTH: usize = 4;
const SOCKET_SCAN_ENTRIES: usize = 4096;
/// Daemons create sockets at start-up; a few seconds of staleness is fine and keeps the scan
/// off the per-call path.
const SOCKET_SCAN_TTL: Duration = Duration::from_secs(5);

static SOCKET_CACHE: Mutex<Option<(Instant, Vec<PathBuf>)>> = Mutex::new(None);

/// The daemon sockets to mask now: the last scan's (at most [`SOCKET_SCAN_TTL`] old), minus
/// those gone since (a mask needs its target: bwrap cannot create one in the read-only root).
fn control_sockets() -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    scanned_sockets()
        .into_iter()
        .filter(|path| std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()))
        .collect()
}

/// Drops the cached scan (a masked socket vanished under a launch).
pub fn forget_sockets() {
    *dsh_sync::lock(&SOCKET_CACHE) = None;
}

/// Whether a runner failure is a socket mask whose target vanished during the launch.
pub fn is_vanished_mask(line: &str) -> bool {
    line.strip_prefix("bwrap: Can't create file at ")
        .and_then(|rest| rest.split(": ").next())
        .is_some_and(|path| {
            let path = Path::new(path);
            SOCKET_AREAS.iter().any(|area| path.starts_with(area))
                || std::fs::canonicalize(path).is_err()
        })
}

fn scanned_sockets() -> Vec<PathBuf> {
    let mut cache = dsh_sync::lock(&SOCKET_CACHE);
    if let Some((at, sockets)) = cache.as_ref()
        && at.elapsed() < SOCKET_SCAN_TTL
    {
        return sockets.clone();
    }
    let mut sockets = Vec::new();
    let mut budget = SOCKET_SCAN_ENTRIES;
    let mut seen = Vec::new();
    for area in SOCKET_AREAS {
        if let Ok(real) = std::fs::canonicalize(area)
            && !seen.contains(&real)
        {
            scan_sockets(&real, SOCKET_SCAN_DEPTH, &mut budget, &mut sockets);
            seen.push(real);
        }
    }
    *cache = Some((Instant::now(), sockets.clone()));
    sockets
}

fn scan_sockets(dir: &Path, depth: usize, budget: &mut usize, out: &mut Vec<PathBuf>) {
    use std::os::unix::fs::FileTypeExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_socket() {
            out.push(entry.path());
        } else if kind.is_dir() && depth > 0 {
            scan_sockets(&entry.path(), depth - 1, budget, out);
        }
    }
}

/// A wrapper program and its arguments, placed before `bash -c <command>`.
#[derive(Debug, Clone)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Under `workspace-write`: the hold on the workspace's placeholders, kept by the command's
    /// process until it has ended (see [`crate::placeholders`]).
    pub lease: Option<Arc<WorkspaceLease>>,
}

impl Launch {
    /// The program and its arguments, for a command whose end dsh does not follow: the
    /// placeholders it mounts stay until dsh exits.
    pub fn detach(self) -> (PathBuf, Vec<OsString>) {
        if let Some(lease) = self.lease.and_then(|lease| Arc::try_unwrap(lease).ok()) {
            lease.hold_until_exit();
        }
        (self.program, self.args)
    }
}

/// The standing (or, for one approved call, escalated) policy of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    /// The session workspace; writable under `workspace-write`.
    pub workspace_root: PathBuf,
    pub approval: ApprovalPolicy,
    pub runner: SandboxRunner,
    /// Network under `workspace-write`.
    pub network: NetworkAccess,
    /// Areas a confined command cannot see at all (dsh's home, credential folders).
    pub hidden: Vec<PathBuf>,
    /// Read-only views re-opened inside hidden areas (the session's own log, skills).
    pub exposed: Vec<PathBuf>,
    /// What one confined command may use.
    pub limits: SandboxLimits,
    /// Where launches lock the workspace's placeholders (in dsh's home, which confined
    /// commands cannot see). Without one the placeholders are never removed.
    pub lock_dir: Option<PathBuf>,
}

impl SandboxPolicy {
    /// A policy with the `dsh-base` approval default, `bwrap` from `PATH`, the network allowed
    /// under `workspace-write`, and the conventional credential folders of `$HOME` hidden.
    pub fn new(mode: SandboxMode, workspace_root: impl Into<PathBuf>) -> Self {
        Self {
            mode,
            workspace_root: workspace_root.into(),
            approval: ApprovalPolicy::default_for(mode),
            runner: SandboxRunner::bwrap(),
            network: NetworkAccess::default(),
            hidden: default_hidden(),
            exposed: Vec::new(),
            limits: SandboxLimits::default(),
            lock_dir: None,
        }
    }

    pub fn with_limits(mut self, limits: SandboxLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Locks the workspace's placeholders in `dir` (see [`SandboxPolicy::lock_dir`]).
    pub fn with_lock_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.lock_dir = Some(dir.into());
        self
    }

    pub fn with_approval(mut self, approval: ApprovalPolicy) -> Self {
        self.approval = approval;
        self
    }

    pub fn with_runner(mut self, runner: SandboxRunner) -> Self {
        self.runner = runner;
        self
    }

    pub fn with_network(mut self, network: NetworkAccess) -> Self {
        self.network = network;
        self
    }

    /// Adds areas to hide from confined commands.
    pub fn hiding(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        self.hidden.extend(paths);
        self
    }

    /// Adds read-only views inside hidden areas.
    pub fn exposing(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        self.exposed.extend(paths);
        self
    }

    /// Whether a denial result should carry the escalation hint.
    pub fn advertises_escalation(&self) -> bool {
        self.approval == ApprovalPolicy::Ask
    }

    /// Whether a confined command of this policy may use the network.
    pub fn network_allowed(&self) -> bool {
        match self.mode {
            SandboxMode::ReadOnly => false,
            SandboxMode::WorkspaceWrite => self.network == NetworkAccess::Allow,
            SandboxMode::DangerFullAccess => true,
        }
    }

    pub fn launch(&self, cwd: &Path) -> Option<Launch> {
        self.runner.launch(self, cwd)
    }

    /// The confining wrapper for a program started in `cwd` under this policy: the wrapper
    /// program and the arguments placed before the confined argv. `None` runs unconfined.
    /// Terminals use it so a PTY shell gets exactly the confinement `bash` gets.
    pub fn wrapper(&self, cwd: &Path) -> Option<(PathBuf, Vec<OsString>)> {
        self.launch(cwd).map(Launch::detach)
    }

    /// [`SandboxPolicy::wrapper`] for a shell on its own PTY: the same confinement without
    /// `--new-session`. That flag exists so a confined command cannot push input into the
    /// user's terminal (TIOCSTI); a PTY shell's terminal is the one dsh created for it, which
    /// it already types into, and without its controlling terminal the shell would have no
    /// job control and no foreground group to interrupt.
    pub fn pty_wrapper(&self, cwd: &Path) -> Option<(PathBuf, Vec<OsString>)> {
        self.wrapper(cwd).map(|(program, args)| {
            let args = args.into_iter().filter(|a| a != "--new-session").collect();
            (program, args)
        })
    }

    pub fn writable_roots(&self) -> Vec<PathBuf> {
        match self.mode {
            SandboxMode::ReadOnly => Vec::new(),
            SandboxMode::WorkspaceWrite => writable_roots(&self.workspace_root),
            SandboxMode::DangerFullAccess => vec![PathBuf::from("/")],
        }
    }
}

/// The conventional credential folders under `$HOME`.
fn default_hidden() -> Vec<PathBuf> {
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(|home| dsh_secrets::secret_paths(Path::new(&home)))
        .unwrap_or_default()
}

/// The composition's sandbox settings; the per-call [`SandboxPolicy`] adds the session root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// The standing mode.
    pub mode: SandboxMode,
    pub approval: ApprovalPolicy,
    pub runner: SandboxRunner,
    pub network: NetworkAccess,
    /// Hidden from confined commands, on top of the credential folders of `$HOME`.
    pub hidden: Vec<PathBuf>,
    /// What one confined command may use.
    pub limits: SandboxLimits,
}

impl SandboxConfig {
    /// `mode` with the `dsh-base` approval default and `bwrap` from `PATH`.
    pub fn new(mode: SandboxMode) -> Self {
        Self {
            mode,
            approval: ApprovalPolicy::default_for(mode),
            runner: SandboxRunner::bwrap(),
            network: NetworkAccess::default(),
            hidden: Vec::new(),
            limits: SandboxLimits::default(),
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

    /// The policy of a session rooted at `workspace_root` (canonicalized when possible) under
    /// `mode`.
    pub fn policy_in(&self, mode: SandboxMode, workspace_root: &Path) -> SandboxPolicy {
        let root =
            std::fs::canonicalize(workspace_root).unwrap_or_else(|_| workspace_root.to_path_buf());
        SandboxPolicy {
            mode,
            workspace_root: root,
            approval: self.approval,
            runner: self.runner.clone(),
            network: self.network,
            hidden: default_hidden(),
            exposed: Vec::new(),
            limits: self.limits,
            lock_dir: None,
        }
        .hiding(self.hidden.iter().cloned())
    }

    /// The policy of a session rooted at `workspace_root` under the standing mode.
    pub fn policy_for(&self, workspace_root: &Path) -> SandboxPolicy {
        self.policy_in(self.mode, workspace_root)
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
/// write anything), or the confinement step's (exit 125, `dsh confine: …`); returns that line.
pub fn runner_failure(exit_code: Option<i32>, stderr: &str) -> Option<String> {
    let first = stderr.lines().next()?;
    let ours = match exit_code {
        Some(1) => first.starts_with("bwrap: "),
        Some(125) => first.starts_with("dsh confine: "),
        _ => false,
    };
    ours.then(|| first.to_owned())
}

/// The note for a confined command whose stderr shows it ran into one of its limits: a fork
/// refused (`max_processes`), an allocation refused (`max_memory_mb`), or no space left (the
/// private `/tmp` is the one size-limited area a confined command writes besides the
/// workspace's disk: `tmp_size_mb`). Each names the setting that raises the limit.
pub fn limit_note(stderr: &str, policy: &SandboxPolicy) -> Option<String> {
    const ALLOCATION_REFUSED: [&str; 7] = [
        "Cannot allocate memory",
        "cannot allocate memory",
        "MemoryError",
        "std::bad_alloc",
        "memory allocation of",
        "out of memory",
        "xmalloc: cannot allocate",
    ];
    let limits = policy.limits;
    let has = |needles: &[&str]| {
        stderr
            .lines()
            .any(|l| needles.iter().any(|n| l.contains(n)))
    };
    let fork_refused = stderr.lines().any(|line| {
        let lower = line.to_ascii_lowercase();
        lower.contains("fork")
            && (lower.contains("resource temporarily unavailable") || lower.contains("eagain"))
    });
    if fork_refused {
        return Some(format!(
            "[sandbox: the command reached its process limit ({} processes and threads); raise [plugins.sandbox] max_processes to allow more]",
            limits.max_processes
        ));
    }
    if has(&ALLOCATION_REFUSED) {
        return Some(format!(
            "[sandbox: a process of the command reached its memory limit ({} MiB); raise [plugins.sandbox] max_memory_mb to allow more]",
            limits.max_memory_mb
        ));
    }
    if has(&["No space left on device"]) {
        return Some(format!(
            "[sandbox: no space left: the command's private /tmp holds at most {} MiB (or the disk is full); raise [plugins.sandbox] tmp_size_mb to allow more]",
            limits.tmp_size_mb
        ));
    }
    None
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

    fn launch_text(mode: SandboxMode, root: &Path) -> Option<Vec<String>> {
        let policy = SandboxConfig::new(mode)
            .policy_for(root)
            .with_runner(SandboxRunner::at("/usr/bin/bwrap"));
        policy.launch(root).map(|launch| {
            launch
                .args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        })
    }

    #[test]
    fn launch_arguments_per_mode() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let real = real.to_string_lossy().into_owned();
        assert!(launch_text(SandboxMode::DangerFullAccess, dir.path()).is_none());
        for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
            let text = launch_text(mode, dir.path()).unwrap();
            for flag in [
                "--die-with-parent",
                "--unshare-pid",
                "--new-session",
                "--unshare-user-try",
            ] {
                assert!(text.contains(&flag.to_owned()), "{mode:?} lacks {flag}");
            }
            assert!(text.windows(2).any(|w| w == ["--cap-drop", "ALL"]));
            assert!(text.windows(2).any(|w| w == ["--tmpfs", "/tmp"]));
            assert_eq!(text.last().map(String::as_str), Some("--"));
            let bind = if mode == SandboxMode::ReadOnly {
                "--ro-bind"
            } else {
                "--bind"
            };
            assert!(
                text.windows(3)
                    .any(|w| w[0] == bind && w[1] == real && w[2] == real),
                "{mode:?}: {text:?}"
            );
        }
        let ro = launch_text(SandboxMode::ReadOnly, dir.path()).unwrap();
        assert!(ro.contains(&"--unshare-net".to_owned()));
        assert!(!ro.contains(&"--bind".to_owned()));
        let ww = launch_text(SandboxMode::WorkspaceWrite, dir.path()).unwrap();
        assert!(!ww.contains(&"--unshare-net".to_owned()));
        let denied = SandboxConfig {
            network: NetworkAccess::Deny,
            ..SandboxConfig::new(SandboxMode::WorkspaceWrite)
        }
        .policy_for(dir.path());
        assert!(!denied.network_allowed());
    }

    #[test]
    fn protected_paths_of_a_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        // Nothing there yet: every protected folder gets an empty placeholder to mount.
        let expected = [
            root.join(".dsh"),
            root.join(".claude"),
            root.join(".codex"),
            root.join(".agents"),
            root.join(".git"),
        ];
        assert_eq!(protected_paths(&root), expected);
        for path in &expected {
            assert!(path.is_dir(), "{} is a placeholder", path.display());
            assert_eq!(std::fs::read_dir(path).unwrap().count(), 0);
        }
        std::fs::write(root.join(".mcp.json"), "{}").unwrap();
        let mut with_file = expected.to_vec();
        with_file.insert(4, root.join(".mcp.json"));
        assert_eq!(protected_paths(&root), with_file);
    }

    #[allow(
        clippy::disallowed_methods,
        reason = "the test builds the repository with the real git"
    )]
    fn git(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    /// The nested repositories the person's git enters are the index's gitlinks: each one's
    /// `.git` is protected (a placeholder when the submodule is not checked out), in every
    /// index version git writes.
    #[test]
    fn submodules_listed_in_the_index_are_protected() {
        for version in ["2", "3", "4"] {
            let dir = tempfile::tempdir().unwrap();
            let root = std::fs::canonicalize(dir.path()).unwrap();
            git(&root, &["init", "-q", "."]);
            git(&root, &["config", "index.version", version]);
            std::fs::create_dir_all(root.join("deps/inner")).unwrap();
            git(&root.join("deps/inner"), &["init", "-q", "."]);
            git(
                &root.join("deps/inner"),
                &["commit", "-q", "--allow-empty", "-m", "x"],
            );
            std::fs::create_dir_all(root.join("src")).unwrap();
            std::fs::write(root.join("src/a-long-file-name.rs"), "x").unwrap();
            std::fs::create_dir_all(root.join("vendor/lib")).unwrap();
            git(&root, &["add", "src", "deps/inner"]);
            // A gitlink whose folder is empty (a submodule not checked out).
            git(
                &root,
                &[
                    "update-index",
                    "--add",
                    "--cacheinfo",
                    "160000,1111111111111111111111111111111111111111,vendor/lib",
                ],
            );
            assert_eq!(
                gitlinks(&root.join(".git/index")),
                ["deps/inner", "vendor/lib"],
                "index version {version}"
            );
            let paths = protected_paths(&root);
            assert!(paths.contains(&root.join(".git")), "{paths:?}");
            assert!(paths.contains(&root.join("deps/inner/.git")), "{paths:?}");
            assert!(paths.contains(&root.join("vendor/lib/.git")), "{paths:?}");
            assert!(root.join("vendor/lib/.git").is_dir());
        }
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
    fn a_vanished_socket_mask_is_told_apart() {
        assert!(is_vanished_mask(
            "bwrap: Can't create file at /run/x.sock: Read-only file system"
        ));
        assert!(!is_vanished_mask(
            "bwrap: Creating new namespace failed: Operation not permitted"
        ));
    }

    #[test]
    fn kernel_tunables_are_bound_read_only_and_triggers_masked() {
        let dir = tempfile::tempdir().unwrap();
        let text = launch_text(SandboxMode::WorkspaceWrite, dir.path()).unwrap();
        let proc_at = text.iter().position(|a| a == "--proc").unwrap();
        let sys_at = text
            .windows(3)
            .position(|w| w == ["--ro-bind", "/proc/sys", "/proc/sys"])
            .expect("/proc/sys is bound read-only");
        assert!(sys_at > proc_at, "the read-only bind must follow --proc");
        if Path::new("/proc/kmsg").exists() {
            assert!(
                text.windows(3)
                    .any(|w| w == ["--ro-bind", "/dev/null", "/proc/kmsg"])
            );
        }
        assert!(text.contains(&"--unshare-ipc".to_owned()));
        let size_at = text.iter().position(|a| a == "--size").unwrap();
        assert_eq!(text[size_at + 1], (1024u64 * 1024 * 1024).to_string());
        assert_eq!(text[size_at + 2], "--tmpfs");
    }

    #[test]
    fn a_hidden_area_under_a_temp_area_is_masked_when_the_workdir_shows_it() {
        let tmp = std::fs::canonicalize(std::env::temp_dir()).unwrap();
        let home = tempfile::tempdir_in(&tmp).unwrap();
        let home = std::fs::canonicalize(home.path()).unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        let ws = tempfile::tempdir().unwrap();
        let policy = SandboxConfig::new(SandboxMode::ReadOnly)
            .policy_for(ws.path())
            .with_runner(SandboxRunner::at("/usr/bin/bwrap"))
            .hiding([home.join(".ssh")]);
        let text = |cwd: &Path| -> Vec<String> {
            policy
                .launch(cwd)
                .unwrap()
                .args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let ssh = home.join(".ssh").display().to_string();
        let masked = |args: &[String]| args.windows(2).any(|w| w[0] == "--tmpfs" && w[1] == ssh);
        assert!(!masked(&text(ws.path())), "unseen under the private /tmp");
        assert!(masked(&text(&home)), "the workdir holds it");
        let inside = text(&home.join(".ssh"));
        assert!(masked(&inside), "the workdir is in it");
        assert!(inside.windows(2).any(|w| w[0] == "--dir" && w[1] == ssh));
    }

    #[test]
    fn limit_notes_name_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let policy = policy(SandboxMode::WorkspaceWrite, dir.path()).with_limits(SandboxLimits {
            max_processes: 64,
            max_memory_mb: 128,
            tmp_size_mb: 16,
        });
        let note = |stderr: &str| limit_note(stderr, &policy).unwrap_or_default();
        assert!(
            note("bash: fork: retry: Resource temporarily unavailable")
                .contains("(64 processes and threads); raise [plugins.sandbox] max_processes")
        );
        assert!(note("MemoryError").contains("(128 MiB); raise [plugins.sandbox] max_memory_mb"));
        assert!(
            note("head: error writing 'standard output': No space left on device").contains(
                "at most 16 MiB (or the disk is full); raise [plugins.sandbox] tmp_size_mb"
            )
        );
        assert_eq!(limit_note("all good", &policy), None);
    }

    #[test]
    fn runner_failure_lines() {
        assert_eq!(
            runner_failure(Some(125), "dsh confine: expected the process limit\n"),
            Some("dsh confine: expected the process limit".to_owned())
        );
        assert_eq!(runner_failure(Some(125), "bash: x\n"), None);
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
