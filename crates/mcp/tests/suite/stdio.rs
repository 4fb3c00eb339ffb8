//! The reference server over stdio.

use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use dsh_kernel::ScopeKind;
use dsh_mcp::McpError;
use dsh_mcp::McpOptions;
use dsh_mcp::McpServer;
use dsh_mcp::McpServerConfig;
use dsh_mcp::ServerState;
use dsh_protocol::ContentBlock;
use pretty_assertions::assert_eq;
use serde_json::json;
use sha2::Digest;

use super::support::*;

const ECHO: &str = "mcp__everything__echo";
const IMAGE: &str = "mcp__everything__get-tiny-image";

#[tokio::test]
async fn lists_tools_calls_echo_and_maps_the_image() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let store = Arc::new(MemoryStore::default());
    let server = McpServer::mount(
        &h.root,
        &h.registry,
        stdio_config("everything", &bin),
        &options_with_images(store.clone()),
    )
    .await
    .unwrap();

    let status = server.status();
    assert_eq!(status.state, ServerState::Connected);
    assert_eq!(status.transport, "stdio");
    let names: Vec<&str> = status.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&ECHO), "{names:?}");
    assert!(names.contains(&IMAGE), "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("mcp__everything__")));

    // Raw tool: the server's schema verbatim, never validated by the harness.
    let echo = h.registry.get(ECHO, None).unwrap();
    assert!(!echo.validates_arguments());
    assert_eq!(echo.description(), "Echoes back the input string");
    assert_eq!(echo.parameters()["properties"]["message"]["type"], "string");

    let result = h.call(ECHO, json!({"message": "hello from dsh"})).await;
    assert!(!result.is_error, "{:?}", result.content);
    assert_eq!(
        result.content,
        vec![ContentBlock::text("Echo: hello from dsh")]
    );

    // Invalid arguments pass through to the server, whose isError becomes an error result.
    let bad = h.call(ECHO, json!({"message": 42})).await;
    assert!(bad.is_error);
    let text = bad.text();
    assert!(text.starts_with("Error: "), "{text}");
    assert!(text.contains("message"), "{text}");
    assert!(bad.error.as_ref().unwrap().info.is_none(), "a plain error");

    let image = h.call(IMAGE, json!({})).await;
    assert!(!image.is_error, "{:?}", image.content);
    let stored = store.0.lock().unwrap().clone();
    assert_eq!(stored.len(), 1);
    let (attachment, bytes) = &stored[0];
    let digest = sha2::Sha256::digest(bytes);
    let id = format!(
        "sha256:{}",
        digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    assert_eq!(attachment.attachment_id, id);
    assert_eq!(
        image.content,
        vec![
            ContentBlock::text("Here's the image you requested:"),
            ContentBlock::Image {
                attachment: json!({
                    "attachmentId": id, "mediaType": "image/png",
                    "bytes": bytes.len(), "width": 20, "height": 20
                })
            },
            ContentBlock::text("The image above is the MCP logo."),
        ]
    );
    // The canonical value keeps the raw MCP content for programmatic callers.
    let value = image.value.as_ref().unwrap();
    assert_eq!(value["content"][1]["type"], "image");
    assert_eq!(value["content"][1]["mimeType"], "image/png");

    server.dispose();
}

#[tokio::test]
async fn without_an_attachment_store_images_become_a_notice() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let server = McpServer::mount(
        &h.root,
        &h.registry,
        stdio_config("everything", &bin),
        &McpOptions::default(),
    )
    .await
    .unwrap();
    let image = h.call(IMAGE, json!({})).await;
    assert_eq!(
        image.content,
        vec![ContentBlock::text(
            "Here's the image you requested:\n\
             [image unavailable: image/png; no attachment store is mounted; raw image data remains available to programmatic callers]\n\
             The image above is the MCP logo."
        )]
    );
    server.dispose();
}

