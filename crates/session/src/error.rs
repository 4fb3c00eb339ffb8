//! The one error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong appending to, persisting, loading or forking a session.
///
/// Append-time variants (`NotLossless`, `Surface`, `InvalidEvent`, `Reentrant`, and `Io` while
/// the log's writer holds a failed write) leave the log unchanged: the event was neither
/// committed in memory nor written. `Io` from a barrier (`sync`, `written`, `flush`) means the
/// events appended before it are not (all) in the file yet; they stay queued, and the file
/// never ends in half a line. Load-time variants reject the whole file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// `data` or surface metadata is not lossless JSON (`-0`, NaN, ±Infinity).
    #[error("{kind}: event data is not lossless JSON (negative zero or a non-finite number)")]
    NotLossless { kind: String },
    /// A §1.5 surface rule was broken (missing/forbidden `surfaceOp`, bad `sourceEventSeqs`,
    /// bad `replace` span).
    #[error("{kind}: surface rule violated: {reason}")]
    Surface { kind: String, reason: String },
    /// The event's data has the wrong shape for its type (e.g. a surface event whose data is
    /// not a message, a request header without provider/model).
    #[error("{kind}: invalid event: {reason}")]
    InvalidEvent { kind: String, reason: String },
    /// An append was attempted from inside an `on_event` callback of the same log.
    #[error("cannot append to session {id} from inside one of its event listeners")]
    Reentrant { id: String },
    /// Reading or writing the log failed (ENOSPC, EACCES, ENOTDIR, …).
    #[error("session log I/O failed at {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A committed part of a stored log is unreadable.
    #[error("session log {} is corrupt at line {line}: {reason}", path.display())]
    Corrupt {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    /// An event this process wrote and no longer keeps in memory could not be read back from
    /// the log's file (the file was changed or damaged under the live log).
    #[error("session log {}: cannot read back event {seq}: {reason}", path.display())]
    ReadBack {
        path: PathBuf,
        seq: u64,
        reason: String,
    },
    /// The header names a format version this build cannot read.
    #[error("session log {} has format version {version}: {hint}", path.display())]
    UnsupportedVersion {
        path: PathBuf,
        version: String,
        hint: &'static str,
    },
    /// `SESSION_NOT_FOUND`
    #[error("session {id:?} not found")]
    NotFound { id: String },
    /// `SESSION_ALREADY_EXISTS`: the id is live in this process or already stored.
    #[error("session {id:?} already exists")]
    AlreadyExists { id: String },
    /// `INVALID_BOUNDARY`
    #[error("invalid fork boundary {boundary}: the source log has {len} events")]
    InvalidBoundary { boundary: u64, len: u64 },
    /// `OPEN_TURN`
    #[error("fork boundary {boundary} is inside an open turn")]
    OpenTurn { boundary: u64 },
    /// An input the store cannot accept (empty id, relative cwd, no home directory).
    #[error("invalid {field}: {reason}")]
    InvalidInput { field: &'static str, reason: String },
    /// A seed whose events are not contiguous from seq 0.
    #[error("invalid seed: event {index} has seq {seq}")]
    SeedGap { index: u64, seq: u64 },
}

impl SessionError {
    /// Upstream's stable code for the store errors, `None` for the rest.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            Self::NotFound { .. } => Some("SESSION_NOT_FOUND"),
            Self::AlreadyExists { .. } => Some("SESSION_ALREADY_EXISTS"),
            Self::InvalidBoundary { .. } => Some("INVALID_BOUNDARY"),
            Self::OpenTurn { .. } => Some("OPEN_TURN"),
            Self::NotLossless { .. }
            | Self::Surface { .. }
            | Self::InvalidEvent { .. }
            | Self::Reentrant { .. }
            | Self::Io { .. }
            | Self::Corrupt { .. }
            | Self::ReadBack { .. }
            | Self::UnsupportedVersion { .. }
            | Self::InvalidInput { .. }
            | Self::SeedGap { .. } => None,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn surface(kind: &str, reason: impl Into<String>) -> Self {
        Self::Surface {
            kind: kind.to_owned(),
            reason: reason.into(),
        }
    }

    pub(crate) fn invalid(kind: &str, reason: impl Into<String>) -> Self {
        Self::InvalidEvent {
            kind: kind.to_owned(),
            reason: reason.into(),
        }
    }
}
