//! `JsonlStore`: JSONL sessions under `$DSH_HOME/sessions` (§1.9, §5).

use std::collections::HashSet;
use std::fs::OpenOptions;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;

use serde_json::Value;

use crate::error::SessionError;
use crate::event::Event;
use crate::event::kind;
use crate::header::SessionHeader;
use crate::jsonl::LoadedSession;
use crate::jsonl::parse_log;
use crate::jsonl::read_log_file;
use crate::log::LiveGuard;
use crate::log::SessionLog;
use crate::log::now_ms;
use crate::paths::LOG_FILE_NAME;
use crate::paths::encode_segment;
use crate::paths::project_dir_name;
use crate::repair::crash_repair;

/// What `create` needs besides the store. `Default` is a fresh top-level session with a
/// minted `session-<uuid>` id and no cwd.
#[derive(Debug, Clone, Default)]
pub struct CreateOptions {
    pub id: Option<String>,
    /// Must be absolute.
    pub cwd: Option<PathBuf>,
    pub parent_session: Option<String>,
    pub seed_length: Option<u64>,
    pub origin: Option<String>,
    pub delegation_depth: u64,
    pub agent_preset: Option<Value>,
    /// Events to start from (replay); validated like appends, followed by `session/end-seed`.
    pub seed: Option<Vec<Event>>,
}

/// One stored session as `dsh sessions list` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    pub id: String,
    pub created_at: u64,
    pub cwd: Option<String>,
    /// The latest `session/title`, if any.
    pub title: Option<String>,
    /// Stored events (packed rows counted per member; a torn tail is not counted).
    pub event_count: u64,
    /// `turn/start` events stored.
    pub turns: u64,
    pub parent_session: Option<String>,
    pub path: PathBuf,
}

/// The JSONL session store. Cheap to clone; clones share the registry of ids that are live
/// (open for appending) in this process.
#[derive(Debug, Clone)]
pub struct JsonlStore {
    root: PathBuf,
    live: Arc<Mutex<HashSet<String>>>,
}

impl JsonlStore {
    /// A store under `home` (`$DSH_HOME`): sessions live in `home/sessions`.
    pub fn new(home: impl Into<PathBuf>) -> Self {
        Self {
            root: home.into().join("sessions"),
            live: Arc::default(),
        }
    }

