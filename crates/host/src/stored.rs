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

/// The stored session `text` names: its full id, or a prefix only one id starts with. dsh has
/// two id forms (`dsh exec` and the TUI write `session-<uuid>`, ACP clients create bare
/// uuids); either form of a prefix finds a session stored under the other.
pub fn resolve(store: &dyn SessionStore, text: &str) -> Result<String, HostError> {
    let all = store.list()?;
    if all.iter().any(|s| s.id == text) {
        return Ok(text.to_owned());
    }
    let wanted = bare(text);
    let mut matches: Vec<&SessionSummary> = all
        .iter()
        .filter(|s| {
            s.id.starts_with(text) || (!wanted.is_empty() && bare(&s.id).starts_with(wanted))
        })
        .collect();
    // The same session stored under both forms cannot happen; one id twice can (listing races).
    matches.dedup_by(|a, b| a.id == b.id);
    match matches.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(HostError::Invalid(format!(
            "no stored session {text} (see `dsh sessions list`)"
        ))),
        many => Err(HostError::Invalid(format!(
            "{text} matches {} sessions: {}; give more of the id",
            many.len(),
            many.iter()
                .map(|s| s.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// An id without its `session-` form prefix.
fn bare(id: &str) -> &str {
    id.strip_prefix("session-").unwrap_or(id)
}

/// The newest top-level session whose cwd is `cwd` and in which the model answered
/// (`dsh exec --continue`, `dsh resume`): a session a failed run left before any answer has
/// nothing to continue.
pub fn newest_in(store: &dyn SessionStore, cwd: &str) -> Result<Option<SessionSummary>, HostError> {
    Ok(recent(store)?
        .into_iter()
        .map(|(summary, _)| summary)
        .filter(|s| s.cwd.as_deref() == Some(cwd))
        .find(|s| has_answer(store, &s.id)))
}

/// Whether the model ever answered in the stored session `id` (an `assistant/message`).
pub fn has_answer(store: &dyn SessionStore, id: &str) -> bool {
    store.load(id).is_ok_and(|loaded| {
        loaded
            .events
            .iter()
            .any(|event| event.kind == dsh_session::kind::ASSISTANT_MESSAGE)
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use dsh_session::CreateOptions;
    use dsh_session::JsonlStore;

    use super::*;

    const EXEC_ID: &str = "session-5f0c3a9e-1111-4aaa-8bbb-000000000001";
    const ACP_ID: &str = "9d2b7c41-2222-4ccc-8ddd-000000000002";

    fn store_with_both_forms() -> (tempfile::TempDir, JsonlStore) {
        let home = tempfile::tempdir().unwrap();
        let store = JsonlStore::new(home.path());
        for id in [EXEC_ID, ACP_ID] {
            let log = store
                .create(CreateOptions {
                    id: Some(id.to_owned()),
                    cwd: Some(home.path().to_path_buf()),
                    ..CreateOptions::default()
                })
                .unwrap();
            // The file appears with the first append.
            log.append("session/title", serde_json::json!({"title": id}), None)
                .unwrap();
            log.flush().unwrap();
        }
        (home, store)
    }

    #[test]
    fn any_prefix_of_either_id_form_finds_the_session() {
        let (_home, store) = store_with_both_forms();
        for text in [
            EXEC_ID,
            "session-5f0c",
            "5f0c",
            "5f0c3a9e-1111-4aaa-8bbb-000000000001",
        ] {
            assert_eq!(resolve(&store, text).unwrap(), EXEC_ID, "{text}");
        }
        for text in [ACP_ID, "9d2b", "session-9d2b", "session-9d2b7c41-2222"] {
            assert_eq!(resolve(&store, text).unwrap(), ACP_ID, "{text}");
        }
    }

    #[test]
    fn an_ambiguous_or_unknown_prefix_says_what_to_do() {
        let (_home, store) = store_with_both_forms();
        let unknown = resolve(&store, "session-ffff").unwrap_err().to_string();
        assert!(unknown.contains("dsh sessions list"), "{unknown}");
        let ambiguous = resolve(&store, "").unwrap_err().to_string();
        assert!(
            ambiguous.contains("matches 2 sessions") && ambiguous.contains("give more of the id"),
            "{ambiguous}"
        );
    }
}
