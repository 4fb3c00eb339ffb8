//! The session-store seam: where logs are created, reopened, listed and removed.
//!
//! The loop and the front-ends only ever hold a [`SessionLog`]; which store made it is the
//! host's choice. [`JsonlStore`] (files under `$DSH_HOME/sessions`) is the embedded default.
//! [`MemoryStore`] keeps everything in the process; it is also the pattern for a store backed
//! by a server: a log is built in memory (`SessionLog::in_memory` / `from_seed`) and every
//! committed event is forwarded from an `on_event` listener.

use dsh_sync::lock;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;

use crate::error::SessionError;
use crate::event::Event;
use crate::event::kind;
use crate::header::SessionHeader;
use crate::jsonl::LoadedSession;
use crate::log::SessionLog;
use crate::log::Subscription;
use crate::log::WeakSessionLog;
use crate::log::now_ms;
use crate::repair::crash_repair;
use crate::store::CreateOptions;
use crate::store::JsonlStore;
use crate::store::SessionSummary;

/// Where session logs live. Every method is synchronous and cheap enough to call from an
/// async task (the JSONL store does small file operations).
pub trait SessionStore: Send + Sync + std::fmt::Debug {
    /// Creates a new session (fails if the id exists or is live).
    fn create(&self, options: CreateOptions) -> Result<SessionLog, SessionError>;
    /// Reopens a stored session for appending, crash repair applied.
    fn resume(&self, id: &str) -> Result<SessionLog, SessionError>;
    /// Reads a stored session without changing it (repair computed, not applied).
    fn load(&self, id: &str) -> Result<LoadedSession, SessionError>;
    /// Forks a live log at `boundary` (default: its last event) into a new stored session.
    fn fork_log(
        &self,
        source: &SessionLog,
        boundary: Option<u64>,
        child_id: Option<String>,
    ) -> Result<SessionLog, SessionError>;
    /// Forks a stored session.
    fn fork(
        &self,
        source_id: &str,
        boundary: Option<u64>,
        child_id: Option<String>,
    ) -> Result<SessionLog, SessionError>;
    /// Every stored session, newest first.
    fn list(&self) -> Result<Vec<SessionSummary>, SessionError>;
    /// Removes a stored session that is not live in this process.
    fn remove(&self, id: &str) -> Result<(), SessionError>;
    /// The header of every stored session (subagent listings walk parent links with it).
    /// Unreadable sessions are skipped.
    fn headers(&self) -> Result<Vec<SessionHeader>, SessionError> {
        Ok(self
            .list()?
            .into_iter()
            .filter_map(|summary| self.load(&summary.id).ok().map(|loaded| loaded.header))
            .collect())
    }
}

impl SessionStore for JsonlStore {
    fn create(&self, options: CreateOptions) -> Result<SessionLog, SessionError> {
        JsonlStore::create(self, options)
    }
    fn resume(&self, id: &str) -> Result<SessionLog, SessionError> {
        JsonlStore::resume(self, id)
    }
    fn load(&self, id: &str) -> Result<LoadedSession, SessionError> {
        JsonlStore::load(self, id)
    }
    fn fork_log(
        &self,
        source: &SessionLog,
        boundary: Option<u64>,
        child_id: Option<String>,
    ) -> Result<SessionLog, SessionError> {
        JsonlStore::fork_log(self, source, boundary, child_id)
    }
    fn fork(
        &self,
        source_id: &str,
        boundary: Option<u64>,
        child_id: Option<String>,
    ) -> Result<SessionLog, SessionError> {
        JsonlStore::fork(self, source_id, boundary, child_id)
    }
    fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        JsonlStore::list(self)
    }
    fn remove(&self, id: &str) -> Result<(), SessionError> {
        JsonlStore::remove(self, id)
    }
    fn headers(&self) -> Result<Vec<SessionHeader>, SessionError> {
        Ok(JsonlStore::headers(self)?
            .into_iter()
            .map(|(header, _)| header)
            .collect())
    }
}

struct Stored {
    header: SessionHeader,
    events: Arc<Mutex<Vec<Arc<Event>>>>,
    live: WeakSessionLog,
    _forward: Subscription,
}

/// Sessions kept in this process only (tests, previews, embedders that persist elsewhere).
#[derive(Default, Clone)]
pub struct MemoryStore {
    sessions: Arc<Mutex<HashMap<String, Stored>>>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("sessions", &lock(&self.sessions).len())
            .finish()
    }
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `log` under its id and mirrors every event it commits.
    fn keep(&self, log: &SessionLog) -> Result<(), SessionError> {
        let mut sessions = lock(&self.sessions);
        let id = log.id().to_owned();
        if let Some(existing) = sessions.get(&id)
            && existing.live.upgrade().is_some()
        {
            return Err(SessionError::AlreadyExists { id });
        }
        let events = Arc::new(Mutex::new(log.events()?.to_vec()));
        let sink = events.clone();
        let forward = log.on_event(move |event| lock(&sink).push(event.clone()));
        sessions.insert(
            id,
            Stored {
                header: log.header().clone(),
                events,
                live: log.downgrade(),
                _forward: forward,
            },
        );
        Ok(())
    }

    fn stored_events(&self, id: &str) -> Result<(SessionHeader, Vec<Arc<Event>>), SessionError> {
        let sessions = lock(&self.sessions);
        let stored = sessions
            .get(id)
            .ok_or_else(|| SessionError::NotFound { id: id.to_owned() })?;
        let events = lock(&stored.events).clone();
        Ok((stored.header.clone(), events))
    }
}

fn plain(events: &[Arc<Event>]) -> Vec<Event> {
    events.iter().map(|event| Event::clone(event)).collect()
}