    /// The product store: `$DSH_HOME`, else `$HOME/.dsh`.
    pub fn from_env() -> Result<Self, SessionError> {
        if let Some(home) = std::env::var_os("DSH_HOME").filter(|h| !h.is_empty()) {
            return Ok(Self::new(home));
        }
        match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            Some(home) => Ok(Self::new(PathBuf::from(home).join(".dsh"))),
            None => Err(SessionError::InvalidInput {
                field: "home",
                reason: "neither DSH_HOME nor HOME is set".into(),
            }),
        }
    }

    /// `<home>/sessions`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Creates a new session. The session directory is created now (so an unwritable home
    /// fails here, with the path); the file appears with the first append.
    pub fn create(&self, options: CreateOptions) -> Result<SessionLog, SessionError> {
        let cwd = match &options.cwd {
            Some(cwd) if !cwd.is_absolute() => {
                return Err(SessionError::InvalidInput {
                    field: "cwd",
                    reason: format!("{} is not absolute", cwd.display()),
                });
            }
            Some(cwd) => Some(cwd.to_string_lossy().into_owned()),
            None => None,
        };
        let id = options
            .id
            .unwrap_or_else(|| format!("session-{}", uuid::Uuid::new_v4()));
        let header = SessionHeader {
            id,
            created_at: now_ms(),
            cwd,
            parent_session: options.parent_session,
            seed_length: options.seed_length,
            origin: options.origin,
            delegation_depth: options.delegation_depth,
            agent_preset: options.agent_preset,
        };
        let seed = options.seed.map(|s| s.into_iter().map(Arc::new).collect());
        self.create_with(header, seed, true)
    }

    fn create_with(
        &self,
        header: SessionHeader,
        seed: Option<Vec<Arc<Event>>>,
        check_lossless: bool,
    ) -> Result<SessionLog, SessionError> {
        let path = self.path_for(&header.id, header.cwd.as_deref())?;
        let live = self.claim(&header.id)?;
        if self.find(&header.id)?.is_some() {
            return Err(SessionError::AlreadyExists { id: header.id });
        }
        if let Some(dir) = path.parent() {
            create_private_dir(dir)?;
        }
        let sink = crate::sink::FileSink::lazy(path, header.id.clone(), header.to_json_line());
        let seeded = seed.is_some();
        let log = SessionLog::seeded(
            header,
            seed.unwrap_or_default(),
            Some((sink, crate::line_index::LineIndex::default())),
            Some(live),
            check_lossless,
        )?;
        if seeded {
            log.mark_end_of_seed()?;
            log.flush()?;
        }
        Ok(log)
    }

    /// Re-opens a stored session for appending: truncates a torn tail, appends the crash
    /// repair of §5.3 and `session/end-seed` (unless already last), fsyncs, and continues
    /// writing the same file. Turn numbers continue from the log.
    pub fn resume(&self, id: &str) -> Result<SessionLog, SessionError> {
        let path = self
            .find(id)?
            .ok_or_else(|| SessionError::NotFound { id: id.to_owned() })?;
        let live = self.claim(id)?;
        let bytes = std::fs::read(&path).map_err(|e| SessionError::io(&path, e))?;
        let parsed = parse_log(&path, bytes, true)?;
        if parsed.header.id != id {
            return Err(SessionError::Corrupt {
                path,
                line: 1,
                reason: format!(
                    "header id {:?} does not match the session directory {id:?}",
                    parsed.header.id
                ),
            });
        }
        if parsed.valid_len < parsed.file_len {
            tracing::warn!(path = %path.display(), dropped = parsed.file_len - parsed.valid_len, "truncating a torn session log tail");
            let file = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|e| SessionError::io(&path, e))?;
            file.set_len(parsed.valid_len)
                .and_then(|()| file.sync_all())
                .map_err(|e| SessionError::io(&path, e))?;
        }
        let mut seed = parsed.events;
        seed.extend(crash_repair(&seed).into_iter().map(Arc::new));
        let sink = crate::sink::FileSink::existing(path, id.to_owned(), parsed.valid_len)?;
        let sink = Some((sink, parsed.starts));
        let log = SessionLog::seeded(parsed.header, seed, sink, Some(live), false)?;
        // Writes the repair (if any) together with the marker, then makes both durable.
        log.mark_end_of_seed()?;
        log.flush()?;
        Ok(log)
    }

    /// Reads a stored session without changing it. Crash repair is computed
    /// (`LoadedSession::repair`) but not applied to `events`.
    pub fn load(&self, id: &str) -> Result<LoadedSession, SessionError> {
        let path = self
            .find(id)?
            .ok_or_else(|| SessionError::NotFound { id: id.to_owned() })?;
        read_log_file(&path)
    }

    /// Forks the stored session `source_id`: the child starts from events `0..=boundary`
    /// (default: the last event) and is persisted at once (header + prefix + end-seed).
    pub fn fork(
        &self,
        source_id: &str,
        boundary: Option<u64>,
        child_id: Option<String>,
    ) -> Result<SessionLog, SessionError> {
        let source = self.load(source_id)?;
        self.fork_events(&source.header, &source.events, boundary, child_id)
    }

    /// Forks a live log (same rules as [`JsonlStore::fork`]).
    pub fn fork_log(
        &self,
        source: &SessionLog,
        boundary: Option<u64>,
        child_id: Option<String>,
    ) -> Result<SessionLog, SessionError> {
        let events = source.events()?;
        self.fork_events(source.header(), &events, boundary, child_id)
    }

    fn fork_events(
        &self,
        source: &SessionHeader,
        events: &[Arc<Event>],
        boundary: Option<u64>,
        child_id: Option<String>,
    ) -> Result<SessionLog, SessionError> {
        let prefix = fork_prefix(events, boundary)?;
        let header = SessionHeader {
            id: child_id.unwrap_or_else(|| format!("session-{}", uuid::Uuid::new_v4())),
            created_at: now_ms(),
            cwd: source.cwd.clone(),
            parent_session: Some(source.id.clone()),
            seed_length: Some(prefix.len() as u64),
            origin: None,
            delegation_depth: source.delegation_depth,
            agent_preset: None,
        };
        self.create_with(header, Some(prefix.to_vec()), false)
    }

    /// Deletes the stored session `id` (its directory). A session open for appending in this
    /// process is refused.
    pub fn remove(&self, id: &str) -> Result<(), SessionError> {
        let _live = self.claim(id)?;
        let path = self
            .find(id)?
            .ok_or_else(|| SessionError::NotFound { id: id.to_owned() })?;
        let dir = path.parent().unwrap_or(&path);
        std::fs::remove_dir_all(dir).map_err(|e| SessionError::io(dir, e))
    }

    /// Every stored session, newest first. Unreadable entries are skipped with a warning.
    pub fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        crate::writer::settle_under(&self.root);
        let mut out = Vec::new();
        for project in read_dirs(&self.root)? {
            for session in read_dirs(&project)? {
                let path = session.join(LOG_FILE_NAME);
                if !path.is_file() {
                    continue;
                }
                match summarize(&path) {
                    Ok(summary) => out.push(summary),
                    Err(err) => {
                        tracing::warn!(path = %path.display(), error = %err, "skipping unreadable session")
                    }
                }
            }
        }
        out.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(out)
    }

    /// The header of every stored session (only each file's first line is read), with its
    /// path. Unreadable entries are skipped with a warning.
    pub fn headers(&self) -> Result<Vec<(SessionHeader, PathBuf)>, SessionError> {
        use std::io::BufRead;
        crate::writer::settle_under(&self.root);
        let mut out = Vec::new();
        for project in read_dirs(&self.root)? {
            for session in read_dirs(&project)? {
                let path = session.join(LOG_FILE_NAME);
                let Ok(file) = std::fs::File::open(&path) else {
                    continue;
                };
                let mut line = Vec::new();
                let read = std::io::BufReader::new(file).read_until(b'\n', &mut line);
                match read.map_err(|e| SessionError::io(&path, e)).and_then(|_| {
                    SessionHeader::parse_line(&path, line.strip_suffix(b"\n").unwrap_or(&line))
                }) {
                    Ok(header) => out.push((header, path)),
                    Err(err) => {
                        tracing::warn!(path = %path.display(), error = %err, "skipping unreadable session header")
                    }
                }
            }
        }
        Ok(out)
    }

    /// The stored log file of `id`, searched across project directories.
    pub fn find(&self, id: &str) -> Result<Option<PathBuf>, SessionError> {
        let segment = encode_segment(id)?;
        crate::writer::settle_session(&self.root, &segment);
        for project in read_dirs(&self.root)? {
            let dir = project.join(&segment);
            let path = dir.join(LOG_FILE_NAME);
            if path.is_file() {
                return Ok(Some(path));
            }
            let compressed = dir.join(format!("{LOG_FILE_NAME}.zstd"));
            if compressed.is_file() {
                // A root holds one encoding only; this build writes and reads plain JSONL.
                return Err(SessionError::InvalidInput {
                    field: "session log",
                    reason: format!(
                        "{} is zstd-compressed; this build reads uncompressed session.jsonl only",
                        compressed.display()
                    ),
                });
            }
        }
        Ok(None)
    }

    /// Where the log of `id` with `cwd` is (or will be) stored.
    pub fn path_for(&self, id: &str, cwd: Option<&str>) -> Result<PathBuf, SessionError> {
        Ok(self
            .root
            .join(project_dir_name(cwd))
            .join(encode_segment(id)?)
            .join(LOG_FILE_NAME))
    }

    /// Reserves `id` as live in this process until the returned guard's log is dropped.
    fn claim(&self, id: &str) -> Result<LiveGuard, SessionError> {
        let mut live = dsh_sync::lock(&self.live);
        if !live.insert(id.to_owned()) {
            return Err(SessionError::AlreadyExists { id: id.to_owned() });
        }
        Ok(LiveGuard {
            ids: self.live.clone(),
            id: id.to_owned(),
        })
    }
}

