//! The executor seam hooks run through (upstream: the deployment's `ctx.shell`), and a local
//! implementation: `bash -c` in its own process group, environment given by the composition,
//! the payload on stdin, bounded capture, a validated and clamped timeout, group-wide kills,
//! and (with a [`Confiner`]) the calling session's sandbox around the shell.

use std::ffi::OsString;
use std::path::Path;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use crate::HookExecError;
use dsh_kernel::BoxFuture;
use dsh_plugin::SessionContext;
use tokio::io::AsyncRead;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

/// One hook run as the bridge asks for it.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    pub command: String,
    /// `None`: the executor's own default (the process cwd).
    pub cwd: Option<PathBuf>,
    /// Added after the executor's scrubbed base environment.
    pub env: Vec<(String, String)>,
    pub stdin: Vec<u8>,
    /// Unvalidated: the executor rejects what it cannot honour.
    pub timeout_ms: f64,
    pub signal: CancellationToken,
    /// The calling agent's session: its live permissions decide the hook's confinement.
    /// `None` without an agent (the confiner's standing default applies).
    pub session: Option<Arc<SessionContext>>,
}

/// What a finished run produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    /// `None` when the process had none (killed by a signal, by the timeout, by a cancel).
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs hook command lines. `Err` is an infrastructure failure (invalid timeout, unusable
/// cwd, missing shell): the bridge records it as a run with no exit code and the message as
/// stderr, and the turn goes on.
pub trait HookExecutor: Send + Sync {
    fn run(&self, request: ExecRequest) -> BoxFuture<'static, Result<ExecOutput, HookExecError>>;
}

/// The base environment of hook children.
pub type EnvSource = Arc<dyn Fn() -> Vec<(String, String)> + Send + Sync>;

/// The confining wrapper of a hook run in `cwd` for `session` (the program and the arguments
/// placed before `bash -c <command>`); `None` runs the hook unconfined. The plugin passes the
/// same bubblewrap policy `bash` uses for that session, so a read-only or workspace-write
/// sandbox confines hook commands too and a mode switch applies at the next hook.
pub type Confiner =
    Arc<dyn Fn(Option<&SessionContext>, &Path) -> Option<(PathBuf, Vec<OsString>)> + Send + Sync>;

/// Upstream bash-local's defaults.
pub const MAX_TIMEOUT_MS: f64 = 600_000.0;
pub const MAX_OUTPUT_BYTES: usize = 64_000;
pub const INVALID_TIMEOUT: &str = "bash-local: request.timeoutMs must be a positive finite number";
/// After the shell exits, how long a stray background child may hold the pipes open.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// `bash -c` on this machine.
#[derive(Clone)]
pub struct LocalExecutor {
    pub max_timeout_ms: f64,
    pub max_output_bytes: usize,
    env: EnvSource,
    confine: Option<Confiner>,
}

impl std::fmt::Debug for LocalExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalExecutor")
            .field("max_timeout_ms", &self.max_timeout_ms)
            .field("max_output_bytes", &self.max_output_bytes)
            .field("confined", &self.confine.is_some())
            .finish_non_exhaustive()
    }
}

impl LocalExecutor {
    /// An executor whose children start from `env()` (the composition passes the shared
    /// child-environment filter, so no credential reaches a hook).
    pub fn new(env: EnvSource) -> Self {
        Self {
            max_timeout_ms: MAX_TIMEOUT_MS,
            max_output_bytes: MAX_OUTPUT_BYTES,
            env,
            confine: None,
        }
    }

    /// The same executor launching every hook through `confine`'s wrapper.
    pub fn with_confiner(mut self, confine: Confiner) -> Self {
        self.confine = Some(confine);
        self
    }

    /// Children start from dsh's environment through the shared filter
    /// (`dsh_secrets::parent_env`): no credential-like name, no registered secret, no `DSH_*`.
    pub fn with_shared_filter() -> Self {
        Self::new(Arc::new(|| dsh_process::ChildEnv::inherited().into_vars()))
    }

    /// `clampTimeout`: a non-positive or non-finite value is refused.
    pub fn resolve_timeout(&self, timeout_ms: f64) -> Result<Duration, HookExecError> {
        if !timeout_ms.is_finite() || timeout_ms <= 0.0 {
            return Err(HookExecError::InvalidTimeout);
        }
        Ok(Duration::from_secs_f64(
            timeout_ms.min(self.max_timeout_ms) / 1000.0,
        ))
    }
}

impl HookExecutor for LocalExecutor {
    fn run(&self, request: ExecRequest) -> BoxFuture<'static, Result<ExecOutput, HookExecError>> {
        let me = self.clone();
        Box::pin(async move { me.run_now(request).await })
    }
}