#[tokio::test]
async fn a_killed_server_ends_the_call_in_flight_keeps_its_tools_and_comes_back() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let server = McpServer::mount(
        &h.root,
        &h.registry,
        stdio_config("everything", &bin),
        &McpOptions::default(),
    )
    .await
    .unwrap();
    let first_pid = server.pid().unwrap();

    let registry = h.registry.clone();
    let in_flight = tokio::spawn(async move {
        let input = dsh_tools::ToolCallInput::new(
            "slow",
            "mcp__everything__trigger-long-running-operation",
            json!({"duration": 30, "steps": 30}),
            dsh_tools::CancellationToken::new(),
        );
        registry.execute(input).await
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    let mut rx = server.watch();
    let killed_at = Instant::now();
    kill(first_pid);

    let result = tokio::time::timeout(Duration::from_secs(5), in_flight)
        .await
        .expect("the call in flight must end, not hang")
        .unwrap();
    assert!(result.is_error);
    let text = result.text();
    assert!(
        text.starts_with("Error: MCP server \"everything\" disconnected while \"trigger-long-running-operation\" was running")
            || text.contains("connection failed"),
        "{text}"
    );
    assert!(killed_at.elapsed() < Duration::from_secs(5));

    // The tools stay registered through the outage (the tool list does not change); a call
    // meanwhile fails with a clear error.
    let outage = tokio::time::timeout(
        Duration::from_secs(5),
        rx.wait_for(|s| matches!(s.state, ServerState::Reconnecting { .. })),
    )
    .await
    .unwrap()
    .unwrap()
    .clone();
    assert!(outage.tools.iter().any(|t| t.name == ECHO), "{outage:?}");
    assert!(h.has(ECHO));

    let back = wait_status(&server, Duration::from_secs(20), |s| {
        s.state == ServerState::Connected
    })
    .await;
    assert!(back.tools.iter().any(|t| t.name == ECHO));
    assert_ne!(server.pid(), Some(first_pid), "a fresh child");
    let again = h.call(ECHO, json!({"message": "back"})).await;
    assert_eq!(again.content, vec![ContentBlock::text("Echo: back")]);
    server.dispose();
}

#[tokio::test]
async fn disposing_the_scope_unregisters_and_stops_the_child() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let server = McpServer::mount(
        &h.root,
        &h.registry,
        stdio_config("everything", &bin),
        &McpOptions::default(),
    )
    .await
    .unwrap();
    let pid = server.pid().unwrap();
    assert!(h.has(ECHO));
    server.dispose();
    assert!(!h.has(ECHO));
    assert!(h.registry.view(None).is_empty());
    assert_eq!(server.status().state, ServerState::Closed);
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!alive(pid), "the child {pid} outlived its server scope");

    // The name is free again once unmounted.
    let again = McpServer::mount(
        &h.root,
        &h.registry,
        stdio_config("everything", &bin),
        &McpOptions::default(),
    )
    .await
    .unwrap();
    again.dispose();
}

#[tokio::test]
async fn a_second_live_server_with_the_same_name_is_refused() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let first = McpServer::mount(
        &h.root,
        &h.registry,
        stdio_config("dup", &bin),
        &McpOptions::default(),
    )
    .await
    .unwrap();
    let second = McpServer::mount(
        &h.root,
        &h.registry,
        stdio_config("dup", &bin),
        &McpOptions::default(),
    )
    .await;
    assert_eq!(
        second.unwrap_err().to_string(),
        "mcp-client: serverName \"dup\" is already in use by another mcp-client instance — pick a unique serverName in cordis.yml"
    );
    first.dispose();
}

#[tokio::test]
async fn acp_session_servers_are_scoped_to_the_session() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let session = h.root.child(ScopeKind::Agent, "session-1").unwrap();
    let entry = json!({
        "name": "sess", "command": bin.display().to_string(), "args": ["stdio"], "env": []
    });
    let servers =
        dsh_mcp::mount_acp_servers(&session, &h.registry, &[entry], &McpOptions::default())
            .await
            .unwrap();
    // The mount waits only the start-up budget; on a loaded machine the child may need longer.
    wait_status(&servers.servers[0], Duration::from_secs(30), |s| {
        s.state == ServerState::Connected
    })
    .await;
    let name = "mcp__sess__echo";
    assert!(h.registry.get(name, Some(&session)).is_some());
    assert!(h.registry.get(name, None).is_none(), "not global");
    assert_eq!(servers.statuses()[0].state, ServerState::Connected);
    session.dispose();
    assert!(h.registry.get(name, Some(&session)).is_none());
    assert_eq!(servers.statuses()[0].state, ServerState::Closed);
}

