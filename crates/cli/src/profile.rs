//! `dsh --profile NAME [--patch FILE]…`: upstream's launcher command line, as its SDK clients
//! and scripts call it. `sdk` (and `sdk-minimal`) serve the SDK runtime protocol on stdio
//! (`dsh-sdk-server`); `headless` runs a task like `dsh exec`. dsh has no profiles or YAML
//! patches: its configuration is `$DSH_HOME/config.toml` and `.dsh/config.toml`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use dsh_sdk_server::Ended;
use dsh_sdk_server::Initialize;

/// The profiles dsh answers to.
const KNOWN: &str =
    "sdk, sdk-minimal (the SDK runtime protocol on stdio) and headless (a task, like dsh exec)";

pub struct ProfileArgs {
    pub profile: String,
    pub patches: Vec<PathBuf>,
    pub words: Vec<String>,
    pub cwd: Option<PathBuf>,
    pub model: Option<String>,
}

pub fn run(args: ProfileArgs) -> anyhow::Result<ExitCode> {
    if let Some(patch) = args.patches.first() {
        anyhow::bail!(
            "--patch {}: dsh does not read upstream's YAML patch files; put the settings in $DSH_HOME/config.toml or the project's .dsh/config.toml (see `dsh config show`), or pass them as `-c key=value` to `dsh exec`",
            patch.display()
        );
    }
    if std::env::var_os("DSH_CORDIS_CONFIG").is_some_and(|v| !v.is_empty()) {
        anyhow::bail!(
            "DSH_CORDIS_CONFIG is set: dsh does not read upstream's Cordis YAML configuration; put the settings in $DSH_HOME/config.toml or the project's .dsh/config.toml (see `dsh config show`) and unset DSH_CORDIS_CONFIG"
        );
    }
    match args.profile.as_str() {
        "sdk" | "sdk-minimal" => {
            if let Some(word) = args.words.first() {
                anyhow::bail!(
                    "--profile {} takes no task (`{word}`): it serves the SDK protocol on stdin/stdout",
                    args.profile
                );
            }
            sdk()
        }
        "headless" => crate::exec::run(crate::exec::ExecArgs::task(
            args.words, args.cwd, args.model,
        )),
        other => anyhow::bail!("unknown profile `{other}`: dsh knows {KNOWN}"),
    }
}

/// The SDK runtime: the host is built at `initialize`, from the client's workspace and route.
fn sdk() -> anyhow::Result<ExitCode> {
    let runtime = crate::host::runtime()?;
    let code = runtime.block_on(async {
        let launch: dsh_sdk_server::Launch = Arc::new(|request: Initialize| {
            Box::pin(async move {
                let mut overrides = crate::host::overrides();
                overrides.set("model.provider", request.provider);
                overrides.set("model.name", request.model);
                if let Some(effort) = request.reasoning_effort {
                    overrides.set("model.reasoning_effort", effort);
                }
                crate::host::start(&request.cwd, overrides)
                    .await
                    .map_err(|error| dsh_sdk_server::LaunchError(format!("{error:#}")))
            })
        });
        let note: dsh_sdk_server::Note = Arc::new(|line: &str| note!("{line}"));
        let mut stops = dsh_headless::signals::listen()?;
        let (stopped_tx, stopped_rx) = tokio::sync::oneshot::channel();
        let stop = async move {
            let stop = stops.first().await;
            let _ = stopped_tx.send(stop);
        };
        let ended =
            dsh_sdk_server::serve(tokio::io::stdin(), tokio::io::stdout(), launch, note, stop)
                .await?;
        // SIGINT exits 130 as a shell reports it; end of input, `shutdown` and SIGTERM are
        // an orderly end (upstream's exit semantics).
        anyhow::Ok(match (ended, stopped_rx.await) {
            (Ended::Stopped, Ok(dsh_headless::signals::Stop::Interrupt)) => ExitCode::from(130),
            _ => ExitCode::SUCCESS,
        })
    });
    // A blocking read of stdin may still be pending: do not wait for it.
    runtime.shutdown_background();
    code
}
