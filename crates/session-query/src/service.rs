//! The session query service (`sessionQuery`): the corpus of live and stored sessions, exact
//! reads, lineage, and literal-phrase full-text search over a SQLite FTS5 index. Trusted: it
//! authorizes nothing itself (the model tools do).

use dsh_sync::lock;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;

use dsh_session::Event;
use dsh_session::JsonlStore;
use dsh_session::WeakSessionLog;
use rusqlite::Connection;
use rusqlite::params;
use serde::Deserialize;
use serde::Serialize;

use crate::model::Analysis;
use crate::model::SurfaceClass;
use crate::model::searchable_text;

/// A service failure: one of the closed `SESSION_QUERY_*` codes and a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct QueryError {
    pub code: &'static str,
    pub message: String,
}

impl QueryError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// When the index opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpenAt {
    Startup,
    FirstSearch,
    /// Searches fail with `SESSION_QUERY_SEARCH_DISABLED`; exact reads still work.
    Never,
}

/// The SQLite backend's settings (`session-query-sqlite`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IndexConfig {
    /// `:memory:` or a file path (never the persistence folder itself).
    pub path: String,
    pub open_at: OpenAt,
    // Upstream's `defaultLimit` / `maxLimit` size the pages of its cursor search; dsh's search
    // tools answer in one page without cursors (capped by the tools' `max_search_results`), so
    // the keys would do nothing here and are refused as unknown instead of accepted and ignored.
    pub snippet_chars: usize,
    pub read_window_max: u64,
}

impl Default for IndexConfig {
    fn default() -> Self {
        Self {
            path: ":memory:".to_owned(),
            open_at: OpenAt::FirstSearch,
            snippet_chars: 240,
            read_window_max: 50,
        }
    }
}

/// A session's identity facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    pub id: String,
    pub created_at: u64,
    pub cwd: Option<String>,
    pub parent: Option<String>,
    pub live: bool,
    pub persisted: bool,
    path: Option<PathBuf>,
}

impl SessionRecord {
    /// The log file, when the session is stored.
    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }

    /// `live, persisted` | `live` | `persisted` | `unavailable`.
    pub fn availability(&self) -> &'static str {
        match (self.live, self.persisted) {
            (true, true) => "live, persisted",
            (true, false) => "live",
            (false, true) => "persisted",
            (false, false) => "unavailable",
        }
    }
}

/// A session's events with their analysis.
#[derive(Debug, Clone)]
pub struct SessionData {
    pub record: SessionRecord,
    pub events: Vec<Arc<Event>>,
    pub analysis: Analysis,
}

impl SessionData {
    /// The latest `session/title`, else `untitled`.
    pub fn title(&self) -> String {
        self.events
            .iter()
            .rev()
            .find(|e| e.kind == "session/title")
            .and_then(|e| e.data["title"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "untitled".to_owned())
    }
}

/// One event with its session and neighbours.
#[derive(Debug, Clone)]
pub struct EventWindow {
    pub data: SessionData,
    pub target: Arc<Event>,
    pub before: Vec<Arc<Event>>,
    pub after: Vec<Arc<Event>>,
}

/// Event-level filters (all optional, inclusive).
#[derive(Debug, Clone, Default)]
pub struct EventFilters {
    pub seq_from: Option<u64>,
    pub seq_to: Option<u64>,
    pub time_from: Option<i64>,
    pub time_to: Option<i64>,
    pub kinds: Option<Vec<String>>,
    pub surfaces: Option<Vec<SurfaceClass>>,
}

impl EventFilters {
    fn admits(&self, seq: u64, time: i64, kind: &str, surface: SurfaceClass) -> bool {
        self.seq_from.is_none_or(|f| seq >= f)
            && self.seq_to.is_none_or(|t| seq <= t)
            && self.time_from.is_none_or(|f| time >= f)
            && self.time_to.is_none_or(|t| time <= t)
            && self
                .kinds
                .as_ref()
                .is_none_or(|k| k.iter().any(|k| k == kind))
            && self.surfaces.as_ref().is_none_or(|s| s.contains(&surface))
    }
}

/// One matching event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventHit {
    pub session_id: String,
    pub seq: u64,
    pub kind: String,
    pub surface: SurfaceClass,
    pub time: u64,
    pub snippet: String,
    spans: usize,
    length: usize,
}

/// The corpus of live and persisted sessions, and the index over it.
pub struct SessionQuery {
    store: Option<JsonlStore>,
    live: Mutex<Vec<WeakSessionLog>>,
    config: IndexConfig,
    index: Mutex<Option<Index>>,
}

