//! One mounted MCP server: a plugin scope whose tools mirror the server's `tools/list`, kept
//! in step with the connection by a supervisor task (reconnect with backoff, re-sync on
//! `tools/list_changed`, unregister on disconnect).

use dsh_sync::lock;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::Weak;
use std::time::Duration;
use std::time::Instant;

use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolRegistry;
use serde::Serialize;
use tokio::sync::Notify;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::McpServerConfig;
use crate::config::Transport;
use crate::connection::Connection;
use crate::connection::connect;
use crate::connection::list_tools;
use crate::error::McpError;
use crate::render::ImageSupport;
use crate::tool::define;

/// What the composition root hands every server it mounts.
#[derive(Debug, Clone, Default)]
pub struct McpOptions {
    /// Image attachments for MCP image content; `None` renders images as notices.
    pub images: Option<ImageSupport>,
    /// How long [`crate::mount_servers`] waits for first connects before returning (the
    /// rest connect in the background and their tools appear when ready). `None`: 3 s.
    pub startup_budget: Option<Duration>,
    /// The workspace folders answered to a server's `roots/list` (declared only when given).
    pub roots: Vec<std::path::PathBuf>,
    /// Where servers' elicitation requests are asked (`None`: the capability is not declared).
    pub questions: Option<Arc<dsh_user_questions::UserQuestions>>,
}

/// The default start-up budget.
pub const STARTUP_BUDGET: Duration = Duration::from_secs(3);

/// Where a server stands. Serialised as `{"state": "connected"}` and so on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum ServerState {
    /// `enabled = false`: never started.
    Disabled,
    Connecting,
    Connected,
    /// Waiting to retry; `attempt` counts consecutive failures so far.
    Reconnecting {
        attempt: u32,
    },
    /// Gave up (retry budget spent, reconnect disabled, or a bad declaration).
    Failed {
        reason: String,
    },
    /// Disposed.
    Closed,
}

/// One bridged tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolStatus {
    /// The registered name, `mcp__<server>__<tool>`.
    pub name: String,
    /// The server's own name for it.
    pub raw_name: String,
    pub description: String,
}

/// A server's state and tools, for `dsh mcp list` and UIs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    pub name: String,
    /// `stdio`, `streamable-http` or `sse` (empty when the declaration is invalid).
    pub transport: String,
    #[serde(flatten)]
    pub state: ServerState,
    /// Currently registered tools (or, from [`crate::list_servers`], the listed ones).
    pub tools: Vec<ToolStatus>,
    /// Resource URIs the server lists (probed by [`crate::list_servers`]).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub resources: Vec<String>,
    /// Prompt names the server lists (probed by [`crate::list_servers`]).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub prompts: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// The tools registered for one connection generation.
struct Generation {
    scope: Scope,
    definitions: Vec<Arc<ToolDefinition>>,
    tools: Vec<ToolStatus>,
    /// The server's listing this generation was built from.
    listing: String,
}

pub(crate) struct Shared {
    pub(crate) name: String,
    pub(crate) config: McpServerConfig,
    transport: Transport,
    registry: Arc<ToolRegistry>,
    scope: Scope,
    pub(crate) images: Option<ImageSupport>,
    pub(crate) side: crate::connection::ClientSide,
    status: watch::Sender<ServerStatus>,
    live: Mutex<Option<Arc<Connection>>>,
    generation: Mutex<Option<Generation>>,
    list_changed: Arc<Notify>,
    stop: CancellationToken,
}

/// Server names in use, per (registry, agent layer): a second live server with the same name
/// would shadow or collide with the first one's tools.
static LIVE_NAMES: Mutex<Option<HashSet<NameKey>>> = Mutex::new(None);

/// (registry address, agent layer, server name).
type NameKey = (usize, Option<dsh_kernel::ScopeId>, String);

