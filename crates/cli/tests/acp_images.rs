//! Images end to end through `dsh acp` against a capturing model server on loopback: with an
//! image-capable model in `[[model.catalog]]`, `initialize` advertises image prompts, an
//! inline prompt image and a `read_image` result both reach the model as `image_url` data
//! URLs, the bytes live in `$DSH_HOME/attachments`, and the session log holds references only.
//! Without the catalog entry nothing is advertised and an image prompt is refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use serde_json::json;
use tokio::io::AsyncBufReadExt;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::io::BufReader;
use tokio::net::TcpListener;

const RED_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
const RED_HEX: &str = "b1ff9c8ea3a780bad09b346c423d2d0e46815926879b18e841d928376a946640";

fn sse(deltas: &[Value], finish: &str) -> String {
    let chunk = |delta: &Value, finish: Option<&str>| {
        let payload = json!({"id": "c1", "object": "chat.completion.chunk", "created": 0,
            "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {payload}\n\n")
    };
    let mut out: String = deltas.iter().map(|d| chunk(d, None)).collect();
    out.push_str(&chunk(&json!({}), Some(finish)));
    out.push_str("data: [DONE]\n\n");
    out
}

/// Answers each POST with the next scripted SSE body and keeps every request body.
async fn model_server(responses: Vec<String>) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let bodies: Arc<Mutex<Vec<Value>>> = Arc::default();
    let seen = bodies.clone();
    tokio::spawn(async move {
        let mut responses = responses.into_iter();
        while let Ok((stream, _)) = listener.accept().await {
            let mut reader = BufReader::new(stream);
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).await.unwrap();
            seen.lock()
                .unwrap()
                .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
            let sse = responses.next().unwrap_or_default();
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{sse}",
                sse.len()
            );
            let mut stream = reader.into_inner();
            let _ = stream.write_all(reply.as_bytes()).await;
            let _ = stream.shutdown().await;
        }
    });
    (url, bodies)
}

struct Acp {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Acp {
    fn start(workspace: &Path, home: &Path, model_url: &str) -> Self {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_dsh"));
        for (name, _) in std::env::vars() {
            if name.starts_with("DEEPSEEK_") || name.starts_with("DSH_") {
                command.env_remove(name);
            }
        }
        let mut child = command
            .arg("acp")
            .current_dir(workspace)
            .env("DSH_HOME", home)
            .env("DEEPSEEK_BASE_URL", model_url)
            .env("DEEPSEEK_API_KEY", "test-key")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            child,
            stdin,
            stdout,
        }
    }

    async fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(20), self.stdout.next_line())
                .await
                .expect("dsh answers in time")
                .unwrap()
                .expect("dsh stdout open");
            let frame: Value = serde_json::from_str(&line).unwrap();
            if frame["id"] == json!(id) && frame.get("method").is_none() {
                return frame;
            }
        }
    }

    async fn stop(mut self) {
        drop(self.stdin);
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

fn workspace_with(config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".dsh")).unwrap();
    std::fs::write(dir.path().join(".dsh/config.toml"), config).unwrap();
    std::fs::write(
        dir.path().join("red.png"),
        base64_decode(RED_PNG), // the recorded 1x1 PNG
    )
    .unwrap();
    dir
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

const VISION: &str = "[plugins.sandbox]\nmode = \"danger-full-access\"\n\n[model]\nname = \"vision-test\"\n\n[[model.catalog]]\nid = \"vision-test\"\ninput = [\"text\", \"image\"]\n\n[plugins.session-title]\nenabled = false\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_and_tool_images_reach_an_image_capable_model_as_data_urls() {
    let call = json!({"tool_calls": [{"index": 0, "id": "call_img", "type": "function",
        "function": {"name": "read_image", "arguments": "{\"file_path\":\"red.png\"}"}}]});
    let (url, bodies) = model_server(vec![
        sse(&[call], "tool_calls"),
        sse(&[json!({"content": "a red pixel"})], "stop"),
    ])
    .await;
    let workspace = workspace_with(VISION);
    let home = tempfile::tempdir().unwrap();
    let mut acp = Acp::start(workspace.path(), home.path(), &url);
    let init = acp
        .request(
            1,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
    assert_eq!(
        init["result"]["agentCapabilities"]["promptCapabilities"]["image"],
        true
    );
    let session = acp
        .request(
            2,
            "session/new",
            json!({"cwd": workspace.path(), "mcpServers": []}),
        )
        .await["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = acp
        .request(
            3,
            "session/prompt",
            json!({"sessionId": session, "prompt": [
                {"type": "text", "text": "Look at this and at red.png."},
                {"type": "image", "data": RED_PNG, "mimeType": "image/png"}
            ]}),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    acp.stop().await;

    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2);
    let data_url = format!("data:image/png;base64,{RED_PNG}");
    let tools: Vec<&str> = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(tools.contains(&"read_image"), "{tools:?}");
    let prompt = bodies[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .unwrap();
    assert_eq!(
        prompt["content"],
        json!([
            {"type": "text", "text": "Look at this and at red.png."},
            {"type": "image_url", "image_url": {"url": data_url}}
        ])
    );
    // The tool result's image follows it in a user message of its own.
    let messages = bodies[1]["messages"].as_array().unwrap();
    let tool_at = messages.iter().position(|m| m["role"] == "tool").unwrap();
    assert_eq!(
        messages[tool_at]["content"],
        format!(
            "<path>{}/red.png</path>\n<type>image</type>\n<content>\nimage/png image, 1x1 px, 69 bytes\n</content>",
            workspace.path().canonicalize().unwrap().display()
        )
    );
    assert_eq!(
        messages[tool_at + 1]["content"][1],
        json!({"type": "image_url", "image_url": {"url": data_url}})
    );

    let stored = home.path().join(format!("attachments/sha256-{RED_HEX}"));
    assert_eq!(std::fs::read(&stored).unwrap(), base64_decode(RED_PNG));
    let log = dsh_session::JsonlStore::new(home.path().to_path_buf())
        .find(&session)
        .unwrap()
        .expect("the session is persisted");
    let text = std::fs::read_to_string(log).unwrap();
    assert!(text.contains(&format!("sha256:{RED_HEX}")));
    assert!(!text.contains(RED_PNG), "no base64 in the durable log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_only_model_advertises_no_image_prompts_and_refuses_them() {
    let (url, bodies) = model_server(Vec::new()).await;
    let workspace = workspace_with("[model]\nname = \"deepseek-v4-flash\"\n");
    let home = tempfile::tempdir().unwrap();
    let mut acp = Acp::start(workspace.path(), home.path(), &url);
    let init = acp
        .request(
            1,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
    assert_eq!(
        init["result"]["agentCapabilities"]["promptCapabilities"]["image"],
        false
    );
    let session = acp
        .request(
            2,
            "session/new",
            json!({"cwd": workspace.path(), "mcpServers": []}),
        )
        .await["result"]["sessionId"]
        .clone();
    let refused = acp
        .request(
            3,
            "session/prompt",
            json!({"sessionId": session, "prompt": [
                {"type": "image", "data": RED_PNG, "mimeType": "image/png"}
            ]}),
        )
        .await;
    assert_eq!(
        refused["error"]["message"],
        "Invalid params: inline image prompts were not advertised by this connection"
    );
    acp.stop().await;
    assert!(bodies.lock().unwrap().is_empty());
    assert!(!home.path().join("attachments").exists());
}
