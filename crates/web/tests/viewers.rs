//! Many viewers on one session: a second connection attaches to a session live in the server
//! (no second writer), sees the other's prompt and its answer, catches up from its cursor
//! after a reconnect without loss or duplicates, and a viewer that stops reading is dropped
//! without holding up the agent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use dsh_agent::scripted::text_response;
use serde_json::json;
use support::Server;
use support::agent_text;
use support::connect_with;
use support::user_text;

fn prompt(session: &str, text: &str) -> serde_json::Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_viewers_of_one_session_both_see_a_prompt_and_its_answer() {
    let server = Server::start(None).await;
    server.adapter.push_chunks(text_response("The answer."));
    let work = tempfile::tempdir().unwrap();
    let mut first = connect_with(&server.ws_url(), &[]).await.unwrap();
    first.initialize().await;
    let session = first.new_session(work.path()).await;

    let mut second = connect_with(&server.ws_url(), &[]).await.unwrap();
    second.initialize().await;
    let loaded = second.load(&session, work.path(), None).await;
    assert!(loaded.get("result").is_some(), "attached: {loaded}");
    // A third load on the same connection is refused as before.
    let again = second.load(&session, work.path(), None).await;
    assert!(again.get("error").is_some(), "{again}");

    let answer = first
        .request(
            "session/prompt",
            prompt(&session, "question from the first tab"),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    second
        .until(&session, |updates| agent_text(updates) == "The answer.")
        .await;
    let seen = second.updates(&session);
    assert_eq!(user_text(&seen), "question from the first tab");
    assert_eq!(agent_text(&seen), "The answer.");
    // The tab that typed it is not sent its own message back (as on stdio).
    assert_eq!(user_text(&first.updates(&session)), "");

    // The second tab drives the same session; the first follows.
    server.adapter.push_chunks(text_response("Second answer."));
    let answer = second
        .request("session/prompt", prompt(&session, "from the second tab"))
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    first
        .until(&session, |updates| {
            agent_text(updates).ends_with("Second answer.")
        })
        .await;
    assert_eq!(user_text(&first.updates(&session)), "from the second tab");

    // Only one agent wrote the log: two turns, each started once.
    let requests = server.adapter.requests();
    assert_eq!(requests.len(), 2);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_that_reconnects_mid_turn_catches_up_without_loss_or_duplicates() {
    let server = Server::start(None).await;
    let text: String = (0..120).map(|i| format!("w{i} ")).collect();
    server.adapter.push_chunks(text_response(&text));
    server
        .adapter
        .set_chunk_delay(Some(Duration::from_millis(3)));
    let work = tempfile::tempdir().unwrap();
    let mut owner = connect_with(&server.ws_url(), &[]).await.unwrap();
    owner.initialize().await;
    let session = owner.new_session(work.path()).await;

    let mut viewer = connect_with(&server.ws_url(), &[]).await.unwrap();
    viewer.initialize_with_cursor().await;
    viewer.load(&session, work.path(), None).await;

    owner
        .send(&json!({"jsonrpc": "2.0", "id": 99, "method": "session/prompt", "params": prompt(&session, "write a lot")}))
        .await;
    // The viewer reads part of the answer, then its network drops.
    viewer
        .until(&session, |updates| agent_text(updates).len() > 40)
        .await;
    let before = viewer.sequenced(&session);
    let cursor = before.iter().map(|(seq, _)| *seq).max().unwrap() + 1;
    drop(viewer);

    tokio::time::sleep(Duration::from_millis(150)).await;
    let mut back = connect_with(&server.ws_url(), &[]).await.unwrap();
    back.initialize_with_cursor().await;
    let loaded = back.load(&session, work.path(), Some(cursor)).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    back.until(&session, |updates| {
        agent_text(updates).len()
            + agent_text(&before.iter().map(|(_, u)| u.clone()).collect::<Vec<_>>()).len()
            >= text.len()
    })
    .await;
    let after = back.sequenced(&session);
    assert!(
        after.iter().all(|(seq, _)| *seq >= cursor),
        "nothing before the cursor is resent"
    );
    let mut seqs: Vec<u64> = before
        .iter()
        .chain(after.iter())
        .map(|(seq, _)| *seq)
        .collect();
    let all = seqs.len();
    seqs.dedup();
    assert_eq!(seqs.len(), all, "no update twice");
    let updates: Vec<serde_json::Value> = before
        .iter()
        .chain(after.iter())
        .map(|(_, u)| u.clone())
        .collect();
    assert_eq!(agent_text(&updates), text, "the whole answer, once");
    assert_eq!(user_text(&updates), "write a lot");

    // The owner's prompt still settles normally.
    loop {
        let frame = owner.next().await.unwrap();
        if frame["id"] == 99 {
            assert_eq!(frame["result"]["stopReason"], "end_turn", "{frame}");
            break;
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_viewer_is_dropped_and_the_agent_finishes() {
    let server = Server::start_with(dsh_web::WebConfig {
        viewer_queue_bytes: Some(64 * 1024),
        ..dsh_web::WebConfig::default()
    })
    .await;
    // Enough updates to fill the kernel's socket buffers and then the viewer's queue.
    let text = "x".repeat(40_000);
    server.adapter.push_chunks(text_response(&text));
    let work = tempfile::tempdir().unwrap();
    let mut owner = connect_with(&server.ws_url(), &[]).await.unwrap();
    owner.initialize().await;
    let session = owner.new_session(work.path()).await;

    // A viewer on a small receive buffer that never reads again after attaching.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(server.addr).await.unwrap();
    let (mut stalled, _) = tokio_tungstenite::client_async(server.ws_url(), stream)
        .await
        .unwrap();
    use futures::SinkExt;
    use futures::StreamExt;
    for (id, method, params) in [
        (
            1,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        ),
        (
            2,
            "session/load",
            json!({"sessionId": session, "cwd": work.path(), "mcpServers": []}),
        ),
    ] {
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        stalled
            .send(tokio_tungstenite::tungstenite::Message::Text(
                frame.to_string().into(),
            ))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    let answer = tokio::time::timeout(
        Duration::from_secs(120),
        owner.request("session/prompt", prompt(&session, "flood")),
    )
    .await
    .expect("the agent finishes while a viewer is stalled");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&owner.updates(&session)).len(), text.len());

    // The stalled viewer was dropped: reading now ends in the "try again later" close.
    let mut received = 0usize;
    let close = loop {
        match tokio::time::timeout(Duration::from_secs(30), stalled.next()).await {
            Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Text(text)))) => {
                received += text.len()
            }
            Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Close(frame)))) => break frame,
            Ok(Some(Ok(_))) => {}
            other => panic!("expected a close frame, got {other:?} after {received} bytes"),
        }
    };
    assert_eq!(close.map(|f| u16::from(f.code)), Some(1013));
    server.stop().await;
}
