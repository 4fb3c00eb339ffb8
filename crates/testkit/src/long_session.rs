//! A model for long-session benchmarks: it keeps calling `bash` with large outputs for a fixed
//! number of steps, answers compaction requests (`x-deepseek-harness-compact: 1`) with a short
//! summary, refuses requests larger than its context window the way a provider does
//! (`context_length_exceeded`), and records, per served step, how long the harness took from
//! the end of the previous response to this request (its per-step overhead, including the
//! tool run).
//!
//! Unlike the replay server it is not scripted: compaction requests arrive whenever the
//! harness decides, so each request is answered by what it is.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Instant;

use axum::body::Body;
use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::http::header;
use axum::response::Response;
use serde::Serialize;
use serde_json::Value;
use serde_json::json;

use crate::error::Result;
use crate::error::TestkitError;
use crate::sse::DONE_FRAME;
use crate::sse::frame;

/// The task prompt (also what binds nothing: there is one session).
pub const LONG_SESSION_PROMPT: &str =
    "Run the numbered commands one after another until told to stop, then say DONE.";

/// What the model does.
#[derive(Debug, Clone)]
pub struct LongSessionPlan {
    /// Tool-calling steps before the final `DONE`.
    pub steps: usize,
    /// Bytes each step's command prints.
    pub result_bytes: usize,
    /// A request estimated above this many tokens (body bytes / 4) is refused as too long.
    pub context_window: u64,
}

/// One served request.
#[derive(Debug, Clone, Serialize)]
pub struct Served {
    pub index: usize,
    pub kind: &'static str,
    /// Milliseconds since the previous response finished (`None` for the first).
    pub gap_ms: Option<f64>,
    pub body_bytes: usize,
    pub messages: usize,
    /// The first 80 characters of the first non-system message (a checkpoint shows here).
    pub first_text: String,
}

#[derive(Debug, Default)]
struct State {
    steps_served: usize,
    log: Vec<Served>,
    last_end: Option<Instant>,
}

#[derive(Debug)]
struct Shared {
    plan: LongSessionPlan,
    state: Mutex<State>,
}

/// A running server.
#[derive(Debug)]
pub struct LongSessionServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LongSessionServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl LongSessionServer {
    /// Binds `addr` (loopback only).
    pub async fn start(plan: LongSessionPlan, addr: SocketAddr) -> Result<Self> {
        if !addr.ip().is_loopback() {
            return Err(TestkitError::Server(format!(
                "refusing non-loopback address {addr}"
            )));
        }
        let shared = Arc::new(Shared {
            plan,
            state: Mutex::new(State::default()),
        });
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| TestkitError::Server(format!("bind {addr}: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| TestkitError::Server(format!("local_addr: {e}")))?;
        let state = shared.clone();
        let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
            let shared = state.clone();
            async move { handle(&shared, &headers, &body) }
        });
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!("long-session server stopped: {e}");
            }
        });
        Ok(Self { addr, shared, task })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every served request so far.
    pub fn served(&self) -> Vec<Served> {
        dsh_sync::lock(&self.shared.state).log.clone()
    }
}

fn sse(frames: Vec<String>) -> Response {
    let body: String = frames.concat();
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from(body))
        .unwrap_or_default()
}

fn chunk(model: &str, delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": "long-session", "object": "chat.completion.chunk", "created": 0, "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })
}

fn finish(model: &str, reason: &str, prompt_tokens: u64, completion: u64) -> Vec<String> {
    let mut last = chunk(model, json!({}), Some(reason));
    last["usage"] = json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
    });
    vec![frame(&last), DONE_FRAME.to_owned()]
}

fn text_response(model: &str, text: &str, prompt_tokens: u64) -> Response {
    let mut frames = vec![
        frame(&chunk(
            model,
            json!({"role": "assistant", "content": ""}),
            None,
        )),
        frame(&chunk(model, json!({"content": text}), None)),
    ];
    frames.extend(finish(
        model,
        "stop",
        prompt_tokens,
        (text.len() / 4) as u64,
    ));
    sse(frames)
}

/// The summary a compaction request gets: every checkpoint section, briefly.
pub const SUMMARY: &str = "## Primary Request and Intent\n- Run the numbered commands, then say DONE.\n## Key Technical Concepts\n- (none)\n## Files and Code\n- (none)\n## Errors and Fixes\n- (none)\n## Pending Jobs\n- (none)\n## Current Work\n- Running the numbered commands.\n## Next Step\n- Run the next command.\n## Critical Context\n- (none)";

