//! `SessionLog`: the append-only log one agent owns (§1.5, §1.6).

use dsh_sync::lock;
use std::collections::HashMap;
use std::collections::HashSet;
use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::thread::ThreadId;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use dsh_protocol::Message;
use dsh_protocol::MessageList;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::data::EndSeed;
use crate::data::EventData;
use crate::error::SessionError;
use crate::event::Event;
use crate::event::Kind;
use crate::event::SurfaceIntent;
use crate::event::kind;
use crate::header::SessionHeader;
use crate::payload::Payload;
use crate::sink::FileSink;
use crate::surface::Surface;
use crate::writer::Level;
use crate::writer::LogWriter;
use crate::writer::ReadBack;

/// A fold kept beside a log and brought up to date with [`SessionLog::catch_up`]: it has seen
/// the events before `next_seq`, and folds each later one with `apply`, in order. `Default` is
/// the fold of no event.
pub trait LogFold: Default {
    /// The seq of the first event the fold has not seen.
    fn next_seq(&mut self) -> &mut u64;
    /// Folds the next event.
    fn apply(&mut self, event: &Event);
}

/// Source of `time` for appended events (epoch ms). Tests inject a fixed clock.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

type Listener = Arc<dyn Fn(&Arc<Event>) + Send + Sync>;

/// Capacity of the `subscribe()` channel; a receiver further behind sees `Lagged`.
const BROADCAST_CAPACITY: usize = 4096;

/// A persisted log keeps only its recent events in memory, so a session of any length costs
/// the same: once `RESIDENT_HIGH` is reached (events, or bytes of their stored text), the oldest
/// events already in the file are dropped until both are under `RESIDENT_LOW`, and read back
/// from the file when asked for. The open step's events and the latest event of each type stay
/// in memory; a log without a file keeps everything.
const RESIDENT_LOW: Budget = Budget {
    events: 1024,
    bytes: 1 << 20,
};
const RESIDENT_HIGH: Budget = Budget {
    events: 2 * RESIDENT_LOW.events,
    bytes: 2 * RESIDENT_LOW.bytes,
};

/// A count of resident events and of the bytes of their stored texts.
#[derive(Debug, Clone, Copy)]
struct Budget {
    events: usize,
    bytes: usize,
}

impl Budget {
    const UNLIMITED: Self = Self {
        events: usize::MAX,
        bytes: usize::MAX,
    };

    /// The next eviction point from `events` and `bytes` resident now: the high mark, or a
    /// quarter of the low one further when more than that has to stay.
    fn next_after(events: usize, bytes: usize) -> Self {
        Self {
            events: RESIDENT_HIGH.events.max(events + RESIDENT_LOW.events / 4),
            bytes: RESIDENT_HIGH.bytes.max(bytes + RESIDENT_LOW.bytes / 4),
        }
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Where the log stands in the turn/step structure, folded from the events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnState {
    /// Number of the last `turn/start` (0 when none): the next turn is `last_turn + 1`.
    pub last_turn: u64,
    pub open_turn: Option<u64>,
    /// `(turn, step)` of the open step.
    pub open_step: Option<(u64, u64)>,
}

impl TurnState {
    fn fold(&mut self, event: &Event) {
        match event.kind.as_str() {
            kind::TURN_START => {
                let turn = event.turn().unwrap_or(self.last_turn + 1);
                self.last_turn = turn;
                self.open_turn = Some(turn);
                self.open_step = None;
            }
            kind::TURN_END => {
                self.open_turn = None;
                self.open_step = None;
            }
            kind::STEP_START => {
                self.open_step = Some((event.turn().unwrap_or(0), event.step().unwrap_or(0)))
            }
            kind::STEP_END => self.open_step = None,
            _ => {}
        }
    }
}

/// Removes a live id from its store's registry when the last handle of the log goes away.
#[derive(Debug)]
pub(crate) struct LiveGuard {
    pub(crate) ids: Arc<Mutex<HashSet<String>>>,
    pub(crate) id: String,
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        lock(&self.ids).remove(&self.id);
    }
}

/// Unregisters an `on_event` listener when dropped.
#[must_use = "dropping a Subscription unregisters the listener immediately"]
pub struct Subscription {
    inner: std::sync::Weak<Inner>,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            lock(&inner.listeners).retain(|(id, _)| *id != self.id);
        }
    }
}

