//! `dsh tools`: the catalog a session in this folder would offer the model.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::compose::Harness;
use crate::config::Config;
use crate::config::Overrides;

pub fn run(json: bool, cwd: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let cwd = match cwd {
        Some(cwd) => cwd,
        None => std::env::current_dir()?,
    };
    let config = Config::load(&cwd, &Overrides::default())?;
    crate::trust::print_notice(config.project.as_ref());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let harness = Harness::build(config)?;
        let agent = harness.preview_agent(&cwd)?;
        let mut schemas = harness.registry.schemas(Some(agent.scope()))?;
        schemas.sort_by(|a, b| a.name.cmp(&b.name));
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
        harness.shutdown();
        Ok(ExitCode::SUCCESS)
    })
}