/// A mounted server. Cheap to clone; disposing its scope (or the parent's) unmounts it.
#[derive(Clone)]
pub struct McpServer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.shared.name)
            .field("status", &*self.shared.status.borrow())
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// Mounts `config` as a child plugin scope of `parent` (a session's agent scope makes the
    /// tools session-local). Awaits the first connect and `tools/list`; a failure there is
    /// logged and the server keeps reconnecting in the background, unless
    /// `fail_on_startup_error` is set, in which case nothing stays mounted.
    pub async fn mount(
        parent: &Scope,
        registry: &Arc<ToolRegistry>,
        config: McpServerConfig,
        options: &McpOptions,
    ) -> Result<McpServer, McpError> {
        Self::mount_with(parent, registry, config, options, true).await
    }

    /// Mounts `config` and returns at once: the first connect (and every later one) runs in
    /// the background, the tools register when `tools/list` answers. A server with
    /// `fail_on_startup_error` is still awaited (its failure must fail the mount).
    pub async fn mount_background(
        parent: &Scope,
        registry: &Arc<ToolRegistry>,
        config: McpServerConfig,
        options: &McpOptions,
    ) -> Result<McpServer, McpError> {
        let wait = config.fail_on_startup_error;
        Self::mount_with(parent, registry, config, options, wait).await
    }

    /// Waits until the first connect settled (connected or failed) or `budget` passed.
    pub async fn ready(&self, budget: Duration) {
        let mut watch = self.watch();
        let settled = async {
            loop {
                if !matches!(watch.borrow_and_update().state, ServerState::Connecting) {
                    return;
                }
                if watch.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(budget, settled).await;
    }

    async fn mount_with(
        parent: &Scope,
        registry: &Arc<ToolRegistry>,
        config: McpServerConfig,
        options: &McpOptions,
        await_first: bool,
    ) -> Result<McpServer, McpError> {
        let transport = config.validate()?;
        let key = (
            Arc::as_ptr(registry) as usize,
            parent.nearest_agent().map(|s| s.id()),
            config.name.clone(),
        );
        if !lock(&LIVE_NAMES)
            .get_or_insert_default()
            .insert(key.clone())
        {
            return Err(McpError::NameInUse { name: config.name });
        }
        let scope = match parent.child(ScopeKind::Plugin, format!("mcp:{}", config.name)) {
            Ok(scope) => scope,
            Err(e) => {
                release(&key);
                return Err(e.into());
            }
        };
        let stop = CancellationToken::new();
        let status = ServerStatus {
            name: config.name.clone(),
            transport: transport.kind().to_owned(),
            state: ServerState::Connecting,
            tools: Vec::new(),
            resources: Vec::new(),
            prompts: Vec::new(),
            last_error: None,
        };
        let server_name = config.name.clone();
        let shared = Arc::new(Shared {
            name: config.name.clone(),
            config,
            transport,
            registry: registry.clone(),
            scope: scope.clone(),
            images: options.images.clone(),
            side: crate::connection::ClientSide {
                roots: options
                    .roots
                    .iter()
                    .map(|p| format!("file://{}", p.display()))
                    .collect(),
                progress: Arc::default(),
                questions: options.questions.clone(),
                server: server_name,
                prompts_changed: Arc::default(),
            },
            status: watch::Sender::new(status),
            live: Mutex::new(None),
            generation: Mutex::new(None),
            list_changed: Arc::new(Notify::new()),
            stop: stop.clone(),
        });
        {
            let weak = Arc::downgrade(&shared);
            scope.defer(move || {
                stop.cancel();
                release(&key);
                if let Some(shared) = weak.upgrade() {
                    shared.drop_connection();
                    shared.set_state(ServerState::Closed);
                }
            });
        }
        if !await_first {
            let background = shared.clone();
            tokio::spawn(async move {
                let connected = first_connect(&background).await;
                supervise(background, connected).await;
            });
            return Ok(McpServer { shared });
        }
        let connected = match shared.connect_and_register().await {
            Ok(()) => true,
            Err(reason) => {
                tracing::error!(server = %shared.name, %reason, "mcp server failed to start");
                if shared.config.fail_on_startup_error {
                    scope.dispose();
                    return Err(McpError::Startup {
                        server: shared.name.clone(),
                        reason,
                    });
                }
                shared.record_error(reason);
                false
            }
        };
        tokio::spawn(supervise(shared.clone(), connected));
        Ok(McpServer { shared })
    }

    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The server's plugin scope; disposing it unregisters the tools and closes the session.
    pub fn scope(&self) -> &Scope {
        &self.shared.scope
    }

    /// Unmounts the server (same as disposing [`McpServer::scope`]).
    pub fn dispose(&self) {
        self.shared.scope.dispose();
    }

    /// The current state and registered tools.
    pub fn status(&self) -> ServerStatus {
        self.shared.status.borrow().clone()
    }

    /// Follows state changes (connect, disconnect, re-sync, give-up).
    pub fn watch(&self) -> watch::Receiver<ServerStatus> {
        self.shared.status.subscribe()
    }

    /// The process id of the current stdio child, if any.
    pub fn pid(&self) -> Option<u32> {
        lock(&self.shared.live).as_ref().and_then(|c| c.pid)
    }

    /// Moves on every connect and every `notifications/prompts/list_changed`: whoever shows
    /// the server's prompts re-lists them (see [`crate::register_prompt_commands`]).
    pub fn prompt_changes(&self) -> watch::Receiver<u64> {
        self.shared.side.prompts_changed.subscribe()
    }

    /// The live server's `instructions` (for the system prompt).
    pub fn instructions(&self) -> Option<String> {
        self.shared.live().and_then(|c| c.instructions.clone())
    }

    fn connection(&self) -> Result<Arc<Connection>, String> {
        self.shared
            .live()
            .ok_or_else(|| format!("MCP server \"{}\" is not connected", self.shared.name))
    }

    /// `resources/list`, every page.
    pub async fn resources(&self) -> Result<Vec<rmcp::model::Resource>, String> {
        let connection = self.connection()?;
        let timeout = self.shared.timeout();
        match tokio::time::timeout(timeout, connection.peer.list_all_resources()).await {
            Ok(Ok(resources)) => Ok(resources),
            Ok(Err(e)) => Err(format!("resources/list failed: {e}")),
            Err(_) => Err(format!(
                "resources/list got no answer within {}ms",
                timeout.as_millis()
            )),
        }
    }

    /// `resources/read` of `uri`: its contents as JSON (`{uri, mimeType?, text | blob}` each).
    pub async fn read_resource(&self, uri: &str) -> Result<Vec<serde_json::Value>, String> {
        let connection = self.connection()?;
        let timeout = self.shared.timeout();
        let params = rmcp::model::ReadResourceRequestParams::new(uri.to_owned());
        match tokio::time::timeout(timeout, connection.peer.read_resource(params)).await {
            Ok(Ok(result)) => {
                let value = serde_json::to_value(&result).map_err(|e| e.to_string())?;
                Ok(value["contents"].as_array().cloned().unwrap_or_default())
            }
            Ok(Err(e)) => Err(format!("resources/read of {uri} failed: {e}")),
            Err(_) => Err(format!(
                "resources/read got no answer within {}ms",
                timeout.as_millis()
            )),
        }
    }

    /// A resource as text for a prompt attachment (`@server:uri`, ACP resource links).
    // String: shown to the person as is; shares the String error of `read_resource` and the
    // other request helpers, which are typed together or not at all (follow-up).
    pub async fn resource_attachment(&self, uri: &str) -> Result<String, String> {
        let contents = self.read_resource(uri).await?;
        let mut parts = Vec::new();
        for content in contents {
            let at = content["uri"].as_str().unwrap_or(uri);
            let mime = content["mimeType"]
                .as_str()
                .unwrap_or("application/octet-stream");
            match (content["text"].as_str(), content["blob"].as_str()) {
                (Some(text), _) => parts.push(format!(
                    "Resource {at} from MCP server \"{}\":\n{text}",
                    self.shared.name
                )),
                (None, Some(blob)) => parts.push(format!(
                    "[binary resource {at} ({mime}, {} base64 characters) from MCP server \"{}\"]",
                    blob.len(),
                    self.shared.name
                )),
                _ => {}
            }
        }
        if parts.is_empty() {
            return Err(format!("resource {uri} has no contents"));
        }
        Ok(parts.join("\n\n"))
    }

    /// `prompts/list`, every page.
    pub async fn prompts(&self) -> Result<Vec<rmcp::model::Prompt>, String> {
        let connection = self.connection()?;
        let timeout = self.shared.timeout();
        match tokio::time::timeout(timeout, connection.peer.list_all_prompts()).await {
            Ok(Ok(prompts)) => Ok(prompts),
            Ok(Err(e)) => Err(format!("prompts/list failed: {e}")),
            Err(_) => Err(format!(
                "prompts/list got no answer within {}ms",
                timeout.as_millis()
            )),
        }
    }

    /// `prompts/get`: the prompt's messages as text (one block per message).
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Vec<String>, String> {
        let connection = self.connection()?;
        let timeout = self.shared.timeout();
        let mut params = rmcp::model::GetPromptRequestParams::new(name.to_owned());
        if !arguments.is_empty() {
            params = params.with_arguments(arguments);
        }
        let result = match tokio::time::timeout(timeout, connection.peer.get_prompt(params)).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => return Err(format!("prompts/get of {name} failed: {e}")),
            Err(_) => {
                return Err(format!(
                    "prompts/get got no answer within {}ms",
                    timeout.as_millis()
                ));
            }
        };
        let value = serde_json::to_value(&result).map_err(|e| e.to_string())?;
        Ok(value["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| {
                let content = &m["content"];
                content["text"]
                    .as_str()
                    .map(str::to_owned)
                    .or_else(|| content["resource"]["text"].as_str().map(str::to_owned))
            })
            .collect())
    }
}

