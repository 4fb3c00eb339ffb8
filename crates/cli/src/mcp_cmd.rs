//! `dsh mcp list`: the configured MCP servers, whether they answer, and their tools.
//! `dsh mcp serve`: this folder's tools offered to an MCP client on stdio
//! (`dsh_headless::mcp_serve`).

use std::process::ExitCode;

pub fn list(json: bool) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir()?;
    let config = crate::host::load(&cwd, &crate::host::overrides())?;
    dsh_host::check(&config, &dsh_host::builtin_plugins())?;
    let servers: Vec<dsh_mcp::McpServerConfig> = match config.get("mcp.servers") {
        Some(servers) => serde_json::from_value(servers.clone())?,
        None => Vec::new(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let statuses = runtime.block_on(dsh_mcp::list_servers(&servers));
    if json {
        say!("{}", serde_json::to_string_pretty(&statuses)?)?;
    } else {
        crate::out::stdout(format_args!("{}", dsh_mcp::status_text(&statuses)?))?;
    }
    Ok(ExitCode::SUCCESS)
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
        let served =
            dsh_headless::mcp_serve::serve(&host.sessions(), &cwd, &crate::out::io()).await;
        host.shutdown();
        served?;
        Ok(ExitCode::SUCCESS)
    })
}