/// Creates `dir` and its missing parents with mode 0700: a session folder (its log, its spill
/// files) is its owner's only.
pub(crate) fn create_private_dir(dir: &Path) -> Result<(), SessionError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| SessionError::io(dir, e))
}

/// Subdirectories of `dir`; a missing `dir` has none.
fn read_dirs(dir: &Path) -> Result<Vec<PathBuf>, SessionError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(SessionError::io(dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| SessionError::io(dir, e))?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

/// A summary without decoding every event: the header, the last `session/title` line and the
/// last complete line's seq.
/// A stored session's summary, read line by line: memory is bounded by the longest line,
/// never by the log's length (a long session's log can be gigabytes). Only committed lines
/// count (a torn tail has no newline yet).
fn summarize(path: &Path) -> Result<SessionSummary, SessionError> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).map_err(|e| SessionError::io(path, e))?;
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, file);
    let io = |e| SessionError::io(path, e);
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).map_err(io)?;
    let header_line = line.strip_suffix(b"\n").unwrap_or_default();
    let header = SessionHeader::parse_line(path, header_line)?;
    let mut title = None;
    let mut turns = 0u64;
    let mut last = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(io)? == 0 {
            break;
        }
        let Some(row) = line.strip_suffix(b"\n") else {
            break;
        };
        if row.starts_with(br#"{"type":"session/title""#)
            && let Ok(event) = serde_json::from_slice::<Value>(row)
            && let Some(t) = event.pointer("/data/title").and_then(Value::as_str)
        {
            title = Some(t.to_owned());
        } else if row.starts_with(br#"{"type":"turn/start""#) {
            turns += 1;
        }
        if !row.is_empty() {
            std::mem::swap(&mut last, &mut line);
        }
    }
    let last = last.strip_suffix(b"\n").unwrap_or(&last);
    let event_count = match serde_json::from_slice::<Value>(last) {
        Ok(row) if !last.is_empty() => end_seq(&row).unwrap_or(0),
        _ => 0,
    };
    Ok(SessionSummary {
        id: header.id,
        created_at: header.created_at,
        cwd: header.cwd,
        title,
        event_count,
        turns,
        parent_session: header.parent_session,
        path: path.to_owned(),
    })
}

