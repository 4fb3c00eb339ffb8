//! `ask_user_question` over ACP: an elicitation form when the client advertises form support,
//! a permission request whose options are the answers otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_user_questions::UserQuestions;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use super::harness::TestHost;
use super::harness::Wire;

const ASK: &str = r#"{"questions":[{"id":"mode","question":"Which mode?","options":[{"label":"Fast (Recommended)"},{"label":"Slow"}]}]}"#;

async fn session(wire: &mut Wire, home: &std::path::Path, caps: Value) -> String {
    wire.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": caps}),
    );
    wire.until_response(1).await;
    wire.request(2, "session/new", json!({"cwd": home, "mcpServers": []}));
    let (_, created) = wire.until_response(2).await;
    created["result"]["sessionId"].as_str().unwrap().to_owned()
}

fn tool_text(home: &std::path::Path) -> String {
    fn find(dir: &std::path::Path) -> Option<std::path::PathBuf> {
        for entry in std::fs::read_dir(dir).ok()? {
            let path = entry.ok()?.path();
            if path.is_dir() {
                if let Some(found) = find(&path) {
                    return Some(found);
                }
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                return Some(path);
            }
        }
        None
    }
    let file = find(home).unwrap();
    let text = std::fs::read_to_string(file).unwrap();
    let result: Value = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "tool/result")
        .unwrap();
    result["data"]["message"]["content"][0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn factory(home: &std::path::Path) -> std::sync::Arc<TestHost> {
    let factory = TestHost::new(home);
    let questions = UserQuestions::install(&factory.root).unwrap();
    dsh_tool_ask_user::register(&factory.registry, &factory.root, Some(questions)).unwrap();
    factory.adapter.push_chunks(tool_call_response(
        "call_ask",
        "ask_user_question",
        ASK,
        None,
    ));
    factory.adapter.push_chunks(text_response("thanks"));
    factory
}

#[tokio::test]
async fn a_form_capable_client_answers_through_elicitation() {
    let home = tempfile::tempdir().unwrap();
    let factory = factory(home.path());
    let mut wire = Wire::start(factory.clone());
    let id = session(&mut wire, home.path(), json!({"elicitation": {"form": {}}})).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": id, "prompt": [{"type": "text", "text": "ask me"}]}),
    );
    let ask = loop {
        let frame = wire.next().await;
        if frame["method"] == "elicitation/create" {
            break frame;
        }
    };
    assert_eq!(ask["params"]["mode"], "form");
    assert_eq!(ask["params"]["sessionId"], json!(id));
    assert_eq!(ask["params"]["message"], "Which mode?");
    assert_eq!(
        ask["params"]["requestedSchema"]["properties"]["mode"]["oneOf"][1]["const"],
        "Slow"
    );
    wire.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"mode": "Slow"}}}));
    let (_, done) = wire.until_response(3).await;
    assert_eq!(done["result"]["stopReason"], "end_turn");
    drop(wire);
    assert_eq!(
        tool_text(home.path()),
        r#"{"answers":[{"id":"mode","selected":["Slow"]}]}"#
    );
}

#[tokio::test]
async fn without_form_support_the_answers_are_permission_options() {
    let home = tempfile::tempdir().unwrap();
    let factory = factory(home.path());
    let mut wire = Wire::start(factory.clone());
    let id = session(&mut wire, home.path(), json!({})).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": id, "prompt": [{"type": "text", "text": "ask me"}]}),
    );
    let ask = loop {
        let frame = wire.next().await;
        assert_ne!(frame["method"], "elicitation/create");
        if frame["method"] == "session/request_permission" {
            break frame;
        }
    };
    let options = ask["params"]["options"].as_array().unwrap();
    let names: Vec<&str> = options
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Fast (Recommended)", "Slow"]);
    assert_eq!(ask["params"]["toolCall"]["title"], "Which mode?");
    wire.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": {"outcome": "selected", "optionId": options[0]["optionId"]}}}));
    wire.until_response(3).await;
    drop(wire);
    assert_eq!(
        tool_text(home.path()),
        r#"{"answers":[{"id":"mode","selected":["Fast (Recommended)"]}]}"#
    );
}

#[tokio::test]
async fn a_declined_form_is_the_cancelled_text() {
    let home = tempfile::tempdir().unwrap();
    let factory = factory(home.path());
    let mut wire = Wire::start(factory.clone());
    let id = session(&mut wire, home.path(), json!({"elicitation": {"form": {}}})).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": id, "prompt": [{"type": "text", "text": "ask me"}]}),
    );
    let ask = loop {
        let frame = wire.next().await;
        if frame["method"] == "elicitation/create" {
            break frame;
        }
    };
    wire.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}}));
    wire.until_response(3).await;
    drop(wire);
    assert_eq!(
        tool_text(home.path()),
        "Error: the user cancelled ask_user_question"
    );
}
