//! `dsh mcp list`: the configured MCP servers, whether they answer, and their tools.
//! `dsh mcp serve`: this folder's tools offered to an MCP client on stdio (`dsh_mcp::ToolServer`).

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

/// Nobody answers approvals over `dsh mcp serve`: a call that needs one is refused, and stderr
/// says so (stdout carries the protocol).
struct NoApprover;

impl dsh_tools::ApprovalService for NoApprover {
    fn request(
        &self,
        request: dsh_tools::ApprovalRequest,
    ) -> dsh_kernel::BoxFuture<'static, dsh_tools::ApprovalOutcome> {
        let why = request
            .reason
            .as_deref()
            .filter(|reason| !reason.trim().is_empty())
            .map(|reason| format!(" ({reason})"))
            .unwrap_or_default();
        note!(
            "dsh: {} needs approval{why}; dsh mcp serve cannot ask, so it was refused.",
            request.tool_name
        );
        Box::pin(std::future::ready(dsh_tools::ApprovalOutcome::Unavailable))
    }
}

/// `dsh mcp serve`: one new session in `cwd`, its tools offered to the MCP client on stdio.
pub fn serve(
    cwd: Option<std::path::PathBuf>,
    sandbox: Option<crate::exec::Sandbox>,
) -> anyhow::Result<ExitCode> {
    let cwd = crate::host::cwd_or_current(cwd)?;
    let mut overrides = crate::host::overrides();
    if let Some(sandbox) = sandbox {
        overrides.set("plugins.sandbox.mode", sandbox.as_str());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let host = crate::host::start(&cwd, overrides).await?;
        let sessions = host.sessions();
        let agent = match sessions.create(dsh_host::NewSession {
            id: None,
            cwd: cwd.clone(),
        }) {
            Ok(agent) => agent,
            Err(error) => {
                host.shutdown();
                return Err(error.into());
            }
        };
        note!("session {}", agent.id());
        let approvals = agent
            .scope()
            .provide::<dyn dsh_tools::ApprovalService>(std::sync::Arc::new(NoApprover));
        let catalog: dsh_mcp::Catalog = {
            let sessions = sessions.clone();
            let agent = agent.clone();
            std::sync::Arc::new(move || {
                sessions
                    .offered_tools(&agent)
                    .map_err(|error| error.to_string())
            })
        };
        let server = dsh_mcp::ToolServer::new(
            sessions.registry(),
            std::sync::Arc::new(agent.clone()),
            catalog,
        );
        let served = server.serve_stdio().await;
        drop(approvals);
        agent.dispose().await;
        host.shutdown();
        served?;
        Ok(ExitCode::SUCCESS)
    })
}
