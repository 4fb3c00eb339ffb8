//! Lifecycle and error mapping over raw JSON-RPC lines (§1A), mirroring the conformance
//! scenarios text-turn, multi-turn, error-finish, empty-response-retry, cancel, handshake,
//! reject-extra-dirs, escalation-rejected, plus the robustness rules.

use dsh_agent::scripted::Script;
use dsh_agent::scripted::error_response;
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_llm::RetryPolicy;
use dsh_protocol::LlmFailure;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::harness::TestHost;
use super::harness::Wire;
use super::harness::message_text;

#[tokio::test]
async fn handshake_answers_protocol_1_and_a_uuid_session() {
    let home = tempfile::tempdir().unwrap();
    let mut wire = Wire::start(TestHost::new(home.path()));
    wire.request(
        1,
        "initialize",
        json!({"protocolVersion": 7, "clientCapabilities": {}}),
    );
    let (_, init) = wire.until_response(1).await;
    assert_eq!(init["result"]["protocolVersion"], 1);
    assert_eq!(
        init["result"]["agentInfo"],
        json!({"name": "deepseek-harness-acp", "version": env!("CARGO_PKG_VERSION")})
    );
    assert_eq!(init["result"]["agentCapabilities"]["loadSession"], true);
    assert_eq!(
        init["result"]["agentCapabilities"]["mcpCapabilities"],
        json!({"http": false, "sse": false})
    );
    assert_eq!(
        init["result"]["agentCapabilities"]["promptCapabilities"],
        json!({"image": false, "audio": false, "embeddedContext": true})
    );
    assert_eq!(
        init["result"]["authMethods"],
        json!([{"id": "api-key-env", "name": "API key in the environment",
            "description": "Set PATH in the environment your editor starts `dsh acp` with (the agent server's `env` setting), then restart the agent."}])
    );
    wire.request(2, "authenticate", json!({"methodId": "api-key-env"}));
    let (_, auth) = wire.until_response(2).await;
    assert_eq!(auth["result"], json!({}));
    wire.request(
        3,
        "session/new",
        json!({"cwd": home.path(), "mcpServers": []}),
    );
    let (_, created) = wire.until_response(3).await;
    let id = created["result"]["sessionId"].as_str().unwrap();
    assert!(
        uuid::Uuid::parse_str(id).is_ok_and(|u| u.get_version_num() == 4),
        "{id}"
    );
    assert_eq!(
        created["result"]["modes"]["currentModeId"],
        "workspace-write"
    );
    wire.close();
    wire.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn session_new_rejections_use_the_exact_texts() {
    let home = tempfile::tempdir().unwrap();
    let mut wire = Wire::start(TestHost::new(home.path()));
    wire.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    wire.until_response(1).await;
    wire.request(
        2,
        "session/new",
        json!({"cwd": home.path(), "mcpServers": [], "additionalDirectories": ["/extra-dir"]}),
    );
    let (_, response) = wire.until_response(2).await;
    assert_eq!(
        response["error"],
        json!({"code": -32602, "message": "Invalid params: additionalDirectories is not supported"})
    );
    wire.request(
        3,
        "session/new",
        json!({"cwd": "relative/dir", "mcpServers": []}),
    );
    let (_, response) = wire.until_response(3).await;
    assert_eq!(
        response["error"],
        json!({"code": -32602, "message": "Invalid params: cwd must be an absolute path: relative/dir"})
    );
    let server = json!({"name": "x", "command": "/bin/true", "args": [], "env": []});
    wire.request(
        4,
        "session/new",
        json!({"cwd": home.path(), "mcpServers": [server]}),
    );
    let (_, response) = wire.until_response(4).await;
    assert_eq!(
        response["error"],
        json!({"code": -32602, "message": "Invalid params: mcpServers is not supported"})
    );
}

/// `write` would create a missing folder; a file is no folder: both are refused up front,
/// as `dsh exec -C` refuses them.
#[tokio::test]
async fn session_new_and_load_refuse_a_cwd_that_is_missing_or_a_file() {
    let home = tempfile::tempdir().unwrap();
    let mut wire = Wire::start(TestHost::new(home.path()));
    wire.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    wire.until_response(1).await;
    let missing = home.path().join("no/such/folder");
    wire.request(2, "session/new", json!({"cwd": missing, "mcpServers": []}));
    let (_, response) = wire.until_response(2).await;
    assert_eq!(
        response["error"],
        json!({"code": -32602, "message": format!("Invalid params: cwd is not an existing folder: {} (no such directory)", missing.display())})
    );
    assert!(!missing.exists());
    let file = home.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    wire.request(3, "session/new", json!({"cwd": file, "mcpServers": []}));
    let (_, response) = wire.until_response(3).await;
    assert_eq!(
        response["error"],
        json!({"code": -32602, "message": format!("Invalid params: cwd is not an existing folder: {} (not a directory)", file.display())})
    );
    wire.request(
        4,
        "session/load",
        json!({"sessionId": "x", "cwd": missing, "mcpServers": []}),
    );
    let (_, response) = wire.until_response(4).await;
    assert_eq!(response["error"]["code"], -32602, "{response}");
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cwd is not an existing folder"),
        "{response}"
    );
}