impl LocalExecutor {
    async fn run_now(self, request: ExecRequest) -> Result<ExecOutput, HookExecError> {
        let timeout = self.resolve_timeout(request.timeout_ms)?;
        let cwd = match request.cwd {
            Some(cwd) => cwd,
            None => std::env::current_dir().map_err(HookExecError::Cwd)?,
        };
        let env = dsh_process::ChildEnv::filtered((self.env)()).with(request.env.iter().cloned());
        // Resolved to an absolute path in the child's own PATH, so the spawn stays on
        // posix_spawn and a project cannot shadow `bash` through dsh's PATH.
        let bash = env
            .resolve("bash", &cwd)
            .unwrap_or_else(|| PathBuf::from("bash"));
        let wrapper = self
            .confine
            .as_ref()
            .and_then(|confine| confine(request.session.as_deref(), &cwd));
        let mut command = match wrapper {
            Some((program, args)) => {
                // The wrapper leads the process group; killing it tears the sandbox down.
                let mut command = dsh_process::command(program, &env);
                command.args(args).arg(bash);
                command
            }
            None => dsh_process::command(bash, &env),
        };
        command
            .arg("-c")
            .arg(&request.command)
            .current_dir(&cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|source| HookExecError::Spawn {
            cwd: cwd.clone(),
            source,
        })?;
        let group = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw);
        if let Some(mut stdin) = child.stdin.take() {
            let bytes = request.stdin;
            // A hook that never reads stdin must not block the run.
            tokio::spawn(async move {
                let _ = stdin.write_all(&bytes).await;
                let _ = stdin.shutdown().await;
            });
        }
        let cap = self.max_output_bytes;
        let stdout = child
            .stdout
            .take()
            .map(|s| tokio::spawn(read_bounded(s, cap)));
        let stderr = child
            .stderr
            .take()
            .map(|s| tokio::spawn(read_bounded(s, cap)));
        let status = tokio::select! {
            status = child.wait() => Some(status),
            () = tokio::time::sleep(timeout) => None,
            () = request.signal.cancelled() => None,
        };
        if let Some(group) = group {
            // Also reaps leftovers of a finished shell: nothing outlives its hook.
            if let Err(error) =
                rustix::process::kill_process_group(group, rustix::process::Signal::KILL)
                && error != rustix::io::Errno::SRCH
            {
                tracing::debug!(%error, "cannot kill the hook's process group");
            }
        }
        let exit_code = match status {
            Some(Ok(status)) => status.code(),
            Some(Err(error)) => return Err(HookExecError::Wait(error)),
            None => {
                let _ = child.kill().await;
                None
            }
        };
        let mut out = ExecOutput {
            exit_code,
            ..ExecOutput::default()
        };
        for (task, slot) in [(stdout, &mut out.stdout), (stderr, &mut out.stderr)] {
            if let Some(task) = task {
                let abort = task.abort_handle();
                match tokio::time::timeout(DRAIN_GRACE, task).await {
                    Ok(Ok(text)) => *slot = text,
                    Ok(Err(_)) => {}
                    Err(_) => abort.abort(),
                }
            }
        }
        Ok(out)
    }
}

async fn read_bounded(mut stream: impl AsyncRead + Unpin, cap: usize) -> String {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn executor() -> LocalExecutor {
        LocalExecutor::new(Arc::new(|| vec![("PATH".into(), "/usr/bin:/bin".into())]))
    }

    fn request(command: &str, timeout_ms: f64) -> ExecRequest {
        ExecRequest {
            command: command.into(),
            cwd: None,
            env: vec![("EXTRA".into(), "1".into())],
            stdin: b"{\"a\":1}\n".to_vec(),
            timeout_ms,
            signal: CancellationToken::new(),
            session: None,
        }
    }

    #[tokio::test]
    async fn runs_with_stdin_env_and_exit_code() {
        let out = executor()
            .run(request(
                "cat; echo \"$EXTRA\" >&2; echo \"${SECRET:-unset}\"; exit 3",
                5_000.0,
            ))
            .await
            .unwrap();
        assert_eq!(out.exit_code, Some(3));
        assert_eq!(out.stdout, "{\"a\":1}\nunset\n");
        assert_eq!(out.stderr, "1\n");
    }

    #[tokio::test]
    async fn item_50_invalid_timeouts_are_refused_before_spawning() {
        for bad in [0.0, -5.0, f64::NAN, f64::INFINITY] {
            let error = executor().run(request("true", bad)).await.unwrap_err();
            assert!(matches!(error, HookExecError::InvalidTimeout));
            assert_eq!(error.to_string(), INVALID_TIMEOUT);
        }
        assert_eq!(
            executor().resolve_timeout(10_000_000.0).unwrap(),
            Duration::from_secs(600)
        );
    }

    #[tokio::test]
    async fn a_hanging_hook_is_killed_at_its_timeout_with_no_exit_code() {
        let started = std::time::Instant::now();
        let out = executor()
            .run(request("sleep 30 & sleep 30; echo never", 300.0))
            .await
            .unwrap();
        assert_eq!(out.exit_code, None);
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(out.stdout, "");
    }

    #[tokio::test]
    async fn stdout_is_capped_and_a_bad_cwd_is_an_infrastructure_error() {
        let mut small = executor();
        small.max_output_bytes = 10;
        let out = small
            .run(request("printf '%050d' 0", 5_000.0))
            .await
            .unwrap();
        assert_eq!(out.stdout.len(), 10);
        let mut req = request("true", 5_000.0);
        req.cwd = Some("/nonexistent/dir".into());
        let error = executor().run(req).await.unwrap_err();
        assert!(matches!(error, HookExecError::Spawn { .. }), "{error}");
        assert!(
            error
                .to_string()
                .starts_with("bash-local: cannot run the hook in /nonexistent/dir"),
            "{error}"
        );
    }
}
