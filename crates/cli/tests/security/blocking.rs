//! Files that never answer (issue #27 §4): a read of `/proc/kmsg`, a FUSE or network mount
//! that stopped answering. Every file tool gives up at its deadline and the turn goes on; a
//! stop signal ends `dsh exec` even while a file-tool thread is stuck in the kernel.
//!
//! The stuck filesystem is a FUSE mount whose server never reads its device: every lookup
//! under it sleeps in `fuse_get_req`, uninterruptibly but killably, as a hung network mount
//! does. Mounting it needs root; the probes then run as root and as `nobody` (`allow_other`).
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]

use std::path::Path;
use std::path::PathBuf;
use std::process::Child;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

use serde_json::Value;
use serde_json::json;

use super::support::Call;
use super::support::Case;
use super::support::User;
use super::support::scenario;
use super::support::serve;
use super::support::tool_results;

/// A FUSE filesystem mounted at `path` whose server never answers. Dropping it kills the
/// server (closing its device aborts every waiting request) and detaches the mount.
struct StuckMount {
    path: PathBuf,
    server: Child,
}

impl StuckMount {
    fn at(path: &Path) -> Self {
        assert!(
            rustix::process::geteuid().is_root(),
            "the stuck-filesystem probes mount FUSE and need root (they run dsh as root and as nobody)"
        );
        std::fs::create_dir_all(path).unwrap();
        let script = format!(
            "exec 3<>/dev/fuse && mount -t fuse -o fd=3,rootmode=40000,user_id=0,group_id=0,allow_other dsh-stuck '{}' && echo mounted && exec sleep 100000",
            path.display()
        );
        let mut server = Command::new("sh")
            .args(["-c", &script])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(server.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "mounted", "the FUSE mount failed");
        Self {
            path: path.to_path_buf(),
            server,
        }
    }
}

impl Drop for StuckMount {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
        let unmounted = Command::new("umount").arg("-l").arg(&self.path).status();
        if !unmounted.is_ok_and(|status| status.success()) {
            eprintln!("could not unmount {}", self.path.display());
        }
    }
}

fn call(tool: &'static str, args: Value) -> Call {
    Call { tool, args }
}

/// Runs `command`, killed (and the test failed) after `limit`.
fn output_within(mut command: Command, limit: Duration) -> std::process::Output {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "dsh exec was still running after {limit:?}: a blocked file operation hung the turn\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_file_tool_gives_up_on_a_file_that_never_answers() {
    for user in User::all() {
        let case = Case::new(user);
        case.write_home(
            "config.toml",
            "[plugins.session-title]\nenabled = false\n\n[plugins.compaction]\nenabled = false\n\n[plugins.fs]\nio_timeout_ms = 1500\n",
        );
        // Inside the workspace, so workspace-write may write there; mounted after the
        // workspace was handed to the user (a chown would block on it).
        let stuck = StuckMount::at(&case.ws().join("stuck"));
        let file = stuck.path.join("file.txt");
        let file = file.to_str().unwrap();
        let dir = stuck.path.to_str().unwrap();
        let mut calls = vec![
            call("read", json!({"file_path": file})),
            call("write", json!({"file_path": file, "content": "x"})),
            call(
                "edit",
                json!({"file_path": file, "old_string": "a", "new_string": "b"}),
            ),
            call("glob", json!({"pattern": "*", "path": dir})),
            call("grep", json!({"pattern": "x", "path": dir})),
        ];
        if user == User::Current && rustix::process::geteuid().is_root() {
            // Root may read the kernel's log; once drained, the read waits for new messages.
            calls.push(call("read", json!({"file_path": "/proc/kmsg"})));
        }
        let count = calls.len();
        let server = serve(&scenario("probe", &calls)).await;
        let url = server.url();
        let mut command = case.command(&["exec", "--output", "stream-json", "probe"], &url);
        command.env("DSH_PERMISSION_MODE", "workspace-write");
        let out =
            tokio::task::spawn_blocking(move || output_within(command, Duration::from_secs(60)))
                .await
                .unwrap();
        let results = tool_results(&out);
        assert_eq!(
            results.len(),
            count,
            "{user:?}: {results:?}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for (call, result) in calls.iter().zip(&results) {
            assert!(
                result.contains("did not finish within 1500 ms"),
                "{user:?} {}: {result}",
                call.tool
            );
        }
        assert_eq!(out.status.code(), Some(0), "{user:?}");
        drop(stuck);
    }
}

/// How many of the pid's threads wait on the FUSE filesystem.
fn threads_waiting_on_fuse(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .flatten()
                .filter(|task| {
                    std::fs::read_to_string(task.path().join("wchan"))
                        .is_ok_and(|wchan| wchan.contains("fuse"))
                })
                .count()
        })
        .unwrap_or(0)
}

/// Kills the child when the test fails before it exits.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_signal_ends_dsh_exec_while_a_file_read_is_stuck() {
    for user in User::all() {
        // One signal, then two at once: either way dsh exits promptly with 128 + SIGINT.
        for signals in [1, 2] {
            let case = Case::new(user);
            let stuck = StuckMount::at(&case.ws().join("stuck"));
            let file = stuck.path.join("file.txt");
            let calls = [call("read", json!({"file_path": file.to_str().unwrap()}))];
            let server = serve(&scenario("probe", &calls)).await;
            let mut command =
                case.command(&["exec", "--output", "stream-json", "probe"], &server.url());
            command
                .env("DSH_PERMISSION_MODE", "read-only")
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let mut running = Running(command.spawn().unwrap());
            let child = &mut running.0;
            let pid = child.id();
            let started = Instant::now();
            while threads_waiting_on_fuse(pid) == 0 {
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "{user:?}: the read never started"
                );
                assert!(
                    child.try_wait().unwrap().is_none(),
                    "{user:?}: dsh ended early"
                );
                std::thread::sleep(Duration::from_millis(25));
            }
            // Let the thread settle in the kernel.
            std::thread::sleep(Duration::from_millis(200));
            let signalled = Instant::now();
            for _ in 0..signals {
                let target = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
                rustix::process::kill_process(target, rustix::process::Signal::INT).unwrap();
                std::thread::sleep(Duration::from_millis(100));
            }
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                if signalled.elapsed() > Duration::from_secs(15) {
                    panic!(
                        "{user:?} {signals} SIGINT: dsh exec did not exit while a file read was stuck"
                    );
                }
                std::thread::sleep(Duration::from_millis(25));
            };
            assert_eq!(status.code(), Some(130), "{user:?} {signals} SIGINT");
            drop(running);
            drop(stuck);
        }
    }
}
