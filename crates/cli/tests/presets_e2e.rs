//! Agent presets through the real `dsh` binary (context-spec §12.4): `dsh exec` on a configured
//! default preset against the replay server (`dsh-mock-llm`'s `ReplayServer`), and `/preset`
//! over the `dsh acp` wire (offered in `available_commands_update`, answered without a model
//! turn, and changing the tools and system prompt of the next request).
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
// Helpers outside `#[test]` functions panic on broken fixtures by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::path::PathBuf;

use dsh_testkit::replay::ReplayServer;
use dsh_testkit::scenario::ModelEntry;
use dsh_testkit::scenario::Scenario;
use dsh_testkit::scenario::ScenarioSpec;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;
use support::Acp;

const PRESET: &str = r#"
description = "Reads and searches, never writes"
[persona]
text = "You review code in {{cwd}}."
[tools]
allow = ["read", "grep"]
"#;

fn setup(home: &Path) {
    let dir = home.join(".agent-presets").join("review");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("preset.toml"), PRESET).unwrap();
    // The LLM title side request would consume a scripted answer.
    std::fs::write(
        home.join("config.toml"),
        "[plugins.session-title]\nenabled = false\n",
    )
    .unwrap();
}

fn session_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            session_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
}

/// The events of the only stored session (the header line is skipped).
fn events(home: &Path) -> Vec<Value> {
    let mut files = Vec::new();
    session_files(&home.join("sessions"), &mut files);
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::read_to_string(&files[0])
        .unwrap()
        .lines()
        .skip(1)
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn names(tools: &Value) -> Vec<String> {
    let mut names: Vec<String> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t["name"]
                .as_str()
                .or_else(|| t["function"]["name"].as_str())
                .unwrap()
                .to_owned()
        })
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_runs_on_the_configured_default_preset() {
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    setup(home.path());
    let task = "look around";
    let spec: ScenarioSpec = serde_json::from_value(json!({
        "suite": "checklist",
        "name": "agent-preset",
        "sessions": [{"session": 0, "first_user_text": task}]
    }))
    .unwrap();
    let entry: ModelEntry = serde_json::from_value(json!({
        "session": 0, "route": "main", "index": 0, "kind": "response",
        "content": "Looked.", "finish_reason": "stop",
        "usage": {"prompt_tokens": 5, "completion_tokens": 2}
    }))
    .unwrap();
    let scenario = Scenario::from_parts(spec, vec![entry]);
    let server = ReplayServer::start(&scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dsh"))
        .args([
            "exec",
            "-c",
            "plugins.agent-presets.default=\"review\"",
            task,
        ])
        .current_dir(workspace.path())
        .env("HOME", home.path())
        .env("DSH_HOME", home.path())
        .env("DEEPSEEK_API_KEY", "replay-key")
        .env("DEEPSEEK_BASE_URL", server.url())
        .env_remove("DSH_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Looked.\n");
    assert!(server.unanswered().is_empty(), "{:?}", server.unanswered());

    // What the model saw is in the log: the request header carries the preset's persona and
    // exactly the tools its filter keeps.
    let events = events(home.path());
    let header = events
        .iter()
        .find(|e| e["type"] == "request/header")
        .expect("a request header");
    let cwd = workspace.path().canonicalize().unwrap();
    let system = header["data"]["header"]["system"].as_str().unwrap();
    assert!(
        system.contains(&format!("You review code in {}.", cwd.display())),
        "{system}"
    );
    assert_eq!(names(&header["data"]["header"]["tools"]), ["grep", "read"]);

    // An unknown default is a configuration error naming the roster.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dsh"))
        .args(["exec", "-c", "plugins.agent-presets.default=\"nope\"", task])
        .current_dir(workspace.path())
        .env("HOME", home.path())
        .env("DSH_HOME", home.path())
        .env("DEEPSEEK_API_KEY", "replay-key")
        .env("DEEPSEEK_BASE_URL", server.url())
        .env_remove("DSH_LOG")
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("default preset \"nope\" is not in the roster"),
        "{stderr}"
    );
}

fn updates<'a>(frames: &'a [Value], kind: &str) -> Vec<&'a Value> {
    frames
        .iter()
        .filter(|f| {
            f["method"] == "session/update" && f["params"]["update"]["sessionUpdate"] == kind
        })
        .map(|f| &f["params"]["update"])
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preset_is_an_acp_command_that_changes_the_next_request() {
    let home = tempfile::tempdir().unwrap();
    setup(home.path());
    let (url, bodies) = support::model_server(vec![support::sse(
        &[json!({"content": "Reviewed."})],
        "stop",
    )])
    .await;
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().canonicalize().unwrap();
    let mut acp = Acp::start(&cwd, home.path(), &url);
    acp.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )
    .await;
    let created = acp
        .request(2, "session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let id = created["result"]["sessionId"].as_str().unwrap().to_owned();

    let switched = acp
        .request(
            3,
            "session/prompt",
            json!({"sessionId": id, "prompt": [{"type": "text", "text": "/preset review"}]}),
        )
        .await;
    assert_eq!(switched["result"]["stopReason"], "end_turn", "{switched}");
    let offered = updates(&acp.frames, "available_commands_update");
    let preset = offered
        .first()
        .and_then(|u| {
            u["availableCommands"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == "preset")
        })
        .expect("/preset is offered after session/new");
    assert_eq!(preset["description"], "Show or switch the agent preset");
    assert_eq!(preset["input"]["hint"], "[<preset>]");
    let replies: Vec<&str> = updates(&acp.frames, "agent_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(replies, ["Switched to preset review."]);
    assert!(bodies.lock().unwrap().is_empty(), "no model turn");

    let answered = acp
        .request(
            4,
            "session/prompt",
            json!({"sessionId": id, "prompt": [{"type": "text", "text": "review it"}]}),
        )
        .await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1, "one model request");
    let body = &bodies[0];
    assert_eq!(names(&body["tools"]), ["grep", "read"]);
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(
        system.contains(&format!("You review code in {}.", cwd.display())),
        "{system}"
    );
    acp.stop().await;
}
