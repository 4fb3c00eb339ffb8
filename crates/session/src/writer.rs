//! The log writer: one thread per persisted log that owns its file.
//!
//! `SessionLog::append` commits an event in memory, publishes it, and queues it here; it never
//! touches the file, so no async worker blocks on a `write` or an `fdatasync`. The thread drains
//! the whole queue at each wake-up and writes it with one `write` (many events per syscall),
//! in seq order. A batch holding a `step/end` or `turn/end` is also `fdatasync`ed, as the
//! write-through did before.
//!
//! Callers that need the file to hold what they appended wait on a barrier:
//! - [`LogWriter::barrier`] with `Level::Written`: every event appended before the call is in
//!   the file (it survives a SIGKILL of the process). The loop waits on it after a `tool/call`,
//!   before the tool runs, so crash repair never reports a call that ran as not started.
//! - `Level::Synced`: the same, and `fdatasync`ed (it survives power loss). The loop waits on
//!   it after `step/end` and `turn/end`: a step or turn is over only once it is durable.
//! - `Level::Materialized`: the file exists even with no event (`SessionLog::persist`).
//!
//! Failed writes. A write that fails (ENOSPC, EIO, a vanished directory) is rolled back by
//! truncation, so the file stays a valid prefix of the log and never ends in half a line. The
//! batch stays queued and the writer is *poisoned*: every barrier waiting on it gets the error
//! (so the step that wrote it fails instead of being reported as durable), and every later
//! append is refused, uncommitted and unpublished, with the same error, exactly as a failed
//! write-through append was. Each refused append and each barrier retries the queued batch; the
//! first retry that succeeds clears the poison, and the file then holds every committed event,
//! in order. What was committed in memory before the failure was known is never lost in this
//! process: it is written by the first successful retry.
//!
//! Why poison rather than publishing an event only once the writer acknowledges it: that
//! would put a thread hop (and, at step ends, an fsync) between every streamed chunk and the
//! listeners and front-ends, and would run listeners off the appending thread. The loop needs
//! to know only at its own checkpoints, and that is where the barriers are.
//!
//! A SIGKILL loses only what no barrier has acknowledged: at most the tail of the open step,
//! which crash repair closes like a torn tail. Dropping the last handle of the log writes the
//! queue out and joins the thread. A reader of the file in this process (`read_log_file`, a
//! store's `load`, `list`, `headers`) first waits for the live writer of that file, so it sees
//! every committed event, as it did with the write-through.

use dsh_sync::lock;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Condvar;
use std::sync::Mutex;
use std::sync::Weak;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::error::SessionError;
use crate::event::Event;
use crate::event::kind;
use crate::line_index::LineIndex;
use crate::sink::FileSink;

/// How far a barrier waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    /// The file exists (header written), whatever is queued.
    Materialized,
    /// Every event up to the target is written.
    Written,
    /// Every event up to the target is written and `fdatasync`ed.
    Synced,
}

/// A write failure, kept so that every waiter and every refused append gets the same error.
#[derive(Debug, Clone)]
enum Failure {
    Io {
        path: PathBuf,
        kind: std::io::ErrorKind,
        message: String,
    },
    AlreadyExists {
        id: String,
    },
}

impl Failure {
    fn of(error: &SessionError, path: &Path) -> Self {
        match error {
            SessionError::Io { path, source } => Self::Io {
                path: path.clone(),
                kind: source.kind(),
                message: source.to_string(),
            },
            SessionError::AlreadyExists { id } => Self::AlreadyExists { id: id.clone() },
            other => Self::Io {
                path: path.to_owned(),
                kind: std::io::ErrorKind::Other,
                message: other.to_string(),
            },
        }
    }

    fn error(&self) -> SessionError {
        match self {
            Self::Io {
                path,
                kind,
                message,
            } => SessionError::io(path, std::io::Error::new(*kind, message.clone())),
            Self::AlreadyExists { id } => SessionError::AlreadyExists { id: id.clone() },
        }
    }
}

enum Notify {
    Async(oneshot::Sender<Result<(), SessionError>>),
    Blocking(std::sync::mpsc::SyncSender<Result<(), SessionError>>),
}

impl Notify {
    fn send(self, result: Result<(), SessionError>) {
        // A waiter that stopped waiting (a dropped future) is not an error.
        match self {
            Self::Async(tx) => {
                let _ = tx.send(result);
            }
            Self::Blocking(tx) => {
                let _ = tx.send(result);
            }
        }
    }
}

struct Waiter {
    /// Events `0..upto` must be stored.
    upto: u64,
    level: Level,
    notify: Notify,
}

