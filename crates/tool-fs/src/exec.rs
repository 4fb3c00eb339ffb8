//! Running a blocking tool body off the async runtime, racing caller cancellation.

use tokio_util::sync::CancellationToken;

use crate::error::FsError;

pub(crate) async fn blocking<T, F>(cancel: &CancellationToken, body: F) -> Result<T, FsError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, FsError> + Send + 'static,
{
    blocking_or(cancel, FsError::aborted, body).await
}

/// As [`blocking`], with the error a cancellation maps to.
pub(crate) async fn blocking_or<T, F>(
    cancel: &CancellationToken,
    on_abort: impl Fn() -> FsError,
    body: F,
) -> Result<T, FsError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, FsError> + Send + 'static,
{
    if cancel.is_cancelled() {
        return Err(on_abort());
    }
    let task = tokio::task::spawn_blocking(body);
    tokio::select! {
        joined = task => match joined {
            Ok(result) => result,
            Err(err) => Err(FsError::coded(crate::error::codes::FS_IO_ERROR, format!("file tool task failed: {err}"))),
        },
        () = cancel.cancelled() => Err(on_abort()),
    }
}

pub(crate) fn require_path(value: &str, name: &str) -> Result<(), FsError> {
    if value.trim().is_empty() {
        return Err(FsError::plain(format!("{name} must be a non-empty string")));
    }
    Ok(())
}

pub(crate) fn display(path: &std::path::Path) -> String {
    path.to_string_lossy().into_owned()
}
