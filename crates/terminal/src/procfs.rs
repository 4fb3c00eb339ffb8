//! Process facts from `/proc` and signal delivery: the members of a terminal's session (its
//! owned process tree) and whether a foreground program is blocked reading the terminal.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rustix::process::Pid;
use rustix::process::Signal;

pub fn kill_group(pgid: i32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(pgid)
        && let Err(error) = rustix::process::kill_process_group(pid, signal)
        && error != rustix::io::Errno::SRCH
    {
        tracing::debug!(%error, pgid, "kill_process_group failed");
    }
}

pub fn kill_pid(pid: i32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// `(state, pgrp, session)` from `/proc/<pid>/stat`.
fn stat(pid: &str) -> Option<(char, i32, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields resume after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some((state, pgrp, session))
}

/// Live (non-zombie) processes whose session id is `sid`.
pub fn session_members(sid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let pid: i32 = name.parse().ok()?;
            let (state, _, session) = stat(&name)?;
            (session == sid && state != 'Z' && state != 'X').then_some(pid)
        })
        .collect()
}

// read, pread64, readv: the fd is the first argument.
#[cfg(target_arch = "x86_64")]
const READ_SYSCALLS: &[u64] = &[0, 17, 19];
#[cfg(target_arch = "aarch64")]
const READ_SYSCALLS: &[u64] = &[63, 65, 67];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const READ_SYSCALLS: &[u64] = &[];

// poll, select, pselect6, ppoll: the fds are behind pointers; a line editor waits here.
#[cfg(target_arch = "x86_64")]
const WAIT_SYSCALLS: &[u64] = &[7, 23, 270, 271];
#[cfg(target_arch = "aarch64")]
const WAIT_SYSCALLS: &[u64] = &[72, 73];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const WAIT_SYSCALLS: &[u64] = &[];

/// Whether the leader of group `pgid` is blocked reading the terminal `tty` (a read of it, or
/// a poll/select while its stdin is the terminal, as a line editor does): proof that a
/// foreground program waits for input.
pub fn reads_terminal(pgid: i32, tty: Option<&Path>) -> bool {
    let Some(tty) = tty else { return false };
    let Ok(terminal) = std::fs::metadata(tty) else {
        return false;
    };
    let Ok(syscall) = std::fs::read_to_string(format!("/proc/{pgid}/syscall")) else {
        return false;
    };
    let mut fields = syscall.split_whitespace();
    let Some(number) = fields.next().and_then(|n| n.parse::<u64>().ok()) else {
        return false;
    };
    let is_terminal = |fd: u64| {
        std::fs::metadata(format!("/proc/{pgid}/fd/{fd}"))
            .is_ok_and(|file| file.rdev() == terminal.rdev() && terminal.rdev() != 0)
    };
    if WAIT_SYSCALLS.contains(&number) {
        return is_terminal(0);
    }
    if !READ_SYSCALLS.contains(&number) {
        return false;
    }
    let Some(fd) = fields
        .next()
        .and_then(|fd| u64::from_str_radix(fd.trim_start_matches("0x"), 16).ok())
    else {
        return false;
    };
    is_terminal(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_in_its_own_session_listing() {
        let me = std::process::id().to_string();
        let (_, _, sid) = stat(&me).unwrap();
        assert!(session_members(sid).contains(&i32::try_from(std::process::id()).unwrap()));
    }
}
