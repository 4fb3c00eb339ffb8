//! What a shell tool call runs against: the session's cwd and identity, the executor limits,
//! spill storage and the jobs runtime.

use std::path::PathBuf;
use std::sync::Arc;

use crate::capture::OutputTap;
use crate::escalation::ApprovalRoute;
use crate::jobs::JobsRuntime;
use crate::jobs::OwnerId;
use crate::sandbox::SandboxPolicy;
use crate::spill::SpillStore;

/// Foreground executor and tool settings (`dsh-bash-local` / `dsh-tool-bash` defaults).
#[derive(Debug, Clone)]
pub struct BashConfig {
    pub timeout_ms: u64,
    pub max_timeout_ms: u64,
    /// Per stream, in memory; the tail is kept.
    pub max_output_bytes: usize,
    /// Per stream spill file; a larger stream discards its spill.
    pub max_spill_bytes: u64,
    /// Between SIGTERM and SIGKILL, applied to the process group.
    pub grace_ms: u64,
    pub enable_run_in_background: bool,
}

impl Default for BashConfig {
    fn default() -> Self {
        Self {
            timeout_ms: 120_000,
            max_timeout_ms: 600_000,
            max_output_bytes: 64_000,
            max_spill_bytes: 64 * 1024 * 1024,
            grace_ms: 3_000,
            enable_run_in_background: true,
        }
    }
}

/// Per-session context of the shell tools.
#[derive(Clone)]
pub struct ShellContext {
    /// The session cwd: default working directory and base for relative `workdir`.
    pub cwd: PathBuf,
    pub session_id: String,
    /// `DSH_HOME` for the managed environment.
    pub dsh_home: Option<PathBuf>,
    /// `DSH_SESSION_JSONL`, when the store can locate the log.
    pub session_jsonl: Option<PathBuf>,
    /// The environment children inherit (before filtering). `None` means this process's.
    pub base_env: Option<Vec<(String, String)>>,
    pub config: BashConfig,
    pub spill: Arc<SpillStore>,
    /// `None` when the jobs runtime is not composed.
    pub jobs: Option<Arc<JobsRuntime>>,
    /// The calling agent; owns the background jobs it starts.
    pub owner: Option<OwnerId>,
    /// `Some` when the executor confines: the call's standing policy. `None` runs every
    /// command unconfined and refuses `sandbox_permissions`.
    pub sandbox: Option<SandboxPolicy>,
    /// Where an escalation prompt for this call is routed.
    pub approval: Option<ApprovalRoute>,
    /// Where a foreground call's output is mirrored while it runs (a front-end's live view).
    /// Display only: results, spills and logs are the same with or without it.
    pub output: Option<OutputTap>,
}

/// The folder of dsh's home where confined launches lock their workspace's placeholders.
pub const LOCK_DIR: &str = "locks";

impl ShellContext {
    /// A context with default settings, spilling under the OS temp directory.
    pub fn new(cwd: impl Into<PathBuf>, session_id: impl Into<String>) -> Self {
        Self {
            cwd: cwd.into(),
            session_id: session_id.into(),
            dsh_home: None,
            session_jsonl: None,
            base_env: None,
            config: BashConfig::default(),
            spill: Arc::new(SpillStore::in_temp_dir()),
            jobs: None,
            owner: None,
            sandbox: None,
            approval: None,
            output: None,
        }
    }

    /// The managed `DSH_*` snapshot; it wins over every other env source.
    pub fn managed_env(&self) -> Vec<(String, String)> {
        let mut env = Vec::new();
        if let Some(home) = &self.dsh_home {
            env.push(("DSH_HOME".to_owned(), home.to_string_lossy().into_owned()));
        }
        env.push(("DSH_SHELL".to_owned(), "1".to_owned()));
        env.push(("DSH_SESSION_ID".to_owned(), self.session_id.clone()));
        if let Some(jsonl) = &self.session_jsonl {
            env.push((
                "DSH_SESSION_JSONL".to_owned(),
                jsonl.to_string_lossy().into_owned(),
            ));
        }
        env
    }

    /// The call's policy with this session's facts applied: dsh's home is hidden from the
    /// command, the session's own log, skills and spill folder stay readable.
    /// (Public: terminals confine a PTY shell with exactly this policy.)
    pub fn confinement(&self) -> Option<SandboxPolicy> {
        let policy = self.sandbox.as_ref()?;
        let mut exposed = Vec::new();
        let mut hidden = Vec::new();
        let mut policy = policy.clone();
        if let Some(home) = &self.dsh_home {
            let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.clone());
            exposed.push(home.join("skills"));
            policy = policy.with_lock_dir(home.join(LOCK_DIR));
            hidden.push(home);
        }
        exposed.extend(self.session_jsonl.iter().cloned());
        if let Ok(dir) = self.spill.session_dir(&self.session_id) {
            exposed.push(dir);
        }
        Some(policy.hiding(hidden).exposing(exposed))
    }

    /// The environment a child of this context gets: the base scrubbed of secrets and stale
    /// `DSH_*` values, plus the managed snapshot (terminals reuse it).
    pub fn child_env(&self) -> Vec<(String, String)> {
        let managed = self.managed_env();
        match &self.base_env {
            Some(base) => crate::process::child_env(base.iter().cloned(), &managed),
            None => {
                crate::process::child_env(dsh_process::ChildEnv::inherited().into_vars(), &managed)
            }
        }
    }
}