/// A non-owning [`SessionLog`] handle (for listeners and caches).
#[derive(Clone)]
pub struct WeakSessionLog {
    inner: std::sync::Weak<Inner>,
}

impl WeakSessionLog {
    /// The log, unless every strong handle is gone.
    pub fn upgrade(&self) -> Option<SessionLog> {
        self.inner.upgrade().map(|inner| SessionLog { inner })
    }
}

struct State {
    /// Events `evicted..` in seq order: every event, unless older ones were evicted.
    resident: VecDeque<Arc<Event>>,
    /// Events `0..evicted` are only in the file (see [`RESIDENT_LOW`]).
    evicted: u64,
    /// The bytes of the resident events' stored texts.
    resident_bytes: usize,
    /// The resident count or size at which eviction is tried next.
    evict_at: Budget,
    /// Seq of the open step's `step/start`: the step's events stay resident.
    open_step: Option<u64>,
    /// Resident events may still share the buffer of the file they were loaded from.
    holds_load_buffer: bool,
    /// Cached `events()` result while nothing is evicted; dropped on every append so old
    /// snapshots never grow.
    snapshot: Option<Arc<[Arc<Event>]>>,
    surface: Surface,
    turns: TurnState,
    /// The latest event of each type.
    last_by_kind: HashMap<Kind, Arc<Event>>,
    /// The writer thread of a persisted log (`None` in memory).
    writer: Option<LogWriter>,
    clock: Clock,
}

struct Inner {
    header: SessionHeader,
    first_live_seq: u64,
    state: Mutex<State>,
    /// Serialises append + publish so listeners see events in commit order.
    gate: Mutex<()>,
    publishing: Mutex<Option<ThreadId>>,
    listeners: Mutex<Vec<(u64, Listener)>>,
    next_listener: Mutex<u64>,
    tx: broadcast::Sender<Arc<Event>>,
    _live: Option<LiveGuard>,
}

/// The append-only event log of one session. Cheap to clone (one `Arc`); all clones are the
/// same log. Appends are serialised; reads take a short lock and never wait for listeners.
#[derive(Clone)]
pub struct SessionLog {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SessionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLog")
            .field("id", &self.inner.header.id)
            .field("len", &self.len())
            .finish()
    }
}

impl SessionLog {
    /// A fresh, unpersisted log with no seed.
    pub fn in_memory(header: SessionHeader) -> Self {
        Self::new(header, 0, State::new(None), None)
    }

    /// A log rebuilt from `seed` (replay, fork, resume without persistence), validated like
    /// appends (§1.10). Appends `session/end-seed` unless the seed already ends with it.
    pub fn from_seed(header: SessionHeader, seed: Vec<Event>) -> Result<Self, SessionError> {
        let log = Self::seeded(
            header,
            seed.into_iter().map(Arc::new).collect(),
            None,
            None,
            true,
        )?;
        log.mark_end_of_seed()?;
        Ok(log)
    }

    /// A log over `seed`. With a sink, the sink's file already holds the first events of the
    /// seed, one per entry of the starts (where each one's line starts in the file).
    pub(crate) fn seeded(
        header: SessionHeader,
        seed: Vec<Arc<Event>>,
        sink: Option<(FileSink, crate::line_index::LineIndex)>,
        live: Option<LiveGuard>,
        check_lossless: bool,
    ) -> Result<Self, SessionError> {
        let (sink, persisted) = match sink {
            Some((sink, starts)) => {
                let persisted = starts.len();
                (Some(LogWriter::new(sink, starts)), persisted)
            }
            None => (None, 0),
        };
        let mut state = State::new(sink);
        state.resident.reserve(seed.len() + 1);
        // Nothing is evicted while seeding: whoever opens a resumed log (the agent's folds, a
        // replay to the editor) reads it whole at once, from memory. See `evict_at` below.
        state.evict_at = Budget::UNLIMITED;
        for (index, event) in seed.into_iter().enumerate() {
            if event.seq != index as u64 {
                return Err(SessionError::SeedGap {
                    index: index as u64,
                    seq: event.seq,
                });
            }
            if check_lossless && !dsh_schema::is_lossless(&event.data) {
                return Err(SessionError::NotLossless {
                    kind: event.kind.to_string(),
                });
            }
            let plan = state.surface.plan(&|seq| state.event(seq), &event)?;
            state.commit(event, plan);
        }
        // Seeds of a fresh file and a resume's crash repair are committed but not stored yet:
        // they go out with the first batch.
        let unstored: Vec<Arc<Event>> = state
            .resident
            .iter()
            .filter(|e| e.seq >= persisted)
            .cloned()
            .collect();
        if let Some(writer) = state.writer.as_mut() {
            writer.queue_quietly(&unstored);
        }
        // A long resumed log shrinks to the resident tail once the session has moved on.
        state.evict_at = Budget::next_after(state.resident.len(), state.resident_bytes);
        // A resume's events, or a fork's copied from a stored session, share a load's buffer.
        state.holds_load_buffer = !state.resident.is_empty();
        let first_live_seq = state.len();
        Ok(Self::new(header, first_live_seq, state, live))
    }

