//! Gap-filling tests for tool-catalog-spec §11 ACP items that the other suites did not pin
//! (see `docs/checklists.md`): cwd hand-off, admission that writes nothing, resource links as
//! the model sees them, max-tokens settlement, the durable cancel reason, autonomous output,
//! and how each client permission answer maps to an approval outcome.

use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_agent::scripted::Script;
use dsh_agent::scripted::max_tokens_response;
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_protocol::Message;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use super::harness::TestHost;
use super::harness::Wire;
use super::harness::message_text;

fn types(factory: &TestHost, session: &str) -> Vec<String> {
    let log = factory.store.load(session).unwrap();
    log.events.iter().map(|e| e.kind.to_string()).collect()
}

fn prompt(wire: &Wire, id: u64, session: &str, blocks: Value) {
    wire.request(
        id,
        "session/prompt",
        json!({"sessionId": session, "prompt": blocks}),
    );
}

#[tokio::test]
async fn item_06_the_session_cwd_is_the_request_cwd() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    let mut wire = Wire::start(factory.clone());
    let session = wire.open(workspace.path(), false).await;
    let agent = factory.agent(&session);
    assert_eq!(agent.id(), session);
    let cwd = workspace.path().to_string_lossy().into_owned();
    assert_eq!(agent.log().header().cwd.as_deref(), Some(cwd.as_str()));
    assert_eq!(agent.log().id(), session);
}

#[tokio::test]
async fn item_08_a_whitespace_prompt_logs_no_turn() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    factory.adapter.push_chunks(text_response("fine"));
    let mut wire = Wire::start(factory.clone());
    let session = wire.open(home.path(), false).await;
    prompt(
        &wire,
        3,
        &session,
        json!([{"type": "text", "text": " \n\t "}]),
    );
    let (_, empty) = wire.until_response(3).await;
    assert_eq!(
        empty["error"],
        json!({"code": -32602, "message": "Invalid params: empty prompt"})
    );
    assert!(
        factory
            .store
            .find(&session)
            .unwrap()
            .is_none_or(|_| { !types(&factory, &session).iter().any(|t| t == "turn/start") }),
        "an empty prompt starts no turn"
    );
    assert_eq!(factory.adapter.requests().len(), 0);
    // The slot was freed: the next prompt runs.
    prompt(&wire, 4, &session, json!([{"type": "text", "text": "go"}]));
    let (_, ok) = wire.until_response(4).await;
    assert_eq!(ok["result"], json!({"stopReason": "end_turn"}));
}

#[tokio::test]
async fn item_09_a_resource_link_reaches_the_model_inline() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    factory.adapter.push_chunks(text_response("seen"));
    let mut wire = Wire::start(factory.clone());
    let session = wire.open(home.path(), false).await;
    prompt(
        &wire,
        3,
        &session,
        json!([
            {"type": "text", "text": "look at"},
            {"type": "resource_link", "name": "a \"b\".rs", "uri": "file:///w/a.rs"},
            {"type": "text", "text": "please"}
        ]),
    );
    let (_, response) = wire.until_response(3).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let request = factory.adapter.requests().remove(0);
    let user: Vec<&Message> = request
        .messages
        .iter()
        .map(|m| m.as_ref())
        .filter(|m| m.role == dsh_protocol::Role::User)
        .collect();
    assert_eq!(
        dsh_protocol::text_of(&user[0].content),
        "look at\n[resource_link name=\"a \\\"b\\\".rs\" uri=\"file:///w/a.rs\"]\nplease"
    );
    assert_eq!(user[0].content.len(), 1, "one concatenated text block");
}

#[tokio::test]
async fn item_10_an_unadvertised_image_is_refused_and_nothing_is_written() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    let mut wire = Wire::start(factory.clone());
    let session = wire.open(home.path(), false).await;
    prompt(
        &wire,
        3,
        &session,
        json!([
            {"type": "text", "text": "what is this"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
        ]),
    );
    let (_, refused) = wire.until_response(3).await;
    assert_eq!(
        refused["error"],
        json!({"code": -32602, "message": "Invalid params: inline image prompts were not advertised by this connection"})
    );
    let written = factory
        .store
        .find(&session)
        .unwrap()
        .map(|_| types(&factory, &session))
        .unwrap_or_default();
    assert!(
        written
            .iter()
            .all(|t| !t.starts_with("agent/inbox") && t != "user/message" && t != "turn/start"),
        "{written:?}"
    );
}