#[derive(Default)]
struct Queue {
    /// Committed, not yet written (seq order). A failed batch goes back to the front.
    pending: Vec<Arc<Event>>,
    /// Number of events ever handed to the writer (stored ones included): seqs `0..queued`.
    queued: u64,
    /// Number of events in the file (seqs `0..written`).
    written: u64,
    /// Where the line of each event in the file starts, by seq (`starts.len() == written`; the
    /// members of a packed row of a resumed file share their row's start), so that an event
    /// the log no longer keeps in memory can be read back.
    starts: LineIndex,
    /// Where the last stored line ends (the file's length after the last write).
    end: u64,
    /// A read handle on the file, once it exists (see [`FileSink::reader`]).
    reader: Option<Arc<std::fs::File>>,
    /// Number of events known to be `fdatasync`ed.
    synced: u64,
    materialized: bool,
    /// Set by every producer; the writer sleeps while it is clear. A failed batch is retried
    /// only on the next request, never in a loop against a full disk.
    work: bool,
    waiters: Vec<Waiter>,
    /// The last write failed and its batch is still queued.
    failure: Option<Failure>,
    closing: bool,
    /// The writer thread is gone (closed, or it could not start or it panicked).
    stopped: bool,
    /// Batches written (`write` calls with events), for tests and diagnostics.
    batches: u64,
    /// The writer thread sleeps on the condvar: only then does a producer pay for a wake-up
    /// (a futex call); while it writes, it drains whatever arrives when it comes back.
    idle: bool,
}

impl Queue {
    fn satisfied(&self, upto: u64, level: Level) -> bool {
        match level {
            Level::Materialized => self.materialized,
            Level::Written => self.written >= upto,
            Level::Synced => self.synced >= upto,
        }
    }

    /// Answers every waiter that is satisfied, and with `failure` every other one.
    fn answer(&mut self, failure: Option<&Failure>) {
        let waiters = std::mem::take(&mut self.waiters);
        for waiter in waiters {
            if self.satisfied(waiter.upto, waiter.level) {
                waiter.notify.send(Ok(()));
            } else if let Some(failure) = failure {
                waiter.notify.send(Err(failure.error()));
            } else {
                self.waiters.push(waiter);
            }
        }
    }
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    /// Locked by the writer thread only (and by nobody else once it runs).
    sink: Mutex<FileSink>,
    path: PathBuf,
    /// Started at the first request, so a log that is never written never has a thread.
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// The writers of the logs open in this process, by file: a reader of a live log's file in
/// this process (`read_log_file`, a store's `load` or `list`) first waits until everything
/// committed is written, so it sees what an append returned, as with the write-through.
static LIVE: Mutex<Vec<(PathBuf, Weak<Shared>)>> = Mutex::new(Vec::new());

/// Waits until every event committed to a live log of this process stored at `path` is in
/// its file. A no-op for files no live log writes. A failed write is the writer's to report;
/// the reader then reads what the file holds.
pub(crate) fn settle(path: &Path) {
    settle_where(|p| p == path);
}

/// Waits until every session log open in this process has written what it committed to its
/// file (no fsync). A process about to exit while logs may still be open calls it, so the
/// writer threads it does not join lose nothing.
pub fn settle_all() {
    settle_where(|_| true);
}

/// [`settle`] for the live log of session directory `segment` under `root` (its file may not
/// exist yet: the first batch creates it).
pub(crate) fn settle_session(root: &Path, segment: &str) {
    settle_where(|p| {
        p.starts_with(root)
            && p.parent()
                .and_then(Path::file_name)
                .is_some_and(|name| name == segment)
    });
}

/// [`settle`] for every live log stored under `root`.
pub(crate) fn settle_under(root: &Path) {
    settle_where(|p| p.starts_with(root));
}

fn settle_where(matches: impl Fn(&Path) -> bool) {
    let writers: Vec<Arc<Shared>> = lock(&LIVE)
        .iter()
        .filter(|(path, _)| matches(path))
        .filter_map(|(_, shared)| shared.upgrade())
        .collect();
    for shared in writers {
        let upto = lock(&shared.queue).queued;
        let _ = shared.blocking(upto, Level::Written).wait();
    }
}

impl Shared {
    fn started(&self) -> bool {
        lock(&self.thread).is_some()
    }

