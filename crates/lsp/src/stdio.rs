//! The stdio provider (`lsp-stdio`): one language-server process per (server, workspace),
//! spawned lazily, JSON-RPC over Content-Length framing, one query at a time per workspace,
//! transient `didOpen`/`didClose` around each request, cancellation, one retry on a dead
//! pooled process, and bounded shutdown.

use dsh_sync::lock;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::path::Path;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicI64;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;
use serde_json::json;
use tokio::io::AsyncBufReadExt;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::error::LspConfigError;
use crate::error::LspError;
use crate::render::file_uri;
use crate::service::LspAnswer;
use crate::service::LspProvider;
use crate::service::LspQuery;
use crate::service::Operation;
use crate::translate;

/// One `servers.<id>` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub extension_to_language: BTreeMap<String, String>,
    #[serde(default)]
    pub initialization_options: Value,
    #[serde(default)]
    pub configuration: Value,
    #[serde(default = "default_max_message")]
    pub max_message_bytes: u64,
    #[serde(default = "default_max_stderr")]
    pub max_stderr_bytes: u64,
    #[serde(default = "default_max_document")]
    pub max_document_bytes: u64,
    #[serde(default = "default_shutdown")]
    pub shutdown_timeout_ms: u64,
    #[serde(default = "default_kill_grace")]
    pub kill_grace_ms: u64,
}

fn default_max_message() -> u64 {
    16_000_000
}
fn default_max_stderr() -> u64 {
    1_000_000
}
fn default_max_document() -> u64 {
    4_000_000
}
fn default_shutdown() -> u64 {
    5_000
}
fn default_kill_grace() -> u64 {
    2_000
}

impl ServerConfig {
    /// Upstream's load-time checks.
    pub fn check(&self, id: &str) -> Result<(), LspConfigError> {
        if id.trim().is_empty() {
            return Err(LspConfigError::EmptyServerId);
        }
        for (name, value) in [
            ("shutdownTimeoutMs", self.shutdown_timeout_ms),
            ("killGraceMs", self.kill_grace_ms),
        ] {
            if value == 0 || value > 2_147_483_647 {
                return Err(LspConfigError::Milliseconds {
                    id: id.to_owned(),
                    field: name,
                });
            }
        }
        for (name, value) in [
            ("maxMessageBytes", self.max_message_bytes),
            ("maxStderrBytes", self.max_stderr_bytes),
            ("maxDocumentBytes", self.max_document_bytes),
        ] {
            if value == 0 {
                return Err(LspConfigError::NotPositive {
                    id: id.to_owned(),
                    field: name,
                });
            }
        }
        if self.command.trim().is_empty() {
            return Err(LspConfigError::NoCommand { id: id.to_owned() });
        }
        Ok(())
    }
}

/// The environment a language server gets: dsh's through the one child filter, then `extra`.
pub fn server_env(extra: &BTreeMap<String, String>) -> dsh_process::ChildEnv {
    dsh_process::ChildEnv::inherited().with(extra.clone())
}

/// `command` on the scrubbed `PATH` (a path with a slash is taken as is).
fn resolve_executable(command: &str, env: &[(String, String)]) -> Option<PathBuf> {
    if command.contains('/') {
        return Some(PathBuf::from(command));
    }
    let path = env
        .iter()
        .find(|(n, _)| n == "PATH")
        .map(|(_, v)| v.as_str())?;
    std::env::split_paths(path)
        .map(|dir| dir.join(command))
        .find(|candidate| candidate.is_file())
}

/// Why an attempt failed: a dead pooled process may be retried on a fresh one.
enum Failure {
    Transport(LspError),
    Other(LspError),
}

impl Failure {
    fn error(self) -> LspError {
        match self {
            Self::Transport(e) | Self::Other(e) => e,
        }
    }
}

type Pending = Mutex<HashMap<i64, oneshot::Sender<Result<Value, LspError>>>>;

/// A running server.
struct Instance {
    /// Shared with the reader task, which answers server requests.
    stdin: Arc<tokio::sync::Mutex<ChildStdin>>,
    pending: Arc<Pending>,
    next_id: AtomicI64,
    exited: CancellationToken,
    stderr: Arc<Mutex<Vec<u8>>>,
    capabilities: Value,
    pgid: Option<i32>,
    child: Mutex<Option<tokio::process::Child>>,
}

