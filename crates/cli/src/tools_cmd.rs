//! `dsh tools`: the catalog a session in this folder would offer the model.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use dsh_host::Host;
use dsh_host::HostOptions;

pub fn run(json: bool, cwd: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let cwd = crate::host::cwd_or_current(cwd)?;
    let config = crate::host::load(&cwd, &crate::host::overrides())?;
    crate::trust::print_notice(config.project.as_ref());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        // Started (MCP servers connected), so their tools are listed as the model gets them.
        let host = Host::build(HostOptions::new(config))?;
        if let Err(error) = host.start().await {
            host.shutdown();
            return Err(error.into());
        }
        let sessions = host.sessions();
        let agent = sessions.preview(&cwd)?;
        let schemas = sessions.offered_tools(&agent)?;
        let mut out = std::io::stdout().lock();
        if json {
            writeln!(out, "{}", serde_json::to_string_pretty(&schemas)?)?;
        } else {
            for schema in &schemas {
                let summary = schema.description.split(". ").next().unwrap_or_default();
                writeln!(out, "{:<20} {summary}", schema.name)?;
            }
        }
        drop(out);
        agent.dispose().await;
        host.shutdown();
        Ok(ExitCode::SUCCESS)
    })
}
