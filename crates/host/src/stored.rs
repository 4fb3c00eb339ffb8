//! Stored sessions as the front-ends name and order them: one id format everywhere (the full
//! id, or a prefix only one id starts with) and "most recently active first".

use std::time::UNIX_EPOCH;

use dsh_session::SessionStore;
use dsh_session::SessionSummary;

use crate::host::HostError;

/// When the session was last written (its file), else when it was created (epoch ms).
pub fn last_activity(summary: &SessionSummary) -> u64 {
    std::fs::metadata(&summary.path)
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|time| time.duration_since(UNIX_EPOCH).ok())
        .and_then(|since| u64::try_from(since.as_millis()).ok())
        .unwrap_or(summary.created_at)
}

/// Top-level sessions with their last activity, most recently active first.
pub fn recent(store: &dyn SessionStore) -> Result<Vec<(SessionSummary, u64)>, HostError> {
    let mut sessions: Vec<(SessionSummary, u64)> = store
        .list()?
        .into_iter()
        .filter(|s| s.parent_session.is_none())
        .map(|s| {
            let at = last_activity(&s);
            (s, at)
        })
        .collect();
    sessions.sort_by_key(|(_, at)| std::cmp::Reverse(*at));
    Ok(sessions)
}

/// The stored session `text` names: its full id, or a prefix only one id starts with.
pub fn resolve(store: &dyn SessionStore, text: &str) -> Result<String, HostError> {
    let all = store.list()?;
    if all.iter().any(|s| s.id == text) {
        return Ok(text.to_owned());
    }
    let matches: Vec<&SessionSummary> = all.iter().filter(|s| s.id.starts_with(text)).collect();
    match matches.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(HostError::Invalid(format!(
            "no stored session {text} (see `dsh sessions list`)"
        ))),
        many => Err(HostError::Invalid(format!(
            "{text} matches {} sessions: {}",
            many.len(),
            many.iter()
                .map(|s| s.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The newest top-level session whose cwd is `cwd` (`dsh exec --continue`, `dsh resume`).
pub fn newest_in(store: &dyn SessionStore, cwd: &str) -> Result<Option<SessionSummary>, HostError> {
    Ok(recent(store)?
        .into_iter()
        .map(|(summary, _)| summary)
        .find(|s| s.cwd.as_deref() == Some(cwd)))
}
