use std::collections::BTreeMap;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

#[test]
fn a_config_row_deserialises_with_defaults_and_rejects_unknown_keys() {
    let row: McpServerConfig = serde_json::from_value(json!({
        "name": "everything",
        "command": "npx",
        "args": ["-y", "server"],
    }))
    .unwrap();
    assert!(row.enabled);
    assert_eq!(row.timeout_ms, 60_000);
    assert_eq!(row.reconnect, ReconnectConfig::default());
    assert_eq!(row.validate().unwrap().kind(), "stdio");

    let err = serde_json::from_value::<McpServerConfig>(json!({"name": "x", "urll": "y"}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field `urll`"), "{err}");

    let partial: McpServerConfig = serde_json::from_value(json!({
        "name": "web", "url": "http://127.0.0.1:1/mcp", "reconnect": {"max_attempts": 2},
        "headers": {"X-Team": "dsh"}, "enabled": false, "timeout_ms": 5
    }))
    .unwrap();
    assert_eq!(partial.reconnect.max_attempts, 2);
    assert_eq!(partial.reconnect.initial_delay_ms, 500);
    assert!(!partial.enabled);
    assert_eq!(partial.validate().unwrap().kind(), "streamable-http");
}

#[test]
fn validation_names_the_problem() {
    let bad_name = McpServerConfig::stdio("has space", "x", vec![]);
    assert_eq!(
        bad_name.validate().unwrap_err().to_string(),
        "mcp server name \"has space\" must match ^[A-Za-z0-9_-]{1,32}$"
    );
    assert!(
        McpServerConfig::stdio("a".repeat(33), "x", vec![])
            .validate()
            .is_err()
    );
    let mut both = McpServerConfig::stdio("s", "x", vec![]);
    both.url = Some("http://127.0.0.1/".into());
    assert!(matches!(
        both.validate(),
        Err(ConfigError::BothTransports { .. })
    ));
    let neither = McpServerConfig {
        command: None,
        ..McpServerConfig::stdio("s", "x", vec![])
    };
    assert!(matches!(
        neither.validate(),
        Err(ConfigError::NoTransport { .. })
    ));
}

#[test]
fn the_transport_field_selects_sse_and_must_fit_the_row() {
    let sse: McpServerConfig = serde_json::from_value(json!({
        "name": "old", "transport": "sse", "url": "http://127.0.0.1:3001/sse",
        "headers": {"Authorization": "Bearer t"}
    }))
    .unwrap();
    assert_eq!(
        sse.validate().unwrap(),
        Transport::Sse {
            url: "http://127.0.0.1:3001/sse".into(),
            headers: BTreeMap::from([("Authorization".to_owned(), "Bearer t".to_owned())]),
        }
    );
    assert_eq!(
        sse,
        McpServerConfig {
            headers: sse.headers.clone(),
            ..McpServerConfig::sse("old", "http://127.0.0.1:3001/sse")
        }
    );
    // Other clients' files call it `type`; `http` is streamable HTTP.
    let typed: McpServerConfig = serde_json::from_value(
        json!({"name": "t", "type": "sse", "url": "http://127.0.0.1:1/sse"}),
    )
    .unwrap();
    assert_eq!(typed.validate().unwrap().kind(), "sse");
    for (given, kind) in [
        ("http", "streamable-http"),
        ("streamable-http", "streamable-http"),
    ] {
        let row: McpServerConfig = serde_json::from_value(
            json!({"name": "h", "transport": given, "url": "http://127.0.0.1:1/mcp"}),
        )
        .unwrap();
        assert_eq!(row.validate().unwrap().kind(), kind);
    }
    let explicit_stdio: McpServerConfig =
        serde_json::from_value(json!({"name": "s", "transport": "stdio", "command": "srv"}))
            .unwrap();
    assert_eq!(explicit_stdio.validate().unwrap().kind(), "stdio");

    let sse_with_command: McpServerConfig =
        serde_json::from_value(json!({"name": "x", "transport": "sse", "command": "srv"})).unwrap();
    assert_eq!(
        sse_with_command.validate().unwrap_err().to_string(),
        "mcp server \"x\": transport \"sse\" needs `url`"
    );
    let stdio_with_url: McpServerConfig = serde_json::from_value(
        json!({"name": "y", "transport": "stdio", "url": "http://127.0.0.1:1/"}),
    )
    .unwrap();
    assert_eq!(
        stdio_with_url.validate().unwrap_err().to_string(),
        "mcp server \"y\": transport \"stdio\" needs `command`"
    );
    let unknown = serde_json::from_value::<McpServerConfig>(
        json!({"name": "z", "transport": "websocket", "url": "ws://127.0.0.1:1/"}),
    )
    .unwrap_err()
    .to_string();
    assert!(unknown.contains("unknown variant `websocket`"), "{unknown}");
}

#[test]
fn acp_entries_convert_sse_included() {
    let stdio = McpServerConfig::from_acp(&json!({
        "name": "fs", "command": "/bin/srv", "args": ["--x"],
        "env": [{"name": "A", "value": "1"}]
    }))
    .unwrap();
    assert_eq!(stdio.command.as_deref(), Some("/bin/srv"));
    assert_eq!(stdio.args, vec!["--x".to_owned()]);
    assert_eq!(
        stdio.env,
        BTreeMap::from([("A".to_owned(), "1".to_owned())])
    );

    let http = McpServerConfig::from_acp(&json!({
        "type": "http", "name": "web", "url": "http://127.0.0.1:9/mcp",
        "headers": [{"name": "Authorization", "value": "Bearer t"}]
    }))
    .unwrap();
    assert_eq!(http.url.as_deref(), Some("http://127.0.0.1:9/mcp"));
    assert_eq!(http.headers["Authorization"], "Bearer t");

    let sse = McpServerConfig::from_acp(&json!({
        "type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse",
        "headers": [{"name": "X-Key", "value": "k"}]
    }))
    .unwrap();
    assert_eq!(sse.validate().unwrap().kind(), "sse");
    assert_eq!(sse.headers["X-Key"], "k");
    let ws = McpServerConfig::from_acp(&json!({
        "type": "ws", "name": "new", "url": "ws://127.0.0.1:9/"
    }));
    assert_eq!(
        ws.unwrap_err().to_string(),
        "mcp server \"new\": the ws transport is not supported (use stdio, http or sse)"
    );
    assert!(McpServerConfig::from_acp(&json!({"name": "x"})).is_err());
}

#[test]
fn the_child_environment_drops_credentials_and_dsh_settings() {
    let parent = [
        ("PATH", "/bin"),
        ("OPENAI_API_KEY", "k"),
        ("db_password", "p"),
        ("GH_TOKEN", "t"),
        ("MY_SECRET_THING", "s"),
        ("DSH_HOME", "/h"),
        ("HOME", "/root"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let extra = BTreeMap::from([("API_KEY".to_owned(), "given".to_owned())]);
    let env = scrubbed_env(parent, &extra);
    let names: Vec<&str> = env.keys().map(String::as_str).collect();
    assert_eq!(names, vec!["API_KEY", "HOME", "PATH"]);
    assert_eq!(env["API_KEY"], "given");
}