    /// Appends the `session/end-seed` marker a seeded log needs (§1.10).
    pub(crate) fn mark_end_of_seed(&self) -> Result<(), SessionError> {
        let last_is_marker = lock(&self.inner.state)
            .resident
            .back()
            .is_some_and(|e| e.kind == kind::END_SEED);
        if !last_is_marker {
            self.append_data(&EndSeed {}, None)?;
        }
        Ok(())
    }

    fn new(
        header: SessionHeader,
        first_live_seq: u64,
        state: State,
        live: Option<LiveGuard>,
    ) -> Self {
        let (tx, _) = broadcast::channel(BROADCAST_CAPACITY);
        Self {
            inner: Arc::new(Inner {
                header,
                first_live_seq,
                state: Mutex::new(state),
                gate: Mutex::new(()),
                publishing: Mutex::new(None),
                listeners: Mutex::new(Vec::new()),
                next_listener: Mutex::new(0),
                tx,
                _live: live,
            }),
        }
    }

    pub fn id(&self) -> &str {
        &self.inner.header.id
    }

    pub fn header(&self) -> &SessionHeader {
        &self.inner.header
    }

    /// `seed.len()`: the seq of the first event this instance wrote (0 without a seed).
    pub fn first_live_seq(&self) -> u64 {
        self.inner.first_live_seq
    }

    /// The backing file, when persisted.
    pub fn path(&self) -> Option<PathBuf> {
        lock(&self.inner.state)
            .writer
            .as_ref()
            .map(|w| w.path().to_path_buf())
    }

    /// Replaces the clock that stamps `time` on later appends.
    pub fn set_clock(&self, clock: Clock) {
        lock(&self.inner.state).clock = clock;
    }

    /// Appends one event with `seq = len()` and `time = now`.
    ///
    /// Rejects, leaving the log and its file unchanged: data that is not lossless JSON, a
    /// surface intent on a non-surface type or none on a surface type, bad `sourceEventSeqs`,
    /// an invalid `replace`, a surface event whose data is not a message of the right role, a
    /// `request/header` without provider and model, an append from inside an `on_event`
    /// listener of this log, and any append while the log's writer holds a failed write (the
    /// error of that write; the append also asks the writer to retry).
    ///
    /// Never does I/O: a persisted log queues the event for its writer thread, which writes
    /// batches in seq order (`step/end` and `turn/end` batches are also fsynced). Wait on
    /// [`SessionLog::written`] or [`SessionLog::sync`] for the file to hold it. Listeners are
    /// notified only after the commit.
    pub fn append(
        &self,
        kind: impl Into<Kind>,
        data: Value,
        surface: Option<SurfaceIntent>,
    ) -> Result<Arc<Event>, SessionError> {
        self.append_inner(kind.into(), data, surface, false, None)
    }

    /// Appends a non-surface event marked `ignorable: true` (readers that do not know its type
    /// may skip it).
    pub fn append_ignorable(
        &self,
        kind: impl Into<Kind>,
        data: Value,
    ) -> Result<Arc<Event>, SessionError> {
        self.append_inner(kind.into(), data, None, true, None)
    }

    /// Appends a typed event.
    pub fn append_data<T: EventData>(
        &self,
        data: &T,
        surface: Option<SurfaceIntent>,
    ) -> Result<Arc<Event>, SessionError> {
        let value = serde_json::to_value(data)
            .map_err(|e| SessionError::invalid(T::KIND, e.to_string()))?;
        // `to_value` writes NaN/±Infinity as `null`; refuse instead of storing a changed value.
        if crate::finite::contains_null(&value) && crate::finite::has_non_finite(data) {
            return Err(SessionError::NotLossless {
                kind: T::KIND.to_owned(),
            });
        }
        self.append_inner(Kind::new(T::KIND), value, surface, false, None)
    }

