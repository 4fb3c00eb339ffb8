//! Exact `session/update` sequences of a bash turn, an edit turn and a cancelled turn
//! (workspace path and session id normalized, as in the conformance recordings).

use dsh_agent::scripted::Script;
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use serde_json::Value;
use serde_json::json;

use super::harness::TestHost;
use super::harness::Wire;
use super::harness::normalize;

/// Joins consecutive chunks of one kind: the scripted model streams one chunk per character,
/// which is not what these snapshots pin.
fn coalesce(frames: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for frame in frames {
        let kind = frame["params"]["update"]["sessionUpdate"].clone();
        if (kind == "agent_message_chunk" || kind == "agent_thought_chunk")
            && let Some(last) = out.last_mut()
            && last["params"]["update"]["sessionUpdate"] == kind
        {
            let text = format!(
                "{}{}",
                last["params"]["update"]["content"]["text"]
                    .as_str()
                    .unwrap_or_default(),
                frame["params"]["update"]["content"]["text"]
                    .as_str()
                    .unwrap_or_default()
            );
            last["params"]["update"]["content"]["text"] = json!(text);
            continue;
        }
        out.push(frame);
    }
    out
}

#[tokio::test]
async fn bash_turn_with_terminal_capability() {
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("ws");
    std::fs::create_dir(&work).unwrap();
    let factory = TestHost::new(home.path());
    let args = json!({"command": "printf 'hello\\n'"}).to_string();
    factory.adapter.push_chunks(tool_call_response(
        "call_1",
        "bash",
        &args,
        Some("Running it."),
    ));
    factory.adapter.push_chunks(text_response("Done."));
    let mut wire = Wire::start(factory);
    let session = wire.open(&work, true).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "say hello"}]}),
    );
    let (frames, response) = wire.until_response(3).await;
    let mut all = coalesce(frames);
    all.push(response);
    let all: Vec<Value> = all.iter().map(|f| normalize(f, &session, &work)).collect();
    insta::assert_json_snapshot!("bash_turn_terminal", all);
}

#[tokio::test]
async fn bash_turn_without_terminal_capability_is_fenced() {
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("ws");
    std::fs::create_dir(&work).unwrap();
    let factory = TestHost::new(home.path());
    let args = json!({"command": "printf 'hello\\n'"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_1", "bash", &args, None));
    factory.adapter.push_chunks(text_response("Done."));
    let mut wire = Wire::start(factory);
    let session = wire.open(&work, false).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "say hello"}]}),
    );
    let (frames, response) = wire.until_response(3).await;
    let mut all = coalesce(frames);
    all.push(response);
    let all: Vec<Value> = all.iter().map(|f| normalize(f, &session, &work)).collect();
    insta::assert_json_snapshot!("bash_turn_fenced", all);
}

#[tokio::test]
async fn edit_turn() {
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("ws");
    std::fs::create_dir_all(work.join("src")).unwrap();
    let file = work.join("src/lib.rs");
    std::fs::write(&file, "fn old() {}\n").unwrap();
    let factory = TestHost::new(home.path());
    let args = json!({"path": file, "old": "old", "new": "new"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_7", "edit", &args, None));
    factory.adapter.push_chunks(text_response("Renamed."));
    let mut wire = Wire::start(factory);
    let session = wire.open(&work, true).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "rename old"}]}),
    );
    let (frames, response) = wire.until_response(3).await;
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "fn new() {}\n");
    let mut all = coalesce(frames);
    all.push(response);
    let all: Vec<Value> = all.iter().map(|f| normalize(f, &session, &work)).collect();
    insta::assert_json_snapshot!("edit_turn", all);
}

#[tokio::test]
async fn cancelled_turn() {
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("ws");
    std::fs::create_dir(&work).unwrap();
    let factory = TestHost::new(home.path());
    factory.adapter.push(Script::Hang);
    let mut wire = Wire::start(factory);
    let session = wire.open(&work, true).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "start"}]}),
    );
    let partial = wire.next().await;
    wire.send(
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
    );
    let (frames, response) = wire.until_response(3).await;
    let mut all = vec![partial];
    all.extend(frames);
    all.push(response);
    let all: Vec<Value> = all.iter().map(|f| normalize(f, &session, &work)).collect();
    insta::assert_json_snapshot!("cancelled_turn", all);
}
