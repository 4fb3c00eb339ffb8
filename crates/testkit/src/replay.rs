//! The replay model server: serves a scenario's `model.jsonl` over HTTP on loopback exactly as
//! the conformance README says (one cursor per session and route, error and hang entries,
//! binding by `x-deepseek-harness-session-id` or by first user text), fails requests it has no
//! entry for, and reports what was left unconsumed or unanswered.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::Response;
use futures::StreamExt as _;
use serde::Serialize;
use serde_json::{Value, json};

use crate::binding::{Binder, ChatRequest};
use crate::error::{Result, TestkitError};
use crate::scenario::{EntryKind, ModelEntry, Scenario};
use crate::sse;

pub const SESSION_HEADER: &str = "x-deepseek-harness-session-id";

/// `GET` here returns `{"served","unconsumed","unanswered"}` (for out-of-process users of
/// `dsh-mock-llm`); it is not a model route and consumes nothing.
pub const STATUS_PATH: &str = "/__replay/status";

/// A request the server could not serve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unanswered {
    pub method: String,
    pub path: String,
    pub session: Option<usize>,
    pub route: Option<String>,
    pub reason: String,
}

/// A scripted entry no request consumed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unconsumed {
    pub session: usize,
    pub route: String,
    pub index: usize,
}

#[derive(Debug)]
struct State {
    scripts: HashMap<(usize, String), Vec<ModelEntry>>,
    cursors: HashMap<(usize, String), usize>,
    title_prefixes: Vec<String>,
    binder: Binder,
    unanswered: Vec<Unanswered>,
    served: usize,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    in_flight: AtomicUsize,
    workspace: Option<PathBuf>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent data (every update is one assignment).
        dsh_sync::lock(&self.state)
    }
}

/// A running replay server; dropping it stops accepting connections.
#[derive(Debug)]
pub struct ReplayServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ReplayServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ReplayServer {
    /// Binds `addr` (must be loopback; port 0 picks a free one) and starts serving.
    /// `workspace` is where `hang` entries create their `ready_file`.
    pub async fn start(
        scenario: &Scenario,
        addr: SocketAddr,
        workspace: Option<PathBuf>,
    ) -> Result<Self> {
        if !addr.ip().is_loopback() {
            return Err(TestkitError::Server(format!(
                "refusing non-loopback address {addr}"
            )));
        }
        let mut scripts: HashMap<(usize, String), Vec<ModelEntry>> = HashMap::new();
        let mut title_prefixes = Vec::new();
        for entry in &scenario.model {
            if let Some(prefix) = entry.match_.as_ref().and_then(|m| m.system_prefix.clone())
                && !title_prefixes.contains(&prefix)
            {
                title_prefixes.push(prefix);
            }
            scripts
                .entry((entry.session, entry.route.clone()))
                .or_default()
                .push(entry.clone());
        }
        for list in scripts.values_mut() {
            list.sort_by_key(|e| e.index);
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                scripts,
                cursors: HashMap::new(),
                title_prefixes,
                binder: Binder::new(&scenario.spec.sessions),
                unanswered: Vec::new(),
                served: 0,
            }),
            in_flight: AtomicUsize::new(0),
            workspace,
        });
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| TestkitError::Server(format!("bind {addr}: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| TestkitError::Server(format!("local_addr: {e}")))?;
        let app_state = shared.clone();
        // Requests of long or large conversations exceed axum's 2 MB default; a real provider
        // takes them (the harness's own caps are what the tests exercise).
        let app = axum::Router::new()
            .fallback(move |method, uri, headers, body| {
                let shared = app_state.clone();
                async move { handle(shared, method, uri, headers, body).await }
            })
            .layer(axum::extract::DefaultBodyLimit::max(256 * 1024 * 1024));
        // Without TCP_NODELAY the second SSE write waits for the client's delayed ACK (40 ms
        // on Linux), which would dominate any whole-process timing taken against this server.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::warn!("replay: cannot set TCP_NODELAY: {e}");
            }
        });
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!("replay server stopped: {e}");
            }
        });
        Ok(Self { addr, shared, task })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL to give the harness as `DEEPSEEK_BASE_URL` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Scripted entries not consumed so far (`repeat` entries never count).
    pub fn unconsumed(&self) -> Vec<Unconsumed> {
        unconsumed_of(&self.shared)
    }

    /// The same facts as [`STATUS_PATH`] serves.
    pub fn status(&self) -> Value {
        status_json(&self.shared)
    }

    /// Requests that got no scripted answer.
    pub fn unanswered(&self) -> Vec<Unanswered> {
        self.shared.lock().unanswered.clone()
    }

    /// Number of requests answered from the script.
    pub fn served(&self) -> usize {
        self.shared.lock().served
    }

    /// Responses whose body is still streaming (hang entries stay in flight until the client
    /// disconnects).
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::SeqCst)
    }
}

