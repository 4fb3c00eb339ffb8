//! `dsh-tool-guard`: the process guard of unconfined tool commands.
//!
//! A confined command lives in a PID namespace that dies with its `bwrap` runner. An unconfined
//! one (`danger-full-access`) has no such boundary, so dsh starts it through a small guard
//! process instead. The guard
//!
//! - starts a new session, so the command has no controlling terminal (nothing can be pushed
//!   into the user's terminal with `TIOCSTI`);
//! - is a child subreaper, so every descendant that detaches (`setsid`, `nohup`, a double fork)
//!   is re-parented to it rather than to init, and can still be found and killed;
//! - takes its orders over a socket on its stdin: `T` forwards SIGTERM to the command's
//!   process group, `K` kills the whole tree. End of file means dsh is gone (closed the socket,
//!   or died in any way, SIGKILL included): the guard kills the whole tree and exits. No
//!   `PR_SET_PDEATHSIG` is involved, so the guard neither needs a `pre_exec` hook (which would
//!   force the standard library off `posix_spawn`) nor dies when the thread that spawned it
//!   exits;
//! - reports the command's exit status on the same socket (`E<code>` or `S<signal>`), then
//!   waits for `K` (dsh lets late output drain first) before it cleans up and exits.
//!
//! The guard is started once per unconfined command, so what it costs to start matters: it is
//! its own executable ([`BINARY_NAME`], a few hundred KiB, shipped and installed next to `dsh`)
//! rather than the whole `dsh` binary re-executed (tens of MB to map and relocate: about 4 ms of
//! CPU per call, see `docs/benchmarks.md`). Any binary that calls [`run_if_invoked`] first thing
//! in `main` can still serve (the `dsh` binary does, as the fallback when the guard executable
//! is missing). This crate depends on nothing but the standard library and rustix so that the
//! guard executable stays small.
//!
//! Everything here is spawned with `posix_spawn`: the command is an absolute path and nothing
//! needs a `pre_exec` hook.
//! The same executable also starts confined commands ([`CONFINE_ARG`], see [`confine`]): it
//! sets their process and memory limits, then becomes bubblewrap.
//!
//! Owns: the guard's main, its control protocol (orders, status lines), the final sweep of the
//! tree. Does not own: when a command runs or how its output is captured (`dsh-tool-shell`).
//! Must not depend on: any other dsh crate (it would grow the executable).

use std::ffi::OsStr;
use std::ffi::OsString;
use std::io;
use std::io::Read;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::path::PathBuf;
use std::process::ExitCode;
use std::process::ExitStatus;
use std::process::Stdio;
use std::sync::mpsc;

use rustix::process::Pid;
use rustix::process::Signal;

/// The first argument that marks a guard start (`<guard> __dsh-tool-guard <program> [args…]`).
/// dsh always passes it, so the dedicated executable and a re-executed `dsh` take the same
/// command line.
pub const GUARD_ARG: &str = "__dsh-tool-guard";

/// The first argument that marks a confinement launch (`<guard> __dsh-confine <max processes>
/// <max data bytes> -- <runner> [args…]`): set the limits of a confined command, then become
/// its runner (bubblewrap). See [`confine`].
pub const CONFINE_ARG: &str = "__dsh-confine";

/// The file name of the guard executable, installed next to `dsh`.
pub const BINARY_NAME: &str = "dsh-tool-guard";

