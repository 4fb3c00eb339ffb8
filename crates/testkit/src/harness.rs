//! Starting the harness under test: command line, working directory and a controlled
//! environment (no inherited `DEEPSEEK_*`/`DSH_*`), shared by the ACP and headless drivers.
#![allow(
    clippy::disallowed_methods,
    reason = "the test kit starts the dsh binary under test"
)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::replay::ReplayServer;
use crate::session_log::{SessionLog, read_logs};

/// Everything a driver needs to run one scenario.
#[derive(Debug)]
pub struct RunContext<'a> {
    pub bin: PathBuf,
    pub workspace: PathBuf,
    pub dsh_home: PathBuf,
    /// Variables set after the defaults (scenario `env` wins).
    pub env: Vec<(String, String)>,
    pub replay: &'a ReplayServer,
    /// Default for every wait (the README's 10 s).
    pub wait: Duration,
}

/// Spawns `cmd`, retrying briefly while the binary is "text file busy" (ETXTBSY): another
/// thread of the caller that forks while a freshly written executable is still open for
/// writing holds that descriptor for a moment, and the kernel refuses to execute the file.
pub fn spawn_retrying(cmd: &mut tokio::process::Command) -> std::io::Result<tokio::process::Child> {
    const ETXTBSY: i32 = 26;
    let mut attempt = 0;
    loop {
        match cmd.spawn() {
            Err(error) if error.raw_os_error() == Some(ETXTBSY) && attempt < 50 => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

impl RunContext<'_> {
    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.args(args)
            .current_dir(&self.workspace)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            if k.starts_with("DEEPSEEK_") || k.starts_with("DSH_") {
                cmd.env_remove(&key);
            }
        }
        cmd.env("DEEPSEEK_BASE_URL", self.replay.url())
            .env("DEEPSEEK_API_KEY", "replay-key")
            .env("DSH_HOME", &self.dsh_home);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    pub fn sessions_root(&self) -> PathBuf {
        self.dsh_home.join("sessions")
    }

    /// Session logs written so far, oldest first.
    pub fn logs(&self) -> Vec<SessionLog> {
        read_logs(&self.sessions_root())
    }

    /// The top-level session's log, if written yet.
    pub fn top_log(&self) -> Option<SessionLog> {
        self.logs().into_iter().find(SessionLog::is_top_level)
    }

    pub fn workspace_file(&self, rel: &str) -> PathBuf {
        self.workspace.join(Path::new(rel))
    }
}

/// Polls `ready` every 20 ms until it holds or `timeout` passes.
pub async fn wait_until(timeout: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if ready() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
