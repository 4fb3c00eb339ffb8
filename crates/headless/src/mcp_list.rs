//! `dsh mcp list` after argv: the configuration checked whole, then each configured MCP server
//! connected to once (`dsh_mcp::list_servers`); the statuses as text or JSON.

use dsh_host::Config;
use dsh_host::HostError;
use dsh_mcp::McpServerConfig;

use crate::HeadlessError;

/// What `dsh mcp list` prints (`json`: the statuses pretty-printed).
pub async fn list(config: &Config, json: bool) -> Result<String, HeadlessError> {
    dsh_host::check(config, &dsh_host::builtin_plugins()).map_err(HostError::from)?;
    let other = |e: serde_json::Error| HeadlessError::Other(Box::new(e));
    let servers: Vec<McpServerConfig> = match config.get("mcp.servers") {
        Some(servers) => serde_json::from_value(servers.clone()).map_err(other)?,
        None => Vec::new(),
    };
    let statuses = dsh_mcp::list_servers(&servers).await;
    if json {
        let text = serde_json::to_string_pretty(&statuses).map_err(other)?;
        return Ok(format!("{text}\n"));
    }
    dsh_mcp::status_text(&statuses).map_err(other)
}