impl std::fmt::Debug for SessionQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionQuery").finish_non_exhaustive()
    }
}

fn index_failed(error: impl std::fmt::Display) -> QueryError {
    QueryError::new(
        "SESSION_QUERY_INDEX_FAILED",
        format!("session index failed: {error}"),
    )
}

impl SessionQuery {
    pub fn new(store: Option<JsonlStore>, config: IndexConfig) -> Result<Arc<Self>, QueryError> {
        let query = Arc::new(Self {
            store,
            live: Mutex::new(Vec::new()),
            config,
            index: Mutex::new(None),
        });
        if query.config.open_at == OpenAt::Startup {
            *lock(&query.index) = Some(Index::open(&query.config.path)?);
        }
        Ok(query)
    }

    pub fn config(&self) -> &IndexConfig {
        &self.config
    }

    /// Adds a live session to the corpus (held weakly: a closed session drops out).
    pub fn register_live(&self, log: &dsh_session::SessionLog) {
        let mut live = lock(&self.live);
        live.retain(|weak| weak.upgrade().is_some());
        live.push(log.downgrade());
    }

    /// Every session, newest first; a live one wins over its stored copy.
    pub fn list_sessions(&self) -> Vec<SessionRecord> {
        let mut records: HashMap<String, SessionRecord> = HashMap::new();
        if let Some(store) = &self.store
            && let Ok(summaries) = store.list()
        {
            for summary in summaries {
                records.insert(
                    summary.id.clone(),
                    SessionRecord {
                        id: summary.id,
                        created_at: summary.created_at,
                        cwd: summary.cwd,
                        parent: summary.parent_session,
                        live: false,
                        persisted: true,
                        path: Some(summary.path),
                    },
                );
            }
        }
        for log in lock(&self.live).iter().filter_map(WeakSessionLog::upgrade) {
            let header = log.header();
            let persisted = log.path().is_some_and(|p| p.exists());
            let entry = records
                .entry(header.id.clone())
                .or_insert_with(|| SessionRecord {
                    id: header.id.clone(),
                    created_at: header.created_at,
                    cwd: header.cwd.clone(),
                    parent: header.parent_session.clone(),
                    live: true,
                    persisted,
                    path: log.path(),
                });
            entry.live = true;
            entry.persisted = entry.persisted || persisted;
        }
        let mut list: Vec<SessionRecord> = records.into_values().collect();
        list.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
        list
    }

    pub fn record(&self, id: &str) -> Result<SessionRecord, QueryError> {
        self.list_sessions()
            .into_iter()
            .find(|r| r.id == id)
            .ok_or_else(|| {
                QueryError::new("SESSION_QUERY_SESSION_NOT_FOUND", "session was not found")
            })
    }

    /// A session's events: from the live log, else read from its file (no crash repair, and
    /// the session is not opened for appending).
    pub fn read_session(&self, id: &str) -> Result<SessionData, QueryError> {
        let record = self.record(id)?;
        let live = lock(&self.live)
            .iter()
            .filter_map(WeakSessionLog::upgrade)
            .find(|log| log.id() == id);
        let events: Vec<Arc<Event>> = match live {
            Some(log) => log
                .events()
                .map_err(|e| {
                    QueryError::new(
                        "SESSION_QUERY_CORRUPT_SESSION",
                        format!("session log cannot be read: {e}"),
                    )
                })?
                .to_vec(),
            None => {
                let path = record.path.clone().ok_or_else(|| {
                    QueryError::new("SESSION_QUERY_SESSION_NOT_FOUND", "session was not found")
                })?;
                dsh_session::read_log_file(&path)
                    .map_err(|e| {
                        QueryError::new(
                            "SESSION_QUERY_CORRUPT_SESSION",
                            format!("session log cannot be read: {e}"),
                        )
                    })?
                    .events
            }
        };
        let analysis = Analysis::of(&events);
        Ok(SessionData {
            record,
            events,
            analysis,
        })
    }