/// The guard executable in the folder of `exe` (normally `std::env::current_exe()`), when it
/// is there as a regular executable file.
pub fn next_to(exe: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let candidate = exe.parent()?.join(BINARY_NAME);
    let meta = std::fs::metadata(&candidate).ok()?;
    (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(candidate)
}

/// The guard executable's `main`: `[__dsh-tool-guard] <program> [args…]`.
pub fn main() -> ExitCode {
    let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().map(OsString::as_os_str) == Some(OsStr::new(CONFINE_ARG)) {
        return confine(args.split_off(1));
    }
    if args.first().map(OsString::as_os_str) == Some(OsStr::new(GUARD_ARG)) {
        args.remove(0);
    }
    run(args)
}

/// Runs the guard when this process was started as one (`<binary> __dsh-tool-guard <program>
/// [args…]`) and returns its exit code; `None` for an ordinary start.
pub fn run_if_invoked() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    match args.next() {
        Some(first) if first == OsStr::new(GUARD_ARG) => Some(run(args.collect())),
        Some(first) if first == OsStr::new(CONFINE_ARG) => Some(confine(args.collect())),
        _ => None,
    }
}

/// The exit code of a confinement launch that could not start its runner (bubblewrap's own
/// setup failures exit 1; 125 says the launch itself failed).
const CONFINE_FAILED: u8 = 125;

/// A confinement launch: `<max processes> <max data bytes> -- <runner> [args…]`. Sets the
/// limits, then replaces itself with the runner (`exec`, same pid, nothing left behind), so
/// the runner and every process of the command inherit them:
///
/// - the processes of the command: a pids cgroup of its own (`pids.max`) where this process
///   can make one (cgroup v1's `pids` hierarchy, or a cgroup v2 folder whose
///   `cgroup.subtree_control` enables `pids`: in practice when dsh runs as root), named
///   `dsh-<pid>` after this process; and, for any uid but root, `RLIMIT_NPROC` at what the uid
///   runs now plus the limit (it counts every task of the uid, and the kernel does not apply
///   it to root: hence the cgroup);
/// - `RLIMIT_DATA`: what one process may allocate. Unlike `RLIMIT_AS` it leaves reserved but
///   unused address space alone (JVMs, V8 and Go reserve far more than they use).
///
/// Done here rather than in a `pre_exec` hook of dsh's spawn, which would force the standard
/// library from `posix_spawn` to `fork` for every call (see `docs/security.md`).
pub fn confine(args: Vec<OsString>) -> ExitCode {
    let error = match confine_and_exec(args) {
        Ok(never) => match never {},
        Err(error) => error,
    };
    let _ = writeln!(io::stderr(), "dsh confine: {error}");
    ExitCode::from(CONFINE_FAILED)
}

enum Never {}

fn confine_and_exec(args: Vec<OsString>) -> io::Result<Never> {
    let mut args = args.into_iter();
    let mut number = |what: &str| -> io::Result<u64> {
        args.next()
            .and_then(|arg| arg.to_str().and_then(|text| text.parse().ok()))
            .ok_or_else(|| io::Error::other(format!("expected {what}")))
    };
    let processes = number("the process limit")?;
    let data = number("the data limit")?;
    if args.next().as_deref() != Some(OsStr::new("--")) {
        return Err(io::Error::other("expected `--` before the runner"));
    }
    let program = args
        .next()
        .ok_or_else(|| io::Error::other("no runner to start"))?;
    join_pids_cgroup(processes);
    let mut limits = vec![(rustix::process::Resource::Data, data)];
    let uid = rustix::process::getuid();
    if !uid.is_root() {
        // `RLIMIT_NPROC` counts every task of the uid, the user's own desktop included: the
        // command may add `processes` to what the user already runs.
        let running = tasks_of(uid.as_raw());
        limits.push((
            rustix::process::Resource::Nproc,
            processes.saturating_add(running),
        ));
    }
    for (resource, value) in limits {
        let limit = rustix::process::Rlimit {
            current: Some(value),
            maximum: Some(value),
        };
        rustix::process::setrlimit(resource, limit)
            .map_err(|e| io::Error::other(format!("cannot set {resource:?} to {value}: {e}")))?;
    }
    // The confined command is exec'd in the environment dsh already filtered.
    #[allow(
        clippy::disallowed_methods,
        reason = "the confinement step execs what dsh gave it"
    )]
    Err(std::process::Command::new(&program).args(args).exec())
}