#[tokio::test]
async fn item_14_a_max_tokens_turn_settles_end_turn() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    factory.adapter.push_chunks(max_tokens_response("cut"));
    let mut wire = Wire::start(factory.clone());
    let session = wire.open(home.path(), false).await;
    prompt(
        &wire,
        3,
        &session,
        json!([{"type": "text", "text": "long"}]),
    );
    let (_, response) = wire.until_response(3).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let log = factory.store.load(&session).unwrap();
    let end = log.events.iter().rfind(|e| e.kind == "turn/end").unwrap();
    assert_eq!(end.data["reason"], json!({"kind": "max-tokens"}));
}

#[tokio::test]
async fn item_15_an_explicit_cancel_ends_the_turn_aborted_by_the_user() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    factory.adapter.push(Script::Hang);
    let mut wire = Wire::start(factory.clone());
    let session = wire.open(home.path(), false).await;
    prompt(
        &wire,
        3,
        &session,
        json!([{"type": "text", "text": "long"}]),
    );
    wire.next().await; // the streamed "partial"
    wire.send(
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
    );
    let (_, response) = wire.until_response(3).await;
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
    let log = factory.store.load(&session).unwrap();
    let end = log.events.iter().rfind(|e| e.kind == "turn/end").unwrap();
    assert_eq!(
        end.data["reason"],
        json!({"kind": "aborted", "reason": {"kind": "user"}})
    );
}

#[tokio::test]
async fn item_19_autonomous_output_is_sent_without_a_prompt() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    factory.adapter.push_chunks(text_response("unsolicited"));
    let mut wire = Wire::start(factory.clone());
    let session = wire.open(home.path(), false).await;
    let agent = factory.agent(&session);
    // A turn nobody prompted over ACP (as a background-job wake would start).
    agent.followup(Message::user_text("job finished")).unwrap();
    let mut frames = Vec::new();
    while message_text(&frames) != "unsolicited" {
        let frame = wire.next().await;
        assert_eq!(frame["params"]["sessionId"], json!(session), "{frame}");
        frames.push(frame);
    }
    assert!(
        frames.iter().all(|f| f.get("id").is_none()),
        "notifications only: {frames:#?}"
    );
}