#[tokio::test]
async fn startup_failures_either_refuse_or_retry_until_the_budget_is_spent() {
    let h = Harness::new();
    let mut strict = McpServerConfig::stdio("broken", "/nonexistent/mcp-server", vec![]);
    strict.fail_on_startup_error = true;
    let refused = McpServer::mount(&h.root, &h.registry, strict, &McpOptions::default()).await;
    match refused {
        Err(McpError::Startup { server, reason }) => {
            assert_eq!(server, "broken");
            assert!(reason.contains("cannot spawn"), "{reason}");
        }
        other => panic!("{other:?}"),
    }

    let mut lenient = McpServerConfig::stdio("broken", "/nonexistent/mcp-server", vec![]);
    lenient.reconnect = dsh_mcp::ReconnectConfig {
        max_attempts: 3,
        initial_delay_ms: 50,
        max_delay_ms: 100,
        enabled: true,
        ping_interval_ms: 0,
    };
    let server = McpServer::mount(&h.root, &h.registry, lenient, &McpOptions::default())
        .await
        .unwrap();
    assert!(server.status().tools.is_empty());
    let failed = wait_status(&server, Duration::from_secs(5), |s| {
        matches!(s.state, ServerState::Failed { .. })
    })
    .await;
    assert_eq!(
        failed.state,
        ServerState::Failed {
            reason: "gave up after 3 consecutive failures".into()
        }
    );
    assert!(failed.last_error.unwrap().contains("cannot spawn"));
    server.dispose();
}

#[tokio::test]
async fn list_servers_probes_each_declaration() {
    let Some(bin) = server_bin() else { return };
    let mut disabled = McpServerConfig::http("off", "http://127.0.0.1:9/mcp");
    disabled.enabled = false;
    let missing = McpServerConfig::stdio("missing", "/nonexistent/mcp-server", vec![]);
    let statuses =
        dsh_mcp::list_servers(&[stdio_config("everything", &bin), disabled, missing]).await;
    assert_eq!(statuses.len(), 3);
    let listed: Vec<&str> = statuses[0]
        .tools
        .iter()
        .map(|t| t.raw_name.as_str())
        .collect();
    eprintln!("everything lists: {listed:?}");
    assert_eq!(statuses[0].state, ServerState::Connected);
    assert!(
        statuses[0]
            .tools
            .iter()
            .any(|t| t.name == ECHO && t.raw_name == "echo")
    );
    assert_eq!(statuses[1].state, ServerState::Disabled);
    assert_eq!(statuses[1].transport, "streamable-http");
    assert!(matches!(statuses[2].state, ServerState::Failed { .. }));
    let json = serde_json::to_value(&statuses[1]).unwrap();
    assert_eq!(
        json,
        json!({"name": "off", "transport": "streamable-http", "state": "disabled", "tools": []})
    );
}

#[tokio::test]
async fn calls_are_bounded_by_the_timeout_and_the_callers_signal() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let mut config = stdio_config("everything", &bin);
    config.timeout_ms = 800;
    let server = McpServer::mount(&h.root, &h.registry, config, &McpOptions::default())
        .await
        .unwrap();
    let slow = "mcp__everything__trigger-long-running-operation";

    let started = Instant::now();
    let timed_out = h.call(slow, json!({"duration": 20, "steps": 20})).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        timed_out.text(),
        "Error: MCP server \"everything\" did not answer \"trigger-long-running-operation\" within 800ms"
    );

    let signal = dsh_tools::CancellationToken::new();
    let cancel = signal.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let aborted = h
        .call_with(slow, json!({"duration": 20, "steps": 20}), signal)
        .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(aborted.is_error);
    assert_eq!(
        aborted.error_code(),
        Some("ABORTED"),
        "{:?}",
        aborted.content
    );

    // Neither killed the session.
    assert_eq!(server.status().state, ServerState::Connected);
    let echo = h.call(ECHO, json!({"message": "still here"})).await;
    assert_eq!(echo.content, vec![ContentBlock::text("Echo: still here")]);
    server.dispose();
}

#[tokio::test]
async fn arguments_reach_the_server_unvalidated_and_non_objects_become_empty() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let server = McpServer::mount(
        &h.root,
        &h.registry,
        stdio_config("everything", &bin),
        &McpOptions::default(),
    )
    .await
    .unwrap();
    let sum = h
        .call("mcp__everything__get-sum", json!({"a": 2, "b": 3}))
        .await;
    assert_eq!(
        sum.content,
        vec![ContentBlock::text("The sum of 2 and 3 is 5.")]
    );

    // A string instead of an object: sent as `{}`, so the server reports the missing field.
    let string = h.call(ECHO, json!("just text")).await;
    assert!(string.is_error);
    assert!(string.text().contains("message"), "{}", string.text());

    // A tool that needs task-based execution fails clearly (the server refuses it).
    let started = Instant::now();
    let task = h
        .call(
            "mcp__everything__simulate-research-query",
            json!({"topic": "x"}),
        )
        .await;
    assert!(task.is_error);
    assert!(started.elapsed() < Duration::from_secs(10));
    eprintln!("task-only tool: {}", task.text());
    server.dispose();
}