fn exit_error(stderr: &Mutex<Vec<u8>>) -> LspError {
    let tail = String::from_utf8_lossy(&lock(stderr)).trim().to_owned();
    if tail.is_empty() {
        LspError::new("LSP_SERVER_EXITED", "language server exited")
    } else {
        LspError::new(
            "LSP_SERVER_EXITED",
            format!("language server exited; stderr: {tail}"),
        )
    }
}

async fn write_frame(
    stdin: &tokio::sync::Mutex<ChildStdin>,
    message: &Value,
) -> Result<(), LspError> {
    let body = message.to_string();
    let frame = format!("Content-Length: {}\r\n\r\n{body}", body.len());
    let mut stdin = stdin.lock().await;
    stdin
        .write_all(frame.as_bytes())
        .await
        .and(stdin.flush().await)
        .map_err(|e| {
            LspError::new(
                "LSP_TRANSPORT",
                format!("cannot write to the language server: {e}"),
            )
        })
}

/// Reads one framed message; `Ok(None)` at end of stream.
async fn read_frame<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    max: u64,
) -> Result<Option<Value>, LspError> {
    let mut length: Option<u64> = None;
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line).await.map_err(|e| {
            LspError::new(
                "LSP_TRANSPORT",
                format!("cannot read the language server: {e}"),
            )
        })?;
        if n == 0 {
            return Ok(None);
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(LspError::new(
                "LSP_FRAMING",
                format!("malformed LSP header line {line:?}"),
            ));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            length = Some(value.trim().parse().map_err(|_| {
                LspError::new(
                    "LSP_FRAMING",
                    format!("invalid LSP Content-Length {:?}", value.trim()),
                )
            })?);
        }
    }
    let length =
        length.ok_or_else(|| LspError::new("LSP_FRAMING", "LSP message without Content-Length"))?;
    if length > max {
        return Err(LspError::new(
            "LSP_FRAMING",
            format!("LSP message length {length} exceeds the {max}-byte limit"),
        ));
    }
    let mut body = vec![0u8; usize::try_from(length).unwrap_or(0)];
    reader.read_exact(&mut body).await.map_err(|e| {
        LspError::new(
            "LSP_TRANSPORT",
            format!("cannot read the language server: {e}"),
        )
    })?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| LspError::new("LSP_FRAMING", format!("invalid LSP message JSON: {e}")))
}

/// The answer to a server→client request.
fn answer_server_request(
    method: &str,
    params: &Value,
    configuration: &Value,
) -> Result<Value, (i64, String)> {
    match method {
        "workspace/configuration" => {
            let items = params["items"].as_array().map_or(0, Vec::len);
            Ok(Value::Array(vec![configuration.clone(); items]))
        }
        "window/workDoneProgress/create"
        | "client/registerCapability"
        | "client/unregisterCapability" => Ok(Value::Null),
        "workspace/applyEdit" => Err((
            -32_601,
            "workspace/applyEdit is not permitted by this host".to_owned(),
        )),
        other => Err((-32_601, format!("unsupported server request: {other}"))),
    }
}

