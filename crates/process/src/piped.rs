//! A long-lived child on piped stdio (remote subagents, servers): spawned with a [`ChildEnv`]
//! in its own process group, and the disposal ladder (EOF grace → SIGTERM → grace → SIGKILL).

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use rustix::process::Pid;
use rustix::process::Signal;
use tokio::io::AsyncReadExt;
use tokio::process::Child;
use tokio::process::ChildStdin;
use tokio::process::ChildStdout;

use crate::ChildEnv;
use crate::kill_group;

/// How much of a child's stderr is kept for diagnostics.
const STDERR_KEEP: usize = 16 * 1024;

/// A spawned child with piped stdio.
pub struct Spawned {
    pub child: Child,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: Arc<Mutex<String>>,
    pub pgid: Option<Pid>,
}

/// Spawns `command args` in `cwd` with exactly `env`, in a new process group.
pub fn spawn(
    command: &str,
    args: &[String],
    cwd: &Path,
    env: &ChildEnv,
) -> std::io::Result<Spawned> {
    let mut cmd = crate::command(command, env);
    cmd.args(args)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(false);
    let mut child = cmd.spawn()?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw);
    let missing = || std::io::Error::other("child stdio was not captured");
    let stdin = child.stdin.take().ok_or_else(missing)?;
    let stdout = child.stdout.take().ok_or_else(missing)?;
    let stderr = Arc::new(Mutex::new(String::new()));
    if let Some(mut pipe) = child.stderr.take() {
        let sink = stderr.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut kept = dsh_sync::lock(&sink);
                kept.push_str(&String::from_utf8_lossy(&buf[..n]));
                if kept.len() > STDERR_KEEP {
                    let mut cut = kept.len() - STDERR_KEEP;
                    while !kept.is_char_boundary(cut) {
                        cut += 1;
                    }
                    kept.drain(..cut);
                }
            }
        });
    }
    Ok(Spawned {
        child,
        stdin,
        stdout,
        stderr,
        pgid,
    })
}

/// The disposal ladder once stdin is closed: wait `eof_grace` for a voluntary exit, then
/// SIGTERM the group, wait `grace`, then SIGKILL the group; always reaps the child, and kills
/// what is left of its group.
pub async fn reap(mut child: Child, pgid: Option<Pid>, eof_grace: Duration, grace: Duration) {
    if tokio::time::timeout(eof_grace, child.wait()).await.is_ok() {
        if let Some(pgid) = pgid {
            kill_group(pgid, Signal::KILL);
        }
        return;
    }
    if let Some(pgid) = pgid {
        kill_group(pgid, Signal::TERM);
    }
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        if let Some(pgid) = pgid {
            kill_group(pgid, Signal::KILL);
        }
        let _ = child.kill().await;
        let _ = child.wait().await;
    } else if let Some(pgid) = pgid {
        kill_group(pgid, Signal::KILL);
    }
}

/// Whether any process of group `pgid` is still running (zombies do not count).
pub fn group_alive(pgid: Pid) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // `pid (comm) state ppid pgrp …`; comm may contain spaces, so split after the `)`.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let _ppid = fields.next();
        let group = fields.next().and_then(|g| g.parse::<i32>().ok());
        group == Some(pgid.as_raw_nonzero().get()) && state != Some("Z")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_ladder_kills_a_child_that_ignores_eof_and_term() {
        let dir = tempfile::tempdir().unwrap();
        let script = "trap '' TERM; sleep 30 & wait";
        let spawned = spawn(
            "sh",
            &["-c".to_owned(), script.to_owned()],
            dir.path(),
            &ChildEnv::inherited(),
        )
        .unwrap();
        let pgid = spawned.pgid;
        drop(spawned.stdin);
        let started = std::time::Instant::now();
        reap(
            spawned.child,
            pgid,
            Duration::from_millis(100),
            Duration::from_millis(100),
        )
        .await;
        assert!(started.elapsed() < Duration::from_secs(5));
        let pgid = pgid.unwrap();
        for _ in 0..100 {
            if !group_alive(pgid) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("process group {pgid:?} still has live members");
    }
}