    fn kick(self: &Arc<Self>) {
        self.wake.notify_one();
        let mut thread = lock(&self.thread);
        // A closing writer's thread (being joined) answers every waiter before it stops.
        if thread.is_some() || lock(&self.queue).closing {
            return;
        }
        let shared = self.clone();
        let spawned = std::thread::Builder::new()
            .name("dsh-session-log".into())
            .spawn(move || run(&shared));
        match spawned {
            Ok(handle) => *thread = Some(handle),
            Err(error) => {
                tracing::error!(path = %self.path.display(), %error, "cannot start the session log writer");
                let failure = Failure::of(&SessionError::io(&self.path, error), &self.path);
                let mut queue = lock(&self.queue);
                queue.failure = Some(failure.clone());
                queue.answer(Some(&failure));
            }
        }
    }

    /// Registers a barrier on events `0..upto`: `Some(())` when the writer will answer
    /// `notify`, `None` when the barrier already holds (no wake-up, no syscall).
    fn register(self: &Arc<Self>, upto: u64, level: Level, notify: Notify) -> Option<()> {
        {
            let mut queue = lock(&self.queue);
            if queue.satisfied(upto, level) {
                return None;
            }
            if queue.stopped {
                drop(queue);
                notify.send(Err(stopped_error(&self.path)));
                return Some(());
            }
            queue.waiters.push(Waiter {
                upto,
                level,
                notify,
            });
            queue.work = true;
        }
        self.kick();
        Some(())
    }

    fn blocking(self: &Arc<Self>, upto: u64, level: Level) -> Blocking {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        Blocking {
            rx: self.register(upto, level, Notify::Blocking(tx)).map(|_| rx),
            path: self.path.clone(),
        }
    }
}

/// The writer of one persisted log. Owned by the log's state, so queueing happens under the
/// log's lock, in commit order.
pub(crate) struct LogWriter {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWriter")
            .field("path", &self.shared.path)
            .finish()
    }
}

impl LogWriter {
    /// A writer for `sink`, whose file already holds one event per entry of `starts` (where
    /// each one's line starts). An existing file was written by another process: its tail may
    /// still sit in the page cache, so the first sync barrier syncs it.
    pub(crate) fn new(sink: FileSink, starts: LineIndex) -> Self {
        let path = sink.path().to_path_buf();
        let materialized = sink.is_materialized();
        let stored = starts.len();
        let reader = match sink.reader() {
            Some(Ok(file)) => Some(Arc::new(file)),
            Some(Err(error)) => {
                // Only reading back evicted events needs it; without it they stay in memory.
                tracing::warn!(path = %path.display(), %error, "cannot open the session log for reading back");
                None
            }
            None => None,
        };
        let queue = Queue {
            queued: stored,
            written: stored,
            synced: if materialized { 0 } else { stored },
            materialized,
            starts,
            end: sink.len(),
            reader,
            ..Queue::default()
        };
        let shared = Arc::new(Shared {
            queue: Mutex::new(queue),
            wake: Condvar::new(),
            sink: Mutex::new(sink),
            path: path.clone(),
            thread: Mutex::new(None),
        });
        let mut live = lock(&LIVE);
        live.retain(|(_, writer)| writer.strong_count() > 0);
        live.push((path, Arc::downgrade(&shared)));
        Self { shared }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.shared.path
    }

    /// How many events can be read back from the file: those written, once the file can be
    /// read (0 before that).
    pub(crate) fn readable(&self) -> u64 {
        let queue = lock(&self.shared.queue);
        if queue.reader.is_some() {
            queue.written
        } else {
            0
        }
    }

    /// A handle that reads written events back from the file, usable without the log's lock.
    pub(crate) fn read_back(&self) -> ReadBack {
        ReadBack {
            shared: self.shared.clone(),
        }
    }

    /// Queues events committed without an append (the seed of a fresh file, crash repair):
    /// written with the next batch. Does not start the thread.
    pub(crate) fn queue_quietly(&mut self, events: &[Arc<Event>]) {
        let mut queue = lock(&self.shared.queue);
        queue.pending.extend_from_slice(events);
        queue.queued += events.len() as u64;
    }

    /// Refuses an append while a failed batch is still queued, and asks for a retry.
    pub(crate) fn check(&mut self) -> Result<(), SessionError> {
        let failure = {
            let mut queue = lock(&self.shared.queue);
            let Some(failure) = queue.failure.clone() else {
                return Ok(());
            };
            queue.work = true;
            failure
        };
        self.shared.kick();
        Err(failure.error())
    }

    /// Queues one committed event for the writer thread.
    pub(crate) fn push(&mut self, event: Arc<Event>) {
        let idle = {
            let mut queue = lock(&self.shared.queue);
            queue.pending.push(event);
            queue.queued += 1;
            queue.work = true;
            queue.idle
        };
        if idle || !self.shared.started() {
            self.shared.kick();
        }
    }

