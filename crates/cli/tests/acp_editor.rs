//! `dsh acp` as editors drive it, process by process, against a capturing model server:
//! a session created in one process and never prompted is loaded and prompted from another,
//! and a sandbox escalation's permission request carries the whole tool call.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use serde_json::json;
use support::Acp;
use support::model_server;
use support::sse;

fn workspace(config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".dsh")).unwrap();
    std::fs::write(dir.path().join(".dsh/config.toml"), config).unwrap();
    dir
}

const NO_TITLES: &str = "[plugins.session-title]\nenabled = false\n";

async fn initialize(acp: &mut Acp) -> Value {
    acp.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_never_prompted_session_is_loaded_and_prompted_from_another_process() {
    let (url, bodies) = model_server(vec![sse(&[json!({"content": "hello back"})], "stop")]).await;
    let work = workspace(NO_TITLES);
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();

    let mut first = Acp::start(&cwd, home.path(), &url);
    let init = initialize(&mut first).await;
    assert_eq!(
        init["result"]["agentInfo"]["version"],
        env!("CARGO_PKG_VERSION"),
        "the binary's version"
    );
    assert_eq!(
        init["result"]["agentCapabilities"]["mcpCapabilities"]["http"], true,
        "streamable-HTTP MCP servers are accepted, so they are advertised"
    );
    assert_eq!(
        init["result"]["agentCapabilities"]["mcpCapabilities"]["sse"], true,
        "legacy HTTP+SSE MCP servers are accepted, so they are advertised"
    );
    assert_eq!(
        init["result"]["authMethods"][0]["id"], "api-key-env",
        "{init}"
    );
    let created = first
        .request(2, "session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let id = created["result"]["sessionId"].as_str().unwrap().to_owned();
    first.stop().await;

    let mut second = Acp::start(&cwd, home.path(), &url);
    initialize(&mut second).await;
    let listed = second.request(2, "session/list", json!({"cwd": cwd})).await;
    let ids: Vec<&str> = listed["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert_eq!(ids, [id.as_str()], "{listed}");
    let loaded = second
        .request(
            3,
            "session/load",
            json!({"sessionId": id, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    let answer = second
        .request(
            4,
            "session/prompt",
            json!({"sessionId": id, "prompt": [{"type": "text", "text": "hi there"}]}),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let said: String = second
        .frames
        .iter()
        .filter(|f| f["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|f| f["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(said, "hello back");
    second.stop().await;
    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1);
    assert!(bodies[0].to_string().contains("hi there"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_config_option_switches_the_sessions_model_from_its_next_request() {
    let (url, bodies) = model_server(vec![
        sse(&[json!({"content": "one"})], "stop"),
        sse(&[json!({"content": "two"})], "stop"),
    ])
    .await;
    let work = workspace(NO_TITLES);
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut acp = Acp::start(&cwd, home.path(), &url);
    initialize(&mut acp).await;
    let created = acp
        .request(2, "session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let id = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let option = &created["result"]["configOptions"][0];
    assert_eq!(option["id"], "model", "{created}");
    assert_eq!(option["type"], "select", "{created}");
    assert_eq!(option["category"], "model", "{created}");
    let configured = option["currentValue"].as_str().unwrap().to_owned();
    let values: Vec<&str> = option["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["value"].as_str())
        .collect();
    let other = values
        .iter()
        .find(|v| **v != configured)
        .expect("a second model to switch to")
        .to_string();

    let prompt = |n: u64| json!({"sessionId": id, "prompt": [{"type": "text", "text": format!("prompt {n}")}]});
    let first = acp.request(3, "session/prompt", prompt(1)).await;
    assert_eq!(first["result"]["stopReason"], "end_turn", "{first}");
    let unknown = acp
        .request(
            4,
            "session/set_config_option",
            json!({"sessionId": id, "configId": "model", "value": "no-such-model"}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let switched = acp
        .request(
            5,
            "session/set_config_option",
            json!({"sessionId": id, "configId": "model", "value": other}),
        )
        .await;
    assert_eq!(
        switched["result"]["configOptions"][0]["currentValue"], other,
        "the refreshed options show the choice: {switched}"
    );
    let second = acp.request(6, "session/prompt", prompt(2)).await;
    assert_eq!(second["result"]["stopReason"], "end_turn", "{second}");
    acp.stop().await;
    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["model"], configured.as_str());
    assert_eq!(
        bodies[1]["model"],
        other.as_str(),
        "from the next request on"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_escalation_asks_with_the_command_mode_and_justification() {
    if !std::path::Path::new("/usr/bin/bwrap").exists() {
        eprintln!("SKIPPED: bubblewrap is not installed");
        return;
    }
    let arguments = json!({
        "command": "touch /etc/dsh-escalated",
        "description": "Touch a file outside the workspace",
        "sandbox_permissions": "danger-full-access",
        "justification": "the user asked for a file in /etc"
    })
    .to_string();
    let call = json!({"tool_calls": [{"index": 0, "id": "call_esc", "type": "function",
        "function": {"name": "bash", "arguments": arguments}}]});
    let (url, bodies) = model_server(vec![
        sse(&[call], "tool_calls"),
        sse(&[json!({"content": "Rejected, so I stopped."})], "stop"),
    ])
    .await;
    let config = format!("{NO_TITLES}\n[plugins.sandbox]\nmode = \"workspace-write\"\n");
    let work = workspace(&config);
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut acp = Acp::start(&cwd, home.path(), &url);
    let asked: std::sync::Arc<std::sync::Mutex<Vec<Value>>> = Default::default();
    let seen = asked.clone();
    acp.answer = Box::new(move |request| {
        seen.lock().unwrap().push(request.clone());
        Ok(json!({"outcome": {"outcome": "selected", "optionId": "reject-once"}}))
    });
    initialize(&mut acp).await;
    let created = acp
        .request(2, "session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let answer = acp
        .request(
            3,
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "make the file"}]}),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:#?}");
    let request = &asked[0];
    assert_eq!(request["method"], "session/request_permission");
    let tool_call = &request["params"]["toolCall"];
    assert_eq!(tool_call["toolCallId"], "call_esc");
    assert_eq!(tool_call["status"], "pending");
    assert_eq!(tool_call["kind"], "execute");
    assert_eq!(tool_call["title"], "touch /etc/dsh-escalated");
    assert_eq!(
        tool_call["rawInput"],
        serde_json::from_str::<Value>(&arguments).unwrap(),
        "the arguments object"
    );
    let what = tool_call["content"][0]["content"]["text"].as_str().unwrap();
    assert!(what.contains("Command: touch /etc/dsh-escalated"), "{what}");
    assert!(what.contains("\"danger-full-access\""), "{what}");
    assert!(what.contains("the user asked for a file in /etc"), "{what}");
    let kinds: Vec<&str> = request["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["kind"].as_str())
        .collect();
    assert_eq!(
        kinds,
        ["allow_once", "reject_once"],
        "no blanket grant for an escalation"
    );
    // The card went pending before the question, and failed after the rejection.
    let statuses: Vec<&str> = acp
        .frames
        .iter()
        .filter(|f| f["params"]["update"]["toolCallId"] == "call_esc")
        .filter_map(|f| f["params"]["update"]["status"].as_str())
        .collect();
    assert_eq!(statuses, ["in_progress", "pending", "failed"]);
    acp.stop().await;
    assert!(!std::path::Path::new("/etc/dsh-escalated").exists());
    let bodies = bodies.lock().unwrap().clone();
    assert!(
        bodies[1]
            .to_string()
            .contains("the user rejected escalating this command"),
        "{}",
        bodies[1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_session_new_asks_the_client_to_authenticate() {
    let (url, bodies) = model_server(Vec::new()).await;
    let work = workspace(NO_TITLES);
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut acp = Acp::start_with(&cwd, home.path(), &url, &[("DEEPSEEK_API_KEY", "")]);
    let init = initialize(&mut acp).await;
    let method = &init["result"]["authMethods"][0];
    assert!(
        method["description"]
            .as_str()
            .unwrap()
            .contains("DEEPSEEK_API_KEY"),
        "{method}"
    );
    let refused = acp
        .request(2, "session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("DEEPSEEK_API_KEY"),
        "{refused}"
    );
    let auth = acp
        .request(3, "authenticate", json!({"methodId": "api-key-env"}))
        .await;
    assert_eq!(auth["error"]["code"], -32000, "{auth}");
    acp.stop().await;
    assert!(bodies.lock().unwrap().is_empty());
    let sessions = dsh_session::JsonlStore::new(home.path().to_path_buf())
        .list()
        .unwrap();
    assert!(sessions.is_empty(), "no half-made session");
}

/// An editor restart: a session switched to `read-only` in one `dsh acp` process is loaded in
/// another, which must offer it as `read-only` and refuse the model's write there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_mode_survives_session_load_in_another_process() {
    let arguments = json!({"file_path": "planted.txt", "content": "x"}).to_string();
    let call = json!({"tool_calls": [{"index": 0, "id": "call_w", "type": "function",
        "function": {"name": "write", "arguments": arguments}}]});
    let (url, bodies) = model_server(vec![
        sse(&[call], "tool_calls"),
        sse(&[json!({"content": "ok"})], "stop"),
    ])
    .await;
    let config = format!("{NO_TITLES}\n[plugins.sandbox]\nmode = \"workspace-write\"\n");
    let work = workspace(&config);
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    // The folder is trusted: its configured mode (workspace-write) is the default to return to.
    let trusted = std::process::Command::new(env!("CARGO_BIN_EXE_dsh"))
        .args(["trust"])
        .arg(&cwd)
        .env("DSH_HOME", home.path())
        .output()
        .unwrap();
    assert!(trusted.status.success(), "{trusted:?}");

    let mut first = Acp::start(&cwd, home.path(), &url);
    initialize(&mut first).await;
    let created = first
        .request(2, "session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    assert_eq!(
        created["result"]["modes"]["currentModeId"], "workspace-write",
        "{created}"
    );
    let id = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let set = first
        .request(
            3,
            "session/set_mode",
            json!({"sessionId": id, "modeId": "read-only"}),
        )
        .await;
    assert!(set.get("error").is_none(), "{set}");
    first.stop().await;

    let mut second = Acp::start(&cwd, home.path(), &url);
    second.answer = Box::new(|_| Ok(json!({"outcome": {"outcome": "cancelled"}})));
    initialize(&mut second).await;
    let loaded = second
        .request(
            2,
            "session/load",
            json!({"sessionId": id, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert_eq!(
        loaded["result"]["modes"]["currentModeId"], "read-only",
        "the mode came back: {loaded}"
    );
    let answer = second
        .request(
            3,
            "session/prompt",
            json!({"sessionId": id, "prompt": [{"type": "text", "text": "write it"}]}),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    second.stop().await;
    assert!(
        !cwd.join("planted.txt").exists(),
        "a write went through in a read-only session"
    );
    let bodies = bodies.lock().unwrap().clone();
    assert!(
        bodies[1]
            .to_string()
            .contains("file access denied under read-only mode"),
        "{}",
        bodies[1]
    );
}
