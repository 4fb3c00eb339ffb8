//! Everything a file tool needs besides its arguments: the session cwd, the file policy,
//! the per-session observation map, the spill store and the escalation approver.

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;

use crate::policy::ApprovalOutcome;
use crate::policy::FilePolicy;
use crate::spill::SpillConfig;

/// File identity at one moment: upstream's `dev:ino:size:mtimeNs:ctimeNs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileVersion {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

impl FileVersion {
    pub fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        }
    }

    /// The current version of `path`, `None` when it does not exist (or cannot be stat'ed).
    pub fn current(path: &Path) -> Option<Self> {
        std::fs::metadata(path).ok().map(|meta| Self::of(&meta))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observation {
    Present(FileVersion),
    Absent,
}

/// The observation policy (catalog §2.2e): per session, in memory, keyed by realpath.
#[derive(Debug, Default)]
pub struct Observations {
    map: Mutex<HashMap<PathBuf, Observation>>,
}

impl Observations {
    pub fn get(&self, key: &Path) -> Option<Observation> {
        self.map.lock().ok().and_then(|map| map.get(key).copied())
    }

    pub fn record(&self, key: &Path, observation: Observation) {
        if let Ok(mut map) = self.map.lock() {
            map.insert(key.to_path_buf(), observation);
        }
    }

    /// Records the file's current state (present with its version, or absent).
    pub fn record_current(&self, key: &Path) {
        let observation =
            FileVersion::current(key).map_or(Observation::Absent, Observation::Present);
        self.record(key, observation);
    }
}

/// An approval outcome, or why the request could not be routed (e.g. the call has no agent).
pub type ApprovalFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ApprovalOutcome, crate::error::FsError>> + Send + 'a>>;

/// The approval seam a mutating tool asks when the call requested `sandbox_permissions`.
pub trait EscalationApprover: Send + Sync {
    /// `reason` is `escalate sandbox to <mode>: <justification>`.
    fn approve<'a>(
        &'a self,
        tool_name: &'a str,
        call_id: Option<&'a str>,
        reason: &'a str,
    ) -> ApprovalFuture<'a>;
}

/// Configurable limits (catalog §2.2 and §2.4 defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsLimits {
    pub read_limit: usize,
    pub read_max_line_length: usize,
    pub read_max_bytes: usize,
    pub glob_max_results: usize,
    pub sample_over_cap_glob_results: bool,
    pub grep_max_matches: usize,
    pub grep_max_line_bytes: usize,
    pub search_meta_max_bytes: usize,
    pub max_image_bytes: u64,
    pub max_image_dimension: u32,
    pub max_image_pixels: u64,
    pub str_replace_max_output_chars: usize,
    /// fs-local `diffBasisMaxBytes` (exclusive bound for the write diff basis).
    pub diff_basis_max_bytes: usize,
    /// How long one call's file I/O may take before it is abandoned (`FS_TIMEOUT`).
    pub io_timeout: std::time::Duration,
}

impl Default for FsLimits {
    fn default() -> Self {
        Self {
            read_limit: 2000,
            read_max_line_length: 2000,
            read_max_bytes: 51_200,
            glob_max_results: 100,
            sample_over_cap_glob_results: true,
            grep_max_matches: 250,
            grep_max_line_bytes: 2000,
            search_meta_max_bytes: 65_536,
            max_image_bytes: 3_670_016,
            max_image_dimension: 2000,
            max_image_pixels: 40_000_000,
            str_replace_max_output_chars: 16_000,
            diff_basis_max_bytes: 10 * 1024 * 1024,
            io_timeout: std::time::Duration::from_secs(60),
        }
    }
}

#[derive(Clone)]
pub struct FsContext {
    /// Session cwd; relative `file_path`s are joined onto it.
    pub cwd: PathBuf,
    pub policy: FilePolicy,
    pub spill: SpillConfig,
    pub limits: FsLimits,
    /// `None` disables the observation policy (upstream: the plugin is optional).
    pub observations: Option<Arc<Observations>>,
    pub approver: Option<Arc<dyn EscalationApprover>>,
    /// The id of the call being run, passed to the approver.
    pub call_id: Option<String>,
    /// True for calls made from inside `run_code`: glob/grep never spill for those.
    pub nested: bool,
    /// Attachment support; `read_image` is registered only when this is set.
    pub images: Option<crate::read_image::ImageSupport>,
    /// The client's editor, when the front-end reads and writes files through it (ACP
    /// `fs/*`); set per call from the calling agent's scope.
    pub editor: Option<std::sync::Arc<dyn dsh_tools::EditorFiles>>,
}

impl std::fmt::Debug for FsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FsContext")
            .field("cwd", &self.cwd)
            .field("policy", &self.policy)
            .field("spill", &self.spill)
            .field("limits", &self.limits)
            .field("observations", &self.observations.is_some())
            .field("approver", &self.approver.is_some())
            .field("call_id", &self.call_id)
            .field("nested", &self.nested)
            .field("images", &self.images)
            .field("editor", &self.editor.is_some())
            .finish()
    }
}

impl FsContext {
    /// A context with default limits, observation policy on, no spill store, no approver.
    pub fn new(cwd: impl Into<PathBuf>, policy: FilePolicy) -> Self {
        Self {
            cwd: cwd.into(),
            policy,
            spill: SpillConfig::default(),
            limits: FsLimits::default(),
            observations: Some(Arc::new(Observations::default())),
            approver: None,
            call_id: None,
            nested: false,
            images: None,
            editor: None,
        }
    }

    pub(crate) fn observe(&self, key: &Path, observation: Observation) {
        if let Some(observations) = &self.observations {
            observations.record(key, observation);
        }
    }
}
