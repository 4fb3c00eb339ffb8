//! Mounting many servers at once (config rows, ACP `mcpServers`) and the one-shot probe
//! behind `dsh mcp list`.

use std::collections::HashSet;
use std::sync::Arc;

use dsh_kernel::Scope;
use dsh_tools::ToolRegistry;
use serde_json::Value;
use tokio::sync::Notify;

use crate::config::McpServerConfig;
use crate::connection::connect;
use crate::connection::list_tools;
use crate::error::McpError;
use crate::naming::public_name;
use crate::server::McpOptions;
use crate::server::McpServer;
use crate::server::ServerState;
use crate::server::ServerStatus;
use crate::server::ToolStatus;

/// The servers one scope mounted. Disposing the parent scope unmounts them all.
#[derive(Debug, Clone, Default)]
pub struct McpServers {
    pub servers: Vec<McpServer>,
}

impl McpServers {
    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.servers.iter().map(McpServer::status).collect()
    }

    pub fn get(&self, name: &str) -> Option<&McpServer> {
        self.servers.iter().find(|s| s.name() == name)
    }

    pub fn dispose(&self) {
        for server in &self.servers {
            server.dispose();
        }
    }
}

/// Mounts every enabled server of `configs` under `parent` concurrently (disabled rows are
/// skipped). All or nothing: if one refuses to mount, the others are unmounted again.
pub async fn mount_servers(
    parent: &Scope,
    registry: &Arc<ToolRegistry>,
    configs: &[McpServerConfig],
    options: &McpOptions,
) -> Result<McpServers, McpError> {
    let mut names = HashSet::new();
    for config in configs.iter().filter(|c| c.enabled) {
        config.validate()?;
        if !names.insert(config.name.as_str()) {
            return Err(McpError::NameInUse {
                name: config.name.clone(),
            });
        }
    }
    let mounts = configs
        .iter()
        .filter(|c| c.enabled)
        .map(|config| McpServer::mount_background(parent, registry, config.clone(), options));
    let mut servers = Vec::new();
    let mut failure = None;
    for outcome in futures::future::join_all(mounts).await {
        match outcome {
            Ok(server) => servers.push(server),
            Err(error) => failure = failure.or(Some(error)),
        }
    }
    if let Some(error) = failure {
        for server in &servers {
            server.dispose();
        }
        return Err(error);
    }
    // Start-up waits for first connects only this long; the rest arrive in the background.
    let budget = options
        .startup_budget
        .unwrap_or(crate::server::STARTUP_BUDGET);
    futures::future::join_all(servers.iter().map(|s| s.ready(budget))).await;
    Ok(McpServers { servers })
}

/// ACP `session/new` `mcpServers`: converts each entry (JSON wire shape) and mounts them under
/// the session's scope, so they live and die with the session.
pub async fn mount_acp_servers(
    session: &Scope,
    registry: &Arc<ToolRegistry>,
    entries: &[Value],
    options: &McpOptions,
) -> Result<McpServers, McpError> {
    let configs = entries
        .iter()
        .map(McpServerConfig::from_acp)
        .collect::<Result<Vec<_>, _>>()?;
    mount_servers(session, registry, &configs, options).await
}

/// For `dsh mcp list`: connects to each enabled server once (concurrently, each bounded by
/// its [`McpServerConfig::connect_timeout`]), lists its tools and disconnects. Nothing is registered anywhere.
pub async fn list_servers(configs: &[McpServerConfig]) -> Vec<ServerStatus> {
    futures::future::join_all(configs.iter().map(probe)).await
}

async fn probe(config: &McpServerConfig) -> ServerStatus {
    let mut status = ServerStatus {
        name: config.name.clone(),
        transport: String::new(),
        state: ServerState::Disabled,
        tools: Vec::new(),
        resources: Vec::new(),
        prompts: Vec::new(),
        last_error: None,
    };
    let transport = match config.validate() {
        Ok(transport) => transport,
        Err(error) => {
            status.state = ServerState::Failed {
                reason: error.to_string(),
            };
            return status;
        }
    };
    status.transport = transport.kind().to_owned();
    if !config.enabled {
        return status;
    }
    let timeout = config.connect_timeout();
    let connected = connect(
        &config.name,
        &transport,
        Arc::new(Notify::new()),
        timeout,
        crate::connection::ClientSide::default(),
    )
    .await;
    let listed = match &connected {
        Ok(connection) => list_tools(connection, timeout).await,
        Err(reason) => Err(reason.clone()),
    };
    if let Ok(connection) = &connected {
        let (resources, prompts) = crate::server::catalog(connection, timeout).await;
        status.resources = resources;
        status.prompts = prompts;
    }
    match listed {
        Ok(tools) => {
            status.state = ServerState::Connected;
            status.tools = tools
                .iter()
                .map(|tool| ToolStatus {
                    name: public_name(&config.name, &tool.name),
                    raw_name: tool.name.to_string(),
                    description: tool.description.as_deref().unwrap_or("").to_owned(),
                })
                .collect();
        }
        Err(reason) => {
            status.state = ServerState::Failed {
                reason: reason.clone(),
            };
            status.last_error = Some(reason);
        }
    }
    status
}

/// `dsh mcp list` as text: each server with its transport and state, its error, tools (name
/// and first description line), resources and prompts (as slash commands).
pub fn status_text(statuses: &[ServerStatus]) -> Result<String, serde_json::Error> {
    use std::fmt::Write as _;
    let mut out = String::new();
    if statuses.is_empty() {
        out.push_str("no MCP servers configured (add [[mcp.servers]] to $DSH_HOME/config.toml)\n");
    }
    let text = |value: &serde_json::Value, key: &str| -> String {
        value
            .get(key)
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    for status in statuses {
        let value = serde_json::to_value(status)?;
        let state = value
            .get("state")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("unknown");
        let _ = writeln!(
            out,
            "{} ({}): {state}",
            status.name,
            text(&value, "transport")
        );
        if let Some(error) = value.get("lastError").and_then(serde_json::Value::as_str) {
            let _ = writeln!(out, "  error: {error}");
        }
        for tool in value
            .get("tools")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = text(tool, "name");
            let description = text(tool, "description");
            let summary = description.lines().next().unwrap_or("");
            let _ = writeln!(out, "  {name:<40} {summary}");
        }
        if !status.resources.is_empty() {
            out.push_str("  resources:\n");
            for uri in &status.resources {
                let _ = writeln!(out, "    {uri}");
            }
        }
        if !status.prompts.is_empty() {
            out.push_str("  prompts (slash commands):\n");
            for prompt in &status.prompts {
                let _ = writeln!(
                    out,
                    "    /{}",
                    crate::naming::prompt_command(&status.name, prompt)
                );
            }
        }
    }
    Ok(out)
}
