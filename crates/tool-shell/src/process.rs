//! Child processes: `bash -c` in its own process group with stdin at EOF, group-wide kills,
//! and the bounded capture of both pipes.

use std::io;
use std::path::Path;
use std::process::ExitStatus;
use std::process::Stdio;
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
use crate::sandbox::Launch;

/// How long the pipes may stay open after the shell itself exited before the rest of its
/// process group is killed (a backgrounded grandchild still holding stdout).
const DRAIN_GRACE: Duration = Duration::from_millis(500);
/// Last resort for pipes held by a process that left our group (setsid).
const DRAIN_HARD_LIMIT: Duration = Duration::from_secs(2);

/// The environment a shell child gets, already filtered and with the managed `DSH_*` snapshot
/// applied last.
pub fn child_env(
    base: impl IntoIterator<Item = (String, String)>,
    managed: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = base
        .into_iter()
        .filter(|(name, _)| inheritable(name))
        .collect();
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

/// Secrets (`/KEY|PASSWORD|SECRET|TOKEN/i`) and stale `DSH_*` values never reach the child.
fn inheritable(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let secret = ["KEY", "PASSWORD", "SECRET", "TOKEN"]
        .iter()
        .any(|word| upper.contains(word));
    !secret && !name.starts_with("DSH_")
}

/// A running shell with both pipes being captured.
pub struct ShellProcess {
    pub child: Child,
    pub pgid: Option<Pid>,
    pub stdout: Capture,
    pub stderr: Capture,
    pumps: Vec<JoinHandle<()>>,
    guard: GroupGuard,
}

/// Spawns `bash -c <command>` as the leader of a new process group, stdin `/dev/null`.
/// With a `launch` wrapper (the sandbox runner) the wrapper is the group leader and `bash`
/// runs beneath it, still in the same group. With a `tap`, both pipes are mirrored to it live.
pub(crate) fn spawn_shell(
    command: &str,
    cwd: &Path,
    env: &[(String, String)],
    launch: Option<&Launch>,
    stdout_config: CaptureConfig,
    stderr_config: CaptureConfig,
    tap: Option<OutputTap>,
) -> io::Result<ShellProcess> {
    let mut cmd = match launch {
        Some(launch) => {
            let mut cmd = Command::new(&launch.program);
            cmd.args(&launch.args).arg("bash");
            cmd
        }
        None => Command::new("bash"),
    };
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn()?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw);
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
        pgid,
        stdout,
        stderr,
        pumps,
        guard: GroupGuard { pgid },
    })
}

impl ShellProcess {
    /// Sends `signal` to the whole group.
    pub fn signal_group(&self, signal: Signal) {
        if let Some(pgid) = self.pgid {
            kill_group(pgid, signal);
        }
    }

    /// SIGTERM to the group, then SIGKILL after `grace` if the shell has not exited.
    pub async fn terminate(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        self.signal_group(Signal::TERM);
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(status) => status,
            Err(_) => {
                self.signal_group(Signal::KILL);
                self.child.wait().await
            }
        }
    }

    /// SIGKILL to the group, then reap the shell.
    pub async fn kill_now(&mut self) -> io::Result<ExitStatus> {
        self.signal_group(Signal::KILL);
        self.child.wait().await
    }

    /// After the shell exited: waits for the pipes to close, killing leftover group members
    /// that keep them open. With `kill_rest`, every survivor of the group is killed first.
    pub async fn finish(mut self, kill_rest: bool) {
        if kill_rest {
            self.signal_group(Signal::KILL);
        }
        let mut pumps = std::mem::take(&mut self.pumps);
        let drained = tokio::time::timeout(DRAIN_GRACE, join_all(&mut pumps))
            .await
            .is_ok();
        if !drained {
            self.signal_group(Signal::KILL);
            if tokio::time::timeout(DRAIN_HARD_LIMIT, join_all(&mut pumps))
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
        }
        self.guard.pgid = None;
    }
}

async fn join_all(pumps: &mut [JoinHandle<()>]) {
    for pump in pumps.iter_mut() {
        let _ = pump.await;
    }
}

/// Kills the group if the owning future is dropped mid-flight (caller gave up without
/// cancelling), so no shell outlives its call.
struct GroupGuard {
    pgid: Option<Pid>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            kill_group(pgid, Signal::KILL);
        }
    }
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
    use std::os::unix::process::ExitStatusExt;
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
    let code = match err.raw_os_error() {
        Some(raw) => errno_name(raw),
        None => err.to_string(),
    };
    format!("spawn {file} {code}")
}

fn errno_name(raw: i32) -> String {
    let name = match raw {
        1 => "EPERM",
        2 => "ENOENT",
        7 => "E2BIG",
        12 => "ENOMEM",
        13 => "EACCES",
        20 => "ENOTDIR",
        24 => "EMFILE",
        other => return format!("errno {other}"),
    };
    name.to_owned()
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