/// Resource URIs and prompt names a connection offers (empty when it offers none).
pub(crate) async fn catalog(
    connection: &Connection,
    timeout: Duration,
) -> (Vec<String>, Vec<String>) {
    let resources = if connection.has_resources {
        match tokio::time::timeout(timeout, connection.peer.list_all_resources()).await {
            Ok(Ok(list)) => list.iter().map(|r| r.uri.clone()).collect(),
            _ => Vec::new(),
        }
    } else {
        Vec::new()
    };
    let prompts = if connection.has_prompts {
        match tokio::time::timeout(timeout, connection.peer.list_all_prompts()).await {
            Ok(Ok(list)) => list.iter().map(|p| p.name.clone()).collect(),
            _ => Vec::new(),
        }
    } else {
        Vec::new()
    };
    (resources, prompts)
}

/// The first name that occurs twice, if any.
fn first_duplicate<'a>(names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let mut seen = HashSet::new();
    names.into_iter().find(|name| !seen.insert(*name))
}

fn release(key: &NameKey) {
    if let Some(names) = lock(&LIVE_NAMES).as_mut() {
        names.remove(key);
    }
}

impl Shared {
    fn timeout(&self) -> Duration {
        self.config.connect_timeout()
    }

    pub(crate) fn live(&self) -> Option<Arc<Connection>> {
        lock(&self.live).clone()
    }