fn unconsumed_of(shared: &Shared) -> Vec<Unconsumed> {
    let st = shared.lock();
    let mut out: Vec<Unconsumed> = st
        .scripts
        .iter()
        .flat_map(|(key, list)| {
            let cursor = st.cursors.get(key).copied().unwrap_or(0);
            list.iter()
                .skip(cursor)
                .filter(|e| !e.repeat)
                .map(|e| Unconsumed {
                    session: e.session,
                    route: e.route.clone(),
                    index: e.index,
                })
                .collect::<Vec<_>>()
        })
        .collect();
    out.sort_by(|a, b| (a.session, &a.route, a.index).cmp(&(b.session, &b.route, b.index)));
    out
}

fn status_json(shared: &Shared) -> Value {
    let unconsumed = unconsumed_of(shared);
    let st = shared.lock();
    json!({"served": st.served, "unconsumed": unconsumed, "unanswered": st.unanswered})
}

/// Decrements the in-flight counter when a response body is dropped.
struct InFlight(Arc<Shared>);

impl InFlight {
    fn new(shared: &Arc<Shared>) -> Self {
        shared.in_flight.fetch_add(1, Ordering::SeqCst);
        Self(shared.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    resp
}

fn refuse(shared: &Shared, status: StatusCode, record: Unanswered) -> Response {
    tracing::warn!(?record, "replay: unanswered request");
    let body = json!({"error": {
        "message": format!("replay: {}", record.reason),
        "type": "replay_error",
        "code": "MOCK_SCRIPT_EXHAUSTED",
    }});
    shared.lock().unanswered.push(record);
    json_response(status, &body)
}

async fn handle(
    shared: Arc<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let record = |reason: String| Unanswered {
        method: method.to_string(),
        path: path.clone(),
        session: None,
        route: None,
        reason,
    };
    if path == STATUS_PATH && method == Method::GET {
        return json_response(StatusCode::OK, &status_json(&shared));
    }
    if !path.ends_with("/chat/completions") {
        return refuse(
            &shared,
            StatusCode::NOT_FOUND,
            record(format!("unknown path {path}")),
        );
    }
    if method != Method::POST {
        return refuse(
            &shared,
            StatusCode::METHOD_NOT_ALLOWED,
            record(format!("method {method} not allowed")),
        );
    }
    let request: ChatRequest = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return refuse(
                &shared,
                StatusCode::BAD_REQUEST,
                record(format!("request body is not a chat request: {e}")),
            );
        }
    };
    let model = request.model.as_deref().unwrap_or("replay").to_owned();
    let header_id = headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);

    let (entry, response_id, session, route) = {
        let mut st = shared.lock();
        let system = request.system_text();
        let route = if st
            .title_prefixes
            .iter()
            .any(|p| system.starts_with(p.as_str()))
        {
            "title"
        } else {
            "main"
        }
        .to_owned();
        let State {
            binder,
            cursors,
            scripts,
            served,
            ..
        } = &mut *st;
        let session = binder.bind(header_id.as_deref(), &request, |s| {
            cursors.get(&(s, route.clone())).copied().unwrap_or(0)
        });
        let key = (session, route.clone());
        let cursor = cursors.get(&key).copied().unwrap_or(0);
        let entry = scripts.get(&key).and_then(|l| l.get(cursor)).cloned();
        if let Some(e) = &entry {
            if !e.repeat {
                cursors.insert(key, cursor + 1);
            }
            *served += 1;
        }
        (entry, format!("replay-{served}"), session, route)
    };
    let Some(entry) = entry else {
        let mut rec = record(format!(
            "no remaining model entry for session {session} route {route}"
        ));
        rec.session = Some(session);
        rec.route = Some(route);
        return refuse(&shared, StatusCode::INTERNAL_SERVER_ERROR, rec);
    };
    tracing::debug!(session, route, index = entry.index, "replay: serving entry");
    match entry.kind {
        EntryKind::Error if !entry.after_stream => {
            let status = entry
                .error
                .as_ref()
                .and_then(|e| StatusCode::from_u16(e.status).ok())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            json_response(status, &sse::error_body(&entry))
        }
        EntryKind::Error => stream_response(
            &shared,
            sse::prefix_frames(&entry, &response_id, &model),
            None,
        ),
        EntryKind::Response if route == "title" => title_response(
            &shared,
            sse::response_frames(&entry, &response_id, &model),
            session,
        ),
        EntryKind::Response => stream_response(
            &shared,
            sse::response_frames(&entry, &response_id, &model),
            None,
        ),
        EntryKind::Hang => {
            let ready = entry
                .ready_file
                .as_ref()
                .map(|f| shared.workspace.clone().unwrap_or_default().join(f));
            stream_response(
                &shared,
                sse::prefix_frames(&entry, &response_id, &model),
                Some(ready),
            )
        }
    }
}