#[tokio::test]
async fn text_turns_stream_the_model_text_and_end_turn() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    factory.adapter.push_chunks(text_response("ONE"));
    factory.adapter.push_chunks(text_response("TWO"));
    let mut wire = Wire::start(factory.clone());
    let session = wire.open(home.path(), false).await;
    for (id, word) in [(3, "ONE"), (4, "TWO")] {
        wire.request(
            id,
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "say it"}]}),
        );
        let (frames, response) = wire.until_response(id).await;
        assert_eq!(message_text(&frames), word);
        assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    }
    assert_eq!(factory.adapter.remaining(), 0);
}

#[tokio::test]
async fn a_failed_turn_rejects_the_prompt_with_turn_failed() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    factory.adapter.set_retry_policy(RetryPolicy {
        max_retries: 0,
        ..RetryPolicy::default()
    });
    factory.adapter.push_chunks(error_response(LlmFailure::new(
        "AUTH",
        "simulated provider error (HTTP 401)",
    )));
    let mut wire = Wire::start(factory);
    let session = wire.open(home.path(), false).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "fail"}]}),
    );
    let (frames, response) = wire.until_response(3).await;
    assert_eq!(message_text(&frames), "");
    assert_eq!(
        response["error"],
        json!({"code": -32603, "message": "Internal error: turn failed: simulated provider error (HTTP 401)"})
    );
}

#[tokio::test]
async fn a_retried_attempt_adds_no_message_text() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    factory.adapter.set_retry_policy(RetryPolicy {
        max_retries: 2,
        base_delay: std::time::Duration::from_millis(1),
        max_delay: std::time::Duration::from_millis(1),
        jitter_ratio: 0.0,
        ..RetryPolicy::default()
    });
    factory.adapter.push_chunks(error_response(LlmFailure::new(
        "EMPTY_RESPONSE",
        "empty completion",
    )));
    factory.adapter.push_chunks(text_response("Recovered."));
    let mut wire = Wire::start(factory);
    let session = wire.open(home.path(), false).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "retry"}]}),
    );
    let (frames, response) = wire.until_response(3).await;
    assert_eq!(message_text(&frames), "Recovered.");
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let thoughts: Vec<_> = frames
        .iter()
        .filter(|f| f["params"]["update"]["sessionUpdate"] == "agent_thought_chunk")
        .collect();
    assert_eq!(
        thoughts.len(),
        1,
        "the retry notice is a thought: {frames:#?}"
    );
}

