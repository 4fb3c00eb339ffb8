//! Child processes: `bash -c` with stdin at EOF in a process group of its own (under the
//! sandbox runner, or under the process guard when unconfined), group-wide kills, and the
//! bounded capture of both pipes. Every spawn is a `posix_spawn`: programs are absolute paths
//! and nothing needs a `pre_exec` hook.

use std::collections::HashMap;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rustix::process::Pid;
use rustix::process::Signal;
use tokio::process::Child;
use tokio::process::Command;
use tokio::task::JoinHandle;

use dsh_tools::OutputStream;

use crate::capture::Capture;
use crate::capture::CaptureConfig;
use crate::capture::OutputTap;
use crate::placeholders::WorkspaceLease;
use crate::sandbox::Launch;

/// How long the pipes may stay open after the shell itself exited before the rest of its
/// process group is killed (a backgrounded grandchild still holding stdout).
const DRAIN_GRACE: Duration = Duration::from_millis(500);
/// Last resort for pipes held by a process that left our group (setsid).
const DRAIN_HARD_LIMIT: Duration = Duration::from_secs(2);
/// How long a guard may take to sweep its tree after `K` before it is killed itself.
const GUARD_EXIT_LIMIT: Duration = Duration::from_secs(2);

/// The environment a shell child gets, already filtered and with the managed `DSH_*` snapshot
/// applied last.
pub fn child_env(
    base: impl IntoIterator<Item = (String, String)>,
    managed: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env = dsh_secrets::filter_env(base);
    for (name, value) in [
        ("NO_COLOR", "1"),
        ("TERM", "dumb"),
        ("PAGER", "cat"),
        ("GIT_PAGER", "cat"),
    ] {
        set(&mut env, name, value);
    }
    for (name, value) in managed {
        set(&mut env, name, value);
    }
    env
}

fn set(env: &mut Vec<(String, String)>, name: &str, value: &str) {
    env.retain(|(existing, _)| existing != name);
    env.push((name.to_owned(), value.to_owned()));
}

/// `bash` as an absolute path, looked up in the child's own `PATH`.
fn bash_program(env: &[(String, String)], cwd: &Path) -> io::Result<PathBuf> {
    let path = env
        .iter()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.as_str());
    dsh_secrets::resolve_program("bash", path, cwd).ok_or_else(|| io::Error::from_raw_os_error(2))
}

/// How a running shell is told to stop.
enum Control {
    /// Signals go to this process group: `bash` itself, or the `bwrap` runner above it.
    Group(Option<Pid>),
    /// Orders go to the process guard over its control socket.
    Guard(GuardLink),
}

struct GuardLink {
    socket: tokio::net::UnixStream,
    /// Bytes of the status line read so far (kept across cancelled waits).
    pending: Vec<u8>,
    status: Option<ExitStatus>,
}

/// A running shell with both pipes being captured.
pub struct ShellProcess {
    pub child: Child,
    control: Control,
    pub stdout: Capture,
    pub stderr: Capture,
    pumps: Vec<JoinHandle<()>>,
    live: LiveEntry,
    /// A confined command's hold on the workspace's placeholders, released when it has ended.
    lease: Option<Arc<WorkspaceLease>>,
    /// When the confined command's runner started (clock ticks after boot).
    launched: u64,
}