/// The tasks (threads) running under `uid` now, from `/proc`.
fn tasks_of(uid: u32) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut count = 0u64;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.as_encoded_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        if entry.metadata().is_ok_and(|meta| meta.uid() == uid) {
            let threads = std::fs::read_dir(entry.path().join("task")).map_or(1, Iterator::count);
            count = count.saturating_add(threads as u64);
        }
    }
    count
}

/// The folder names of the cgroups [`confine`] makes: `dsh-<pid of the launch>`.
pub const CGROUP_PREFIX: &str = "dsh-";

/// Moves this process into a new pids cgroup limited to `max` tasks, when it can make one;
/// otherwise leaves it where it is (the rlimit still applies to unprivileged uids). Empty
/// cgroups of earlier launches are removed first: the kernel refuses to remove one that still
/// holds a process, so only finished commands' folders go.
fn join_pids_cgroup(max: u64) {
    let Some(PidsCgroup { parent, version }) = pids_cgroup_parent() else {
        return;
    };
    if let Ok(entries) = std::fs::read_dir(&parent) {
        for entry in entries.flatten() {
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with(CGROUP_PREFIX)
            {
                let _ = std::fs::remove_dir(entry.path());
            }
        }
    }
    let own = parent.join(format!("{CGROUP_PREFIX}{}", std::process::id()));
    // Another launch's sweep may remove the folder between its creation and joining it.
    for _ in 0..3 {
        let joined = (std::fs::create_dir(&own).is_ok() || own.is_dir())
            && std::fs::write(own.join("pids.max"), max.to_string()).is_ok()
            && join(&own, version);
        if joined {
            return;
        }
    }
    let _ = std::fs::remove_dir(&own);
}

/// Moves this process into the cgroup `dir`.
///
/// Moving a whole process (`cgroup.procs`) write-locks the kernel's global
/// `cgroup_threadgroup_rwsem`, which waits for an RCU grace period unless another migration
/// ran moments before: 5 to 20 ms of every confined call on a busy machine (measured in
/// `docs/benchmarks.md`). Under cgroup v1, moving one thread (`tasks`, `0` for the caller)
/// takes no such lock, and this process is one thread (nothing here starts another; and
/// `exec` would leave only the calling thread anyway), so the thread is the whole process.
/// cgroup v2 moves threads only inside threaded subtrees: there the process is moved.
fn join(dir: &Path, version: CgroupVersion) -> bool {
    (version == CgroupVersion::V1 && std::fs::write(dir.join("tasks"), "0").is_ok())
        || std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string()).is_ok()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CgroupVersion {
    V1,
    V2,
}

/// Where this process may make pids cgroups, and the hierarchy's version.
struct PidsCgroup {
    parent: PathBuf,
    version: CgroupVersion,
}

/// Removes the pids cgroup a confinement launch with process id `pid` made, once its command
/// has ended (the kernel refuses while a process is left in it; the next launch sweeps it then).
/// `Some(true)` when it was there and is removed: every process of the command has ended;
/// `Some(false)` while a process is left in it; `None` when there is none (this process could
/// not make it, or it is gone already).
pub fn remove_pids_cgroup(pid: u32) -> Option<bool> {
    let cgroup = pids_cgroup_parent()?;
    match std::fs::remove_dir(cgroup.parent.join(format!("{CGROUP_PREFIX}{pid}"))) {
        Ok(()) => Some(true),
        Err(error) if error.kind() == io::ErrorKind::NotFound => None,
        Err(_) => Some(false),
    }
}

