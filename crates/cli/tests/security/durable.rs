//! stream-json prints only what the log holds (issue #27 §4): on a full disk, an event the
//! writer could not write was printed with its sequence number, and crash repair later gave
//! that number to an "interrupted" result.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]

use std::path::Path;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use super::support::Case;
use super::support::User;
use super::support::bash;
use super::support::scenario;
use super::support::serve;

/// A small tmpfs over `path` (the case's dsh home), unmounted on drop.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn over(path: &Path, user: User) -> Self {
        assert!(
            rustix::process::geteuid().is_root(),
            "the full-disk probe mounts a tmpfs and needs root (it runs dsh as root and as nobody)"
        );
        let owner = user.uid().unwrap_or(0);
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size=2m,mode=0700,uid={owner},gid={owner}"))
            .arg("dsh-small-disk")
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success(), "mount tmpfs failed");
        Self(path.to_path_buf())
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// `(seq, type)` of each event line in `text` (stream-json lines or log lines).
fn seqs(lines: impl Iterator<Item = Value>) -> Vec<(u64, String)> {
    lines
        .filter_map(|event| Some((event["seq"].as_u64()?, event["type"].as_str()?.to_owned())))
        .collect()
}

fn log_events(home: &Path) -> Vec<(u64, String)> {
    let mut logs = Vec::new();
    let mut dirs = vec![home.join("sessions")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                logs.push(path);
            }
        }
    }
    assert_eq!(logs.len(), 1, "{logs:?}");
    let text = std::fs::read_to_string(&logs[0]).unwrap();
    seqs(
        text.lines()
            .filter_map(|line| serde_json::from_str(line).ok()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_json_never_prints_an_event_the_full_disk_kept_out_of_the_log() {
    for user in User::all() {
        let case = Case::new(user);
        let home = case.home_path();
        let _disk = SmallDisk::over(&home, user);
        case.write_home(
            "config.toml",
            "[plugins.session-title]\nenabled = false\n\n[plugins.compaction]\nenabled = false\n",
        );
        // Unconfined, the command fills the disk the log is on, then prints: its result
        // cannot be written.
        let filler = home.join("filler");
        let command = format!(
            "dd if=/dev/zero of={} bs=4k 2>/dev/null; yes output | head -c 20000",
            filler.display()
        );
        let task = "fill the disk";
        let server = serve(&scenario(task, &[bash(&command)])).await;
        let mut command = case.command(&["exec", "--output", "stream-json", task], &server.url());
        command.env("DSH_PERMISSION_MODE", "danger-full-access");
        let out = tokio::task::spawn_blocking(move || command.output().unwrap())
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let printed = seqs(
            stdout
                .lines()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .filter(|line| line["type"] == "session_event")
                .map(|line| line["event"].clone()),
        );
        assert!(
            printed.iter().any(|(_, kind)| kind == "tool/call"),
            "{user:?}: the call was printed: {printed:?}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stored = log_events(&home);
        for event in &printed {
            assert!(
                stored.contains(event),
                "{user:?}: printed {event:?}, which the log does not hold\nlog: {stored:?}"
            );
        }
        assert_ne!(
            out.status.code(),
            Some(0),
            "{user:?}: a full disk fails the run"
        );
        let _ = std::fs::remove_file(&filler);
    }
}