#[tokio::test]
async fn cancel_settles_cancelled_after_the_partial_text() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    factory.adapter.push(Script::Hang);
    let mut wire = Wire::start(factory);
    let session = wire.open(home.path(), false).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "long"}]}),
    );
    let first = wire.next().await;
    assert_eq!(first["params"]["update"]["content"]["text"], "partial");
    // A second prompt while one runs is refused; the first one is unaffected.
    wire.request(
        4,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "again"}]}),
    );
    let (_, refused) = wire.until_response(4).await;
    assert_eq!(
        refused["error"],
        json!({"code": -32602, "message": "Invalid params: a prompt is already in flight for this session"})
    );
    wire.send(
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
    );
    let (frames, response) = wire.until_response(3).await;
    assert_eq!(message_text(&frames), "");
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
}

#[tokio::test]
async fn protocol_errors_are_answered_and_nothing_panics() {
    let home = tempfile::tempdir().unwrap();
    let mut wire = Wire::start(TestHost::new(home.path()));
    wire.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    wire.until_response(1).await;
    wire.send_raw("{this is not json");
    let parse = wire.next().await;
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    wire.request(2, "session/frobnicate", json!({}));
    let (_, unknown) = wire.until_response(2).await;
    assert_eq!(unknown["error"]["code"], -32601);
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]}),
    );
    let (_, response) = wire.until_response(3).await;
    assert_eq!(
        response["error"],
        json!({"code": -32602, "message": "Invalid params: unknown session: nope"})
    );
    // Cancel for an unknown session is ignored (a notification has no answer).
    wire.send(
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "nope"}}),
    );
    wire.request(
        4,
        "session/new",
        json!({"cwd": home.path(), "mcpServers": []}),
    );
    let (_, created) = wire.until_response(4).await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
    wire.request(5, "session/prompt", json!({"sessionId": session, "prompt": [{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]}));
    let (_, audio) = wire.until_response(5).await;
    assert_eq!(
        audio["error"]["message"],
        "Invalid params: audio prompt content is not supported"
    );
    wire.request(
        6,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "   "}]}),
    );
    let (_, empty) = wire.until_response(6).await;
    assert_eq!(empty["error"]["message"], "Invalid params: empty prompt");
}

#[tokio::test]
async fn stdin_closed_mid_turn_cancels_answers_and_keeps_the_log_valid() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    factory.adapter.push(Script::Hang);
    let mut wire = Wire::start(factory.clone());
    let session = wire.open(home.path(), false).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "long"}]}),
    );
    wire.next().await;
    wire.close();
    let (_, response) = wire.until_response(3).await;
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
    wire.task.await.unwrap().unwrap();
    // The disposed agent released the log: it resumes cleanly, its last turn closed as aborted.
    let log = factory.store.resume(&session).unwrap();
    let end = log
        .events()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e.kind == "turn/end")
        .cloned()
        .unwrap();
    assert_eq!(
        end.data["reason"],
        json!({"kind": "aborted", "reason": {"kind": "user"}})
    );
}

#[tokio::test]
async fn a_rejected_permission_denies_the_tool() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    let args = json!({"command": "echo needs-approval"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_1", "bash", &args, None));
    factory
        .adapter
        .push_chunks(text_response("The user rejected it."));
    let mut wire = Wire::start(factory.clone());
    let session = wire.open(home.path(), false).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "run it"}]}),
    );
    let ask = loop {
        let frame = wire.next().await;
        if frame["method"] == "session/request_permission" {
            break frame;
        }
    };
    // The full call the client was shown, pending, led by what is asked.
    assert_eq!(
        ask["params"]["toolCall"],
        json!({"toolCallId": "call_1", "kind": "execute", "status": "pending",
            "title": "echo needs-approval",
            "content": [
                {"type": "content", "content": {"type": "text", "text": "bash needs approval to run."}},
                {"type": "content", "content": {"type": "text", "text": "Runs a command"}}
            ],
            "rawInput": {"command": "echo needs-approval"}})
    );
    let pending = ask_status(&wire.seen, "call_1");
    assert_eq!(
        pending,
        vec!["in_progress", "pending"],
        "pending while asking"
    );
    let kinds: Vec<_> = ask["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].clone())
        .collect();
    assert_eq!(
        kinds,
        vec![
            json!("allow_once"),
            json!("allow_always"),
            json!("reject_once"),
            json!("reject_always")
        ]
    );
    wire.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": {"outcome": "selected", "optionId": "reject-once"}}}));
    let (frames, response) = wire.until_response(3).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(message_text(&frames), "The user rejected it.");
    let update = frames
        .iter()
        .find(|f| f["params"]["update"]["sessionUpdate"] == "tool_call_update")
        .unwrap();
    assert_eq!(update["params"]["update"]["status"], "failed");
    let requests = factory.adapter.requests();
    let last = serde_json::to_string(&requests.last().unwrap().messages).unwrap();
    assert!(
        last.contains("the user rejected tool \\\"bash\\\""),
        "{last}"
    );
}