    /// One event and up to `before`/`after` neighbours.
    pub fn read_event(
        &self,
        id: &str,
        seq: u64,
        before: u64,
        after: u64,
    ) -> Result<EventWindow, QueryError> {
        let max = self.config.read_window_max;
        if before > max || after > max {
            return Err(QueryError::new(
                "SESSION_QUERY_INVALID_WINDOW",
                format!("event window must not exceed {max} events on either side"),
            ));
        }
        let data = self.read_session(id)?;
        let index = data
            .events
            .iter()
            .position(|e| e.seq == seq)
            .ok_or_else(|| {
                QueryError::new(
                    "SESSION_QUERY_EVENT_NOT_FOUND",
                    "session event was not found",
                )
            })?;
        let target = data.events[index].clone();
        let start = index.saturating_sub(usize::try_from(before).unwrap_or(usize::MAX));
        let end = (index + 1 + usize::try_from(after).unwrap_or(usize::MAX)).min(data.events.len());
        let before = data.events[start..index].to_vec();
        let after = data.events[index + 1..end].to_vec();
        Ok(EventWindow {
            data,
            target,
            before,
            after,
        })
    }

    fn with_index<T>(
        &self,
        run: impl FnOnce(&mut Index) -> Result<T, QueryError>,
    ) -> Result<T, QueryError> {
        if self.config.open_at == OpenAt::Never {
            return Err(QueryError::new(
                "SESSION_QUERY_SEARCH_DISABLED",
                "session search is disabled",
            ));
        }
        let mut guard = lock(&self.index);
        if guard.is_none() {
            *guard = Some(Index::open(&self.config.path)?);
        }
        match guard.as_mut() {
            Some(index) => run(index),
            None => Err(index_failed("the index is not open")),
        }
    }

    /// Matching events in `sessions` (brought up to date first), best first.
    pub fn search(
        &self,
        query: &str,
        sessions: &[SessionRecord],
        filters: &EventFilters,
    ) -> Result<Vec<EventHit>, QueryError> {
        let phrase = normalize_query(query)?;
        let datas: Vec<SessionData> = sessions
            .iter()
            .filter_map(|r| self.read_session(&r.id).ok())
            .collect();
        let snippet_chars = self.config.snippet_chars;
        self.with_index(|index| {
            for data in &datas {
                index.sync(data)?;
            }
            let ids: Vec<&str> = datas.iter().map(|d| d.record.id.as_str()).collect();
            let mut hits = index.search(&phrase, &ids, snippet_chars)?;
            hits.retain(|hit| {
                filters.admits(
                    hit.seq,
                    i64::try_from(hit.time).unwrap_or(i64::MAX),
                    &hit.kind,
                    hit.surface,
                )
            });
            hits.sort_by(|a, b| {
                b.spans
                    .cmp(&a.spans)
                    .then(a.length.cmp(&b.length))
                    .then(a.time.cmp(&b.time))
                    .then(a.session_id.cmp(&b.session_id))
                    .then(a.seq.cmp(&b.seq))
            });
            Ok(hits)
        })
    }
}

/// Trimmed, whitespace-collapsed literal phrase; NUL and blank rejected.
pub fn normalize_query(query: &str) -> Result<String, QueryError> {
    if query.contains('\0') {
        return Err(QueryError::new(
            "SESSION_QUERY_INVALID_QUERY",
            "session-search query must not contain NUL",
        ));
    }
    let phrase = query.split_whitespace().collect::<Vec<_>>().join(" ");
    if phrase.is_empty() {
        return Err(QueryError::new(
            "SESSION_QUERY_INVALID_QUERY",
            "session-search query must contain non-whitespace text",
        ));
    }
    Ok(phrase)
}

/// The FTS5 index: one row per event with searchable text.
struct Index {
    db: Connection,
    /// Session id → event count and last seq indexed.
    indexed: HashMap<String, (usize, u64)>,
}

const OPEN_MARK: char = '\u{1}';
const CLOSE_MARK: char = '\u{2}';

impl Index {
    fn open(path: &str) -> Result<Self, QueryError> {
        let db = if path == ":memory:" {
            Connection::open_in_memory()
        } else {
            Connection::open(path)
        }
        .map_err(index_failed)?;
        db.execute_batch(
            "PRAGMA journal_mode=WAL;
             DROP TABLE IF EXISTS events;
             CREATE VIRTUAL TABLE events USING fts5(
                text, session_id UNINDEXED, seq UNINDEXED, kind UNINDEXED,
                surface UNINDEXED, time UNINDEXED, length UNINDEXED,
                tokenize = 'unicode61');",
        )
        .map_err(index_failed)?;
        Ok(Self {
            db,
            indexed: HashMap::new(),
        })
    }