/// Runs one `bash` call that needs approval, answers the permission request with `answer`
/// (a JSON-RPC `result` or `error` member), and returns the tool result text the model saw.
async fn answered(answer: (&str, Value)) -> String {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    let args = json!({"command": "echo needs-approval"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_1", "bash", &args, None));
    factory.adapter.push_chunks(text_response("done"));
    let mut wire = Wire::start(factory.clone());
    let session = wire.open(home.path(), false).await;
    prompt(
        &wire,
        3,
        &session,
        json!([{"type": "text", "text": "run it"}]),
    );
    let ask = loop {
        let frame = wire.next().await;
        if frame["method"] == "session/request_permission" {
            break frame;
        }
    };
    let mut reply = json!({"jsonrpc": "2.0", "id": ask["id"]});
    reply[answer.0] = answer.1;
    wire.send(reply);
    let (_, response) = wire.until_response(3).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let log = factory.store.load(&session).unwrap();
    let result = log.events.iter().find(|e| e.kind == "tool/result").unwrap();
    result.data["message"]["content"][0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn item_21_client_answers_map_to_approval_outcomes() {
    let selected = |id: &str| {
        (
            "result",
            json!({"outcome": {"outcome": "selected", "optionId": id}}),
        )
    };
    assert_eq!(answered(selected("allow-once")).await, "needs-approval\n");
    let rejected = "Error: the user rejected tool \"bash\"";
    assert_eq!(answered(selected("reject-once")).await, rejected);
    assert_eq!(answered(selected("no-such-option")).await, rejected);
    assert_eq!(
        answered(("result", json!({"outcome": {"outcome": "cancelled"}}))).await,
        "Error: approval for tool \"bash\" was cancelled"
    );
    assert_eq!(
        answered((
            "error",
            json!({"code": -32603, "message": "Internal error: no UI"})
        ))
        .await,
        "Error: tool \"bash\" requires approval, but no approval channel is available"
    );
}

fn approval_request(
    agent: &AgentHandle,
    call_id: &str,
) -> (
    dsh_tools::ApprovalRequest,
    tokio_util::sync::CancellationToken,
) {
    let signal = tokio_util::sync::CancellationToken::new();
    let request = dsh_tools::ApprovalRequest {
        agent: Arc::new(agent.clone()),
        tool_name: "bash".into(),
        call_id: call_id.into(),
        reason: None,
        signal: signal.clone(),
    };
    (request, signal)
}

#[tokio::test]
async fn item_22_requests_without_a_call_or_from_a_foreign_agent_stay_local() {
    use dsh_tools::ApprovalOutcome;
    use dsh_tools::ApprovalService;

    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    let mut wire = Wire::start(factory.clone());
    let session = wire.open(home.path(), false).await;
    wire.request(
        3,
        "session/new",
        json!({"cwd": home.path(), "mcpServers": []}),
    );
    let (_, second) = wire.until_response(3).await;
    let (owned, foreign) = (
        factory.agent(&session),
        factory.agent(second["result"]["sessionId"].as_str().unwrap()),
    );
    let service = owned.scope().service::<dyn ApprovalService>().unwrap();

    // Answered locally and at once; a request that reached the client would wait for it.
    let local = |request| tokio::time::timeout(super::harness::TIMEOUT, service.request(request));
    let (no_call, _) = approval_request(&owned, "");
    assert_eq!(local(no_call).await.unwrap(), ApprovalOutcome::Unavailable);
    let (impostor, _) = approval_request(&foreign, "call_9");
    assert_eq!(local(impostor).await.unwrap(), ApprovalOutcome::Unavailable);
    // Neither reached the client: the next frame is the answer to a later request.
    wire.request(4, "session/list", json!({}));
    let (before, _) = wire.until_response(4).await;
    assert!(
        before
            .iter()
            .all(|f| f["method"] != "session/request_permission"),
        "{before:#?}"
    );

    // The owned agent with a call id is asked, with the ACP call id attached.
    let (owned_call, _) = approval_request(&owned, "call_1");
    let pending = tokio::spawn(service.request(owned_call));
    let ask = wire.next().await;
    assert_eq!(ask["method"], "session/request_permission");
    assert_eq!(ask["params"]["sessionId"], json!(session));
    // A call the client was never shown is described from the request alone.
    assert_eq!(
        ask["params"]["toolCall"],
        json!({"toolCallId": "call_1", "kind": "other", "status": "pending", "title": "bash",
            "content": [{"type": "content", "content": {"type": "text", "text": "bash needs approval to run."}}]})
    );
    wire.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}}}));
    assert_eq!(pending.await.unwrap(), ApprovalOutcome::AllowedOnce);
}

#[tokio::test]
async fn item_18_disconnect_disposes_every_owned_agent() {
    let home = tempfile::tempdir().unwrap();
    let factory = TestHost::new(home.path());
    factory.adapter.push(Script::Hang);
    let mut wire = Wire::start(factory.clone());
    let busy = wire.open(home.path(), false).await;
    wire.request(
        3,
        "session/new",
        json!({"cwd": home.path(), "mcpServers": []}),
    );
    let (_, idle) = wire.until_response(3).await;
    let agents = [
        factory.agent(&busy),
        factory.agent(idle["result"]["sessionId"].as_str().unwrap()),
    ];
    prompt(&wire, 4, &busy, json!([{"type": "text", "text": "long"}]));
    wire.next().await;
    wire.close();
    let (_, response) = wire.until_response(4).await;
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
    wire.task.await.unwrap().unwrap();
    for agent in &agents {
        assert!(
            agent.followup(Message::user_text("late")).is_err(),
            "agent {} is still alive after the disconnect",
            agent.id()
        );
    }
}