    /// An awaitable barrier on events `0..upto`, registered now (not at first poll); `None`
    /// when it is already satisfied.
    pub(crate) fn barrier(
        &mut self,
        upto: u64,
        level: Level,
    ) -> Option<impl Future<Output = Result<(), SessionError>> + Send + 'static + use<>> {
        let (tx, rx) = oneshot::channel();
        self.shared.register(upto, level, Notify::Async(tx))?;
        let path = self.shared.path.clone();
        Some(async move { rx.await.unwrap_or_else(|_| Err(stopped_error(&path))) })
    }

    /// The barrier for synchronous callers: register under the log's lock, then call
    /// [`Blocking::wait`] after releasing it.
    pub(crate) fn blocking(&mut self, upto: u64, level: Level) -> Blocking {
        self.shared.blocking(upto, level)
    }
}

/// Reads events the writer has stored back from the file (see [`LogWriter::read_back`]).
#[derive(Clone)]
pub(crate) struct ReadBack {
    shared: Arc<Shared>,
}

impl ReadBack {
    /// Events `from..to`, read from the file. They must have been written.
    pub(crate) fn read(&self, from: u64, to: u64) -> Result<Vec<Arc<Event>>, SessionError> {
        use std::os::unix::fs::FileExt;
        if from >= to {
            return Ok(Vec::new());
        }
        let path = &self.shared.path;
        let not_stored = || SessionError::ReadBack {
            path: path.clone(),
            seq: from,
            reason: "the event is not in the file yet".into(),
        };
        let (reader, start, end) = {
            let queue = lock(&self.shared.queue);
            let reader = queue.reader.clone().ok_or_else(not_stored)?;
            let (Some(start), Some(last_start)) =
                (queue.starts.get(from), queue.starts.get(to - 1))
            else {
                return Err(not_stored());
            };
            // The line of `to - 1` ends where the next line starts (members of a packed row
            // share one start), or at the end of what is stored.
            let end = (to..queue.starts.len())
                .filter_map(|seq| queue.starts.get(seq))
                .find(|&s| s > last_start)
                .unwrap_or(queue.end);
            (reader, start, end)
        };
        let len = usize::try_from(end.saturating_sub(start)).map_err(|_| not_stored())?;
        let mut bytes = vec![0; len];
        reader
            .read_exact_at(&mut bytes, start)
            .map_err(|e| SessionError::io(path, e))?;
        crate::jsonl::parse_read_back(path, bytes, from, to)
    }
}

/// A registered blocking barrier.
pub(crate) struct Blocking {
    rx: Option<std::sync::mpsc::Receiver<Result<(), SessionError>>>,
    path: PathBuf,
}

impl Blocking {
    /// A barrier that already holds (an in-memory log).
    pub(crate) fn ready() -> Self {
        Self {
            rx: None,
            path: PathBuf::new(),
        }
    }

    pub(crate) fn wait(self) -> Result<(), SessionError> {
        match self.rx {
            None => Ok(()),
            Some(rx) => rx.recv().unwrap_or_else(|_| Err(stopped_error(&self.path))),
        }
    }
}

fn stopped_error(path: &Path) -> SessionError {
    SessionError::io(
        path,
        std::io::Error::other("the session log writer stopped"),
    )
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        let pending = {
            let mut queue = lock(&self.shared.queue);
            queue.closing = true;
            !queue.pending.is_empty()
        };
        self.shared.wake.notify_one();
        let thread = lock(&self.shared.thread).take();
        match thread {
            // Writes out what is queued: dropping a log loses nothing it committed.
            Some(thread) => {
                let _ = thread.join();
            }
            // Never started, yet something is queued (a seed nobody appended after): written
            // here like any batch.
            None if pending => {
                lock(&self.shared.queue).work = true;
                run(&self.shared);
            }
            None => {}
        }
        let mut live = lock(&LIVE);
        live.retain(|(_, writer)| {
            writer.strong_count() > 0 && !writer.ptr_eq(&Arc::downgrade(&self.shared))
        });
    }
}

/// Marks the writer stopped and fails whoever still waits, also when the thread unwinds.
struct StopGuard<'a>(&'a Shared);

impl Drop for StopGuard<'_> {
    fn drop(&mut self) {
        let mut queue = lock(&self.0.queue);
        queue.stopped = true;
        let path = &self.0.path;
        let failure = queue
            .failure
            .clone()
            .unwrap_or_else(|| Failure::of(&stopped_error(path), path));
        queue.answer(Some(&failure));
    }
}

