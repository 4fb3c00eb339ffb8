//! Running a blocking tool body off the async runtime, racing caller cancellation and the
//! file-I/O deadline.
//!
//! A file can block for ever: `/proc/kmsg`, tracefs pipes, a FUSE or network filesystem that
//! stopped answering (the thread then sleeps in the kernel, often uninterruptibly). So each body
//! runs on a thread of its own that is *abandoned*, never joined, when the deadline passes or
//! the call is cancelled: nothing awaits it, the runtime's shutdown does not wait for it (it is
//! not a `spawn_blocking` task), and the process exit takes it down. The number of threads
//! still running is bounded; past the bound a call is refused at once instead of adding one.
//! The deadline is a tokio timer: the runtime the tools run on must have its time driver
//! (every dsh runtime enables it).

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::FsError;
use crate::error::codes;

/// File-tool threads that may be running at once, stuck ones included.
pub(crate) const MAX_RUNNING: usize = 64;

static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Counts a running body; released when the body returns (never, for a stuck one).
struct Running(&'static AtomicUsize);

impl Running {
    fn enter(counter: &'static AtomicUsize, max: usize) -> Option<Self> {
        counter
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Self(counter))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

pub(crate) async fn blocking<T, F>(
    cancel: &CancellationToken,
    deadline: Duration,
    body: F,
) -> Result<T, FsError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, FsError> + Send + 'static,
{
    blocking_or(cancel, deadline, FsError::aborted, body).await
}

/// As [`blocking`], with the error a cancellation maps to.
pub(crate) async fn blocking_or<T, F>(
    cancel: &CancellationToken,
    deadline: Duration,
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
    let Some(running) = Running::enter(&RUNNING, MAX_RUNNING) else {
        return Err(FsError::coded(
            codes::FS_TIMEOUT,
            format!(
                "{MAX_RUNNING} file operations are still blocked in the filesystem (a device, /proc file or unresponsive mount that never answers); no new file operation starts until they end: avoid those paths"
            ),
        ));
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("dsh-fs-io".to_owned())
        .spawn(move || {
            let _running = running;
            let _ = tx.send(body());
        });
    if let Err(err) = spawned {
        return Err(FsError::io("cannot start the file operation", &err));
    }
    tokio::select! {
        done = rx => done.unwrap_or_else(|_| Err(FsError::coded(codes::FS_IO_ERROR, "file tool task failed"))),
        () = cancel.cancelled() => Err(on_abort()),
        () = tokio::time::sleep(deadline) => Err(timed_out(deadline)),
    }
}

/// The error of a file operation still blocked at its deadline.
pub(crate) fn timed_out(deadline: Duration) -> FsError {
    FsError::coded(
        codes::FS_TIMEOUT,
        format!(
            "the file operation did not finish within {} ms: the path blocks (a device, a /proc or tracefs file that waits for data, or an unresponsive mount); it was abandoned, avoid that path",
            deadline.as_millis()
        ),
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that never returns, as a read of a hung mount does.
    fn stuck() -> Result<(), FsError> {
        loop {
            std::thread::park();
        }
    }

    #[test]
    fn a_stuck_body_fails_at_its_deadline_and_the_runtime_still_ends() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let started = std::time::Instant::now();
        let err = runtime
            .block_on(blocking(
                &CancellationToken::new(),
                Duration::from_millis(100),
                stuck,
            ))
            .unwrap_err();
        assert_eq!(err.code.as_deref(), Some(codes::FS_TIMEOUT));
        assert!(
            err.message.contains("did not finish within 100 ms"),
            "{}",
            err.message
        );
        // A `spawn_blocking` body would make this drop wait for ever.
        drop(runtime);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn cancelling_abandons_a_stuck_body_at_once() {
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            trigger.cancel();
        });
        let err = blocking(&cancel, Duration::from_secs(3600), stuck)
            .await
            .unwrap_err();
        assert_eq!(err.code.as_deref(), Some(codes::FS_ABORTED));
    }

    #[test]
    fn the_running_count_is_bounded_and_released() {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let held: Vec<Running> = (0..3).map_while(|_| Running::enter(&COUNTER, 3)).collect();
        assert_eq!(held.len(), 3);
        assert!(Running::enter(&COUNTER, 3).is_none());
        drop(held);
        assert_eq!(COUNTER.load(Ordering::Acquire), 0);
        assert!(Running::enter(&COUNTER, 3).is_some());
    }
}
