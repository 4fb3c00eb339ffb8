//! Compaction failures. The texts are the spec's; they are written into `compaction/end.error`
//! and warnings, so keep them exact.

use crate::summarizer::SummaryError;

/// Why a compaction attempt did not replace anything (or did not finish cleanly).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactionError {
    /// A region that cannot be replaced, or an owner that may not compact now.
    #[error("{0}")]
    Invalid(String),
    /// The session's compaction lock is held, or the agent is not available.
    #[error("{0}")]
    Busy(String),
    /// The token meter could not price the surface.
    #[error("{0}")]
    Meter(String),
    #[error("{0}")]
    Summary(SummaryError),
    #[error("{0}")]
    NotSmaller(String),
    /// The surface changed while the summary was being written.
    #[error("{0}")]
    Changed(String),
    /// An append of the commit failed.
    #[error("{0}")]
    Commit(String),
    /// An append before the summary (the bracket's start) failed.
    #[error("{0}")]
    Session(String),
    /// `TargetPressureConfigError`: the route's capacity or retention is unusable.
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    StillAbove(String),
    #[error("compaction was cancelled")]
    Cancelled,
}

/// `ManualCompactionError.code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManualCode {
    Busy,
    Cancelled,
    Changed,
    Summary,
    Commit,
    Persistence,
}

impl ManualCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Busy => "busy",
            Self::Cancelled => "cancelled",
            Self::Changed => "changed",
            Self::Summary => "summary",
            Self::Commit => "commit",
            Self::Persistence => "persistence",
        }
    }
}

/// What `/compact` and other manual callers see.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ManualCompactionError {
    pub code: ManualCode,
    pub message: String,
}

pub const LOCK_BUSY: &str =
    "compaction: compaction already in progress; the session compaction lock is already active";
pub const MANUAL_NOT_IDLE: &str =
    "manual compaction requires an idle agent with no waking queued work";
pub const MANUAL_OPEN_TURN: &str = "manual compaction: the session already has an open turn";
pub const MANUAL_CANCELLED: &str = "manual compaction was cancelled";
pub const MANUAL_CHANGED: &str = "the compacted history changed during manual compaction";
pub const MANUAL_SUMMARY: &str = "manual compaction could not produce a smaller summary";
pub const MANUAL_COMMIT: &str = "manual compaction did not commit cleanly";
pub const MANUAL_PERSISTENCE: &str = "manual compaction durability checkpoint failed";
pub const NO_OPEN_TURN: &str =
    "compactRegion: no open turn — automatic compaction events must be enclosed in a turn";
pub const METER_MISMATCH: &str =
    "compaction: token-meter surface does not match the current session surface";
pub const SURFACE_CHANGED: &str = "compaction: session surface changed during summarization";
pub const SPAN_INVALID: &str =
    "compaction: the selected span is no longer a valid replacement target";
pub const SPAN_CHANGED: &str = "compaction: the selected span changed during summarization";
pub const SPAN_REWRITTEN: &str = "compaction: the selected span was rewritten during summarization";

impl ManualCompactionError {
    pub fn new(code: ManualCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The manual mapping of a failed attempt (§8.3 step 10).
    pub(crate) fn from_attempt(error: &CompactionError) -> Self {
        match error {
            CompactionError::Cancelled => Self::new(ManualCode::Cancelled, MANUAL_CANCELLED),
            CompactionError::Busy(message) => Self::new(ManualCode::Busy, message.clone()),
            CompactionError::Changed(_) => Self::new(ManualCode::Changed, MANUAL_CHANGED),
            CompactionError::Commit(_) => Self::new(ManualCode::Commit, MANUAL_COMMIT),
            _ => Self::new(ManualCode::Summary, MANUAL_SUMMARY),
        }
    }
}
