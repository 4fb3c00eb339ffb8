//! The crate's typed errors; their texts are upstream's diagnostics exactly.

use crate::Dialect;
use crate::exec::INVALID_TIMEOUT;

/// Why a bridge's settings or a hook file's matcher was refused (the plugin does not load).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookConfigError {
    #[error("{}: stderrSummaryMaxChars must be a positive integer", .0.plugin())]
    SummaryCap(Dialect),
    #[error(
        "invalid {} regex matcher {}",
        dialect.as_str(),
        serde_json::Value::from(pattern.as_str())
    )]
    Matcher { dialect: Dialect, pattern: String },
}

/// An infrastructure failure of a hook run: recorded as a run with no exit code and this text
/// as its stderr.
#[derive(Debug, thiserror::Error)]
pub enum HookExecError {
    #[error("{INVALID_TIMEOUT}")]
    InvalidTimeout,
    #[error("bash-local: {0}")]
    Cwd(#[source] std::io::Error),
    #[error("bash-local: cannot run the hook in {}: {source}", cwd.display())]
    Spawn {
        cwd: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("bash-local: {0}")]
    Wait(#[source] std::io::Error),
}