    fn set_state(&self, state: ServerState) {
        self.status.send_modify(|s| s.state = state);
    }

    fn record_error(&self, reason: String) {
        self.status.send_modify(|s| s.last_error = Some(reason));
    }

    fn drop_connection(&self) {
        if let Some(connection) = lock(&self.live).take() {
            connection.close();
        }
    }

    /// Connect, list, register; on success the connection becomes live.
    // String: the reason becomes the server's `last_error` status text and a log line only.
    async fn connect_and_register(self: &Arc<Self>) -> Result<(), String> {
        let connection = connect(
            &self.name,
            &self.transport,
            self.list_changed.clone(),
            self.timeout(),
            self.side.clone(),
        )
        .await?;
        let tools = list_tools(&connection, self.timeout()).await?;
        if self.stop.is_cancelled() {
            return Err("unmounted while connecting".to_owned());
        }
        self.register(&tools)?;
        *lock(&self.live) = Some(Arc::new(connection));
        self.set_state(ServerState::Connected);
        // The prompts may have changed while the server was away.
        self.side.prompts_changed.send_modify(|n| *n += 1);
        Ok(())
    }

    /// Replaces the registered generation with `tools`. All or nothing: on any conflict the
    /// new generation is rolled back and the previous one restored.
    // String: the reason becomes the server's `last_error` status text and a log line only.
    fn register(self: &Arc<Self>, tools: &[rmcp::model::Tool]) -> Result<(), String> {
        if let Some(twice) = first_duplicate(tools.iter().map(|t| t.name.as_ref())) {
            return Err(format!(
                "mcp server \"{}\" listed tool \"{twice}\" more than once — invalid tool list",
                self.name
            ));
        }
        // A reconnect that lists the same tools keeps the registered generation: the tool
        // list the model sees stays byte-identical.
        let listing = serde_json::to_string(tools).unwrap_or_default();
        {
            let generation = lock(&self.generation);
            if generation.as_ref().is_some_and(|g| g.listing == listing) {
                return Ok(());
            }
        }
        let mut definitions = Vec::with_capacity(tools.len());
        let mut statuses = Vec::with_capacity(tools.len());
        for tool in tools {
            let definition = define(Arc::downgrade(self), tool).map_err(|e| {
                format!("mcp server \"{}\": tool \"{}\": {e}", self.name, tool.name)
            })?;
            statuses.push(ToolStatus {
                name: definition.name().to_owned(),
                raw_name: tool.name.to_string(),
                description: definition.description().to_owned(),
            });
            definitions.push(Arc::new(definition));
        }
        let previous = lock(&self.generation).take();
        if let Some(old) = &previous {
            old.scope.dispose();
        }
        match self.install(definitions, statuses, listing) {
            Ok(()) => Ok(()),
            Err(error) => {
                if let Some(old) = previous
                    && let Err(restore) = self.install(old.definitions, old.tools, old.listing)
                {
                    tracing::error!(server = %self.name, %restore, "could not restore the previous mcp tools");
                }
                Err(error)
            }
        }
    }

