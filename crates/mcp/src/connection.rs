//! One live MCP session over stdio, streamable HTTP (rmcp) or legacy HTTP+SSE ([`crate::sse`]),
//! plus the initial `tools/list`.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderName;
use reqwest::header::HeaderValue;
use rmcp::ClientHandler;
use rmcp::RoleClient;
use rmcp::ServiceExt;
use rmcp::model::ClientCapabilities;
use rmcp::model::ClientConfig;
use rmcp::model::ClientRequest;
use rmcp::model::Implementation;
use rmcp::model::PingRequest;
use rmcp::service::NotificationContext;
use rmcp::service::Peer;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::TokioChildProcess;
use rmcp::transport::common::client_side_sse::SseRetryPolicy;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::AsyncBufReadExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::config::Transport;
use crate::error::ConfigError;

/// Client identity sent in `initialize` (catalog §4 "Client identity").
pub const CLIENT_NAME: &str = "dsh-mcp-client";
pub const CLIENT_VERSION: &str = "0.0.1";

/// Where a call's `notifications/progress` go: progress token → a line writer.
pub(crate) type ProgressRoutes =
    std::sync::Mutex<HashMap<String, Arc<dyn Fn(String) + Send + Sync>>>;

/// What the client offers a server beyond tools: the workspace roots and progress routing.
#[derive(Clone, Default)]
pub(crate) struct ClientSide {
    /// `file://` URIs answered to `roots/list` (the capability is declared when non-empty).
    pub(crate) roots: Vec<String>,
    pub(crate) progress: Arc<ProgressRoutes>,
    /// Who answers `elicitation/create` (the capability is declared when present).
    pub(crate) questions: Option<Arc<dsh_user_questions::UserQuestions>>,
    /// The server's name, shown with its questions.
    pub(crate) server: String,
    /// Bumped on `notifications/prompts/list_changed` (and by the server on every connect):
    /// the prompt commands re-list when it moves.
    pub(crate) prompts_changed: Arc<tokio::sync::watch::Sender<u64>>,
}

/// Receives server notifications and requests: the `list_changed` notifications, progress,
/// `roots/list`, elicitation.
#[derive(Clone)]
struct Handler {
    info: ClientConfig,
    list_changed: Arc<Notify>,
    side: ClientSide,
}

pub(crate) fn token_key(token: &rmcp::model::ProgressToken) -> String {
    match &token.0 {
        rmcp::model::NumberOrString::String(s) => s.to_string(),
        rmcp::model::NumberOrString::Number(n) => n.to_string(),
    }
}

/// `progress <p>/<total>: <message>` (parts omitted when absent), one line.
pub(crate) fn progress_line(progress: f64, total: Option<f64>, message: Option<&str>) -> String {
    let number = |n: f64| {
        if n.fract() == 0.0 && n.abs() < 1e15 {
            format!("{}", n as i64)
        } else {
            format!("{n}")
        }
    };
    let mut line = format!("progress {}", number(progress));
    if let Some(total) = total {
        line.push_str(&format!("/{}", number(total)));
    }
    if let Some(message) = message.filter(|m| !m.is_empty()) {
        line.push_str(&format!(": {message}"));
    }
    line.push('\n');
    line
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.notify_one();
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.side.prompts_changed.send_modify(|n| *n += 1);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // Nothing to refresh: resources are listed and read on demand, never cached.
        tracing::debug!(server = %self.side.server, "mcp resources changed");
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let key = token_key(&params.progress_token);
        let route = dsh_sync::lock(&self.side.progress).get(&key).cloned();
        if let Some(route) = route {
            route(progress_line(
                params.progress,
                params.total,
                params.message.as_deref(),
            ));
        }
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let decline = rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Decline);
        let Some(questions) = self.side.questions.as_deref() else {
            return Ok(decline);
        };
        match request {
            rmcp::model::ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => {
                let schema = serde_json::to_value(&requested_schema).unwrap_or_default();
                Ok(crate::elicit::ask_form(
                    questions,
                    &self.side.server,
                    &message,
                    &schema,
                    context.ct.clone(),
                )
                .await)
            }
            // URL mode is never declared; a server that sends it (or a later mode) is declined.
            _ => Ok(decline),
        }
    }

    // Roots are deprecated upstream (SEP-2577) but still what servers of this protocol
    // generation ask for; the session's workspace is the answer.
    #[allow(deprecated)]
    async fn list_roots(
        &self,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        let roots = self
            .side
            .roots
            .iter()
            .map(|uri| rmcp::model::Root::new(uri.clone()))
            .collect();
        Ok(rmcp::model::ListRootsResult::new(roots))
    }
}

