//! Running one hook command and reading its answer (the Claude Code hook protocol, which the
//! Codex bridge shares): exit 2 blocks with stderr as the reason, exit 0 may carry a JSON
//! decision on stdout, any other exit is a non-blocking error.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

use dsh_tools::CancellationToken;
use serde_json::Value;
use tokio::io::AsyncRead;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;

use crate::Point;

/// Each captured stream keeps at most this many bytes; the rest is drained and dropped.
pub const OUTPUT_LIMIT: usize = 1024 * 1024;
/// `stderrSummary` keeps at most this many characters.
const SUMMARY_CHARS: usize = 1000;
/// After the shell exits, how long a stray background child may keep its pipes open.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// What one command run produced.
#[derive(Debug, Clone, Default)]
pub struct HookRun {
    /// `None` when the command did not exit on its own (timeout, cancel, spawn failure).
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    pub cancelled: bool,
    /// Set when the shell could not be started.
    pub spawn_error: Option<String>,
    pub duration: Duration,
}

/// Runs `bash -c <command>` in `cwd` with `payload` on stdin, killed (with its whole process
/// group) after `timeout` or when `signal` fires. The command inherits dsh's environment
/// through the shared child filter (`dsh_secrets::parent_env`): no credential, no registered
/// secret (the provider key), no `DSH_*` setting. `bash` is resolved to an absolute path in
/// that environment's `PATH`, so the spawn stays on `posix_spawn`.
pub async fn run_command(
    command: &str,
    cwd: &Path,
    payload: &Value,
    timeout: Duration,
    signal: &CancellationToken,
) -> HookRun {
    let started = Instant::now();
    let mut run = HookRun::default();
    let env = dsh_secrets::parent_env();
    let path = env
        .iter()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.as_str());
    let bash = dsh_secrets::resolve_program("bash", path, cwd)
        .unwrap_or_else(|| std::path::PathBuf::from("bash"));
    let spawned = tokio::process::Command::new(bash)
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env_clear()
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => {
            run.spawn_error = Some(error.to_string());
            run.duration = started.elapsed();
            return run;
        }
    };
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(rustix::process::Pid::from_raw);
    if let Some(mut stdin) = child.stdin.take() {
        let bytes = serde_json::to_vec(payload).unwrap_or_default();
        // A hook that never reads stdin must not block us: write in the background and
        // ignore a broken pipe.
        tokio::spawn(async move {
            let _ = stdin.write_all(&bytes).await;
            let _ = stdin.shutdown().await;
        });
    }
    let stdout = child.stdout.take().map(|s| tokio::spawn(read_bounded(s)));
    let stderr = child.stderr.take().map(|s| tokio::spawn(read_bounded(s)));
    let status = tokio::select! {
        status = child.wait() => Some(status),
        () = tokio::time::sleep(timeout) => { run.timed_out = true; None }
        () = signal.cancelled() => { run.cancelled = true; None }
    };
    if let Some(group) = group {
        // Kills leftovers of a finished shell too, so nothing outlives the hook.
        if let Err(error) =
            rustix::process::kill_process_group(group, rustix::process::Signal::KILL)
            && error != rustix::io::Errno::SRCH
        {
            tracing::debug!(%error, "cannot kill the hook's process group");
        }
    }
    match status {
        Some(Ok(status)) => run.exit_code = status.code(),
        Some(Err(error)) => run.spawn_error = Some(error.to_string()),
        None => {
            let _ = child.kill().await;
        }
    }
    for (task, slot) in [(stdout, &mut run.stdout), (stderr, &mut run.stderr)] {
        if let Some(task) = task {
            let abort = task.abort_handle();
            match tokio::time::timeout(DRAIN_GRACE, task).await {
                Ok(Ok(text)) => *slot = text,
                Ok(Err(_)) => {}
                Err(_) => abort.abort(),
            }
        }
    }
    run.duration = started.elapsed();
    run
}

async fn read_bounded(mut stream: impl AsyncRead + Unpin) -> String {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = OUTPUT_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// A hook's answer, reduced to what the pipeline needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookOutcome {
    /// Exit 0 without a decision.
    Pass,
    /// `permissionDecision: "allow"` (does not pre-approve).
    Allow,
    Ask {
        reason: Option<String>,
    },
    /// `permissionDecision: "deny"`.
    Deny {
        reason: String,
    },
    /// Exit 2 or `decision: "block"`.
    Block {
        reason: String,
    },
    /// A non-blocking failure (other exit code, timeout, unparsable JSON, spawn failure).
    Error {
        decision: &'static str,
    },
}

impl HookOutcome {
    /// The `decision` of `hook/result`.
    pub fn decision(&self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Allow => "allow",
            Self::Ask { .. } => "ask",
            Self::Deny { .. } => "deny",
            Self::Block { .. } => "block",
            Self::Error { decision } => decision,
        }
    }
}

/// Reads a finished run: its outcome and any `additionalContext`.
pub fn interpret(point: Point, run: &HookRun) -> (HookOutcome, Option<String>) {
    let default_reason = || format!("blocked by {} hook", point.as_str());
    if run.timed_out {
        return (
            HookOutcome::Error {
                decision: "timeout",
            },
            None,
        );
    }
    if run.cancelled {
        return (
            HookOutcome::Error {
                decision: "cancelled",
            },
            None,
        );
    }
    match run.exit_code {
        Some(2) => {
            let reason = run.stderr.trim();
            let reason = if reason.is_empty() {
                default_reason()
            } else {
                reason.to_owned()
            };
            (HookOutcome::Block { reason }, None)
        }
        Some(0) => {
            let text = run.stdout.trim();
            if !text.starts_with('{') {
                return (HookOutcome::Pass, None);
            }
            let Ok(Value::Object(output)) = serde_json::from_str::<Value>(text) else {
                tracing::warn!("hook stdout looks like JSON but does not parse; ignored");
                return (HookOutcome::Error { decision: "error" }, None);
            };
            let specific = output.get("hookSpecificOutput").and_then(Value::as_object);
            let text_of = |map: Option<&serde_json::Map<String, Value>>, key: &str| {
                map.and_then(|m| m.get(key))
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
            };
            let context = text_of(specific, "additionalContext");
            let reason = text_of(Some(&output), "reason");
            let permission = match point {
                Point::PreToolUse => specific
                    .and_then(|m| m.get("permissionDecision"))
                    .and_then(Value::as_str),
                Point::PostToolUse => None,
            };
            let permission_reason = text_of(specific, "permissionDecisionReason");
            let outcome = match (permission, output.get("decision").and_then(Value::as_str)) {
                (Some("deny"), _) => HookOutcome::Deny {
                    reason: permission_reason.or(reason).unwrap_or_else(default_reason),
                },
                (_, Some("block")) => HookOutcome::Block {
                    reason: reason.unwrap_or_else(default_reason),
                },
                (Some("ask"), _) => HookOutcome::Ask {
                    reason: permission_reason.or(reason),
                },
                (Some("allow"), _) | (None, Some("approve")) => HookOutcome::Allow,
                _ => HookOutcome::Pass,
            };
            (outcome, context)
        }
        _ => (HookOutcome::Error { decision: "error" }, None),
    }
}

/// Trimmed stderr, bounded, for `stderrSummary`; `None` when empty.
pub fn stderr_summary(stderr: &str) -> Option<String> {
    let trimmed = stderr.trim();
    if trimmed.is_empty() {
        return None;
    }
    Some(trimmed.chars().take(SUMMARY_CHARS).collect())
}