/// The writer loop: sleep until asked, drain the queue, write it in one syscall, sync when a
/// durable event or a waiter asks for it, answer the waiters.
fn run(shared: &Shared) {
    let _stop = StopGuard(shared);
    let mut sink = lock(&shared.sink);
    loop {
        let (batch, want_sync, materialize, closing) = {
            let mut queue = lock(&shared.queue);
            while !queue.work && !queue.closing {
                queue.idle = true;
                queue = dsh_sync::wait(&shared.wake, queue);
            }
            queue.idle = false;
            queue.work = false;
            let batch = std::mem::take(&mut queue.pending);
            let want_sync = batch
                .iter()
                .any(|e| e.kind == kind::STEP_END || e.kind == kind::TURN_END)
                || queue
                    .waiters
                    .iter()
                    .any(|w| w.level == Level::Synced && w.upto > queue.synced);
            let materialize =
                !queue.materialized && queue.waiters.iter().any(|w| w.level == Level::Materialized);
            (batch, want_sync, materialize, queue.closing)
        };
        let mut result = Ok(());
        let mut starts = Vec::new();
        if !batch.is_empty() || materialize {
            result = sink.write_batch(&batch, &mut starts);
        }
        let wrote = result.is_ok();
        if wrote && want_sync {
            result = sink.flush();
        }
        let need_reader = wrote && sink.is_materialized() && lock(&shared.queue).reader.is_none();
        let reader = if need_reader { sink.reader() } else { None };
        let mut queue = lock(&shared.queue);
        if wrote {
            queue.batches += u64::from(!batch.is_empty());
            queue.written += batch.len() as u64;
            starts
                .into_iter()
                .for_each(|start| queue.starts.push(start));
            queue.end = sink.len();
            queue.materialized = queue.materialized || sink.is_materialized();
            match reader {
                Some(Ok(file)) => queue.reader = Some(Arc::new(file)),
                Some(Err(error)) => {
                    tracing::warn!(path = %sink.path().display(), %error, "cannot open the session log for reading back")
                }
                None => {}
            }
        }
        match result {
            Ok(()) => {
                if want_sync {
                    queue.synced = queue.written;
                }
                queue.failure = None;
                queue.answer(None);
            }
            Err(error) => {
                tracing::warn!(path = %sink.path().display(), %error, "session log write failed; the events stay queued");
                let failure = Failure::of(&error, sink.path());
                if !wrote {
                    // Back to the front, before anything appended meanwhile: order is kept.
                    let later = std::mem::replace(&mut queue.pending, batch);
                    queue.pending.extend(later);
                }
                queue.failure = Some(failure.clone());
                queue.answer(Some(&failure));
            }
        }
        if closing && (queue.pending.is_empty() || queue.failure.is_some()) {
            if !queue.pending.is_empty() {
                tracing::error!(path = %sink.path().display(), lost = queue.pending.len(), "session log closed with unwritten events");
            }
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(seq: u64) -> Arc<Event> {
        Arc::new(Event::new("x/y", seq, seq, json!({ "n": seq })).with_ignorable(true))
    }

    #[test]
    fn the_writer_drains_the_whole_queue_in_one_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s").join("session.jsonl");
        let header = crate::header::SessionHeader::new("s", None).to_json_line();
        let mut writer = LogWriter::new(
            FileSink::lazy(path.clone(), "s".into(), header),
            LineIndex::default(),
        );
        {
            // The writer thread starts at the first push and waits for the file meanwhile.
            let shared = writer.shared.clone();
            let _busy = lock(&shared.sink);
            for seq in 0..100 {
                writer.push(event(seq));
            }
        }
        writer.blocking(100, Level::Written).wait().unwrap();
        assert_eq!(lock(&writer.shared.queue).batches, 1);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 101);
        for (seq, line) in lines[1..].iter().enumerate() {
            assert_eq!(*line, event(seq as u64).to_json_line());
        }
        assert!(
            writer.barrier(100, Level::Written).is_none(),
            "a barrier that holds costs no wake-up"
        );
    }

    #[test]
    fn a_full_disk_fails_the_barrier_and_refuses_later_appends() {
        let full = Path::new("/dev/full");
        let sink = FileSink::existing(full.to_path_buf(), "full".into(), 0).unwrap();
        let mut writer = LogWriter::new(sink, LineIndex::default());
        writer.push(event(0));
        let err = writer.blocking(1, Level::Written).wait().unwrap_err();
        let SessionError::Io { path, source } = &err else {
            panic!("{err}")
        };
        assert_eq!(path, full);
        assert_eq!(source.kind(), std::io::ErrorKind::StorageFull, "{err}");
        assert!(writer.check().is_err(), "a poisoned writer refuses appends");
        assert!(
            writer.blocking(1, Level::Synced).wait().is_err(),
            "every barrier reports it until a retry succeeds"
        );
    }
}
