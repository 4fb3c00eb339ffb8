//! `dsh mcp list`: the configured MCP servers, whether they answer, and their tools
//! (`dsh_headless::mcp_list`). `dsh mcp serve`: this folder's tools offered to an MCP client on
//! stdio (`dsh_headless::mcp_serve`).

use std::process::ExitCode;

pub fn list(json: bool) -> anyhow::Result<ExitCode> {
    let config = crate::host::load(&std::env::current_dir()?, &crate::host::overrides())?;
    let text = crate::host::runtime()?.block_on(dsh_headless::mcp_list::list(&config, json))?;
    crate::out::stdout(format_args!("{text}"))?;
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
    crate::host::block_on(async move {
        let host = crate::host::start(&cwd, overrides).await?;
        let served =
            dsh_headless::mcp_serve::serve(&host.sessions(), &cwd, &crate::out::io()).await;
        host.shutdown();
        served?;
        Ok(ExitCode::SUCCESS)
    })?
}