/// Spawns `bash -c <command>` with stdin `/dev/null`. With a `launch` wrapper (the sandbox
/// runner) the wrapper leads a new process group and `bash` runs beneath it in its own
/// session; without one, under the process guard when the process has one (see
/// [`crate::guard`]), else as the leader of a new process group. With a `tap`, both pipes are
/// mirrored to it live.
#[allow(
    clippy::disallowed_methods,
    reason = "the shell is started here with the filtered environment it is given"
)]
pub fn spawn_shell(
    command: &str,
    cwd: &Path,
    env: &[(String, String)],
    launch: Option<&Launch>,
    stdout_config: CaptureConfig,
    stderr_config: CaptureConfig,
    tap: Option<OutputTap>,
) -> io::Result<ShellProcess> {
    let bash = bash_program(env, cwd);
    let guard = crate::guard::program().filter(|_| launch.is_none());
    let mut guard_socket = None;
    let mut cmd = match (launch, guard) {
        (Some(launch), _) => {
            let mut cmd = Command::new(&launch.program);
            // Inside the sandbox `bash` is found in the sandbox's own view of `PATH`.
            cmd.args(&launch.args).arg("bash").process_group(0);
            cmd
        }
        (None, Some(guard)) => {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
            ours.set_nonblocking(true)?;
            guard_socket = Some(ours);
            let mut cmd = Command::new(guard);
            cmd.arg(crate::guard::GUARD_ARG)
                .arg(bash?)
                .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)));
            cmd
        }
        (None, None) => {
            let mut cmd = Command::new(bash?);
            cmd.process_group(0);
            cmd
        }
    };
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if guard_socket.is_none() {
        cmd.stdin(Stdio::null());
    }
    let mut child = cmd.spawn()?;
    drop(cmd);
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw);
    let control = match guard_socket {
        Some(socket) => Control::Guard(GuardLink {
            socket: tokio::net::UnixStream::from_std(socket)?,
            pending: Vec::new(),
            status: None,
        }),
        None => Control::Group(pid),
    };
    let live = LiveEntry::register(&control);
    let stdout = Capture::new();
    let stderr = Capture::new();
    let mut pumps = Vec::new();
    if let Some(pipe) = child.stdout.take() {
        let cap = stdout.clone();
        let tap = tap.clone();
        pumps.push(tokio::spawn(async move {
            let mirror = tap.as_ref().map(|tap| (tap, OutputStream::Stdout));
            cap.pump_mirrored(pipe, &stdout_config, mirror).await;
        }));
    }
    if let Some(pipe) = child.stderr.take() {
        let cap = stderr.clone();
        pumps.push(tokio::spawn(async move {
            let mirror = tap.as_ref().map(|tap| (tap, OutputStream::Stderr));
            cap.pump_mirrored(pipe, &stderr_config, mirror).await;
        }));
    }
    Ok(ShellProcess {
        child,
        control,
        stdout,
        stderr,
        pumps,
        live,
        lease: launch.and_then(|launch| launch.lease.clone()),
        launched: pid
            .filter(|_| launch.is_some())
            .and_then(|pid| {
                crate::placeholders::start_ticks(
                    &Path::new("/proc").join(pid.as_raw_nonzero().to_string()),
                )
            })
            .unwrap_or(0),
    })
}

impl ShellProcess {
    /// Asks the whole command to stop: SIGTERM to its group, or SIGKILL to everything it
    /// started (`signal` is TERM or KILL; others are delivered as TERM under a guard).
    pub fn signal_group(&self, signal: Signal) {
        match &self.control {
            Control::Group(Some(pgid)) => kill_group(*pgid, signal),
            Control::Group(None) => {}
            Control::Guard(link) => {
                let order: &[u8] = if signal == Signal::KILL { b"K" } else { b"T" };
                if let Err(err) = link.socket.try_write(order) {
                    tracing::debug!(%err, "cannot reach the process guard");
                }
            }
        }
    }