/// Where this process may make a pids cgroup: cgroup v1's `pids` hierarchy, or (cgroup v2)
/// its own cgroup when that enables `pids` for its children.
fn pids_cgroup_parent() -> Option<PidsCgroup> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let v1 = own.lines().find_map(|line| {
        let (_, rest) = line.split_once(':')?;
        let (controllers, path) = rest.split_once(':')?;
        controllers.split(',').any(|c| c == "pids").then_some(path)
    });
    if let Some(path) = v1 {
        let dir = Path::new("/sys/fs/cgroup/pids").join(path.trim_start_matches('/'));
        if dir.join("cgroup.procs").is_file() {
            return Some(PidsCgroup {
                parent: dir,
                version: CgroupVersion::V1,
            });
        }
    }
    let path = own.lines().find_map(|line| line.strip_prefix("0::"))?;
    for mount in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        let dir = Path::new(mount).join(path.trim_start_matches('/'));
        let controls = std::fs::read_to_string(dir.join("cgroup.subtree_control")).ok();
        if controls.is_some_and(|c| c.split_whitespace().any(|name| name == "pids")) {
            return Some(PidsCgroup {
                parent: dir,
                version: CgroupVersion::V2,
            });
        }
    }
    None
}

/// The guard's main: runs `args[0]` with `args[1..]`, guarded as described above.
pub fn run(args: Vec<OsString>) -> ExitCode {
    match guard(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let _ = writeln!(io::stderr(), "dsh tool guard: {error}");
            ExitCode::from(125)
        }
    }
}

fn guard(args: Vec<OsString>) -> io::Result<()> {
    let mut args = args.into_iter();
    let program = args
        .next()
        .ok_or_else(|| io::Error::other("no program to run"))?;
    let control = UnixStream::from(io::stdin().as_fd().try_clone_to_owned()?);
    // Fails only if we already lead a process group; dsh never starts us as one.
    let _ = rustix::process::setsid();
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    // The guard runs the command dsh handed it, in the environment dsh already filtered.
    #[allow(
        clippy::disallowed_methods,
        reason = "the guard execs what dsh gave it"
    )]
    let mut command = std::process::Command::new(&program);
    command.args(args).stdin(Stdio::null()).process_group(0);
    let child = command.spawn();
    // Only the command may hold the output pipes; ours would keep them open after it exits.
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    let mut child = match child {
        Ok(child) => {
            rustix::stdio::dup2_stdout(&null)?;
            rustix::stdio::dup2_stderr(&null)?;
            child
        }
        Err(error) => {
            let _ = writeln!(
                io::stderr(),
                "{}",
                spawn_error_message_for(&program.to_string_lossy(), &error)
            );
            let _ = (&control).write_all(b"E127\n");
            return Ok(());
        }
    };
    let group = i32::try_from(child.id())
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| io::Error::other("the command has no pid"))?;
    let (stop, stopped) = mpsc::channel::<()>();
    let orders = control.try_clone()?;
    std::thread::spawn(move || follow_orders(orders, group, &stop));
    let status = child.wait()?;
    let _ = (&control).write_all(status_line(status).as_bytes());
    // dsh sends `K` once late output had its chance to drain (or closes the socket).
    let _ = stopped.recv();
    let _ = rustix::process::kill_process_group(group, Signal::KILL);
    kill_descendants();
    Ok(())
}

/// Reads orders until `K` or end of file; both kill the command's group and release the main
/// thread for the final sweep.
fn follow_orders(mut control: UnixStream, group: Pid, stop: &mpsc::Sender<()>) {
    let mut byte = [0u8; 1];
    loop {
        match control.read(&mut byte) {
            Ok(1) if byte[0] == b'T' => {
                let _ = rustix::process::kill_process_group(group, Signal::TERM);
            }
            Ok(1) if byte[0] != b'K' => {}
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            _ => {
                let _ = rustix::process::kill_process_group(group, Signal::KILL);
                let _ = stop.send(());
                return;
            }
        }
    }
}

fn status_line(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("E{code}\n"),
        (None, Some(signal)) => format!("S{signal}\n"),
        (None, None) => "E255\n".to_owned(),
    }
}

