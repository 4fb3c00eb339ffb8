//! The process guard of unconfined tool commands.
//!
//! A confined command lives in a PID namespace that dies with its `bwrap` runner. An unconfined
//! one (`danger-full-access`) has no such boundary, so dsh starts it through a small guard
//! process instead: the dsh binary itself, re-executed with [`GUARD_ARG`] (any binary that calls
//! [`run_if_invoked`] first thing in `main` can serve). The guard
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
//! Everything here is spawned with `posix_spawn`: the guard and the command are absolute paths
//! and nothing needs a `pre_exec` hook.

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
use std::sync::OnceLock;
use std::sync::mpsc;

use rustix::process::Pid;
use rustix::process::Signal;

/// The first argument that turns a binary into the guard.
pub const GUARD_ARG: &str = "__dsh-tool-guard";

static PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// Makes `program` (absolute) the guard of every unconfined tool command of this process. The
/// dsh binary passes itself; a process that never calls this runs unconfined commands
/// directly (its own process group, the caller's session).
pub fn set_program(program: impl Into<PathBuf>) {
    let _ = PROGRAM.set(program.into());
}

/// The guard program, when one was set.
pub fn program() -> Option<&'static Path> {
    PROGRAM.get().map(PathBuf::as_path)
}

/// Runs the guard when this process was started as one (`<binary> __dsh-tool-guard <program>
/// [args…]`) and returns its exit code; `None` for an ordinary start.
pub fn run_if_invoked() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(OsStr::new(GUARD_ARG)) {
        return None;
    }
    Some(run(args.collect()))
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
                crate::process::spawn_error_message_for(&program.to_string_lossy(), &error)
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
pub(crate) fn parse_status(line: &[u8]) -> Option<ExitStatus> {
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
}
