//! `dsh web` as a user runs it: the real binary on a free port, driven over its `/acp`
//! WebSocket against a scripted model server. The same session gives the same frames over
//! the WebSocket as over `dsh acp` on stdio, and SIGTERM ends a running turn cleanly (the log
//! valid and closed, the tool's process gone).
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use futures::SinkExt;
use futures::StreamExt;
use serde_json::Value;
use serde_json::json;
use support::Acp;
use support::model_server;
use support::sse;
use tokio::io::AsyncBufReadExt;
use tokio_tungstenite::tungstenite::Message;

struct Web {
    child: tokio::process::Child,
    port: u16,
}

impl Web {
    async fn start(workspace: &Path, home: &Path, model_url: &str) -> Self {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_dsh"));
        for (name, _) in std::env::vars() {
            if name.starts_with("DEEPSEEK_") || name.starts_with("DSH_") {
                command.env_remove(name);
            }
        }
        let mut child = command
            .args(["web", "--port", "0"])
            .current_dir(workspace)
            .env("DSH_HOME", home)
            .env("DEEPSEEK_BASE_URL", model_url)
            .env("DEEPSEEK_API_KEY", "test-key")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("dsh web prints its URL")
            .unwrap()
            .unwrap();
        let port = line
            .strip_prefix("dsh web: http://127.0.0.1:")
            .unwrap_or_else(|| panic!("{line}"))
            .parse()
            .unwrap();
        Self { child, port }
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Sends a request over the socket and collects every frame up to its answer.
async fn request(
    socket: &mut Socket,
    frames: &mut Vec<Value>,
    id: u64,
    method: &str,
    params: Value,
) -> Value {
    let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    socket
        .send(Message::Text(frame.to_string().into()))
        .await
        .unwrap();
    loop {
        let message = tokio::time::timeout(Duration::from_secs(30), socket.next())
            .await
            .expect("an answer in time")
            .unwrap()
            .unwrap();
        let Message::Text(text) = message else {
            continue;
        };
        let frame: Value = serde_json::from_str(&text).unwrap();
        frames.push(frame.clone());
        if frame["id"] == json!(id) && frame.get("method").is_none() {
            return frame;
        }
    }
}

/// A frame with the session id and times made comparable.
fn normalise(frame: &Value, session: &str) -> Value {
    match frame {
        Value::String(s) if s == session => Value::String("<session>".into()),
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| k.as_str() != "updatedAt")
                .map(|(k, v)| (k.clone(), normalise(v, session)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| normalise(v, session)).collect()),
        other => other.clone(),
    }
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".dsh")).unwrap();
    std::fs::write(
        dir.path().join(".dsh/config.toml"),
        "[plugins.session-title]\nenabled = false\n",
    )
    .unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_over_the_websocket_answers_as_over_stdio() {
    let reply = || {
        sse(
            &[json!({"content": "hello "}), json!({"content": "back"})],
            "stop",
        )
    };
    let mut transcripts = Vec::new();
    for over_web in [false, true] {
        let (url, _) = model_server(vec![reply()]).await;
        let work = workspace();
        let cwd = work.path().canonicalize().unwrap();
        let home = tempfile::tempdir().unwrap();
        let init = json!({"protocolVersion": 1, "clientCapabilities": {}});
        let new = json!({"cwd": cwd, "mcpServers": []});
        let frames: Vec<Value> = if over_web {
            let web = Web::start(&cwd, home.path(), &url).await;
            let (mut socket, _) =
                tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{}/acp", web.port))
                    .await
                    .unwrap();
            let mut frames = Vec::new();
            request(&mut socket, &mut frames, 1, "initialize", init).await;
            let created = request(&mut socket, &mut frames, 2, "session/new", new).await;
            let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
            let prompt = json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]});
            request(&mut socket, &mut frames, 3, "session/prompt", prompt).await;
            drop(web);
            frames.iter().map(|f| normalise(f, &session)).collect()
        } else {
            let mut acp = Acp::start(&cwd, home.path(), &url);
            acp.request(1, "initialize", init).await;
            let created = acp.request(2, "session/new", new).await;
            let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
            let prompt = json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]});
            acp.request(3, "session/prompt", prompt).await;
            let frames = acp.frames.iter().map(|f| normalise(f, &session)).collect();
            acp.stop().await;
            frames
        };
        transcripts.push(frames);
    }
    assert!(
        transcripts[0]
            .iter()
            .any(|f| f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"),
        "{:#?}",
        transcripts[0]
    );
    pretty_assertions::assert_eq!(transcripts[0], transcripts[1]);
}

fn running(marker: &str) -> bool {
    std::process::Command::new("pgrep")
        .args(["-f", marker])
        .output()
        .map(|out| out.status.success())
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_a_running_turn_cleanly() {
    let marker = "sleep 4217";
    let call = json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
        "function": {"name": "bash", "arguments": json!({"command": marker, "description": "wait a while"}).to_string()}}]});
    let (url, _) = model_server(vec![sse(&[call], "tool_calls")]).await;
    let work = workspace();
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut web = Web::start(&cwd, home.path(), &url).await;
    let (mut socket, _) =
        tokio_tungstenite::connect_async(format!("ws://127.0.0.1:{}/acp", web.port))
            .await
            .unwrap();
    let mut frames = Vec::new();
    request(
        &mut socket,
        &mut frames,
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )
    .await;
    let created = request(
        &mut socket,
        &mut frames,
        2,
        "session/new",
        json!({"cwd": cwd, "mcpServers": []}),
    )
    .await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "wait"}]}});
    socket
        .send(Message::Text(prompt.to_string().into()))
        .await
        .unwrap();
    // Allow whatever the agent asks (the sandbox's approval policy may ask for the call).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !running(marker) {
        assert!(
            std::time::Instant::now() < deadline,
            "the tool's process started: {frames:#?}"
        );
        if let Ok(Some(Ok(Message::Text(text)))) =
            tokio::time::timeout(Duration::from_millis(100), socket.next()).await
        {
            let frame: Value = serde_json::from_str(&text).unwrap();
            if frame["method"] == "session/request_permission" {
                let option = frame["params"]["options"][0]["optionId"].clone();
                let reply = json!({"jsonrpc": "2.0", "id": frame["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": option}}});
                socket
                    .send(Message::Text(reply.to_string().into()))
                    .await
                    .unwrap();
            }
            frames.push(frame);
        }
    }

    let pid = web.child.id().unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // The open prompt is answered before the socket closes.
    let mut answered = None;
    while let Ok(Some(Ok(message))) =
        tokio::time::timeout(Duration::from_secs(30), socket.next()).await
    {
        if let Message::Text(text) = message {
            let frame: Value = serde_json::from_str(&text).unwrap();
            if frame["id"] == 3 {
                answered = Some(frame);
            }
        }
    }
    let answered = answered.expect("the prompt was answered before the server went");
    assert_eq!(answered["result"]["stopReason"], "cancelled", "{answered}");
    let status = tokio::time::timeout(Duration::from_secs(30), web.child.wait())
        .await
        .expect("dsh web exits after SIGTERM")
        .unwrap();
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert!(!running(marker), "the tool's process is gone");

    // The log is whole: every line JSON, and the turn is closed.
    let logs: Vec<_> = walk(&home.path().join("sessions"))
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(&session))
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    let text = std::fs::read_to_string(&logs[0]).unwrap();
    let kinds: Vec<String> = text
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line).expect("every line is JSON");
            event["type"]
                .as_str()
                .or(event["kind"].as_str())
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert!(kinds.iter().any(|k| k == "turn/end"), "{kinds:?}");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
    }
    out
}