/// Parses the guard's status line back into the command's exit status.
pub fn parse_status(line: &[u8]) -> Option<ExitStatus> {
    let text = std::str::from_utf8(line).ok()?;
    let (kind, value) = text.split_at_checked(1)?;
    let value: i32 = value.trim().parse().ok()?;
    match kind {
        "E" => Some(ExitStatus::from_raw((value & 0xff) << 8)),
        "S" => Some(ExitStatus::from_raw(value & 0x7f)),
        _ => None,
    }
}

/// Kills every remaining descendant. They are all our children by now or become ones: a
/// process whose parent dies is re-parented to us (we are a subreaper), so each round kills the
/// current children and the next round finds their orphans.
fn kill_descendants() {
    const MAX_ROUNDS: usize = 64;
    for _ in 0..MAX_ROUNDS {
        let children = own_children();
        if children.is_empty() {
            return;
        }
        for pid in &children {
            let _ = rustix::process::kill_process(*pid, Signal::KILL);
        }
        for pid in &children {
            let _ = rustix::process::waitpid(Some(*pid), rustix::process::WaitOptions::empty());
        }
    }
}

/// Our children, from `/proc/self/task/*/children` (every thread: an orphan may be handed to
/// any of them), else from a scan of `/proc` for our pid as parent.
fn own_children() -> Vec<Pid> {
    let mut found = false;
    let mut pids = Vec::new();
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
                found = true;
                pids.extend(text.split_whitespace().filter_map(parse_pid));
            }
        }
    }
    if !found {
        let me = rustix::process::getpid().as_raw_nonzero().get();
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let Some(pid) = entry.file_name().to_str().and_then(parse_pid) else {
                    continue;
                };
                let parent = std::fs::read_to_string(entry.path().join("stat"))
                    .ok()
                    .and_then(|stat| {
                        stat.rsplit(')')
                            .next()?
                            .split_whitespace()
                            .nth(1)?
                            .parse::<i32>()
                            .ok()
                    });
                if parent == Some(me) {
                    pids.push(pid);
                }
            }
        }
    }
    pids.sort_unstable_by_key(|pid| pid.as_raw_nonzero());
    pids.dedup();
    pids
}

fn parse_pid(text: &str) -> Option<Pid> {
    text.parse::<i32>().ok().and_then(Pid::from_raw)
}

/// `spawn <file> <CODE>` (Node's rendering of a spawn failure, e.g. `spawn bash ENOENT`).
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
    fn status_lines_round_trip() {
        for raw in [0, 1 << 8, 127 << 8, 255 << 8, 9, 15] {
            let status = ExitStatus::from_raw(raw);
            let line = status_line(status);
            assert_eq!(
                parse_status(line.trim_end().as_bytes()),
                Some(status),
                "{line}"
            );
        }
        assert_eq!(parse_status(b"X1"), None);
        assert_eq!(parse_status(b""), None);
    }

    #[test]
    fn spawn_errors_read_like_node() {
        assert_eq!(
            spawn_error_message_for("bash", &io::Error::from_raw_os_error(2)),
            "spawn bash ENOENT"
        );
        assert_eq!(
            spawn_error_message_for("/x/y", &io::Error::from_raw_os_error(99)),
            "spawn /x/y errno 99"
        );
    }

    #[test]
    fn the_guard_is_found_only_as_an_executable_file_next_to_the_binary() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("dsh-tool-guard-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("dsh");
        assert_eq!(next_to(&exe), None, "absent");
        let guard = dir.join(BINARY_NAME);
        std::fs::write(&guard, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&guard, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(next_to(&exe), None, "not executable");
        std::fs::set_permissions(&guard, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(next_to(&exe), Some(guard.clone()));
        std::fs::remove_file(&guard).unwrap();
        std::fs::create_dir(&guard).unwrap();
        assert_eq!(next_to(&exe), None, "a folder");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
