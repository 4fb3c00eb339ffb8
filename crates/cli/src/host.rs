//! Configuration → host: the one place the binary builds a [`Host`].

use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use anyhow::Context;
use dsh_host::Config;
use dsh_host::Host;
use dsh_host::HostOptions;
use dsh_host::Overrides;

static TRUST_PROJECT: AtomicBool = AtomicBool::new(false);

/// `--trust-project`: the project layer applies whole for this run.
pub fn trust_for_this_run() {
    TRUST_PROJECT.store(true, Ordering::Relaxed);
}

/// The overrides every command starts from.
pub fn overrides() -> Overrides {
    Overrides {
        trust_project: TRUST_PROJECT.load(Ordering::Relaxed),
        ..Overrides::default()
    }
}

/// Every configuration layer for `cwd`; an untrusted project layer's ignored keys are named on
/// stderr.
pub fn load(cwd: &Path, overrides: &Overrides) -> anyhow::Result<Config> {
    let config = Config::load(cwd, overrides)?;
    crate::trust::print_notice(config.project.as_ref());
    Ok(config)
}

/// Loads every configuration layer for `cwd`, builds the host and waits for its start-up work
/// (MCP servers). Must run inside a tokio runtime.
pub async fn start(cwd: &Path, overrides: Overrides) -> anyhow::Result<Host> {
    let config = load(cwd, &overrides)?;
    let mut options = HostOptions::new(config);
    options.overrides = overrides;
    let host = Host::build(options)?;
    if let Err(error) = host.start().await {
        host.shutdown();
        return Err(error.into());
    }
    Ok(host)
}

/// The named directory, or the current one.
pub fn cwd_or_current(cwd: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match cwd {
        Some(cwd) => Ok(cwd),
        None => std::env::current_dir().context("cannot read the current directory"),
    }
}

/// Watches the configuration files for the life of the returned guard; each reload outcome is
/// logged (the editor's ACP log and the TUI's log file show it).
pub fn watch_and_log(host: &Host) -> Option<dsh_host::watch::ConfigWatch> {
    let mut reports = host.reports();
    tokio::spawn(async move {
        while let Ok(report) = reports.recv().await {
            match report {
                dsh_host::ReloadReport::Rejected { .. }
                | dsh_host::ReloadReport::Partial { .. } => {
                    tracing::warn!("{report}")
                }
                _ => tracing::info!("{report}"),
            }
        }
    });
    match host.watch() {
        Ok(watch) => Some(watch),
        Err(error) => {
            tracing::warn!(%error, "configuration changes will need a restart");
            None
        }
    }
}

/// What `/model` (TUI) and the `model` config option (ACP) offer: the adapter's built-in
/// models, the `[[model.catalog]]` entries and the configured model.
pub fn models(host: &dsh_host::Host) -> Vec<String> {
    let mut models: Vec<String> = dsh_llm::DeepSeekConfig::default()
        .models
        .iter()
        .map(|m| m.id.clone())
        .collect();
    if let Some(catalog) = host
        .config()
        .get("model.catalog")
        .and_then(|c| c.as_array())
    {
        models.extend(
            catalog
                .iter()
                .filter_map(|entry| entry.get("id").and_then(|id| id.as_str()))
                .map(str::to_owned),
        );
    }
    models.push(host.sessions().route().1);
    let mut seen = std::collections::HashSet::new();
    models.retain(|m| seen.insert(m.clone()));
    models
}
