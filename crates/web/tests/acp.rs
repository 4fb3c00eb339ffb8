//! ACP over the `/acp` WebSocket: the same bridge as `dsh acp` on stdio, one JSON-RPC message
//! per text frame.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use dsh_agent::scripted::text_response;
use futures::SinkExt;
use serde_json::json;
use support::Server;
use support::agent_text;
use support::connect_with;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_over_the_websocket_streams_its_answer() {
    let server = Server::start(None).await;
    server
        .adapter
        .push_chunks(text_response("Hello from the web."));
    let work = tempfile::tempdir().unwrap();
    let mut client = connect_with(&server.ws_url(), &[]).await.unwrap();
    client.initialize().await;
    let session = client.new_session(work.path()).await;
    let answer = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&client.updates(&session)), "Hello from the web.");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_frame_costs_one_error_answer_not_the_connection() {
    let server = Server::start(None).await;
    let mut client = connect_with(&server.ws_url(), &[]).await.unwrap();
    client
        .socket
        .send(tokio_tungstenite::tungstenite::Message::Text(
            "{not json".into(),
        ))
        .await
        .unwrap();
    let error = client.next().await.unwrap();
    assert_eq!(error["error"]["code"], -32700, "{error}");
    // A pretty-printed message (newlines between tokens) is still one message.
    client
        .socket
        .send(tokio_tungstenite::tungstenite::Message::Text(
            "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 7,\n  \"method\": \"initialize\",\n  \"params\": {\"protocolVersion\": 1}\n}".into(),
        ))
        .await
        .unwrap();
    let answer = client.next().await.unwrap();
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["result"]["protocolVersion"], 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_get_of_the_socket_path_asks_for_an_upgrade() {
    let server = Server::start(None).await;
    let response = support::http()
        .get(server.url("/acp"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 426);
    server.stop().await;
}
