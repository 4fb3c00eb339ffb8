//! The legacy HTTP+SSE transport (protocol 2024-11-05): the reference server's `sse` mode on
//! 127.0.0.1, plus a hand-written server for the endpoint-origin rule.

use std::time::Duration;
use std::time::Instant;

use dsh_mcp::McpOptions;
use dsh_mcp::McpServer;
use dsh_mcp::McpServerConfig;
use dsh_mcp::ServerState;
use dsh_protocol::ContentBlock;
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;

use super::support::*;

const ECHO: &str = "mcp__old__echo";

#[tokio::test]
async fn tools_resources_prompts_a_kill_mid_call_and_a_reconnect_over_sse() {
    let Some(bin) = server_bin() else { return };
    let port = free_port();
    let mut sse = HttpServer::start_sse(&bin, port).await;

    let h = Harness::new();
    let mut config = McpServerConfig::sse("old", sse.url());
    config.timeout_ms = 20_000;
    config.reconnect = fast_reconnect();
    config.headers.insert("X-Dsh-Test".into(), "sse".into());
    let server = McpServer::mount(&h.root, &h.registry, config.clone(), &McpOptions::default())
        .await
        .unwrap();
    let status = server.status();
    assert_eq!(status.state, ServerState::Connected, "{status:?}");
    assert_eq!(status.transport, "sse");
    assert!(status.tools.iter().any(|t| t.name == ECHO), "{status:?}");

    let echo = h.call(ECHO, json!({"message": "over sse"})).await;
    assert!(!echo.is_error, "{:?}", echo.content);
    assert_eq!(echo.content, vec![ContentBlock::text("Echo: over sse")]);

    // Resources and prompts travel the same way.
    let resources = server.resources().await.unwrap();
    assert!(!resources.is_empty());
    let uri = resources[0].uri.clone();
    let contents = server.read_resource(&uri).await.unwrap();
    assert_eq!(contents[0]["uri"], json!(uri));
    let prompts = server.prompts().await.unwrap();
    assert!(
        prompts.iter().any(|p| p.name == "simple-prompt"),
        "{prompts:?}"
    );
    let messages = server
        .get_prompt("simple-prompt", serde_json::Map::new())
        .await
        .unwrap();
    assert!(!messages.is_empty());
    assert!(server.instructions().is_some());

    // `dsh mcp list` probes it too.
    let listed = dsh_mcp::list_servers(std::slice::from_ref(&config)).await;
    assert_eq!(listed[0].state, ServerState::Connected, "{listed:?}");
    assert_eq!(listed[0].transport, "sse");
    assert!(listed[0].tools.iter().any(|t| t.name == ECHO));
    assert!(listed[0].resources.contains(&uri));
    assert!(listed[0].prompts.contains(&"simple-prompt".to_owned()));

    // A long call is in flight when the server dies: it must end with an error, not hang.
    let registry = h.registry.clone();
    let in_flight = tokio::spawn(async move {
        let input = dsh_tools::ToolCallInput::new(
            "slow",
            "mcp__old__trigger-long-running-operation",
            json!({"duration": 30, "steps": 30}),
            dsh_tools::CancellationToken::new(),
        );
        registry.execute(input).await
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    let killed_at = Instant::now();
    sse.kill().await;
    let result = tokio::time::timeout(Duration::from_secs(10), in_flight)
        .await
        .expect("the call in flight must end, not hang")
        .unwrap();
    assert!(result.is_error);
    let text = result.text();
    assert!(text.starts_with("Error: MCP server \"old\""), "{text}");
    eprintln!(
        "in-flight call ended after {:?}: {text}",
        killed_at.elapsed()
    );

    // The stream's end is noticed at once; the tools stay through the outage and a call
    // says why it cannot run.
    let outage = wait_status(&server, Duration::from_secs(10), |s| {
        matches!(s.state, ServerState::Reconnecting { .. })
    })
    .await;
    assert!(outage.tools.iter().any(|t| t.name == ECHO), "{outage:?}");
    let during = h.call(ECHO, json!({"message": "down"})).await;
    assert!(during.is_error);
    assert!(
        during
            .text()
            .starts_with("Error: MCP server \"old\" is not connected (reconnecting)"),
        "{}",
        during.text()
    );

    // Back on the same port: a new stream, a new session, the tools work again.
    let _sse = HttpServer::start_sse(&bin, port).await;
    wait_status(&server, Duration::from_secs(20), |s| {
        s.state == ServerState::Connected
    })
    .await;
    let again = h.call(ECHO, json!({"message": "again"})).await;
    assert_eq!(again.content, vec![ContentBlock::text("Echo: again")]);

    server.dispose();
    assert!(!h.has(ECHO));
    assert_eq!(server.status().state, ServerState::Closed);
}

/// Serves one GET: an event stream whose `endpoint` event is `endpoint`; returns what the
/// client sent (its request head).
async fn one_stream(listener: tokio::net::TcpListener, endpoint: String) -> String {
    let (mut socket, _) = listener.accept().await.unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = socket.read(&mut buf).await.unwrap();
        assert!(n > 0, "the client closed before its request was complete");
        head.extend_from_slice(&buf[..n]);
    }
    let body = format!("event: endpoint\ndata: {endpoint}\n\n");
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\r\n{body}"
    );
    socket.write_all(response.as_bytes()).await.unwrap();
    // Hold the stream open while the client decides.
    let mut rest = [0u8; 64];
    let _ = tokio::time::timeout(Duration::from_secs(5), socket.read(&mut rest)).await;
    String::from_utf8_lossy(&head).into_owned()
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused_and_gets_no_headers() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    // A second listener stands for the other origin: nothing may ever reach it.
    let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other = elsewhere.local_addr().unwrap().port();
    let served = tokio::spawn(one_stream(
        listener,
        format!("http://127.0.0.1:{other}/message?sessionId=s"),
    ));

    let mut config = McpServerConfig::sse("evil", format!("http://127.0.0.1:{port}/sse"));
    config.headers.insert("X-Api-Key".into(), "k-123".into());
    config.fail_on_startup_error = true;
    let h = Harness::new();
    let error = McpServer::mount(&h.root, &h.registry, config, &McpOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        format!(
            "mcp server \"evil\" failed to start: the server's `endpoint` event points to another origin (http://127.0.0.1:{other}); refusing to send this server's headers there"
        )
    );
    let head = served.await.unwrap();
    assert!(head.starts_with("GET /sse HTTP/1.1\r\n"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("x-api-key: k-123"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("accept: text/event-stream"),
        "{head}"
    );
    let reached = tokio::time::timeout(Duration::from_millis(300), elsewhere.accept()).await;
    assert!(reached.is_err(), "the foreign endpoint was contacted");
}

#[tokio::test]
async fn a_stream_that_ends_before_its_endpoint_fails_the_connect_clearly() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 1024];
        let _ = socket.read(&mut buf).await;
        let _ = socket
            .write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 11\r\n\r\n: nothing\n\n",
            )
            .await;
    });
    let url = format!("http://127.0.0.1:{port}/sse");
    let mut config = McpServerConfig::sse("mute", url.clone());
    config.fail_on_startup_error = true;
    let h = Harness::new();
    let error = McpServer::mount(&h.root, &h.registry, config, &McpOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        format!(
            "mcp server \"mute\" failed to start: the event stream at {url} ended before the server sent its `endpoint` event"
        )
    );
}