    /// Re-indexes a session whose events changed since the last sync.
    fn sync(&mut self, data: &SessionData) -> Result<(), QueryError> {
        let id = &data.record.id;
        let state = (data.events.len(), data.events.last().map_or(0, |e| e.seq));
        if self.indexed.get(id) == Some(&state) {
            return Ok(());
        }
        let tx = self.db.transaction().map_err(index_failed)?;
        tx.execute("DELETE FROM events WHERE session_id = ?1", params![id])
            .map_err(index_failed)?;
        {
            let mut insert = tx
                .prepare(
                    "INSERT INTO events (text, session_id, seq, kind, surface, time, length)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(index_failed)?;
            for event in &data.events {
                let Some(text) = searchable_text(event) else {
                    continue;
                };
                let length = text.chars().count();
                insert
                    .execute(params![
                        text,
                        id,
                        i64::try_from(event.seq).unwrap_or(i64::MAX),
                        event.kind.as_str(),
                        data.analysis.class(event.seq).as_str(),
                        i64::try_from(event.time).unwrap_or(i64::MAX),
                        i64::try_from(length).unwrap_or(i64::MAX),
                    ])
                    .map_err(index_failed)?;
            }
        }
        tx.commit().map_err(index_failed)?;
        self.indexed.insert(id.clone(), state);
        Ok(())
    }

    fn search(
        &self,
        phrase: &str,
        sessions: &[&str],
        snippet_chars: usize,
    ) -> Result<Vec<EventHit>, QueryError> {
        // FTS syntax is data: the whole query is one quoted phrase.
        let quoted = format!("\"{}\"", phrase.replace('"', "\"\""));
        let mut statement = self
            .db
            .prepare(
                "SELECT session_id, seq, kind, surface, time, length,
                        highlight(events, 0, char(1), char(2))
                 FROM events WHERE events MATCH ?1",
            )
            .map_err(index_failed)?;
        let rows = statement.query_map(params![quoted], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, i64>(4)?,
                row.get::<_, i64>(5)?,
                row.get::<_, String>(6)?,
            ))
        });
        let rows = match rows {
            Ok(rows) => rows,
            // A phrase with no indexable token matches nothing.
            Err(_) => return Ok(Vec::new()),
        };
        let mut hits = Vec::new();
        for row in rows {
            let Ok((session_id, seq, kind, surface, time, length, highlighted)) = row else {
                continue;
            };
            if !sessions.contains(&session_id.as_str()) {
                continue;
            }
            hits.push(EventHit {
                session_id,
                seq: u64::try_from(seq).unwrap_or(0),
                kind,
                surface: SurfaceClass::parse(&surface).unwrap_or(SurfaceClass::LogOnly),
                time: u64::try_from(time).unwrap_or(0),
                spans: highlighted.matches(OPEN_MARK).count(),
                length: usize::try_from(length).unwrap_or(0),
                snippet: snippet(&highlighted, snippet_chars),
            });
        }
        Ok(hits)
    }
}

/// A whitespace-normalised window of at most `max` code points around the first match.
fn snippet(highlighted: &str, max: usize) -> String {
    let chars: Vec<char> = highlighted.chars().collect();
    let first = chars.iter().position(|c| *c == OPEN_MARK).unwrap_or(0);
    let start = first.saturating_sub(max / 3);
    let window: String = chars[start..]
        .iter()
        .filter(|c| **c != OPEN_MARK && **c != CLOSE_MARK)
        .collect();
    let normalized = window.split_whitespace().collect::<Vec<_>>().join(" ");
    normalized.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn page_limits_that_nothing_reads_are_refused() {
        for key in ["default_limit", "max_limit"] {
            let error = serde_json::from_value::<super::IndexConfig>(serde_json::json!({key: 5}))
                .unwrap_err()
                .to_string();
            assert!(error.contains(&format!("unknown field `{key}`")), "{error}");
        }
        let known: super::IndexConfig =
            serde_json::from_value(serde_json::json!({"snippet_chars": 10})).unwrap();
        assert_eq!(known.snippet_chars, 10);
    }

    use super::*;

    #[test]
    fn queries_are_literal_phrases() {
        assert_eq!(normalize_query("  a \n b ").unwrap(), "a b");
        assert_eq!(
            normalize_query(" ").unwrap_err().message,
            "session-search query must contain non-whitespace text"
        );
        assert_eq!(
            normalize_query("a\0").unwrap_err().message,
            "session-search query must not contain NUL"
        );
    }

    #[test]
    fn snippets_are_bounded_and_normalised() {
        let text = format!("{}\u{1}needle\u{2}   tail", "x ".repeat(300));
        let s = snippet(&text, 40);
        assert!(s.chars().count() <= 40);
        assert!(s.contains("needle tail"), "{s}");
    }
}
