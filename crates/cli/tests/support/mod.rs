//! Shared by the tests that drive `dsh acp` as a process: a capturing SSE model server on
//! loopback and a newline-delimited JSON-RPC client on the process's stdio.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
#![allow(dead_code, reason = "each test binary uses part of it")]

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

pub fn sse(deltas: &[Value], finish: &str) -> String {
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
pub async fn model_server(responses: Vec<String>) -> (String, Arc<Mutex<Vec<Value>>>) {
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

/// Answers an agent→client request: `Ok(result)` or `Err(error object)`.
pub type Answerer = Box<dyn FnMut(&Value) -> Result<Value, Value> + Send>;

pub struct Acp {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    /// Every frame dsh sent, in order.
    pub frames: Vec<Value>,
    /// Answers dsh's own requests (`session/request_permission`, …); by default a permission
    /// request is cancelled and anything else is method-not-found.
    pub answer: Answerer,
}

fn default_answer(request: &Value) -> Result<Value, Value> {
    match request["method"].as_str() {
        Some("session/request_permission") => Ok(json!({"outcome": {"outcome": "cancelled"}})),
        other => Err(json!({"code": -32601, "message": format!("Method not found: {other:?}")})),
    }
}

impl Acp {
    pub fn start(workspace: &Path, home: &Path, model_url: &str) -> Self {
        Self::start_with(workspace, home, model_url, &[])
    }

    /// As [`Acp::start`], with extra environment variables.
    pub fn start_with(
        workspace: &Path,
        home: &Path,
        model_url: &str,
        env: &[(&str, &str)],
    ) -> Self {
        // `DSH_TEST_ACP_BIN` runs the same probes against another build (an older binary, to
        // see a probe fail before its fix).
        let binary = std::env::var_os("DSH_TEST_ACP_BIN")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_dsh").into());
        let mut command = tokio::process::Command::new(binary);
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
            .envs(env.iter().copied())
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
            frames: Vec::new(),
            answer: Box::new(default_answer),
        }
    }

    async fn send(&mut self, message: &Value) {
        self.stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }

    pub async fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send_request(id, method, params).await;
        self.response(id).await
    }

    /// Sends a request without waiting for its answer (see [`Acp::response`]).
    pub async fn send_request(&mut self, id: u64, method: &str, params: Value) {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&line).await;
    }

    /// Sends a notification (`session/cancel`, `$/cancel_request`).
    pub async fn notify(&mut self, method: &str, params: Value) {
        let line = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send(&line).await;
    }

    /// The next frame dsh sends, recorded in [`Acp::frames`] and left unanswered.
    pub async fn next_frame(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), self.stdout.next_line())
            .await
            .expect("dsh sends in time")
            .unwrap()
            .expect("dsh stdout open");
        let frame: Value = serde_json::from_str(&line).unwrap();
        self.frames.push(frame.clone());
        frame
    }

    /// Reads frames, answering none of dsh's requests, until one matches `wanted`.
    pub async fn until(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let frame = self.next_frame().await;
            if wanted(&frame) {
                return frame;
            }
        }
    }

    /// Waits for the answer to request `id`, answering dsh's own requests through
    /// [`Acp::answer`] meanwhile.
    pub async fn response(&mut self, id: u64) -> Value {
        if let Some(answered) = self
            .frames
            .iter()
            .find(|f| f["id"] == json!(id) && f.get("method").is_none())
        {
            return answered.clone();
        }
        loop {
            let line = tokio::time::timeout(Duration::from_secs(20), self.stdout.next_line())
                .await
                .expect("dsh answers in time")
                .unwrap()
                .expect("dsh stdout open");
            let frame: Value = serde_json::from_str(&line).unwrap();
            self.frames.push(frame.clone());
            if frame.get("method").is_some() && frame.get("id").is_some() {
                let reply = match (self.answer)(&frame) {
                    Ok(result) => json!({"jsonrpc": "2.0", "id": frame["id"], "result": result}),
                    Err(error) => json!({"jsonrpc": "2.0", "id": frame["id"], "error": error}),
                };
                self.send(&reply).await;
                continue;
            }
            if frame["id"] == json!(id) && frame.get("method").is_none() {
                return frame;
            }
        }
    }

    pub async fn stop(mut self) {
        drop(self.stdin);
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}