    fn install(
        &self,
        definitions: Vec<Arc<ToolDefinition>>,
        tools: Vec<ToolStatus>,
        listing: String,
        // String: reported through `register` (status text and log only).
    ) -> Result<(), String> {
        let scope = self
            .scope
            .child(ScopeKind::Plugin, format!("mcp:{}:tools", self.name))
            .map_err(|e| e.to_string())?;
        for definition in &definitions {
            if let Err(error) = self.registry.register_arc(&scope, definition.clone()) {
                scope.dispose();
                return Err(format!(
                    "mcp server \"{}\": registering \"{}\" failed: {error}",
                    self.name,
                    definition.name()
                ));
            }
        }
        self.status.send_modify(|s| s.tools = tools.clone());
        *lock(&self.generation) = Some(Generation {
            scope,
            definitions,
            tools,
            listing,
        });
        Ok(())
    }

    fn unregister(&self) {
        if let Some(old) = lock(&self.generation).take() {
            old.scope.dispose();
        }
        self.status.send_modify(|s| s.tools.clear());
    }

    /// `tools/list_changed`: re-list; a failed fetch keeps the current tools.
    async fn resync(self: &Arc<Self>, connection: &Connection) {
        match list_tools(connection, self.timeout()).await {
            Ok(tools) => {
                if let Err(reason) = self.register(&tools) {
                    tracing::error!(server = %self.name, %reason, "mcp tool re-sync rolled back");
                    self.record_error(reason);
                }
            }
            Err(reason) => {
                tracing::warn!(server = %self.name, %reason, "mcp tool re-sync failed; keeping the previous tools");
            }
        }
    }
}

/// The first attempt of a background mount; a failure is logged and leaves the server
/// reconnecting.
async fn first_connect(shared: &Arc<Shared>) -> bool {
    let attempt = tokio::select! {
        () = shared.stop.cancelled() => return false,
        attempt = shared.connect_and_register() => attempt,
    };
    match attempt {
        Ok(()) => true,
        Err(reason) => {
            tracing::error!(server = %shared.name, %reason, "mcp server failed to start");
            shared.record_error(reason);
            shared.set_state(ServerState::Reconnecting { attempt: 1 });
            false
        }
    }
}

