//! Configuration → host: the one place the binary loads the configuration and builds a
//! [`Host`], and the commands that only print what `dsh-host` renders (`dsh config show`,
//! `dsh tools`, `dsh trust`).

use std::path::Path;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use anyhow::Context;
use dsh_host::Config;
use dsh_host::Host;
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
    for notice in config.trust_notices() {
        note!("{notice}");
    }
    Ok(config)
}

/// Loads every configuration layer for `cwd`, builds the host and waits for its start-up work
/// (MCP servers). Must run inside a tokio runtime. When what an untrusted folder's project
/// layer kept makes the host fail (a mistyped key, a plugin that cannot start), the layer is
/// left out with a notice: a cloned repository must not keep dsh from running in it.
pub async fn start(cwd: &Path, overrides: Overrides) -> anyhow::Result<Host> {
    let config = load(cwd, &overrides)?;
    let untrusted = config.has_untrusted_project_layer();
    match Host::launch(config, overrides.clone()).await {
        Ok(host) => Ok(host),
        Err(error) if untrusted => {
            let overrides = Overrides {
                skip_untrusted_project: true,
                skip_untrusted_reason: Some(format!("{error:#}").replace('\n', "; ")),
                ..overrides
            };
            let config = Config::load(cwd, &overrides)?;
            if let Some(notice) = config.project.as_ref().and_then(|p| p.notice()) {
                note!("{notice}");
            }
            Ok(Host::launch(config, overrides).await?)
        }
        Err(error) => Err(error.into()),
    }
}

/// The runtime of the commands that drive a host.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

/// Runs `work` to its end on a new [`runtime`], then shuts the runtime down without waiting
/// for blocking work that is stuck (a blocking read of stdin, a filesystem call that never
/// returns): dropping a runtime would wait for it for ever, and dsh would not exit.
pub fn block_on<T>(work: impl Future<Output = T>) -> std::io::Result<T> {
    let runtime = runtime()?;
    let done = runtime.block_on(work);
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    Ok(done)
}

/// The named directory, or the current one.
pub fn cwd_or_current(cwd: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match cwd {
        Some(cwd) => Ok(cwd),
        None => std::env::current_dir().context("cannot read the current directory"),
    }
}

/// The session's folder: `--cwd` (an existing directory) or the current one, made absolute.
/// Checked before anything is created, so a bad folder leaves no session behind.
pub fn checked_cwd(cwd: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let Some(cwd) = cwd else {
        return std::env::current_dir().context("cannot read the current directory");
    };
    match std::fs::metadata(&cwd) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => anyhow::bail!("--cwd {}: not a directory", cwd.display()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            anyhow::bail!("--cwd {}: no such directory", cwd.display())
        }
        Err(error) => anyhow::bail!("--cwd {}: {error}", cwd.display()),
    }
    cwd.canonicalize()
        .with_context(|| format!("--cwd {}", cwd.display()))
}

/// `dsh config show [--json]`.
pub fn config_show(cwd: Option<PathBuf>, json: bool) -> anyhow::Result<ExitCode> {
    let config = load(&cwd_or_current(cwd)?, &overrides())?;
    let text = dsh_host::show::command(&config, &dsh_host::builtin_plugins(), json)?;
    crate::out::stdout(format_args!("{text}"))?;
    Ok(ExitCode::SUCCESS)
}

/// `dsh tools [--json]`: the host started (MCP servers connected), so their tools are listed as
/// the model gets them.
pub fn tools(json: bool, cwd: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let cwd = cwd_or_current(cwd)?;
    let schemas = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(async {
            let host = start(&cwd, overrides()).await?;
            let schemas = host.sessions().catalog(&cwd).await;
            host.shutdown();
            anyhow::Ok(schemas?)
        })?;
    crate::out::stdout(format_args!("{}", dsh_host::show::tools(&schemas, json)?))?;
    Ok(ExitCode::SUCCESS)
}

/// `dsh trust [PATH] [--revoke]`.
pub fn trust(folder: Option<PathBuf>, revoke: bool) -> anyhow::Result<ExitCode> {
    let home = dsh_host::config::dsh_home()?;
    let folder = match folder {
        Some(folder) => folder,
        None => std::env::current_dir()?,
    };
    let trust = if revoke {
        dsh_host::trust::Trust::Untrusted
    } else {
        dsh_host::trust::Trust::Trusted
    };
    say!("{}", dsh_host::trust::command(&home, &folder, trust)?)?;
    Ok(ExitCode::SUCCESS)
}