/// One past the last seq a stored row covers (plain event or packed row).
fn end_seq(row: &Value) -> Option<u64> {
    if let Some(seq) = row.get("seq").and_then(Value::as_u64) {
        return Some(seq + 1);
    }
    let seq0 = row.get("seq0").and_then(Value::as_u64)?;
    let data = row.get("data")?;
    let members = data
        .get("texts")
        .or_else(|| data.get("args"))
        .and_then(Value::as_array)?
        .len();
    Some(seq0 + members as u64)
}

/// The events a fork at `boundary` (default: the last event) starts from; a prefix that ends
/// inside a turn is refused.
pub(crate) fn fork_prefix(
    events: &[Arc<Event>],
    boundary: Option<u64>,
) -> Result<&[Arc<Event>], SessionError> {
    let len = events.len() as u64;
    let prefix = match (boundary, len) {
        (None, 0) => &events[..0],
        (None, _) => events,
        (Some(b), _) if b >= len => {
            return Err(SessionError::InvalidBoundary { boundary: b, len });
        }
        (Some(b), _) => &events[..=b as usize],
    };
    let last_marker = prefix
        .iter()
        .rev()
        .find(|e| e.kind == kind::TURN_START || e.kind == kind::TURN_END);
    if last_marker.is_some_and(|e| e.kind == kind::TURN_START) {
        return Err(SessionError::OpenTurn {
            boundary: boundary.unwrap_or(len.saturating_sub(1)),
        });
    }
    Ok(prefix)
}