/// The longest an idle-session ping may take before the session is declared dead.
const PING_TIMEOUT: Duration = Duration::from_secs(5);

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Keeps the server connected: serves the live session until it closes, then reconnects
/// with exponential backoff until the retry budget is spent or the server is unmounted.
async fn supervise(shared: Arc<Shared>, mut connected: bool) {
    let policy = shared.config.reconnect.clone();
    let initial = Duration::from_millis(policy.initial_delay_ms.max(1));
    let ceiling = Duration::from_millis(policy.max_delay_ms.max(policy.initial_delay_ms));
    let mut failures: u32 = u32::from(!connected);
    let mut delay = initial;
    loop {
        if connected {
            let Some(connection) = shared.live() else {
                return;
            };
            let up = Instant::now();
            let ping_every = match shared.transport {
                Transport::StreamableHttp { .. } | Transport::Sse { .. }
                    if policy.ping_interval_ms > 0 =>
                {
                    Some(Duration::from_millis(policy.ping_interval_ms))
                }
                _ => None,
            };
            let mut next_ping = ping_every.map(|every| tokio::time::Instant::now() + every);
            loop {
                tokio::select! {
                    biased;
                    () = shared.stop.cancelled() => {
                        // Unmounted while a connect was finishing: do not leave it open.
                        shared.drop_connection();
                        return;
                    }
                    () = connection.closed.cancelled() => break,
                    () = shared.list_changed.notified() => shared.resync(&connection).await,
                    () = sleep_until(next_ping) => {
                        let answered = connection.ping(PING_TIMEOUT).await;
                        if !answered {
                            tracing::warn!(server = %shared.name, "mcp server did not answer ping");
                            connection.close();
                        }
                        next_ping = ping_every.map(|every| tokio::time::Instant::now() + every);
                    }
                }
            }
            drop(connection);
            if shared.stop.is_cancelled() {
                // Unmounting (a normal exit) closed the session: nothing to report.
                shared.drop_connection();
                return;
            }
            // The last good tools stay registered: the tool list (and the prompt cache) does
            // not change during an outage; calls fail with a clear error until the server is back.
            tracing::warn!(server = %shared.name, "mcp server disconnected; reconnecting");
            shared.drop_connection();
            shared.record_error("the connection closed".to_owned());
            if up.elapsed() >= ceiling {
                failures = 0;
                delay = initial;
            }
            failures += 1;
            connected = false;
        }
        if shared.stop.is_cancelled() {
            return;
        }
        if !policy.enabled || failures >= policy.max_attempts {
            let reason = if policy.enabled {
                format!("gave up after {failures} consecutive failures")
            } else {
                "disconnected; reconnect is disabled".to_owned()
            };
            tracing::error!(server = %shared.name, %reason, "mcp server stopped reconnecting");
            shared.unregister();
            shared.set_state(ServerState::Failed { reason });
            return;
        }
        shared.set_state(ServerState::Reconnecting { attempt: failures });
        tokio::select! {
            () = shared.stop.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(ceiling);
        let attempt = tokio::select! {
            () = shared.stop.cancelled() => return,
            attempt = shared.connect_and_register() => attempt,
        };
        match attempt {
            Ok(()) => {
                tracing::info!(server = %shared.name, "mcp server reconnected");
                connected = true;
            }
            Err(reason) => {
                tracing::warn!(server = %shared.name, %reason, "mcp reconnect failed");
                shared.record_error(reason);
                failures += 1;
            }
        }
    }
}

/// Keeps only a weak link from tool bodies to their server: the registry must not keep an
/// unmounted server alive.
pub(crate) type ServerLink = Weak<Shared>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_with_a_repeated_raw_name_is_caught() {
        assert_eq!(first_duplicate(["a", "b", "c"].into_iter()), None);
        assert_eq!(first_duplicate(["a", "b", "a", "b"].into_iter()), Some("a"));
    }

    #[test]
    fn status_serialises_flat() {
        let status = ServerStatus {
            name: "s".into(),
            transport: "stdio".into(),
            state: ServerState::Reconnecting { attempt: 2 },
            tools: vec![ToolStatus {
                name: "mcp__s__t".into(),
                raw_name: "t".into(),
                description: String::new(),
            }],
            resources: Vec::new(),
            prompts: Vec::new(),
            last_error: Some("the connection closed".into()),
        };
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            serde_json::json!({
                "name": "s", "transport": "stdio", "state": "reconnecting", "attempt": 2,
                "tools": [{"name": "mcp__s__t", "rawName": "t", "description": ""}],
                "lastError": "the connection closed"
            })
        );
    }
}
