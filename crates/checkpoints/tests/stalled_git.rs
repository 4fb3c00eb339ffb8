//! A git that never finishes (the walk stuck on a file system that stopped answering) must
//! not hang the checkpoint: at the deadline its whole process group is killed, the checkpoint
//! fails with an error that says why and how to turn checkpoints off, and the next one works.
//!
//! Without FUSE: a `git` wrapper first in `PATH` that, while a marker file is in the
//! workspace, takes git's index lock as git would, starts a long `sleep` and waits for it.
//! Its own test binary, because it changes
//! this process's `PATH` before anything reads it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

use dsh_checkpoints::CheckpointError;
use dsh_checkpoints::Checkpoints;
use dsh_checkpoints::Limits;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;

fn real_git() -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|dir| dir.join("git"))
        .find(|path| path.is_file())
        .expect("git is installed")
}

fn alive(pid: u32) -> bool {
    // A zombie has exited; anything else still runs.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[test]
fn a_git_that_never_finishes_is_killed_at_the_deadline_and_the_next_checkpoint_works() {
    let wrappers = tempfile::tempdir().unwrap();
    let pid_file = wrappers.path().join("sleeper.pid");
    let script = format!(
        "#!/bin/sh\nif [ -e \"$GIT_WORK_TREE/stall-git\" ]; then\n  : > \"$GIT_INDEX_FILE.lock\"\n  sleep 300 &\n  echo $! > '{}'\n  wait\nfi\nexec '{}' \"$@\"\n",
        pid_file.display(),
        real_git().display()
    );
    let wrapper = wrappers.path().join("git");
    std::fs::write(&wrapper, script).unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = std::env::join_paths(
        std::iter::once(wrappers.path().to_path_buf())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    #[allow(
        unsafe_code,
        reason = "the only test of this binary, before any thread reads PATH"
    )]
    // SAFETY: no other thread runs yet in this single-test binary.
    unsafe {
        std::env::set_var("PATH", path);
    }

    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let root: &Path = work.path();
    let limits = Limits {
        git_deadline: Duration::from_millis(500),
        ..Limits::default()
    };
    let checkpoints = Checkpoints::new(home.path().to_path_buf(), limits, u64::MAX);
    let log = SessionLog::in_memory(SessionHeader::new("s-1", None));
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    let first = checkpoints
        .checkpoint(&log, root, 1, Some(1), None)
        .unwrap();
    assert!(first.is_some(), "the wrapper passes through while unmarked");

    std::fs::write(root.join("stall-git"), "").unwrap();
    let started = Instant::now();
    let error = checkpoints
        .checkpoint(&log, root, 1, Some(2), None)
        .expect_err("a stalled git cannot produce a checkpoint");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "the checkpoint waited {took:?} for a git that never finishes"
    );
    assert!(matches!(error, CheckpointError::Timeout { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("did not finish within 500 ms"),
        "{message}"
    );
    assert!(
        message.contains("[plugins.checkpoints] enabled = false"),
        "{message}"
    );

    // What the stalled git started dies with it (its process group is killed).
    let sleeper: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let killed = Instant::now();
    while alive(sleeper) {
        assert!(
            killed.elapsed() < Duration::from_secs(5),
            "the stalled git's child {sleeper} still runs"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // Once git answers again, checkpoints work as before (the lock the killed git held is
    // gone).
    std::fs::remove_file(root.join("stall-git")).unwrap();
    std::fs::write(root.join("a.txt"), "b\n").unwrap();
    let next = checkpoints
        .checkpoint(&log, root, 1, Some(3), None)
        .unwrap();
    assert!(next.is_some(), "the changed file makes a new checkpoint");
}