    /// Waits for the command (not its guard) to exit. Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let Control::Guard(link) = &mut self.control else {
            return self.child.wait().await;
        };
        if let Some(status) = link.status {
            return Ok(status);
        }
        loop {
            if let Some(end) = link.pending.iter().position(|b| *b == b'\n') {
                if let Some(status) = crate::guard::parse_status(&link.pending[..end]) {
                    link.status = Some(status);
                    return Ok(status);
                }
                link.pending.drain(..=end);
                continue;
            }
            link.socket.readable().await?;
            let mut buf = [0u8; 64];
            match link.socket.try_read(&mut buf) {
                Ok(0) => {
                    // The guard is gone without a word: its own status is all there is.
                    let status = self.child.wait().await?;
                    link.status = Some(status);
                    return Ok(status);
                }
                Ok(n) => link.pending.extend_from_slice(&buf[..n]),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                Err(err) => return Err(err),
            }
        }
    }

    /// SIGTERM to the group, then SIGKILL after `grace` if the shell has not exited.
    pub async fn terminate(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        self.signal_group(Signal::TERM);
        match tokio::time::timeout(grace, self.wait()).await {
            Ok(status) => status,
            Err(_) => {
                self.signal_group(Signal::KILL);
                self.wait().await
            }
        }
    }

    /// SIGKILL to the group, then reap the shell.
    pub async fn kill_now(&mut self) -> io::Result<ExitStatus> {
        self.signal_group(Signal::KILL);
        self.wait().await
    }

    /// After the shell exited: waits for the pipes to close, killing leftover group members
    /// that keep them open. With `kill_rest`, every survivor of the group is killed first.
    /// Under a guard every remaining descendant is killed at the end, detached ones included.
    pub async fn finish(mut self, kill_rest: bool) {
        if kill_rest {
            self.signal_group(Signal::KILL);
        }
        let mut pumps = std::mem::take(&mut self.pumps);
        let drained = tokio::time::timeout(DRAIN_GRACE, join_all(&mut pumps))
            .await
            .is_ok();
        if !drained || matches!(self.control, Control::Guard(_)) {
            self.signal_group(Signal::KILL);
        }
        if !drained
            && tokio::time::timeout(DRAIN_HARD_LIMIT, join_all(&mut pumps))
                .await
                .is_err()
        {
            tracing::warn!(
                "a process outside the group still holds the output pipes; abandoning them"
            );
            for pump in &pumps {
                pump.abort();
            }
        }
        if matches!(self.control, Control::Guard(_))
            && tokio::time::timeout(GUARD_EXIT_LIMIT, self.child.wait())
                .await
                .is_err()
        {
            let _ = self.child.start_kill();
        }
        if let Control::Group(Some(pid)) = self.control {
            // A confined command's pids cgroup, named after its launch (see `dsh-tool-guard`).
            let launch = pid.as_raw_nonzero().get().unsigned_abs();
            let removed = dsh_tool_guard::remove_pids_cgroup(launch);
            // The runner's exit does not mean its sandbox is empty: bubblewrap exits with the
            // command's status while the namespace's other processes are being killed.
            if let Some(lease) = self
                .lease
                .take()
                .filter(|lease| !lease.placeholders().is_empty())
            {
                let launched = self.launched;
                let wait = sandbox_gone(launch, removed, launched, SANDBOX_EXIT_WAIT);
                if wait.await {
                    lease.sandbox_gone();
                } else {
                    // Not yet: keep waiting off the call's path (the lease holds the lock until
                    // then). Should dsh exit first, a later command removes the placeholders.
                    tokio::spawn(async move {
                        // Gone since (`None`) means another launch's sweep removed it empty.
                        let removed = removed
                            .map(|_| dsh_tool_guard::remove_pids_cgroup(launch).unwrap_or(true));
                        if sandbox_gone(launch, removed, launched, SANDBOX_EXIT_GRACE).await {
                            lease.sandbox_gone();
                        }
                    });
                }
            }
        }
        self.live.disarm();
    }
}

/// How long a finished confined command's sandbox may take to empty before its placeholders
/// are left for a later command to remove: bubblewrap exits with the command's status while
/// the kernel is still killing the namespace's other processes, which takes a few
/// milliseconds.
const SANDBOX_EXIT_GRACE: Duration = Duration::from_millis(1000);
/// How much of that grace the call itself waits (it usually takes a millisecond or two).
const SANDBOX_EXIT_WAIT: Duration = Duration::from_millis(10);