/// The statuses `call_id` went through so far, in order (`tool_call`, then updates).
fn ask_status(frames: &[serde_json::Value], call_id: &str) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f["method"] == "session/update")
        .map(|f| &f["params"]["update"])
        .filter(|u| u["toolCallId"] == call_id)
        .filter_map(|u| u["status"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn authentication_is_required_without_credentials() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    factory.set_key_env(super::harness::ABSENT_KEY_ENV).await;
    let mut wire = Wire::start(factory.clone());
    wire.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    wire.until_response(1).await;
    wire.request(
        2,
        "session/new",
        json!({"cwd": home.path(), "mcpServers": []}),
    );
    let (_, refused) = wire.until_response(2).await;
    assert_eq!(
        refused["error"],
        json!({"code": -32000, "message": "Authentication required: no API key: set DSH_ACP_TEST_UNSET_KEY in the environment your editor starts `dsh acp` with"})
    );
    assert!(factory.store.list().unwrap().is_empty(), "no session made");
    wire.request(3, "authenticate", json!({"methodId": "api-key-env"}));
    let (_, still) = wire.until_response(3).await;
    assert_eq!(still["error"]["code"], -32000);
    wire.request(4, "authenticate", json!({"methodId": "other"}));
    let (_, unknown) = wire.until_response(4).await;
    assert_eq!(
        unknown["error"],
        json!({"code": -32602, "message": "Invalid params: unknown authentication method: other"})
    );
    factory.set_key_env(super::harness::PRESENT_KEY_ENV).await;
    wire.request(5, "authenticate", json!({"methodId": "api-key-env"}));
    let (_, ok) = wire.until_response(5).await;
    assert_eq!(ok["result"], json!({}));
    wire.request(
        6,
        "session/new",
        json!({"cwd": home.path(), "mcpServers": []}),
    );
    let (_, created) = wire.until_response(6).await;
    assert!(created["result"]["sessionId"].is_string(), "{created}");
    wire.close();
    wire.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn an_always_answer_is_remembered_for_the_session() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    let args = json!({"command": "echo needs-approval"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_1", "bash", &args, None));
    factory
        .adapter
        .push_chunks(tool_call_response("call_2", "bash", &args, None));
    factory.adapter.push_chunks(text_response("ok"));
    let mut wire = Wire::start(factory);
    let session = wire.open(home.path(), false).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "run twice"}]}),
    );
    let ask = loop {
        let frame = wire.next().await;
        if frame["method"] == "session/request_permission" {
            break frame;
        }
    };
    wire.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow-always"}}}));
    let (frames, response) = wire.until_response(3).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert!(
        !frames
            .iter()
            .any(|f| f["method"] == "session/request_permission"),
        "asked twice: {frames:#?}"
    );
    let completed = frames
        .iter()
        .filter(|f| f["params"]["update"]["status"] == "completed")
        .count();
    assert_eq!(completed, 2);
}