    fn append_inner(
        &self,
        kind: Kind,
        data: Value,
        surface: Option<SurfaceIntent>,
        ignorable: bool,
        time: Option<u64>,
    ) -> Result<Arc<Event>, SessionError> {
        let me = std::thread::current().id();
        if *lock(&self.inner.publishing) == Some(me) {
            return Err(SessionError::Reentrant {
                id: self.inner.header.id.clone(),
            });
        }
        let _gate = lock(&self.inner.gate);
        if !dsh_schema::is_lossless(&data) {
            return Err(SessionError::NotLossless {
                kind: kind.to_string(),
            });
        }
        let listeners: Vec<Listener> = lock(&self.inner.listeners)
            .iter()
            .map(|(_, l)| l.clone())
            .collect();
        let event = {
            let mut guard = lock(&self.inner.state);
            let state = &mut *guard;
            let event = Event::new(
                kind,
                state.len(),
                time.unwrap_or_else(|| (state.clock)()),
                compact(data),
            )
            .with_ignorable(ignorable)
            .with_intent(surface);
            let plan = state.surface.plan(&|seq| state.event(seq), &event)?;
            if let Some(writer) = state.writer.as_mut() {
                writer.check()?;
            }
            let event = Arc::new(event);
            state.commit(event.clone(), plan);
            if let Some(writer) = state.writer.as_mut() {
                writer.push(event.clone());
            }
            event
        };
        self.publish(me, &listeners, &event);
        Ok(event)
    }

    fn publish(&self, me: ThreadId, listeners: &[Listener], event: &Arc<Event>) {
        *lock(&self.inner.publishing) = Some(me);
        for listener in listeners {
            if std::panic::catch_unwind(AssertUnwindSafe(|| listener(event))).is_err() {
                tracing::warn!(session = %self.inner.header.id, seq = event.seq, kind = %event.kind, "session event listener panicked; continuing");
            }
        }
        *lock(&self.inner.publishing) = None;
        // No receivers is not an error: nobody is watching.
        let _ = self.inner.tx.send(event.clone());
    }

    /// A snapshot of the whole log; a returned snapshot never grows. O(len): in a long
    /// session it reads the events no longer in memory back from the file, so it is for
    /// whole-history readers (fork, replay, export). Per-step readers use
    /// [`SessionLog::events_since`] from a recent seq, [`SessionLog::last_of_kind`] or
    /// [`SessionLog::last`].
    ///
    /// Fails only when an evicted event cannot be read back ([`SessionError::ReadBack`],
    /// [`SessionError::Io`]): the file was changed or damaged under the live log.
    pub fn events(&self) -> Result<Arc<[Arc<Event>]>, SessionError> {
        {
            let mut state = lock(&self.inner.state);
            if state.evicted == 0 {
                if let Some(snapshot) = &state.snapshot {
                    return Ok(snapshot.clone());
                }
                let snapshot: Arc<[Arc<Event>]> = state.resident.iter().cloned().collect();
                state.snapshot = Some(snapshot.clone());
                return Ok(snapshot);
            }
        }
        self.events_since(0).map(Arc::from)
    }

    /// Events with `seq >= from`. Cheap for a recent `from`; events no longer in memory are
    /// read back from the file (and can fail as [`SessionLog::events`] does).
    pub fn events_since(&self, from: u64) -> Result<Vec<Arc<Event>>, SessionError> {
        let (resident, cold) = {
            let state = lock(&self.inner.state);
            let resident: Vec<Arc<Event>> = state.resident_since(from).cloned().collect();
            (resident, state.cold(from, state.evicted))
        };
        match cold {
            None => Ok(resident),
            Some(cold) => {
                let mut events = cold.read()?;
                events.extend(resident);
                Ok(events)
            }
        }
    }

