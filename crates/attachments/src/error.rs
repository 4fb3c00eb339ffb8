//! What can go wrong when saving or loading an attachment.

use std::path::PathBuf;

/// A store failure. [`AttachmentError::Rejected`] is a policy decision about the image itself
/// (callers answer it as bad input); everything else is the store failing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttachmentError {
    /// The image is not acceptable: wrong format, over a limit, record and bytes disagree.
    #[error("{0}")]
    Rejected(String),
    /// The reference is not a `sha256:<64 lowercase hex>` id.
    #[error("invalid attachment id {0:?}")]
    InvalidId(String),
    /// No file is stored for the id.
    #[error("attachment {0} is not in the store")]
    NotFound(String),
    /// The stored bytes no longer hash to their id (or do not match their record).
    #[error("attachment {id} is corrupt: {reason}")]
    Corrupt { id: String, reason: String },
    #[error("attachment store I/O failed at {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl AttachmentError {
    /// Whether this is a refusal of the image (bad input) rather than a storage failure.
    pub fn is_rejection(&self) -> bool {
        matches!(self, Self::Rejected(_))
    }

    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