fn handle(shared: &Shared, headers: &HeaderMap, body: &Bytes) -> Response {
    let now = Instant::now();
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let model = request["model"].as_str().unwrap_or("model").to_owned();
    let messages = request["messages"].as_array().map_or(0, Vec::len);
    let first_text: String = request["messages"]
        .as_array()
        .and_then(|list| list.iter().find(|m| m["role"] != "system"))
        .map(|m| match &m["content"] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<String>(),
            _ => String::new(),
        })
        .unwrap_or_default()
        .chars()
        .take(80)
        .collect();
    let prompt_tokens = (body.len() / 4) as u64;
    let compact = headers
        .get("x-deepseek-harness-compact")
        .is_some_and(|v| v == "1");
    let title = request["messages"][0]["role"] == "system"
        && request["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with("Create a concise title"));
    let mut state = dsh_sync::lock(&shared.state);
    let gap_ms = state
        .last_end
        .map(|end| now.duration_since(end).as_secs_f64() * 1000.0);
    let index = state.log.len();
    let kind = if title {
        "title"
    } else if compact {
        "compaction"
    } else if prompt_tokens > shared.plan.context_window {
        "overflow"
    } else {
        "step"
    };
    state.log.push(Served {
        index,
        kind,
        gap_ms: if kind == "step" || kind == "overflow" {
            gap_ms
        } else {
            None
        },
        body_bytes: body.len(),
        messages,
        first_text,
    });
    let response = match kind {
        "title" => text_response(&model, "Long session", prompt_tokens),
        "compaction" => text_response(&model, SUMMARY, prompt_tokens),
        "overflow" => Response::builder()
            .status(StatusCode::BAD_REQUEST)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(
                json!({"error": {
                    "message": format!("This model's maximum context length is {} tokens; the request has {prompt_tokens}.", shared.plan.context_window),
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded"
                }})
                .to_string(),
            ))
            .unwrap_or_default(),
        _ => {
            let step = state.steps_served;
            state.steps_served += 1;
            if step >= shared.plan.steps {
                text_response(&model, "DONE", prompt_tokens)
            } else {
                let command = format!(
                    "printf 'step-{step}\\n'; head -c {} /dev/zero | tr '\\0' x",
                    shared.plan.result_bytes
                );
                let arguments = json!({"command": command, "description": format!("Run step {step}")}).to_string();
                let mut frames = vec![
                    frame(&chunk(&model, json!({"role": "assistant", "content": ""}), None)),
                    frame(&chunk(&model, json!({"reasoning_content": format!("Step {step} next.")}), None)),
                    frame(&chunk(&model, json!({"tool_calls": [{"index": 0, "id": format!("call_{step:05}"), "type": "function", "function": {"name": "bash", "arguments": arguments}}]}), None)),
                ];
                frames.extend(finish(&model, "tool_calls", prompt_tokens, 20));
                sse(frames)
            }
        }
    };
    // The response is built in full before it is sent, so "now" is when it ends.
    state.last_end = Some(Instant::now());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn it_answers_by_request_kind() {
        let server = LongSessionServer::start(
            LongSessionPlan {
                steps: 1,
                result_bytes: 10,
                context_window: 1000,
            },
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap();
        let client = reqwest::Client::new();
        let url = format!("{}/chat/completions", server.url());
        let post = |body: Value, compact: bool| {
            let mut req = client.post(&url).json(&body);
            if compact {
                req = req.header("x-deepseek-harness-compact", "1");
            }
            req.send()
        };
        let small = json!({"model": "m", "messages": [{"role": "user", "content": "go"}]});
        let step = post(small.clone(), false)
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(step.contains("\"name\":\"bash\""), "{step}");
        assert!(step.contains("head -c 10 /dev/zero"));
        let done = post(small.clone(), false)
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(done.contains("\"content\":\"DONE\""));
        let summary = post(small.clone(), true)
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(summary.contains("## Primary Request and Intent"));
        let big =
            json!({"model": "m", "messages": [{"role": "user", "content": "x".repeat(5000)}]});
        let refused = post(big, false).await.unwrap();
        assert_eq!(refused.status(), 400);
        let served = server.served();
        let kinds: Vec<&str> = served.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, ["step", "step", "compaction", "overflow"]);
        assert!(served[0].gap_ms.is_none());
        assert!(served[1].gap_ms.is_some());
        assert_eq!(served[0].first_text, "go");
    }
}
