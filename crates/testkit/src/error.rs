use std::path::PathBuf;

/// Everything that can go wrong while loading, laying out, replaying or running a scenario.
///
/// The variant decides the routing: `Scenario*` and `Workspace` make the runner report the
/// scenario as FAIL with the message; `Io`/`Server` while starting infrastructure do too, but
/// the bins print them as fatal when they happen outside a scenario.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestkitError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: invalid JSON: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}:{line}: invalid JSON line: {source}")]
    JsonLine {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("invalid scenario {name}: {message}")]
    Scenario { name: String, message: String },
    #[error("workspace: {0}")]
    Workspace(String),
    #[error("replay server: {0}")]
    Server(String),
    #[error("harness: {0}")]
    Harness(String),
}

impl TestkitError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = TestkitError> = std::result::Result<T, E>;