impl Instance {
    async fn spawn(config: &ServerConfig, workspace: &Path) -> Result<Arc<Self>, LspError> {
        let env = server_env(&config.env);
        let program = resolve_executable(&config.command, env.vars()).ok_or_else(|| {
            LspError::new(
                "LSP_SPAWN_FAILED",
                format!(
                    "cannot start language server \"{}\": not found on PATH",
                    config.command
                ),
            )
        })?;
        let mut command = dsh_process::command(&program, &env);
        command
            .args(&config.args)
            .current_dir(workspace)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|e| {
            LspError::new(
                "LSP_SPAWN_FAILED",
                format!("cannot start language server \"{}\": {e}", config.command),
            )
        })?;
        let pgid = child.id().and_then(|id| i32::try_from(id).ok());
        let (Some(stdin), Some(stdout), Some(stderr_pipe)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(LspError::new(
                "LSP_SPAWN_FAILED",
                "language server pipes are missing",
            ));
        };
        let stderr = Arc::new(Mutex::new(Vec::new()));
        {
            let stderr = stderr.clone();
            let max = usize::try_from(config.max_stderr_bytes).unwrap_or(usize::MAX);
            tokio::spawn(async move {
                let mut pipe = stderr_pipe;
                let mut buf = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    let mut tail = lock(&stderr);
                    tail.extend_from_slice(&buf[..n]);
                    if tail.len() > max {
                        let cut = tail.len() - max;
                        tail.drain(..cut);
                    }
                }
            });
        }
        let pending: Arc<Pending> = Arc::new(Mutex::new(HashMap::new()));
        let exited = CancellationToken::new();
        let stdin = Arc::new(tokio::sync::Mutex::new(stdin));
        {
            let pending = pending.clone();
            let exited = exited.clone();
            let stdin = stdin.clone();
            let stderr = stderr.clone();
            let configuration = config.configuration.clone();
            let max = config.max_message_bytes;
            tokio::spawn(async move {
                let mut reader = tokio::io::BufReader::new(stdout);
                let failure = loop {
                    match read_frame(&mut reader, max).await {
                        Ok(Some(message)) => {
                            let method = message.get("method").and_then(Value::as_str);
                            let id = message.get("id").cloned();
                            match (method, id) {
                                (Some(method), Some(id)) => {
                                    let reply = match answer_server_request(
                                        method,
                                        &message["params"],
                                        &configuration,
                                    ) {
                                        Ok(result) => {
                                            json!({"jsonrpc": "2.0", "id": id, "result": result})
                                        }
                                        Err((code, text)) => {
                                            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}})
                                        }
                                    };
                                    let _ = write_frame(&stdin, &reply).await;
                                }
                                (None, Some(id)) => {
                                    let Some(id) = id.as_i64() else { continue };
                                    let Some(waiter) = lock(&pending).remove(&id) else {
                                        continue;
                                    };
                                    let outcome = match message.get("error") {
                                        Some(error) => Err(LspError::new(
                                            "LSP_ERROR_RESPONSE",
                                            error
                                                .get("message")
                                                .and_then(Value::as_str)
                                                .unwrap_or("LSP error response"),
                                        )),
                                        None => Ok(message
                                            .get("result")
                                            .cloned()
                                            .unwrap_or(Value::Null)),
                                    };
                                    let _ = waiter.send(outcome);
                                }
                                _ => {}
                            }
                        }
                        Ok(None) => break None,
                        Err(error) => break Some(error),
                    }
                };
                // Give stderr a moment so the exit message can quote it.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let error = failure.unwrap_or_else(|| exit_error(&stderr));
                for (_, waiter) in lock(&pending).drain() {
                    let _ = waiter.send(Err(error.clone()));
                }
                exited.cancel();
            });
        }
        let mut instance = Self {
            stdin,
            pending,
            next_id: AtomicI64::new(1),
            exited,
            stderr,
            capabilities: Value::Null,
            pgid,
            child: Mutex::new(Some(child)),
        };
        let root = file_uri(&workspace.to_string_lossy());
        let params = json!({
            "processId": null,
            "rootUri": root,
            "workspaceFolders": [{"uri": root, "name": "workspace"}],
            "capabilities": {
                "general": {"positionEncodings": ["utf-16"]},
                "workspace": {"workspaceFolders": true, "configuration": true},
                "textDocument": {
                    "synchronization": {"dynamicRegistration": false},
                    "hover": {"contentFormat": ["markdown", "plaintext"]},
                    "definition": {"linkSupport": true},
                    "implementation": {"linkSupport": true},
                    "references": {}
                }
            },
            "initializationOptions": config.initialization_options,
        });
        let result = instance
            .request_raw("initialize", params, &CancellationToken::new())
            .await?;
        let capabilities = result.get("capabilities").cloned().unwrap_or(Value::Null);
        if let Some(encoding) = capabilities.get("positionEncoding").and_then(Value::as_str)
            && encoding != "utf-16"
        {
            instance.kill();
            return Err(LspError::new(
                "LSP_UNSUPPORTED_ENCODING",
                format!(
                    "server negotiated unsupported position encoding \"{encoding}\"; this host requires utf-16"
                ),
            ));
        }
        instance.capabilities = capabilities;
        instance.notify("initialized", json!({})).await?;
        // Servers that watch workspace folders (pyright) only load their settings, and only
        // then answer queries, once the client pushes a configuration.
        instance
            .notify(
                "workspace/didChangeConfiguration",
                json!({"settings": config.configuration}),
            )
            .await?;
        Ok(Arc::new(instance))
    }

    async fn notify(&self, method: &str, params: Value) -> Result<(), LspError> {
        let written = write_frame(
            &self.stdin,
            &json!({"jsonrpc": "2.0", "method": method, "params": params}),
        )
        .await;
        self.explain(written).await
    }

    /// A failed write to a server that is exiting reports the exit (with its stderr).
    async fn explain(&self, written: Result<(), LspError>) -> Result<(), LspError> {
        if written.is_ok() {
            return written;
        }
        let exited =
            tokio::time::timeout(Duration::from_millis(500), self.exited.cancelled()).await;
        if exited.is_ok() {
            return Err(exit_error(&self.stderr));
        }
        written
    }

    async fn request_raw(
        &self,
        method: &str,
        params: Value,
        signal: &CancellationToken,
    ) -> Result<Value, LspError> {
        if self.exited.is_cancelled() {
            return Err(exit_error(&self.stderr));
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        let written = write_frame(
            &self.stdin,
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .await;
        self.explain(written).await?;
        tokio::select! {
            outcome = rx => outcome.unwrap_or_else(|_| Err(exit_error(&self.stderr))),
            () = signal.cancelled() => {
                lock(&self.pending).remove(&id);
                let _ = self.notify("$/cancelRequest", json!({"id": id})).await;
                Err(LspError::new("LSP_ABORTED", "the LSP request was aborted"))
            }
        }
    }

    fn kill(&self) {
        if let Some(pgid) = self.pgid.and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
        if let Some(mut child) = lock(&self.child).take() {
            let _ = child.start_kill();
        }
        self.exited.cancel();
    }

    /// `shutdown` + `exit` within `budget`, then the process group is killed.
    async fn teardown(&self, budget: Duration) {
        let graceful = async {
            let _ = self
                .request_raw("shutdown", Value::Null, &CancellationToken::new())
                .await;
            let _ = self.notify("exit", Value::Null).await;
            self.exited.cancelled().await;
        };
        let _ = tokio::time::timeout(budget, graceful).await;
        self.kill();
    }
}

type Slot = Arc<tokio::sync::Mutex<Option<Arc<Instance>>>>;

/// The provider of one configured server.
pub struct StdioProvider {
    config: Arc<ServerConfig>,
    pool: Arc<Mutex<HashMap<PathBuf, Slot>>>,
    disposed: Arc<AtomicBool>,
}

impl StdioProvider {
    pub fn new(config: ServerConfig) -> Self {
        Self {
            config: Arc::new(config),
            pool: Arc::new(Mutex::new(HashMap::new())),
            disposed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Stops every server (bounded by `shutdownTimeoutMs` each); later queries fail.
    pub async fn dispose(&self) {
        self.disposed.store(true, Ordering::SeqCst);
        let slots: Vec<Slot> = lock(&self.pool).drain().map(|(_, s)| s).collect();
        let budget = Duration::from_millis(self.config.shutdown_timeout_ms);
        for slot in slots {
            if let Some(instance) = slot.lock().await.take() {
                instance.teardown(budget).await;
            }
        }
    }

    /// Kills every server at once (no graceful shutdown).
    pub fn kill_all(&self) {
        self.disposed.store(true, Ordering::SeqCst);
        for slot in lock(&self.pool).values() {
            if let Ok(guard) = slot.try_lock()
                && let Some(instance) = guard.as_ref()
            {
                instance.kill();
            }
        }
    }
}

fn read_source(file: &str, workspace: &Path, max: u64) -> Result<(PathBuf, String), LspError> {
    let given = Path::new(file);
    let joined = if given.is_absolute() {
        given.to_path_buf()
    } else {
        workspace.join(given)
    };
    let resolve_error = |e: std::io::Error| {
        LspError::new(
            "LSP_SOURCE_UNRESOLVED",
            format!("source \"{file}\" cannot be resolved: {e}"),
        )
    };
    let resolved = match std::fs::canonicalize(&joined) {
        Ok(path) => path,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            // A missing file is a read failure, as long as where it would be resolves.
            let parent = joined.parent().unwrap_or(workspace);
            let name = joined.file_name().map(PathBuf::from).unwrap_or_default();
            std::fs::canonicalize(parent)
                .map_err(resolve_error)?
                .join(name)
        }
        Err(error) => return Err(resolve_error(error)),
    };
    if !resolved.starts_with(workspace) {
        return Err(LspError::new(
            "LSP_SOURCE_OUTSIDE",
            format!("source \"{file}\" resolves outside the workspace"),
        ));
    }
    let read_error = |message: String| {
        LspError::new(
            "LSP_SOURCE_UNREADABLE",
            format!("source \"{file}\" could not be read: {message}"),
        )
    };
    let metadata = std::fs::metadata(&resolved).map_err(|e| read_error(e.to_string()))?;
    if !metadata.is_file() {
        return Err(read_error("not a regular file".to_owned()));
    }
    let mut bytes = Vec::new();
    let handle = std::fs::File::open(&resolved).map_err(|e| read_error(e.to_string()))?;
    std::io::Read::read_to_end(&mut std::io::Read::take(handle, max + 1), &mut bytes)
        .map_err(|e| read_error(e.to_string()))?;
    if bytes.len() as u64 > max {
        return Err(LspError::new(
            "LSP_SOURCE_TOO_LARGE",
            format!(
                "source \"{file}\" exceeds the {max}-byte limit; reading stopped after {} bytes",
                bytes.len()
            ),
        ));
    }
    let text = String::from_utf8(bytes).map_err(|_| read_error("not valid UTF-8".to_owned()))?;
    Ok((resolved, text))
}

fn capability_check(capabilities: &Value, operation: Operation) -> Result<(), LspError> {
    let key = match operation {
        Operation::GoToDefinition => "definitionProvider",
        Operation::FindReferences => "referencesProvider",
        Operation::GoToImplementation => "implementationProvider",
        Operation::Hover => "hoverProvider",
    };
    match capabilities.get(key) {
        None | Some(Value::Null | Value::Bool(false)) => {
            return Err(LspError::new(
                "LSP_UNSUPPORTED_OPERATION",
                format!("server does not support {}", operation.as_str()),
            ));
        }
        _ => {}
    }
    let sync = capabilities.get("textDocumentSync");
    let open_close = match sync {
        Some(Value::Number(kind)) => kind.as_u64().is_some_and(|k| k > 0),
        Some(Value::Object(options)) => options.get("openClose") == Some(&Value::Bool(true)),
        _ => false,
    };
    if !open_close {
        return Err(LspError::new(
            "LSP_UNSUPPORTED_OPERATION",
            "server does not support the transient textDocument/didOpen this host requires",
        ));
    }
    Ok(())
}

async fn attempt(
    instance: &Instance,
    query: &LspQuery,
    uri: &str,
    text: &str,
    workspace_uri: &str,
    signal: &CancellationToken,
    kill_grace: Duration,
) -> Result<LspAnswer, Failure> {
    capability_check(&instance.capabilities, query.operation).map_err(Failure::Other)?;
    let transport = |e: LspError| {
        if e.code == "LSP_TRANSPORT" || e.code == "LSP_SERVER_EXITED" {
            Failure::Transport(e)
        } else {
            Failure::Other(e)
        }
    };
    instance
        .notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": query.language_id, "version": 1, "text": text}}),
        )
        .await
        .map_err(transport)?;
    let position = json!({"line": query.position.line, "character": query.position.character});
    let (method, params) = match query.operation {
        Operation::GoToDefinition => (
            "textDocument/definition",
            json!({"textDocument": {"uri": uri}, "position": position}),
        ),
        Operation::FindReferences => (
            "textDocument/references",
            json!({"textDocument": {"uri": uri}, "position": position, "context": {"includeDeclaration": true}}),
        ),
        Operation::GoToImplementation => (
            "textDocument/implementation",
            json!({"textDocument": {"uri": uri}, "position": position}),
        ),
        Operation::Hover => (
            "textDocument/hover",
            json!({"textDocument": {"uri": uri}, "position": position}),
        ),
    };
    let outcome = instance.request_raw(method, params, signal).await;
    if signal.is_cancelled() && !instance.exited.is_cancelled() {
        // Give the cancelled request its grace, then drop a server that does not settle.
        let _ = tokio::time::timeout(kill_grace, async {
            while !lock(&instance.pending).is_empty() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
    }
    let _ = instance
        .notify(
            "textDocument/didClose",
            json!({"textDocument": {"uri": uri}}),
        )
        .await;
    let result = outcome.map_err(transport)?;
    match query.operation {
        Operation::Hover => translate::hover(Some(&result))
            .map(LspAnswer::Hover)
            .map_err(Failure::Other),
        _ => translate::navigation(Some(&result))
            .map(|locations| LspAnswer::Locations {
                locations,
                resolved_workspace_uri: workspace_uri.to_owned(),
            })
            .map_err(Failure::Other),
    }
}

impl LspProvider for StdioProvider {
    fn query(
        &self,
        query: LspQuery,
        signal: CancellationToken,
    ) -> BoxFuture<'static, Result<LspAnswer, LspError>> {
        let config = self.config.clone();
        let pool = self.pool.clone();
        let disposed = self.disposed.clone();
        Box::pin(async move {
            if disposed.load(Ordering::SeqCst) {
                return Err(LspError::new(
                    "LSP_DISPOSED",
                    "lsp-stdio provider is disposed",
                ));
            }
            let root = &query.workspace_root;
            let workspace = std::fs::canonicalize(root).map_err(|e| {
                LspError::new(
                    "LSP_WORKSPACE_UNRESOLVED",
                    format!(
                        "workspace root \"{}\" cannot be resolved: {e}",
                        root.display()
                    ),
                )
            })?;
            if !workspace.is_dir() {
                return Err(LspError::new(
                    "LSP_WORKSPACE_UNRESOLVED",
                    format!("workspace root \"{}\" is not a directory", root.display()),
                ));
            }
            let slot = lock(&pool).entry(workspace.clone()).or_default().clone();
            let mut guard = tokio::select! {
                guard = slot.lock() => guard,
                () = signal.cancelled() => return Err(LspError::new("LSP_ABORTED", "the LSP request was aborted")),
            };
            let (path, text) =
                read_source(&query.file_path, &workspace, config.max_document_bytes)?;
            let uri = file_uri(&path.to_string_lossy());
            let workspace_uri = file_uri(&workspace.to_string_lossy());
            let kill_grace = Duration::from_millis(config.kill_grace_ms);
            let mut retried = false;
            loop {
                let reused = guard.as_ref().is_some_and(|i| !i.exited.is_cancelled());
                let instance = match guard.as_ref() {
                    Some(instance) if reused => instance.clone(),
                    _ => {
                        let spawned = tokio::select! {
                            spawned = Instance::spawn(&config, &workspace) => spawned,
                            () = signal.cancelled() => Err(LspError::new("LSP_ABORTED", "the LSP request was aborted")),
                        };
                        let instance = spawned?;
                        *guard = Some(instance.clone());
                        instance
                    }
                };
                match attempt(
                    &instance,
                    &query,
                    &uri,
                    &text,
                    &workspace_uri,
                    &signal,
                    kill_grace,
                )
                .await
                {
                    Ok(answer) => return Ok(answer),
                    Err(failure) => {
                        let dead = instance.exited.is_cancelled();
                        if signal.is_cancelled() && !dead {
                            instance.kill();
                            *guard = None;
                        }
                        if dead {
                            *guard = None;
                        }
                        match failure {
                            Failure::Transport(_)
                                if reused && !retried && !signal.is_cancelled() =>
                            {
                                instance.kill();
                                *guard = None;
                                retried = true;
                            }
                            other => return Err(other.error()),
                        }
                    }
                }
            }
        })
    }
}

impl Drop for StdioProvider {
    fn drop(&mut self) {
        self.kill_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_are_read_and_capped() {
        let mut input: &[u8] = b"Content-Length: 2\r\n\r\n{}Content-Length: 99\r\n\r\n";
        let mut reader = tokio::io::BufReader::new(&mut input);
        assert_eq!(read_frame(&mut reader, 50).await.unwrap(), Some(json!({})));
        assert_eq!(
            read_frame(&mut reader, 50).await.unwrap_err().message,
            "LSP message length 99 exceeds the 50-byte limit"
        );
    }

    #[test]
    fn server_requests_get_the_spec_answers() {
        let config = json!({"x": 1});
        assert_eq!(
            answer_server_request(
                "workspace/configuration",
                &json!({"items": [{}, {}]}),
                &config
            ),
            Ok(json!([{"x": 1}, {"x": 1}]))
        );
        assert_eq!(
            answer_server_request("client/registerCapability", &json!({}), &config),
            Ok(Value::Null)
        );
        assert_eq!(
            answer_server_request("workspace/applyEdit", &json!({}), &config),
            Err((
                -32_601,
                "workspace/applyEdit is not permitted by this host".to_owned()
            ))
        );
        assert_eq!(
            answer_server_request("x/y", &json!({}), &config),
            Err((-32_601, "unsupported server request: x/y".to_owned()))
        );
    }

    #[test]
    fn capabilities_gate_operations() {
        let caps = json!({"hoverProvider": true, "textDocumentSync": {"openClose": true}});
        assert!(capability_check(&caps, Operation::Hover).is_ok());
        assert_eq!(
            capability_check(&caps, Operation::FindReferences)
                .unwrap_err()
                .message,
            "server does not support findReferences"
        );
        let no_sync = json!({"hoverProvider": true, "textDocumentSync": 0});
        assert_eq!(
            capability_check(&no_sync, Operation::Hover)
                .unwrap_err()
                .message,
            "server does not support the transient textDocument/didOpen this host requires"
        );
    }
}
