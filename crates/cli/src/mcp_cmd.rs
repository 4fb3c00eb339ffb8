//! `dsh mcp list`: the configured MCP servers, whether they answer, and their tools.

use std::io::Write;
use std::process::ExitCode;

pub fn list(json: bool) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir()?;
    let config = crate::host::load(&cwd, &crate::host::overrides())?;
    let table = dsh_host::builtin_plugins();
    dsh_host::check(&config, &table)?;
    let servers: Vec<dsh_mcp::McpServerConfig> = match config.get("mcp.servers") {
        Some(servers) => serde_json::from_value(servers.clone())?,
        None => Vec::new(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let statuses = runtime.block_on(dsh_mcp::list_servers(&servers));
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&statuses)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if statuses.is_empty() {
        writeln!(
            out,
            "no MCP servers configured (add [[mcp.servers]] to $DSH_HOME/config.toml)"
        )?;
    }
    for status in &statuses {
        let value = serde_json::to_value(status)?;
        let state = value
            .get("state")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("unknown");
        let transport = value
            .get("transport")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        writeln!(out, "{} ({transport}): {state}", status.name)?;
        if let Some(error) = value.get("lastError").and_then(serde_json::Value::as_str) {
            writeln!(out, "  error: {error}")?;
        }
        for tool in value
            .get("tools")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = tool
                .get("name")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("");
            let description = tool
                .get("description")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("");
            let summary = description.lines().next().unwrap_or("");
            writeln!(out, "  {name:<40} {summary}")?;
        }
        if !status.resources.is_empty() {
            writeln!(out, "  resources:")?;
            for uri in &status.resources {
                writeln!(out, "    {uri}")?;
            }
        }
        if !status.prompts.is_empty() {
            writeln!(out, "  prompts (slash commands):")?;
            for prompt in &status.prompts {
                writeln!(
                    out,
                    "    /{}",
                    dsh_mcp::prompt_command(&status.name, prompt)
                )?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
