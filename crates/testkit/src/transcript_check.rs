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

/// The `session/update` kinds that render the transcript (what `session/load` replays). The
/// others describe the session's state now, not its history, and are sent when it changes
/// (`available_commands_update`, `current_mode_update`, `config_option_update`,
/// `usage_update`), so a live stream and a load legitimately differ in them.
const TRANSCRIPT_UPDATES: [&str; 7] = [
    "user_message_chunk",
    "agent_message_chunk",
    "agent_thought_chunk",
    "tool_call",
    "tool_call_update",
    "plan",
    "session_info_update",
];

/// The transcript updates of `session` in `lines` (every stdout line of one `dsh acp` run), in
/// order, with what must differ between a live run and a load taken out:
/// - `user_message_chunk`: the person's own prompt is sent only on a load (a live editor
///   already shows what it sent);
/// - a `tool_call_update` that neither completes nor fails the call: live tool output
///   (progress while the call runs, `crates/acp/src/live.rs`), which the log does not keep;
/// - how text is cut into chunks: a live client gets each streamed delta, a load sends the
///   consecutive deltas of a message (or of its reasoning) as one chunk
///   (`crates/acp/src/session.rs`, `replay`), so consecutive text chunks of one kind are
///   joined on both sides before comparing.
pub fn acp_transcript(lines: &[Value], session: &str) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for update in transcript_updates(lines, session) {
        if let Some(held) = out.last_mut()
            && join_text_chunk(held, &update)
        {
            continue;
        }
        out.push(update);
    }
    out
}

/// Appends `next`'s text to `held` when both are text chunks of the same kind.
fn join_text_chunk(held: &mut Value, next: &Value) -> bool {
    let kind = |update: &Value| {
        update
            .get("sessionUpdate")
            .and_then(Value::as_str)
            .filter(|kind| matches!(*kind, "agent_message_chunk" | "agent_thought_chunk"))
            .map(str::to_owned)
    };
    let text = |update: &Value| {
        (update.pointer("/content/type").and_then(Value::as_str) == Some("text"))
            .then(|| update.pointer("/content/text").and_then(Value::as_str))
            .flatten()
            .map(str::to_owned)
    };
    let (Some(held_kind), Some(next_kind)) = (kind(held), kind(next)) else {
        return false;
    };
    let (Some(held_text), Some(next_text)) = (text(held), text(next)) else {
        return false;
    };
    if held_kind != next_kind {
        return false;
    }
    held["content"]["text"] = Value::String(held_text + &next_text);
    true
}

fn transcript_updates(lines: &[Value], session: &str) -> Vec<Value> {
    lines
        .iter()
        .filter(|line| line.get("method").and_then(Value::as_str) == Some("session/update"))
        .filter(|line| line.pointer("/params/sessionId").and_then(Value::as_str) == Some(session))
        .filter_map(|line| line.pointer("/params/update"))
        .filter(|update| {
            let kind = update
                .get("sessionUpdate")
                .and_then(Value::as_str)
                .unwrap_or("");
            if !TRANSCRIPT_UPDATES.contains(&kind) || kind == "user_message_chunk" {
                return false;
            }
            kind != "tool_call_update"
                || matches!(
                    update.get("status").and_then(Value::as_str),
                    Some("completed" | "failed")
                )
        })
        .cloned()
        .collect()
}

/// The sessions a live ACP run created (`session/new` results), in order.
pub fn acp_sessions(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|line| line.get("method").is_none())
        .filter_map(|line| line.pointer("/result/sessionId").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

/// Appends a failure when the live transcript updates of `session` differ from those its
/// `session/load` replay sent; returns how many updates were compared.
pub fn judge_acp_live_equals_load(
    session: &str,
    live_lines: &[Value],
    loaded_lines: &[Value],
    out: &mut Vec<String>,
) -> usize {
    let live = acp_transcript(live_lines, session);
    let loaded = acp_transcript(loaded_lines, session);
    if live != loaded {
        let at = live
            .iter()
            .zip(&loaded)
            .position(|(a, b)| a != b)
            .unwrap_or(live.len().min(loaded.len()));
        out.push(format!(
            "acp: session {session}: the live session/update stream and its session/load replay differ at update {at} (live {}, load {}): {} vs {}",
            live.len(),
            loaded.len(),
            live.get(at).map_or_else(|| "-".to_owned(), Value::to_string),
            loaded.get(at).map_or_else(|| "-".to_owned(), Value::to_string),
        ));
    }
    live.len()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    fn update(session: &str, update: Value) -> Value {
        json!({"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": session, "update": update}})
    }

    #[test]
    fn live_and_load_compare_the_transcript_only() {
        let call = json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "ls"});
        let done =
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"});
        let text = json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}});
        let live = vec![
            json!({"jsonrpc": "2.0", "id": 2, "result": {"sessionId": "s1"}}),
            update(
                "s1",
                json!({"sessionUpdate": "available_commands_update", "availableCommands": []}),
            ),
            update("s1", call.clone()),
            update(
                "s1",
                json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1",
                "content": [{"type": "content", "content": {"type": "text", "text": "partial"}}]}),
            ),
            update("s1", done.clone()),
            update("s1", text.clone()),
            update("other", text.clone()),
        ];
        let loaded = vec![
            update(
                "s1",
                json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "go"}}),
            ),
            update("s1", call),
            update("s1", done),
            update("s1", text.clone()),
        ];
        assert_eq!(acp_sessions(&live), ["s1"]);
        // A load joins the deltas a live client got one by one.
        let delta = |text: &str| {
            update(
                "s1",
                json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}),
            )
        };
        let mut split = live.clone();
        split.insert(5, delta("h"));
        split[6] = delta("i");
        let mut failures = Vec::new();
        judge_acp_live_equals_load("s1", &split, &loaded, &mut failures);
        assert!(failures.is_empty(), "{failures:?}");
        let mut failures = Vec::new();
        assert_eq!(
            judge_acp_live_equals_load("s1", &live, &loaded, &mut failures),
            3
        );
        assert!(failures.is_empty(), "{failures:?}");

        // A replay that loses or changes an update fails.
        let mut short = loaded.clone();
        short.pop();
        judge_acp_live_equals_load("s1", &live, &short, &mut failures);
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].contains("differ at update 2"), "{failures:?}");
    }
}