#[tokio::test]
async fn the_child_gets_the_scrubbed_environment_plus_its_own() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let mut config = stdio_config("everything", &bin);
    config.env.insert("FROM_DSH_CONFIG".into(), "yes".into());
    config.env.insert("GIVEN_API_KEY".into(), "explicit".into());
    let server = McpServer::mount(&h.root, &h.registry, config, &McpOptions::default())
        .await
        .unwrap();
    let env = h.call("mcp__everything__get-env", json!({})).await;
    let env: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&env.text()).unwrap();
    assert_eq!(env["FROM_DSH_CONFIG"], "yes");
    assert_eq!(
        env["GIVEN_API_KEY"], "explicit",
        "explicit env is never scrubbed"
    );
    for name in env.keys().filter(|n| *n != "GIVEN_API_KEY") {
        let upper = name.to_ascii_uppercase();
        assert!(
            !["KEY", "PASSWORD", "SECRET", "TOKEN"]
                .iter()
                .any(|w| upper.contains(w)),
            "{name} leaked into the child"
        );
        assert!(!name.starts_with("DSH_"), "{name} leaked into the child");
    }
    server.dispose();
}

#[tokio::test]
async fn a_registration_conflict_rolls_back_the_whole_generation() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let squatter = dsh_tools::Tool::builder(ECHO)
        .description("already here")
        .raw_parameters(json!({"type": "object"}))
        .raw_output(json!({"type": "object"}), |_, _| Ok(vec![]))
        .run(|_args: serde_json::Value, _run| async { Ok(json!({})) })
        .build()
        .unwrap();
    h.registry.register(&h.root, squatter).unwrap();
    let mut config = stdio_config("everything", &bin);
    config.fail_on_startup_error = true;
    let refused = McpServer::mount(&h.root, &h.registry, config, &McpOptions::default()).await;
    match refused {
        Err(McpError::Startup { reason, .. }) => assert_eq!(
            reason,
            format!(
                "mcp server \"everything\": registering \"{ECHO}\" failed: tool \"{ECHO}\" is already registered (for a per-agent variant, register through that agent's `agent.ctx` instead)"
            )
        ),
        other => panic!("{other:?}"),
    }
    let names: Vec<String> = h
        .registry
        .view(None)
        .iter()
        .map(|d| d.name().to_owned())
        .collect();
    assert_eq!(names, vec![ECHO.to_owned()], "no partial set");
    assert_eq!(
        h.registry.get(ECHO, None).unwrap().description(),
        "already here"
    );
}

#[tokio::test]
async fn start_up_waits_only_for_the_budget_and_late_servers_arrive_in_the_background() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let mut silent = McpServerConfig::stdio(
        "silent",
        "/bin/sh",
        vec!["-c".into(), "exec sleep 600".into()],
    );
    silent.timeout_ms = 60_000;
    let configs = vec![silent, stdio_config("everything", &bin)];
    let options = McpOptions {
        startup_budget: Some(Duration::from_millis(1500)),
        ..McpOptions::default()
    };
    let started = Instant::now();
    let servers = dsh_mcp::mount_servers(&h.root, &h.registry, &configs, &options)
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "start-up took {took:?}");
    let silent = servers.get("silent").unwrap();
    assert_eq!(silent.status().state, ServerState::Connecting);
    // The responsive server's tools appear without anyone waiting for the silent one.
    let everything = servers.get("everything").unwrap();
    wait_status(everything, Duration::from_secs(20), |s| {
        s.state == ServerState::Connected
    })
    .await;
    assert!(h.has(ECHO));
    servers.dispose();
}

#[tokio::test]
async fn read_only_hints_make_calls_concurrency_safe() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let server = McpServer::mount(
        &h.root,
        &h.registry,
        stdio_config("everything", &bin),
        &McpOptions::default(),
    )
    .await
    .unwrap();
    let safe = |name: &str| {
        h.registry
            .get(name, None)
            .map(|d| d.is_concurrency_safe(&json!({})))
    };
    assert_eq!(safe(ECHO), Some(true), "echo declares readOnlyHint: true");
    assert_eq!(
        safe("mcp__everything__trigger-long-running-operation"),
        Some(true)
    );
    assert_eq!(
        safe("mcp__everything__toggle-subscriber-updates"),
        Some(false),
        "readOnlyHint: false"
    );
    server.dispose();
}