    /// Calls `visit` with every event with `seq >= from`, in order, reading the ones no longer
    /// in memory back from the file a window at a time: a fold over a long stretch of history
    /// (a turn's usage, its endings) without holding all of it at once. Fails as
    /// [`SessionLog::events`] does, after visiting what it could read.
    pub fn visit_since(
        &self,
        from: u64,
        mut visit: impl FnMut(&Arc<Event>),
    ) -> Result<(), SessionError> {
        let (resident, cold) = {
            let state = lock(&self.inner.state);
            let resident: Vec<Arc<Event>> = state.resident_since(from).cloned().collect();
            (resident, state.cold(from, state.evicted))
        };
        if let Some(Cold { reader, from, to }) = cold {
            let mut at = from;
            while at < to {
                let end = to.min(at + RESIDENT_LOW.events as u64);
                reader.read(at, end)?.iter().for_each(&mut visit);
                at = end;
            }
        }
        resident.iter().for_each(visit);
        Ok(())
    }

    /// Brings `fold` up to date with the log: folds every event it has not seen, a window at a
    /// time when a long stretch has to be read back. A log shorter than what the fold has seen
    /// is another log under the same id (a reload, a fork): the fold starts over. On an error
    /// the fold keeps what it folded, and the next call resumes after it.
    pub fn catch_up<F: LogFold>(&self, fold: &mut F) -> Result<(), SessionError> {
        if self.len() < *fold.next_seq() {
            *fold = F::default();
        }
        let from = *fold.next_seq();
        self.visit_since(from, |event| {
            *fold.next_seq() = event.seq + 1;
            fold.apply(event);
        })
    }

    /// The event `seq`, `None` past the end. An event no longer in memory is read back from
    /// the file (and can fail as [`SessionLog::events`] does).
    pub fn get(&self, seq: u64) -> Result<Option<Arc<Event>>, SessionError> {
        let cold = {
            let state = lock(&self.inner.state);
            if let Some(event) = state.resident(seq) {
                return Ok(Some(event.clone()));
            }
            match state.cold(seq, seq.saturating_add(1).min(state.evicted)) {
                Some(cold) => cold,
                None => return Ok(None),
            }
        };
        Ok(cold.read()?.pop())
    }

    pub fn last(&self) -> Option<Arc<Event>> {
        lock(&self.inner.state).resident.back().cloned()
    }

    pub fn len(&self) -> u64 {
        lock(&self.inner.state).len()
    }

    /// How many events are in memory.
    #[cfg(test)]
    pub(crate) fn resident_len(&self) -> usize {
        lock(&self.inner.state).resident.len()
    }

    /// The bytes of the stored texts of the events in memory.
    #[cfg(test)]
    pub(crate) fn resident_bytes(&self) -> usize {
        lock(&self.inner.state).resident_bytes
    }