impl SessionStore for MemoryStore {
    fn create(&self, options: CreateOptions) -> Result<SessionLog, SessionError> {
        let id = options
            .id
            .unwrap_or_else(|| format!("session-{}", uuid::Uuid::new_v4()));
        if lock(&self.sessions).contains_key(&id) {
            return Err(SessionError::AlreadyExists { id });
        }
        let header = SessionHeader {
            id,
            created_at: now_ms(),
            cwd: options.cwd.map(|cwd| cwd.to_string_lossy().into_owned()),
            parent_session: options.parent_session,
            seed_length: options.seed_length,
            origin: options.origin,
            delegation_depth: options.delegation_depth,
            agent_preset: options.agent_preset,
        };
        let log = match options.seed {
            Some(seed) => SessionLog::from_seed(header, seed)?,
            None => SessionLog::in_memory(header),
        };
        self.keep(&log)?;
        Ok(log)
    }

    fn resume(&self, id: &str) -> Result<SessionLog, SessionError> {
        if lock(&self.sessions)
            .get(id)
            .is_some_and(|stored| stored.live.upgrade().is_some())
        {
            return Err(SessionError::AlreadyExists { id: id.to_owned() });
        }
        let (header, events) = self.stored_events(id)?;
        let mut seed = plain(&events);
        seed.extend(crash_repair(&events));
        let log = SessionLog::from_seed(header, seed)?;
        self.keep(&log)?;
        Ok(log)
    }

    fn load(&self, id: &str) -> Result<LoadedSession, SessionError> {
        let (header, events) = self.stored_events(id)?;
        let repair = crash_repair(&events);
        Ok(LoadedSession {
            header,
            path: PathBuf::from(format!("memory:{id}")),
            events,
            dropped_bytes: 0,
            repair,
        })
    }

    fn fork_log(
        &self,
        source: &SessionLog,
        boundary: Option<u64>,
        child_id: Option<String>,
    ) -> Result<SessionLog, SessionError> {
        let events = source.events()?;
        fork_seed(self, source.header(), &events, boundary, child_id)
    }

    fn fork(
        &self,
        source_id: &str,
        boundary: Option<u64>,
        child_id: Option<String>,
    ) -> Result<SessionLog, SessionError> {
        let (header, events) = self.stored_events(source_id)?;
        fork_seed(self, &header, &events, boundary, child_id)
    }

    fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        let sessions = lock(&self.sessions);
        let mut out: Vec<SessionSummary> = sessions
            .values()
            .map(|stored| {
                let events = lock(&stored.events);
                let title = events
                    .iter()
                    .rev()
                    .find(|event| event.kind == kind::SESSION_TITLE)
                    .and_then(|event| event.data.get("title")?.as_str().map(str::to_owned));
                SessionSummary {
                    id: stored.header.id.clone(),
                    created_at: stored.header.created_at,
                    cwd: stored.header.cwd.clone(),
                    title,
                    event_count: events.len() as u64,
                    turns: events
                        .iter()
                        .filter(|event| event.kind == kind::TURN_START)
                        .count() as u64,
                    parent_session: stored.header.parent_session.clone(),
                    path: PathBuf::from(format!("memory:{}", stored.header.id)),
                }
            })
            .collect();
        out.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(out)
    }

    fn remove(&self, id: &str) -> Result<(), SessionError> {
        let mut sessions = lock(&self.sessions);
        match sessions.get(id) {
            None => Err(SessionError::NotFound { id: id.to_owned() }),
            Some(stored) if stored.live.upgrade().is_some() => {
                Err(SessionError::AlreadyExists { id: id.to_owned() })
            }
            Some(_) => {
                sessions.remove(id);
                Ok(())
            }
        }
    }
}

/// The fork rules of the JSONL store, over in-memory events.
fn fork_seed(
    store: &MemoryStore,
    source: &SessionHeader,
    events: &[Arc<Event>],
    boundary: Option<u64>,
    child_id: Option<String>,
) -> Result<SessionLog, SessionError> {
    let prefix = crate::store::fork_prefix(events, boundary)?;
    store.create(CreateOptions {
        id: child_id,
        cwd: source.cwd.as_ref().map(PathBuf::from),
        parent_session: Some(source.id.clone()),
        seed_length: Some(prefix.len() as u64),
        delegation_depth: source.delegation_depth,
        seed: Some(plain(prefix)),
        ..CreateOptions::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn turn(log: &SessionLog) {
        log.append(kind::TURN_START, json!({"turn": 1}), None)
            .unwrap();
    }

    #[test]
    fn the_memory_store_keeps_what_a_log_commits_and_repairs_it_on_resume() {
        let store = MemoryStore::new();
        let log = store
            .create(CreateOptions {
                id: Some("s1".into()),
                ..CreateOptions::default()
            })
            .unwrap();
        turn(&log);
        assert!(matches!(
            store.resume("s1"),
            Err(SessionError::AlreadyExists { .. })
        ));
        drop(log);
        let loaded = store.load("s1").unwrap();
        assert_eq!(loaded.events.len(), 1);
        assert!(!loaded.repair.is_empty(), "an open turn needs repair");
        let resumed = store.resume("s1").unwrap();
        assert_eq!(resumed.turn_state().open_turn, None);
        assert_eq!(store.list().unwrap()[0].id, "s1");
        assert!(store.remove("s1").is_err(), "a live session is not removed");
        drop(resumed);
        store.remove("s1").unwrap();
        assert!(store.list().unwrap().is_empty());
    }

    #[test]
    fn forks_of_an_open_turn_are_refused() {
        let store = MemoryStore::new();
        let log = store.create(CreateOptions::default()).unwrap();
        turn(&log);
        assert!(matches!(
            store.fork_log(&log, None, None),
            Err(SessionError::OpenTurn { .. })
        ));
    }
}
