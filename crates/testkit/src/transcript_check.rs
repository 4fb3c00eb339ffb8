//! Live equals replay: the display items the transcript fold makes of a session's events as
//! they were committed (the live stream `dsh exec --output stream-json` printed) must equal the
//! items of the same session read back from its stored log the way `dsh resume` and
//! `session/load` read it (`JsonlStore::load`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use dsh_session::Event;
use dsh_session::JsonlStore;
use dsh_transcript::Fold;
use dsh_transcript::Presentation;
use serde_json::Value;

/// Appends a failure for each session whose live and replayed transcripts differ; returns how
/// many items were compared (zero means nothing was checked).
pub fn judge_live_equals_replay(home: &Path, live_lines: &[Value], out: &mut Vec<String>) -> usize {
    let mut live: BTreeMap<String, Vec<Arc<Event>>> = BTreeMap::new();
    for line in live_lines {
        if line.get("type").and_then(Value::as_str) != Some("session_event") {
            continue;
        }
        let (Some(id), Some(event)) = (
            line.get("sessionId").and_then(Value::as_str),
            line.get("event"),
        ) else {
            continue;
        };
        match serde_json::from_value::<Event>(event.clone()) {
            Ok(event) => live.entry(id.to_owned()).or_default().push(Arc::new(event)),
            Err(error) => out.push(format!(
                "transcript: unreadable live event of {id}: {error}"
            )),
        }
    }
    let store = JsonlStore::new(home.to_path_buf());
    let presentation = Presentation::default();
    let mut compared = 0;
    for (id, events) in live {
        let stored = match store.load(&id) {
            Ok(loaded) => loaded.events,
            // An agent under test that keeps no dsh store (the runner's own stand-ins) has
            // nothing to replay.
            Err(dsh_session::SessionError::NotFound { .. }) => continue,
            Err(error) => {
                out.push(format!(
                    "transcript: session {id} cannot be replayed: {error}"
                ));
                continue;
            }
        };
        let live_items = Fold::items_of(&presentation, events.iter());
        let replayed = Fold::items_of(&presentation, stored.iter());
        if live_items != replayed {
            let at = live_items
                .iter()
                .zip(&replayed)
                .position(|(a, b)| a != b)
                .unwrap_or(live_items.len().min(replayed.len()));
            out.push(format!(
                "transcript: session {id}: live and replay differ at item {at} (live {} items, replay {}): {:?} vs {:?}",
                live_items.len(),
                replayed.len(),
                live_items.get(at),
                replayed.get(at)
            ));
        }
        compared += live_items.len();
    }
    compared
}
