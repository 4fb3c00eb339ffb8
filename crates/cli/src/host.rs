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