#[tokio::test]
async fn set_mode_applies_the_preset_and_notifies() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    let mut wire = Wire::start(factory.clone());
    let session = wire.open(home.path(), false).await;
    wire.request(
        3,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "read-only"}),
    );
    let (frames, response) = wire.until_response(3).await;
    assert_eq!(response["result"], json!({}));
    assert_eq!(
        frames[0]["params"]["update"],
        json!({"sessionUpdate": "current_mode_update", "currentModeId": "read-only"})
    );
    let agent = factory.agent(&session);
    assert_eq!(
        factory.sessions().current_preset(&agent).map(|p| p.name),
        Some("read-only"),
        "the host switched the session's preset"
    );
    wire.request(
        4,
        "session/set_mode",
        json!({"sessionId": session, "modeId": "yolo"}),
    );
    let (_, response) = wire.until_response(4).await;
    assert_eq!(
        response["error"]["message"],
        "Invalid params: unknown mode: yolo"
    );
}

#[tokio::test]
async fn load_and_list_validate_their_requests() {
    let home = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    factory.adapter.push_chunks(text_response("hello"));
    let mut wire = Wire::start(factory.clone());
    let session = wire.open(home.path(), false).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
    );
    wire.until_response(3).await;
    let load = |id: u64, cwd: &std::path::Path| json!({"jsonrpc": "2.0", "id": id, "method": "session/load", "params": {"sessionId": session, "cwd": cwd, "mcpServers": []}});
    wire.send(load(4, home.path()));
    let (_, live) = wire.until_response(4).await;
    assert_eq!(
        live["error"]["message"],
        format!("Invalid params: session is already loaded: {session}")
    );
    wire.request(5, "session/list", json!({"cursor": "abc"}));
    let (_, cursor) = wire.until_response(5).await;
    assert_eq!(
        cursor["error"]["message"],
        "Invalid params: session/list cursors are not supported"
    );
    wire.request(6, "session/list", json!({"cwd": "rel"}));
    let (_, relative) = wire.until_response(6).await;
    assert_eq!(
        relative["error"]["message"],
        "Invalid params: cwd must be an absolute path: rel"
    );
    wire.request(7, "session/list", json!({}));
    let (_, listed) = wire.until_response(7).await;
    assert_eq!(listed["result"]["sessions"][0]["sessionId"], json!(session));
    wire.close();
    wire.task.await.unwrap().unwrap();

    // A new connection: the stored session exists but belongs to another cwd.
    let mut wire = Wire::start(factory);
    wire.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    wire.until_response(1).await;
    wire.send(load(2, other.path()));
    let (_, wrong) = wire.until_response(2).await;
    assert_eq!(wrong["error"]["code"], -32602, "{wrong}");
    wire.send(load(3, home.path()));
    let (frames, loaded) = wire.until_response(3).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    assert_eq!(message_text(&frames), "hello");
    // Streamed one delta per character, replayed as one update.
    let chunks = frames
        .iter()
        .filter(|f| f["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .count();
    assert_eq!(
        chunks, 1,
        "replay coalesces a message's deltas: {frames:#?}"
    );
    let user: Vec<_> = frames
        .iter()
        .filter(|f| f["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .collect();
    assert_eq!(user.len(), 1);
}

#[tokio::test]
async fn cancel_during_a_permission_request_withdraws_it() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    let args = json!({"command": "echo needs-approval"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_1", "bash", &args, None));
    let mut wire = Wire::start(factory.clone());
    let session = wire.open(home.path(), false).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "run it"}]}),
    );
    let ask = loop {
        let frame = wire.next().await;
        if frame["method"] == "session/request_permission" {
            break frame;
        }
    };
    wire.send(
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
    );
    let (frames, response) = wire.until_response(3).await;
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
    let withdrawn = frames
        .iter()
        .any(|f| f["method"] == "$/cancel_request" && f["params"]["requestId"] == ask["id"]);
    assert!(
        withdrawn,
        "the pending permission request is cancelled: {frames:#?}"
    );
    // A late answer is harmless.
    wire.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}}}));
    factory.adapter.push_chunks(text_response("still here"));
    wire.request(
        4,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "next"}]}),
    );
    let (frames, response) = wire.until_response(4).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(message_text(&frames), "still here");
}

