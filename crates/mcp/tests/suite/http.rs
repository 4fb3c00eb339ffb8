//! The reference server over streamable HTTP on 127.0.0.1.

use std::time::Duration;
use std::time::Instant;

use dsh_mcp::McpOptions;
use dsh_mcp::McpServer;
use dsh_mcp::McpServerConfig;
use dsh_mcp::ServerState;
use dsh_protocol::ContentBlock;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::*;

const ECHO: &str = "mcp__web__echo";

#[tokio::test]
async fn lists_calls_echo_survives_a_kill_and_reconnects() {
    let Some(bin) = server_bin() else { return };
    let port = free_port();
    let mut http = HttpServer::start(&bin, port).await;

    let h = Harness::new();
    let mut config = McpServerConfig::http("web", http.url());
    config.timeout_ms = 20_000;
    config.reconnect = fast_reconnect();
    config
        .headers
        .insert("X-Dsh-Test".into(), "streamable-http".into());
    let server = McpServer::mount(&h.root, &h.registry, config, &McpOptions::default())
        .await
        .unwrap();
    let status = server.status();
    assert_eq!(status.state, ServerState::Connected);
    assert_eq!(status.transport, "streamable-http");
    assert!(status.tools.iter().any(|t| t.name == ECHO), "{status:?}");

    let echo = h.call(ECHO, json!({"message": "over http"})).await;
    assert!(!echo.is_error, "{:?}", echo.content);
    assert_eq!(echo.content, vec![ContentBlock::text("Echo: over http")]);

    // A long call is in flight when the server dies: it must end with an error, not hang.
    let registry = h.registry.clone();
    let in_flight = tokio::spawn(async move {
        let input = dsh_tools::ToolCallInput::new(
            "slow",
            "mcp__web__trigger-long-running-operation",
            json!({"duration": 30, "steps": 30}),
            dsh_tools::CancellationToken::new(),
        );
        registry.execute(input).await
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    let killed_at = Instant::now();
    http.kill().await;

    let result = tokio::time::timeout(Duration::from_secs(10), in_flight)
        .await
        .expect("the call in flight must end, not hang")
        .unwrap();
    assert!(result.is_error);
    let text = result.text();
    assert!(text.starts_with("Error: MCP server \"web\""), "{text}");
    eprintln!(
        "in-flight call ended after {:?}: {text}",
        killed_at.elapsed()
    );

    // The next call fails clearly: either the session is already known dead (tools gone or
    // "not connected") or the request itself fails.
    let next = h.call(ECHO, json!({"message": "anyone?"})).await;
    assert!(next.is_error);
    let next_text = next.text();
    assert!(
        next_text.starts_with("Error: MCP server \"web\"")
            || next_text == format!("Error: unknown tool \"{ECHO}\""),
        "{next_text}"
    );

    let outage = wait_status(&server, Duration::from_secs(10), |s| {
        matches!(s.state, ServerState::Reconnecting { .. })
    })
    .await;
    assert!(outage.tools.iter().any(|t| t.name == ECHO), "{outage:?}");
    assert!(h.has(ECHO), "tools stay registered during an outage");
    let during = h.call(ECHO, json!({"message": "down"})).await;
    assert!(during.is_error);
    assert!(
        during
            .text()
            .starts_with("Error: MCP server \"web\" is not connected (reconnecting)"),
        "{}",
        during.text()
    );

    // The server comes back on the same port: the tools return.
    let mut http = HttpServer::start(&bin, port).await;
    let back = wait_status(&server, Duration::from_secs(20), |s| {
        s.state == ServerState::Connected
    })
    .await;
    assert!(back.tools.iter().any(|t| t.name == ECHO));
    let again = h.call(ECHO, json!({"message": "again"})).await;
    assert_eq!(again.content, vec![ContentBlock::text("Echo: again")]);

    // Killed while idle: the next call fails fast with a clear error instead of hanging.
    http.kill().await;
    let started = Instant::now();
    let idle = h.call(ECHO, json!({"message": "gone"})).await;
    assert!(idle.is_error);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let idle_text = idle.text();
    eprintln!("call after an idle kill: {idle_text}");
    assert!(
        idle_text.starts_with("Error: MCP server \"web\"")
            || idle_text == format!("Error: unknown tool \"{ECHO}\""),
        "{idle_text}"
    );
    wait_status(&server, Duration::from_secs(10), |s| {
        matches!(s.state, ServerState::Reconnecting { .. }) && !s.tools.is_empty()
    })
    .await;

    server.dispose();
    assert!(!h.has(ECHO));
    assert_eq!(server.status().state, ServerState::Closed);
}

#[tokio::test]
async fn an_idle_disconnect_is_noticed_without_a_call() {
    let Some(bin) = server_bin() else { return };
    let port = free_port();
    let mut http = HttpServer::start(&bin, port).await;
    let h = Harness::new();
    let mut config = McpServerConfig::http("idle", http.url());
    config.reconnect = fast_reconnect();
    let server = McpServer::mount(&h.root, &h.registry, config, &McpOptions::default())
        .await
        .unwrap();
    assert!(h.has("mcp__idle__echo"));
    http.kill().await;
    let started = Instant::now();
    wait_status(&server, Duration::from_secs(15), |s| {
        matches!(s.state, ServerState::Reconnecting { .. })
    })
    .await;
    eprintln!("idle disconnect noticed after {:?}", started.elapsed());
    assert!(
        h.has("mcp__idle__echo"),
        "the tools stay through the outage"
    );
    let call = h.call("mcp__idle__echo", json!({"message": "x"})).await;
    assert!(
        call.text().contains("is not connected (reconnecting)"),
        "{}",
        call.text()
    );
    server.dispose();
}
