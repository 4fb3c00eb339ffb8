//! `bash` with `run_in_background`: a stream job in the jobs runtime. No timeout applies; the
//! job is stopped by `job_kill` (SIGTERM to the group, SIGKILL after the grace period) or by
//! owner disposal.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use crate::bash::BashArgs;
use crate::bash::resolve_workdir;
use crate::bash::spawn_for;
use crate::capture::Capture;
use crate::context::ShellContext;
use crate::error::ShellError;
use crate::jobs::JobError;
use crate::jobs::JobOutcome;
use crate::jobs::JobProducer;
use crate::jobs::JobRun;
use crate::jobs::JobSpec;
use crate::jobs::JobStatus;
use crate::process;
use crate::sandbox;
use crate::sandbox::SandboxMode;
use crate::sandbox::SandboxPolicy;

/// Starts the command as job `bash-<n>` and returns its id.
pub(crate) fn start_bash_job(
    args: &BashArgs,
    ctx: &ShellContext,
    cancel: &CancellationToken,
) -> Result<String, ShellError> {
    let Some(jobs) = ctx.jobs.as_ref() else {
        return Err(ShellError::plain(
            "background jobs unavailable: load @deepseek-ai/dsh-jobs and @deepseek-ai/dsh-tool-jobs",
        ));
    };
    if cancel.is_cancelled() {
        return Err(ShellError::aborted());
    }
    let spec = JobSpec {
        kind: "bash".into(),
        label: args.command.clone(),
        owner: ctx.owner.clone(),
        output_limit_bytes: None,
    };
    jobs.start(spec, || Ok(spawn_job(args, ctx)))
}

struct BashJob {
    stdout: Capture,
    stderr: Capture,
    stop: Notify,
    /// `spawn failed: …`, delivered once as a stderr section.
    spawn_failure: Mutex<Option<String>>,
    sandbox: Option<JobSandbox>,
}

/// What a confined job needs to report denials and runner failures in its reads.
struct JobSandbox {
    policy: SandboxPolicy,
    cwd: PathBuf,
    /// Set once the runner is known to have failed; reported on the next read.
    runner_failed: AtomicBool,
    runner_reported: AtomicBool,
}

impl JobSandbox {
    /// The sandbox notice for a read whose stderr delta is `stderr`.
    fn notice(&self, stderr: &str) -> Option<String> {
        if self.runner_failed.load(Ordering::SeqCst) {
            if self.runner_reported.swap(true, Ordering::SeqCst) {
                return None;
            }
            return Some(sandbox::runner_failed_marker(self.policy.mode));
        }
        if !sandbox::detect_denial(stderr, &self.policy, &self.cwd) {
            return None;
        }
        let mut text = sandbox::denial_marker(self.policy.mode);
        if self.policy.advertises_escalation() {
            text.push('\n');
            text.push_str(sandbox::ESCALATION_HINT);
        }
        Some(text)
    }
}

impl JobProducer for BashJob {
    fn cancel(&self, _reason: Option<&str>) -> Result<(), JobError> {
        self.stop.notify_one();
        Ok(())
    }

    fn read_output(&self) -> Option<String> {
        let out = self.stdout.read_delta();
        let mut err = self.stderr.read_delta();
        if err.text.is_empty()
            && let Some(failure) = dsh_sync::lock(&self.spawn_failure).take()
        {
            err.text = failure;
        }
        let notice = self.sandbox.as_ref().and_then(|sb| sb.notice(&err.text));
        let mut text = out.text;
        if !err.text.is_empty() {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str("[stderr]\n");
            text.push_str(&err.text);
        }
        if out.lossy || err.lossy {
            let paths: Vec<String> = [self.stdout.spill_path(), self.stderr.spill_path()]
                .into_iter()
                .flatten()
                .collect();
            let paths = if paths.is_empty() {
                let why = self
                    .stdout
                    .spill_missing()
                    .or_else(|| self.stderr.spill_missing());
                crate::bash::full_output(None, why.as_deref())
            } else {
                paths.join(", ")
            };
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!(
                "[some output was dropped from memory; full output: {paths}]"
            ));
        }
        if let Some(notice) = notice {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&notice);
        }
        Some(text)
    }
}

fn spawn_job(args: &BashArgs, ctx: &ShellContext) -> JobRun {
    let cwd = resolve_workdir(args, ctx);
    let job_sandbox = |runner_failed: bool| {
        ctx.sandbox
            .as_ref()
            .filter(|policy| policy.mode != SandboxMode::DangerFullAccess)
            .map(|policy| JobSandbox {
                policy: policy.clone(),
                cwd: cwd.clone(),
                runner_failed: AtomicBool::new(runner_failed),
                runner_reported: AtomicBool::new(false),
            })
    };
    let spawned = spawn_for(args, ctx, false);
    let grace = Duration::from_millis(ctx.config.grace_ms);
    let mut proc = match spawned {
        Ok(proc) => proc,
        Err(failure) => {
            // Not a tool error: the job exists and settles as killed before exit.
            let message = format!("spawn failed: Error: {}", failure.message);
            let job = Arc::new(BashJob {
                stdout: Capture::new(),
                stderr: Capture::new(),
                stop: Notify::new(),
                spawn_failure: Mutex::new(Some(message)),
                sandbox: job_sandbox(failure.runner_mode.is_some()),
            });
            let done = async {
                Ok(JobOutcome {
                    status: JobStatus::Killed,
                    detail: Some("killed before exit".into()),
                    output: None,
                })
            };
            return JobRun {
                producer: job,
                done: done.boxed(),
            };
        }
    };
    let producer = Arc::new(BashJob {
        stdout: proc.stdout.clone(),
        stderr: proc.stderr.clone(),
        stop: Notify::new(),
        spawn_failure: Mutex::new(None),
        sandbox: job_sandbox(false),
    });
    let watcher = Arc::clone(&producer);
    let done = async move {
        let mut stopped = false;
        let status = tokio::select! {
            status = proc.wait() => status,
            () = watcher.stop.notified() => {
                stopped = true;
                proc.terminate(grace).await
            }
        };
        proc.finish(stopped).await;
        let status =
            status.map_err(|err| JobError::Failed(format!("failed to wait for bash: {err}")))?;
        let (code, signal) = process::exit_parts(&status);
        if let Some(sb) = &watcher.sandbox
            && !stopped
            && sandbox::runner_failure(code, &watcher.stderr.snapshot().text).is_some()
        {
            sb.runner_failed.store(true, Ordering::SeqCst);
        }
        Ok(match (signal, code) {
            (Some(sig), _) => JobOutcome {
                status: JobStatus::Killed,
                detail: Some(format!("signal: {sig}")),
                output: None,
            },
            (None, Some(code)) => JobOutcome {
                status: JobStatus::Completed,
                detail: Some(format!("exit code: {code}")),
                output: None,
            },
            (None, None) => JobOutcome {
                status: JobStatus::Killed,
                detail: Some("killed before exit".into()),
                output: None,
            },
        })
    };
    JobRun {
        producer,
        done: done.boxed(),
    }
}