    /// Whether any event in memory still shares a load's buffer.
    #[cfg(test)]
    pub(crate) fn holds_load_buffer(&self) -> bool {
        let state = lock(&self.inner.state);
        state
            .resident
            .iter()
            .chain(state.last_by_kind.values())
            .any(|e| e.detached().is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Model history: every surface node's message, minus empty assistant messages (§1.6).
    /// O(1): the list is maintained at append and shared; the messages are immutable
    /// projections cached at append, and keep their identity until a `replace` removes them.
    pub fn derive_messages(&self) -> MessageList {
        lock(&self.inner.state).surface.messages()
    }

    /// The latest message of the derived history whose source has this `kind` (O(1)).
    pub fn latest_message_of_kind(&self, kind: &str) -> Option<Arc<Message>> {
        lock(&self.inner.state).surface.latest_of_kind(kind)
    }

    /// The latest message of the derived history whose source is `{kind:"plugin", plugin}`
    /// (O(1)).
    pub fn latest_message_from_plugin(&self, plugin: &str) -> Option<Arc<Message>> {
        lock(&self.inner.state).surface.latest_from_plugin(plugin)
    }

    /// The latest event of type `kind` (O(1), always in memory).
    pub fn last_of_kind(&self, kind: &str) -> Option<Arc<Event>> {
        lock(&self.inner.state).last_by_kind.get(kind).cloned()
    }

    /// Seqs of the current surface nodes, in surface order.
    pub fn surface_seqs(&self) -> Vec<u64> {
        lock(&self.inner.state).surface.seqs()
    }

    /// Incremented by every committed `replace`.
    pub fn replace_generation(&self) -> u64 {
        lock(&self.inner.state).surface.generation()
    }

    pub fn turn_state(&self) -> TurnState {
        lock(&self.inner.state).turns
    }

    /// The latest `request/header` event (`foldRequestHeader`).
    pub fn request_header(&self) -> Option<Arc<Event>> {
        self.last_of_kind(kind::REQUEST_HEADER)
    }

    /// The latest `request/context` event, kept as the log grows (no scan per request).
    pub fn request_context(&self) -> Option<Arc<Event>> {
        self.last_of_kind(kind::REQUEST_CONTEXT)
    }

    /// A receiver of every event committed from now on. A receiver that falls more than
    /// 4096 events behind gets `RecvError::Lagged` (and should re-read `events_since`).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.inner.tx.subscribe()
    }

    /// Registers a synchronous listener, called after each commit in registration order on the
    /// appending thread. A panicking listener is logged and skipped; an append from inside a
    /// listener fails with [`SessionError::Reentrant`]. A listener that needs the log should
    /// hold a [`WeakSessionLog`]: a strong clone would keep the log (and its live id) alive.
    pub fn on_event(&self, listener: impl Fn(&Arc<Event>) + Send + Sync + 'static) -> Subscription {
        let id = {
            let mut next = lock(&self.inner.next_listener);
            *next += 1;
            *next
        };
        lock(&self.inner.listeners).push((id, Arc::new(listener)));
        Subscription {
            inner: Arc::downgrade(&self.inner),
            id,
        }
    }

    /// A handle that does not keep the log alive.
    pub fn downgrade(&self) -> WeakSessionLog {
        WeakSessionLog {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// Makes the session exist on disk now, even before its first event: a session created
    /// in one process can then be listed and resumed from another. A no-op for in-memory logs
    /// and for files already written. Blocks until the writer has created the file.
    pub fn persist(&self) -> Result<(), SessionError> {
        self.blocking(Level::Materialized).wait()
    }

    /// Durability checkpoint: blocks until every event appended so far is written and
    /// fsynced (no-op for in-memory logs), and returns the error of a failed write.
    /// Async code should await [`SessionLog::sync`] instead.
    pub fn flush(&self) -> Result<(), SessionError> {
        self.blocking(Level::Synced).wait()
    }

    /// The durability barrier: resolves once every event appended before the call is written
    /// and fsynced (at once for in-memory logs, and without waking the writer when nothing is
    /// outstanding). A failed write resolves it with that write's error: whoever waits (the
    /// loop at a step or turn end) must not treat the events as committed to disk.
    pub fn sync(&self) -> impl Future<Output = Result<(), SessionError>> + Send + 'static + use<> {
        self.barrier(Level::Synced)
    }

    /// Like [`SessionLog::sync`] without the fsync: resolves once every event appended before
    /// the call is in the file, so a SIGKILL of the process can no longer lose it (power loss
    /// still can). The loop waits on it between logging a `tool/call` and running the tool.
    pub fn written(
        &self,
    ) -> impl Future<Output = Result<(), SessionError>> + Send + 'static + use<> {
        self.barrier(Level::Written)
    }

    fn barrier(
        &self,
        level: Level,
    ) -> impl Future<Output = Result<(), SessionError>> + Send + 'static + use<> {
        let pending = {
            let mut guard = lock(&self.inner.state);
            let state = &mut *guard;
            let upto = state.len();
            state
                .writer
                .as_mut()
                .and_then(|writer| writer.barrier(upto, level))
        };
        async move {
            match pending {
                Some(pending) => pending.await,
                None => Ok(()),
            }
        }
    }

    fn blocking(&self, level: Level) -> crate::writer::Blocking {
        let mut guard = lock(&self.inner.state);
        let state = &mut *guard;
        let upto = state.len();
        match state.writer.as_mut() {
            Some(writer) => writer.blocking(upto, level),
            None => crate::writer::Blocking::ready(),
        }
    }
}

/// An appended event's data as it is kept for the rest of the session: its compact JSON text
/// (the bytes the writer puts in the file), the tree dropped. Nearly every event (a streamed
/// chunk above all) is never read as a tree again; one that is builds it from the text on first
/// use, as a loaded event does.
fn compact(data: Value) -> Payload {
    match serde_json::to_string(&data) {
        Ok(text) => Payload::from_text(text),
        Err(_) => data.into(),
    }
}

/// Events `from..to` to read back from the file, outside the log's lock.
struct Cold {
    reader: ReadBack,
    from: u64,
    to: u64,
}

impl Cold {
    fn read(self) -> Result<Vec<Arc<Event>>, SessionError> {
        self.reader.read(self.from, self.to)
    }
}