/// A connected session. Dropping it shuts the session down (a stdio child is closed, then
/// killed).
pub(crate) struct Connection {
    pub(crate) peer: Peer<RoleClient>,
    /// Cancelled once the session is gone: the service loop ended (child exit, stream end) or a
    /// call saw the transport fail.
    pub(crate) closed: CancellationToken,
    shutdown: CancellationToken,
    pub(crate) pid: Option<u32>,
    /// The server's `instructions` from `initialize`.
    pub(crate) instructions: Option<String>,
    /// Whether the server offers resources / prompts.
    pub(crate) has_resources: bool,
    pub(crate) has_prompts: bool,
}

impl Connection {
    /// `ping` within `timeout`: false when the transport failed or nothing answered. An
    /// error *response* still proves the server is there.
    pub(crate) async fn ping(&self, timeout: Duration) -> bool {
        let request = ClientRequest::PingRequest(PingRequest::default());
        match tokio::time::timeout(timeout, self.peer.send_request(request)).await {
            Ok(Ok(_) | Err(rmcp::ServiceError::McpError(_))) => true,
            Ok(Err(_)) | Err(_) => false,
        }
    }

    /// Marks the session dead and tears it down; in-flight calls end at once.
    pub(crate) fn close(&self) {
        self.closed.cancel();
        self.shutdown.cancel();
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.close();
    }
}

fn headers(
    server: &str,
    given: &std::collections::BTreeMap<String, String>,
) -> Result<HashMap<HeaderName, HeaderValue>, ConfigError> {
    given
        .iter()
        .map(|(name, value)| {
            let bad = || ConfigError::InvalidHeader {
                server: server.to_owned(),
                header: name.clone(),
            };
            Ok((
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?,
                HeaderValue::from_str(value).map_err(|_| bad())?,
            ))
        })
        .collect()
}

/// How often a broken SSE stream is resumed before the request fails. rmcp's default retries
/// forever, which would leave a call hanging on a dead server until its timeout.
#[derive(Debug)]
struct BoundedSseRetry;

impl SseRetryPolicy for BoundedSseRetry {
    fn retry(&self, current_times: usize) -> Option<Duration> {
        // 200, 400, 800 ms: rides out a blip, gives up on a dead server in under 2 s.
        (current_times <= 3).then(|| Duration::from_millis(100 << current_times.min(3)))
    }
}