#[tokio::test]
async fn sessions_are_independent() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    factory.adapter.push(Script::Hang);
    factory.adapter.push_chunks(text_response("B"));
    let mut wire = Wire::start(factory);
    let first = wire.open(home.path(), false).await;
    wire.request(
        10,
        "session/new",
        json!({"cwd": home.path(), "mcpServers": []}),
    );
    let (_, created) = wire.until_response(10).await;
    let second = created["result"]["sessionId"].as_str().unwrap().to_owned();
    assert_ne!(first, second);
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": first, "prompt": [{"type": "text", "text": "hang"}]}),
    );
    wire.next().await;
    wire.request(
        4,
        "session/prompt",
        json!({"sessionId": second, "prompt": [{"type": "text", "text": "talk"}]}),
    );
    let (frames, response) = wire.until_response(4).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let second_text: String = frames
        .iter()
        .filter(|f| f["params"]["sessionId"] == json!(second))
        .filter_map(|f| f["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(second_text, "B");
    wire.send(
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": first}}),
    );
    let (_, response) = wire.until_response(3).await;
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
}

#[tokio::test]
async fn slash_commands_are_announced_and_run_without_a_model_request() {
    use dsh_commands::CommandCall;
    use dsh_commands::CommandResult;
    use dsh_commands::CommandSpec;
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    let echo = CommandSpec::new("echo", "Say it back", |call: CommandCall| async move {
        Ok(CommandResult::text(call.argument().to_owned()))
    })
    .input("<text>");
    factory.commands.register(&factory.root, echo).unwrap();
    factory
        .commands
        .register(
            &factory.root,
            CommandSpec::new("broken", "Always fails", |_: CommandCall| async {
                Err("disk on fire".to_owned())
            }),
        )
        .unwrap();
    let mut wire = Wire::start(factory.clone());
    wire.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    wire.until_response(1).await;
    wire.request(
        2,
        "session/new",
        json!({"cwd": home.path(), "mcpServers": []}),
    );
    let (_, created) = wire.until_response(2).await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let announced = wire.next().await;
    assert_eq!(
        announced["params"]["update"],
        json!({"sessionUpdate": "available_commands_update", "availableCommands": [
            {"name": "broken", "description": "Always fails"},
            {"name": "echo", "description": "Say it back", "input": {"hint": "<text>"}}
        ]})
    );
    let prompt = |id: u64, text: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}})
    };
    for (id, line, said) in [
        (3, "/echo hello there", "hello there"),
        (4, "/nope x", "Error: unknown command: /nope x"),
        (5, "/broken", "Error: command failed: disk on fire"),
    ] {
        wire.send(prompt(id, line));
        let (frames, response) = wire.until_response(id).await;
        assert_eq!(
            response["result"],
            json!({"stopReason": "end_turn"}),
            "{line}"
        );
        assert_eq!(message_text(&frames), said, "{line}");
    }
    assert!(factory.adapter.requests().is_empty(), "no model request");
    // A command registered later is announced to the live session.
    let later = factory
        .commands
        .register(
            &factory.root,
            CommandSpec::new("later", "Arrived later", |_: CommandCall| async {
                Ok(CommandResult::ok())
            }),
        )
        .unwrap();
    let update = wire.next().await;
    let names: Vec<&str> = update["params"]["update"]["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["broken", "echo", "later"]);
    later.dispose();
    let update = wire.next().await;
    assert_eq!(
        update["params"]["update"]["availableCommands"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // A path is not a command: it goes to the model.
    factory.adapter.push_chunks(text_response("A path."));
    wire.send(prompt(6, "/tmp/x is odd"));
    let (frames, _) = wire.until_response(6).await;
    assert_eq!(message_text(&frames), "A path.");
    let events = factory.store.load(&session).unwrap().events;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e.kind.as_str())
        .filter(|k| k.starts_with("command/"))
        .collect();
    assert_eq!(
        kinds,
        ["command/run", "command/done", "command/run", "command/done"]
    );
    wire.close();
    wire.task.await.unwrap().unwrap();
}
