//! A scripted server speaking plain OpenAI chat completions (streaming SSE, no DeepSeek
//! extensions: no `reasoning_content`, no cache fields) that records every request body. For
//! tests that need to see what the harness sent (tool lists, bodies) or that exercise a generic
//! OpenAI-compatible provider.

use dsh_sync::lock;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::routing::post;
use serde_json::Value;
use serde_json::json;

/// One scripted model turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Assistant text, streamed in two deltas; finishes `stop`.
    Text(String),
    /// One tool call (arguments as JSON text); finishes `tool_calls`.
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
}

impl Reply {
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(text.into())
    }

    pub fn tool_call(id: &str, name: &str, arguments: Value) -> Self {
        Self::ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_string(),
        }
    }
}

#[derive(Default)]
struct Shared {
    replies: VecDeque<Reply>,
    requests: Vec<Value>,
    headers: Vec<Vec<(String, String)>>,
}

/// The running server; stops when dropped.
pub struct ChatServer {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ChatServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })
}

fn events(reply: &Reply) -> Vec<Value> {
    let mut out = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    match reply {
        Reply::Text(text) => {
            let middle = text
                .char_indices()
                .nth(text.chars().count() / 2)
                .map_or(text.len(), |(i, _)| i);
            out.push(chunk(json!({"content": &text[..middle]}), None));
            out.push(chunk(json!({"content": &text[middle..]}), None));
            out.push(chunk(json!({}), Some("stop")));
        }
        Reply::ToolCall {
            id,
            name,
            arguments,
        } => {
            out.push(chunk(
                json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                    "function": {"name": name, "arguments": ""}}]}),
                None,
            ));
            out.push(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}),
                None,
            ));
            out.push(chunk(json!({}), Some("tool_calls")));
        }
    }
    out.push(json!({
        "id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0,
        "model": "test-model", "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }));
    out
}

async fn complete(
    State(shared): State<Arc<Mutex<Shared>>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "body is not JSON").into_response();
    };
    let reply = {
        let mut shared = lock(&shared);
        shared.requests.push(request);
        shared.headers.push(
            headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_owned()))
                .collect(),
        );
        shared.replies.pop_front()
    };
    let Some(reply) = reply else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"error": {"message": "no scripted reply left"}})),
        )
            .into_response();
    };
    let mut text = String::new();
    for event in events(&reply) {
        text.push_str(&format!("data: {event}\n\n"));
    }
    text.push_str("data: [DONE]\n\n");
    ([(header::CONTENT_TYPE, "text/event-stream")], text).into_response()
}

impl ChatServer {
    /// Serves `replies` in order on a loopback port; `POST {url}/chat/completions`.
    pub async fn start(replies: Vec<Reply>) -> std::io::Result<Self> {
        let shared = Arc::new(Mutex::new(Shared {
            replies: replies.into(),
            ..Shared::default()
        }));
        let app = Router::new()
            .route("/chat/completions", post(complete))
            .route("/v1/chat/completions", post(complete))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, shared, task })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Adds replies after the scripted ones.
    pub fn push(&self, reply: Reply) {
        lock(&self.shared).replies.push_back(reply);
    }

    /// Every request body received so far.
    pub fn requests(&self) -> Vec<Value> {
        lock(&self.shared).requests.clone()
    }

    /// The headers of every request received so far.
    pub fn headers(&self) -> Vec<Vec<(String, String)>> {
        lock(&self.shared).headers.clone()
    }

    /// The tool names offered in request `index`, sorted.
    pub fn offered_tools(&self, index: usize) -> Vec<String> {
        let mut names: Vec<String> = self
            .requests()
            .get(index)
            .and_then(|r| r.get("tools"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
            .map(str::to_owned)
            .collect();
        names.sort();
        names
    }
}
