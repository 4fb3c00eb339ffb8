//! The bridge driven by the official crate's client side, as an editor would: a diff card and
//! a terminal card arrive live, and `session/load` on a new connection replays them.

use std::sync::Arc;
use std::sync::Mutex;

use agent_client_protocol::Agent;
use agent_client_protocol::ByteStreams;
use agent_client_protocol::Client;
use agent_client_protocol::on_receive_notification;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::ClientCapabilities;
use agent_client_protocol::v1::schema::ContentBlock;
use agent_client_protocol::v1::schema::InitializeRequest;
use agent_client_protocol::v1::schema::ListSessionsRequest;
use agent_client_protocol::v1::schema::LoadSessionRequest;
use agent_client_protocol::v1::schema::NewSessionRequest;
use agent_client_protocol::v1::schema::PromptRequest;
use agent_client_protocol::v1::schema::SessionNotification;
use agent_client_protocol::v1::schema::SessionUpdate;
use agent_client_protocol::v1::schema::StopReason;
use agent_client_protocol::v1::schema::TextContent;
use agent_client_protocol::v1::schema::ToolCallContent;
use dsh_acp::BridgeConfig;
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use serde_json::json;
use tokio_util::compat::TokioAsyncReadCompatExt;
use tokio_util::compat::TokioAsyncWriteCompatExt;

use super::harness::TIMEOUT;
use super::harness::TestHost;

type Updates = Arc<Mutex<Vec<SessionUpdate>>>;

/// Runs `body` as an ACP client connected to a fresh bridge over an in-memory duplex pipe.
async fn with_client<R: Send + 'static>(
    factory: Arc<TestHost>,
    updates: Updates,
    body: impl AsyncFnOnce(ConnectionTo<Agent>) -> Result<R, agent_client_protocol::Error> + Send,
) -> R {
    let (client_io, agent_io) = tokio::io::duplex(1 << 16);
    let (agent_read, agent_write) = tokio::io::split(agent_io);
    let server = tokio::spawn(dsh_acp::serve(
        factory.sessions(),
        BridgeConfig::default(),
        agent_read,
        agent_write,
    ));
    let (client_read, client_write) = tokio::io::split(client_io);
    let transport = ByteStreams::new(client_write.compat_write(), client_read.compat());
    let result = Client
        .v1()
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                updates.lock().unwrap().push(notification.update);
                Ok(())
            },
            on_receive_notification!(),
        )
        .connect_with(transport, body)
        .await
        .expect("client run succeeds");
    tokio::time::timeout(TIMEOUT, server)
        .await
        .expect("bridge exits when the client leaves")
        .unwrap()
        .unwrap();
    result
}

fn text_prompt(
    session: &agent_client_protocol::v1::schema::SessionId,
    text: &str,
) -> PromptRequest {
    PromptRequest::new(
        session.clone(),
        vec![ContentBlock::Text(TextContent::new(text))],
    )
}

fn has_diff(updates: &[SessionUpdate]) -> bool {
    updates.iter().any(|u| match u {
        SessionUpdate::ToolCallUpdate(update) => update
            .fields
            .content
            .as_ref()
            .is_some_and(|c| c.iter().any(|c| matches!(c, ToolCallContent::Diff(_)))),
        _ => false,
    })
}

fn has_terminal(updates: &[SessionUpdate]) -> bool {
    updates.iter().any(|u| match u {
        SessionUpdate::ToolCall(call) => call
            .content
            .iter()
            .any(|c| matches!(c, ToolCallContent::Terminal(_))),
        _ => false,
    })
}

fn terminal_output(updates: &[SessionUpdate]) -> Option<String> {
    updates.iter().find_map(|u| match u {
        SessionUpdate::ToolCallUpdate(update) => update
            .meta
            .as_ref()
            .and_then(|m| m.get("terminal_output"))
            .and_then(|t| t["data"].as_str())
            .map(str::to_owned),
        _ => None,
    })
}

#[tokio::test]
async fn an_acp_client_sees_diff_and_terminal_cards_and_load_replays_them() {
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("ws");
    std::fs::create_dir(&work).unwrap();
    let file = work.join("notes.txt");
    std::fs::write(&file, "draft\n").unwrap();
    let factory = TestHost::new(home.path());
    let edit = json!({"path": file, "old": "draft", "new": "final"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_edit", "edit", &edit, None));
    let bash = json!({"command": "cat notes.txt", "cwd": work}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_bash", "bash", &bash, None));
    factory.adapter.push_chunks(text_response("All done."));

    let live: Updates = Arc::default();
    let cwd = work.clone();
    let session_id = with_client(factory.clone(), live.clone(), async move |cx| {
        let caps =
            ClientCapabilities::new().meta(json!({"terminal_output": true}).as_object().cloned());
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1).client_capabilities(caps))
            .block_task()
            .await?;
        let created = cx
            .send_request(NewSessionRequest::new(cwd))
            .block_task()
            .await?;
        let done = cx
            .send_request(text_prompt(&created.session_id, "finalize the notes"))
            .block_task()
            .await?;
        assert_eq!(done.stop_reason, StopReason::EndTurn);
        Ok(created.session_id)
    })
    .await;
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "final\n");
    let live = live.lock().unwrap().clone();
    assert!(has_diff(&live), "no diff card: {live:#?}");
    assert!(has_terminal(&live), "no terminal card: {live:#?}");
    assert_eq!(terminal_output(&live).as_deref(), Some("final\n"));

    // A new connection (the editor reopened) loads the stored session and sees the same cards.
    let replayed: Updates = Arc::default();
    let cwd = work.clone();
    let id = session_id.clone();
    let listed = with_client(factory, replayed.clone(), async move |cx| {
        let caps =
            ClientCapabilities::new().meta(json!({"terminal_output": true}).as_object().cloned());
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1).client_capabilities(caps))
            .block_task()
            .await?;
        let listed = cx
            .send_request(ListSessionsRequest::new())
            .block_task()
            .await?;
        cx.send_request(LoadSessionRequest::new(id, cwd))
            .block_task()
            .await?;
        Ok(listed)
    })
    .await;
    assert!(listed.sessions.iter().any(|s| s.session_id == session_id));
    let replayed = replayed.lock().unwrap().clone();
    assert!(has_diff(&replayed), "no diff card on load: {replayed:#?}");
    assert!(
        has_terminal(&replayed),
        "no terminal card on load: {replayed:#?}"
    );
    assert_eq!(terminal_output(&replayed).as_deref(), Some("final\n"));
    let user: String = replayed
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::UserMessageChunk(chunk) => match &chunk.content {
                ContentBlock::Text(text) => Some(text.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(user, "finalize the notes");
    let said: String = replayed
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                ContentBlock::Text(text) => Some(text.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(said, "All done.");
}