/// Streams `frames`; with `hang = Some(ready)` it then creates the ready file and keeps the
/// connection open until the client goes away.
fn stream_response(
    shared: &Arc<Shared>,
    frames: Vec<String>,
    hang: Option<Option<PathBuf>>,
) -> Response {
    let guard = InFlight::new(shared);
    let frames = futures::stream::iter(
        frames
            .into_iter()
            .map(|f| Ok::<Bytes, std::io::Error>(Bytes::from(f))),
    );
    let body = match hang {
        None => frames
            .map(move |f| {
                let _keep = &guard;
                f
            })
            .boxed(),
        Some(ready) => {
            let marker = futures::stream::once(async move {
                // Give the transport a moment to flush the prefix before the client may react.
                tokio::time::sleep(Duration::from_millis(50)).await;
                if let Some(path) = ready
                    && let Err(e) = std::fs::write(&path, b"")
                {
                    tracing::error!("replay: cannot create ready file {}: {e}", path.display());
                }
            })
            .filter_map(|()| async { None });
            frames
                .chain(marker)
                .chain(futures::stream::pending())
                .map(move |f| {
                    let _keep = &guard;
                    f
                })
                .boxed()
        }
    };
    sse_response(body)
}

/// Upstream paced its title replies (10 ms per chunk) so they landed after the main turn.
const TITLE_PACE: Duration = Duration::from_millis(10);
/// How long the main route must stay idle before a title reply starts…
const TITLE_SETTLE: Duration = Duration::from_millis(150);
/// …waiting at most this long for that.
const TITLE_HOLD_LIMIT: Duration = Duration::from_secs(2);

/// A title reply, held until the session's main script is drained and no other response is
/// streaming (so the harness has had time to close its turn), then paced chunk by chunk. This
/// reproduces the recorded order (title after the turn) independently of machine load.
fn title_response(shared: &Arc<Shared>, frames: Vec<String>, session: usize) -> Response {
    let guard = InFlight::new(shared);
    let waiter = shared.clone();
    let hold = futures::stream::once(async move { main_settled(&waiter, session).await })
        .filter_map(|()| async { None::<std::result::Result<Bytes, std::io::Error>> });
    let frames = futures::stream::iter(frames).then(|f| async move {
        tokio::time::sleep(TITLE_PACE).await;
        Ok::<Bytes, std::io::Error>(Bytes::from(f))
    });
    let body = hold
        .chain(frames)
        .map(move |f| {
            let _keep = &guard;
            f
        })
        .boxed();
    sse_response(body)
}

async fn main_settled(shared: &Shared, session: usize) {
    let started = tokio::time::Instant::now();
    let mut idle_since: Option<tokio::time::Instant> = None;
    while started.elapsed() < TITLE_HOLD_LIMIT {
        let drained = {
            let st = shared.lock();
            let key = (session, "main".to_owned());
            let total = st.scripts.get(&key).map_or(0, Vec::len);
            st.cursors.get(&key).copied().unwrap_or(0) >= total
        };
        // This reply's own guard is the one response allowed in flight.
        let idle = drained && shared.in_flight.load(Ordering::SeqCst) <= 1;
        match (idle, idle_since) {
            (false, _) => idle_since = None,
            (true, None) => idle_since = Some(tokio::time::Instant::now()),
            (true, Some(since)) if since.elapsed() >= TITLE_SETTLE => return,
            (true, Some(_)) => {}
        }
        tokio::time::sleep(TITLE_PACE).await;
    }
}

fn sse_response(body: futures::stream::BoxStream<'static, std::io::Result<Bytes>>) -> Response {
    let mut resp = Response::new(Body::from_stream(body));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    resp
}

#[cfg(test)]
#[path = "replay_tests.rs"]
mod tests;