impl State {
    fn new(writer: Option<LogWriter>) -> Self {
        Self {
            resident: VecDeque::new(),
            evicted: 0,
            resident_bytes: 0,
            evict_at: RESIDENT_HIGH,
            open_step: None,
            holds_load_buffer: false,
            snapshot: None,
            surface: Surface::default(),
            turns: TurnState::default(),
            last_by_kind: HashMap::new(),
            writer,
            clock: Arc::new(now_ms),
        }
    }

    fn len(&self) -> u64 {
        self.evicted + self.resident.len() as u64
    }

    /// The resident events with `seq >= from`.
    fn resident_since(&self, from: u64) -> std::collections::vec_deque::Iter<'_, Arc<Event>> {
        let skip = usize::try_from(from.saturating_sub(self.evicted)).unwrap_or(usize::MAX);
        self.resident.range(skip.min(self.resident.len())..)
    }

    fn resident(&self, seq: u64) -> Option<&Arc<Event>> {
        let index = usize::try_from(seq.checked_sub(self.evicted)?).ok()?;
        self.resident.get(index)
    }

    /// The events of `from..to` that are only in the file, as a read to make without the lock.
    fn cold(&self, from: u64, to: u64) -> Option<Cold> {
        let to = to.min(self.evicted);
        if from >= to {
            return None;
        }
        let reader = self.writer.as_ref()?.read_back();
        Some(Cold { reader, from, to })
    }

    /// The event `seq`, read back from the file when it is no longer in memory (under the
    /// log's lock: only a `replace` of an old tool result asks for that).
    fn event(&self, seq: u64) -> Result<Option<Arc<Event>>, SessionError> {
        if let Some(event) = self.resident(seq) {
            return Ok(Some(event.clone()));
        }
        match self.cold(seq, seq.saturating_add(1)) {
            Some(cold) => Ok(cold.read()?.pop()),
            None => Ok(None),
        }
    }

    fn commit(&mut self, event: Arc<Event>, plan: crate::surface::Plan) {
        self.surface.apply(plan);
        self.turns.fold(&event);
        match event.kind.as_str() {
            kind::STEP_START => self.open_step = Some(event.seq),
            kind::STEP_END | kind::TURN_START | kind::TURN_END => self.open_step = None,
            _ => {}
        }
        self.last_by_kind.insert(event.kind, event.clone());
        self.resident_bytes += event.data.stored_len();
        self.resident.push_back(event);
        self.snapshot = None;
        if self.resident.len() >= self.evict_at.events || self.resident_bytes >= self.evict_at.bytes
        {
            self.evict();
        }
    }

    /// Drops the oldest resident events that the file holds until both counts are under
    /// [`RESIDENT_LOW`] (see there). When the open step or a lagging writer holds more, the next
    /// try waits for a quarter of the low mark to arrive, so a long step does not ask the writer
    /// on every append.
    fn evict(&mut self) {
        let Some(writer) = &self.writer else {
            self.evict_at = Budget::UNLIMITED;
            return;
        };
        let limit = writer.readable().min(self.open_step.unwrap_or(u64::MAX));
        while let Some(front) = self.resident.front() {
            let over = self.resident.len() > RESIDENT_LOW.events
                || self.resident_bytes > RESIDENT_LOW.bytes;
            if !over || front.seq >= limit {
                break;
            }
            self.resident_bytes -= front.data.stored_len();
            self.resident.pop_front();
            self.evicted += 1;
        }
        self.evict_at = Budget::next_after(self.resident.len(), self.resident_bytes);
        if self.holds_load_buffer && self.evicted > 0 {
            self.detach_loaded();
            self.holds_load_buffer = false;
        }
    }

    /// Once a resumed log evicted part of what it loaded: the events that stay in memory get
    /// texts of their own, so the buffer of the whole file they were loaded from is freed.
    fn detach_loaded(&mut self) {
        for event in self.resident.iter_mut() {
            if let Some(detached) = event.detached() {
                *event = Arc::new(detached);
            }
        }
        let (resident, evicted) = (&self.resident, self.evicted);
        for event in self.last_by_kind.values_mut() {
            let same = event
                .seq
                .checked_sub(evicted)
                .and_then(|index| usize::try_from(index).ok())
                .and_then(|index| resident.get(index));
            match same {
                Some(same) => *event = same.clone(),
                None => {
                    if let Some(detached) = event.detached() {
                        *event = Arc::new(detached);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