/// Whether every process of the confined command launched as `launch` (at `launched` clock
/// ticks after boot) has ended: its pids cgroup is removed (`removed` is the first try), or,
/// where dsh makes none, no visible process started since lives in another PID namespace.
async fn sandbox_gone(launch: u32, removed: Option<bool>, launched: u64, grace: Duration) -> bool {
    let started = tokio::time::Instant::now();
    if removed.is_none() {
        loop {
            if !crate::placeholders::another_pid_namespace_runs(launched) {
                return true;
            }
            if started.elapsed() >= grace {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let mut removed = removed;
    while removed == Some(false) {
        if started.elapsed() >= grace {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        // Gone (`None`) means another launch's sweep removed it: it was empty.
        removed = dsh_tool_guard::remove_pids_cgroup(launch);
    }
    true
}

async fn join_all(pumps: &mut [JoinHandle<()>]) {
    for pump in pumps.iter_mut() {
        let _ = pump.await;
    }
}

/// What the process-wide registry can do to a live command without its `ShellProcess`.
enum KillHandle {
    Group(Pid),
    Guard(std::os::unix::net::UnixStream),
}

fn live_processes() -> &'static Mutex<HashMap<u64, KillHandle>> {
    static LIVE: std::sync::OnceLock<Mutex<HashMap<u64, KillHandle>>> = std::sync::OnceLock::new();
    LIVE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// A command's entry in the registry of live commands. Dropping it (the owning future gave up
/// without cancelling) kills the command, so no shell outlives its call.
struct LiveEntry {
    id: Option<u64>,
}

impl LiveEntry {
    fn register(control: &Control) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let handle = match control {
            Control::Group(Some(pgid)) => KillHandle::Group(*pgid),
            Control::Group(None) => return Self { id: None },
            Control::Guard(link) => {
                use std::os::fd::AsFd;
                // A second handle on the socket, only for `K`; the entry is removed before the
                // `ShellProcess` lets go of its own, so end of file still reaches the guard.
                match link.socket.as_fd().try_clone_to_owned() {
                    Ok(fd) => KillHandle::Guard(std::os::unix::net::UnixStream::from(fd)),
                    Err(_) => return Self { id: None },
                }
            }
        };
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        lock_live().insert(id, handle);
        Self { id: Some(id) }
    }

    /// The command finished normally: forget it without killing anything.
    fn disarm(&mut self) {
        if let Some(id) = self.id.take() {
            lock_live().remove(&id);
        }
    }
}

impl Drop for LiveEntry {
    fn drop(&mut self) {
        if let Some(id) = self.id.take()
            && let Some(handle) = lock_live().remove(&id)
        {
            kill_handle(&handle);
        }
    }
}

fn lock_live() -> std::sync::MutexGuard<'static, HashMap<u64, KillHandle>> {
    dsh_sync::lock(live_processes())
}

fn kill_handle(handle: &KillHandle) {
    match handle {
        KillHandle::Group(pgid) => kill_group(*pgid, Signal::KILL),
        KillHandle::Guard(socket) => {
            use std::io::Write;
            let _ = (&*socket).write_all(b"K");
        }
    }
}

/// Kills every command this process started that is still running (foreground calls and
/// background jobs alike); for a signal handler on the way out. Returns how many there were.
pub fn kill_all() -> usize {
    let handles: Vec<KillHandle> = lock_live().drain().map(|(_, handle)| handle).collect();
    for handle in &handles {
        kill_handle(handle);
    }
    handles.len()
}

/// `kill(-pgid, signal)`; a group that is already gone is not an error.
pub fn kill_group(pgid: Pid, signal: Signal) {
    if let Err(err) = rustix::process::kill_process_group(pgid, signal)
        && err != rustix::io::Errno::SRCH
    {
        tracing::debug!(%err, pgid = pgid.as_raw_nonzero().get(), "kill_process_group failed");
    }
}

/// `(exitCode, signal)` as upstream reports them.
pub fn exit_parts(status: &ExitStatus) -> (Option<i32>, Option<String>) {
    match status.signal() {
        Some(sig) => (None, Some(signal_name(sig))),
        None => (status.code(), None),
    }
}

/// The Node-style name of a Linux signal number.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        16 => "SIGSTKFLT",
        17 => "SIGCHLD",
        18 => "SIGCONT",
        19 => "SIGSTOP",
        20 => "SIGTSTP",
        21 => "SIGTTIN",
        22 => "SIGTTOU",
        23 => "SIGURG",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        26 => "SIGVTALRM",
        27 => "SIGPROF",
        28 => "SIGWINCH",
        29 => "SIGIO",
        30 => "SIGPWR",
        31 => "SIGSYS",
        other => return format!("SIG{other}"),
    };
    name.to_owned()
}

/// Node's rendering of a spawn failure (`spawn bash ENOENT`).
pub fn spawn_error_message(err: &io::Error) -> String {
    spawn_error_message_for("bash", err)
}

/// `spawn <file> <CODE>` for any program.
pub fn spawn_error_message_for(file: &str, err: &io::Error) -> String {
    dsh_tool_guard::spawn_error_message_for(file, err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_filters_secrets_and_applies_managed_last() {
        let base = [
            ("PATH", "/bin"),
            ("OPENAI_API_KEY", "x"),
            ("github_token", "x"),
            ("DB_PASSWORD", "x"),
            ("MY_SECRET", "x"),
            ("DSH_SESSION_ID", "stale"),
            ("TERM", "xterm"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let managed = vec![
            ("DSH_SHELL".to_owned(), "1".to_owned()),
            ("DSH_SESSION_ID".to_owned(), "s1".to_owned()),
        ];
        let env = child_env(base, &managed);
        let get = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        assert_eq!(get("PATH"), Some("/bin"));
        assert_eq!(get("TERM"), Some("dumb"));
        assert_eq!(get("NO_COLOR"), Some("1"));
        assert_eq!(get("PAGER"), Some("cat"));
        assert_eq!(get("GIT_PAGER"), Some("cat"));
        assert_eq!(get("DSH_SESSION_ID"), Some("s1"));
        assert_eq!(get("DSH_SHELL"), Some("1"));
        for gone in ["OPENAI_API_KEY", "github_token", "DB_PASSWORD", "MY_SECRET"] {
            assert_eq!(get(gone), None, "{gone}");
        }
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(
            spawn_error_message(&io::Error::from_raw_os_error(2)),
            "spawn bash ENOENT"
        );
    }
}