/// Connects (spawning the child for stdio) and completes `initialize`, within `timeout`.
pub(crate) async fn connect(
    server: &str,
    transport: &Transport,
    list_changed: Arc<Notify>,
    timeout: Duration,
    side: ClientSide,
    // String: the reason becomes the server's `last_error` status text and a log line only.
) -> Result<Connection, String> {
    let mut capabilities = ClientCapabilities::default();
    if !side.roots.is_empty() {
        capabilities.roots = Some(rmcp::model::RootsCapabilities::default());
    }
    if side.questions.is_some() {
        capabilities.elicitation = Some(
            rmcp::model::ElicitationCapability::new()
                .with_form(rmcp::model::FormElicitationCapability::new()),
        );
    }
    let handler = Handler {
        info: ClientConfig::new(
            capabilities,
            Implementation::new(CLIENT_NAME, CLIENT_VERSION),
        ),
        list_changed,
        side,
    };
    let shutdown = CancellationToken::new();
    let (running, pid) = match transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let child_env = dsh_process::ChildEnv::inherited().with(env.clone());
            // Found in the child's own (scrubbed) PATH, as an absolute path: the spawn then
            // stays on posix_spawn.
            let base = cwd
                .as_deref()
                .map(std::path::PathBuf::from)
                .or_else(|| std::env::current_dir().ok())
                .unwrap_or_else(|| std::path::PathBuf::from("/"));
            let program = child_env
                .resolve(command, &base)
                .unwrap_or_else(|| std::path::PathBuf::from(command));
            let mut cmd = dsh_process::command(program, &child_env);
            cmd.args(args).kill_on_drop(true);
            if let Some(cwd) = cwd {
                cmd.current_dir(cwd);
            }
            let (child, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot spawn \"{command}\": {e}"))?;
            let pid = child.id();
            if let Some(stderr) = stderr {
                let server = server.to_owned();
                tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tracing::debug!(target: "dsh_mcp::stderr", server = %server, "{line}");
                    }
                });
            }
            let serve = handler.serve_with_ct(child, shutdown.clone());
            let running = tokio::time::timeout(timeout, serve)
                .await
                .map_err(|_| format!("no initialize answer within {}ms", timeout.as_millis()))?
                .map_err(|e| format!("initialize failed: {e}"))?;
            (running, pid)
        }
        Transport::StreamableHttp {
            url,
            headers: given,
        } => {
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(headers(server, given).map_err(|e| e.to_string())?);
            config.retry_config = Arc::new(BoundedSseRetry);
            let http = StreamableHttpClientTransport::from_config(config);
            let serve = handler.serve_with_ct(http, shutdown.clone());
            let running = tokio::time::timeout(timeout, serve)
                .await
                .map_err(|_| {
                    format!(
                        "no initialize answer from {url} within {}ms",
                        timeout.as_millis()
                    )
                })?
                .map_err(|e| format!("initialize failed ({url}): {e}"))?;
            (running, None)
        }
        Transport::Sse {
            url,
            headers: given,
        } => {
            let headers = headers(server, given).map_err(|e| e.to_string())?;
            // Opening the stream and waiting for its `endpoint` event are part of connecting.
            let serve = async {
                let sse = crate::sse::SseClientTransport::connect(url, headers)
                    .await
                    .map_err(|e| e.to_string())?;
                handler
                    .serve_with_ct(sse, shutdown.clone())
                    .await
                    .map_err(|e| format!("initialize failed ({url}): {e}"))
            };
            let running = tokio::time::timeout(timeout, serve).await.map_err(|_| {
                format!(
                    "no initialize answer from {url} within {}ms",
                    timeout.as_millis()
                )
            })??;
            (running, None)
        }
    };
    let closed = CancellationToken::new();
    let peer = running.peer().clone();
    let info = peer.peer_info();
    let instructions = info
        .as_ref()
        .and_then(|i| i.instructions.clone())
        .filter(|t| !t.trim().is_empty());
    let has_resources = info
        .as_ref()
        .is_some_and(|i| i.capabilities.resources.is_some());
    let has_prompts = info
        .as_ref()
        .is_some_and(|i| i.capabilities.prompts.is_some());
    let watcher = closed.clone();
    let name = server.to_owned();
    tokio::spawn(async move {
        let reason = running.waiting().await;
        tracing::debug!(server = %name, ?reason, "mcp session ended");
        watcher.cancel();
    });
    Ok(Connection {
        peer,
        closed,
        shutdown,
        pid,
        instructions,
        has_resources,
        has_prompts,
    })
}

/// Every page of `tools/list`, within `timeout`.
pub(crate) async fn list_tools(
    connection: &Connection,
    timeout: Duration,
) -> Result<Vec<rmcp::model::Tool>, String> {
    tokio::select! {
        listed = tokio::time::timeout(timeout, connection.peer.list_all_tools()) => match listed {
            Ok(Ok(tools)) => Ok(tools),
            Ok(Err(e)) => Err(format!("tools/list failed: {e}")),
            Err(_) => Err(format!("tools/list got no answer within {}ms", timeout.as_millis())),
        },
        () = connection.closed.cancelled() => Err("the connection closed during tools/list".to_owned()),
    }
}
