//! `dsh acp`: serve the Agent Client Protocol on stdio (for Zed and other ACP editors).

use std::process::ExitCode;

use dsh_acp::BridgeConfig;

pub fn run() -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir()?;
    let runtime = crate::host::runtime()?;
    let code = runtime.block_on(async move {
        let host = crate::host::start(&cwd, crate::host::overrides()).await?;
        let _watch = host.watch_and_log();
        let identity = BridgeConfig {
            agent_version: env!("CARGO_PKG_VERSION").to_owned(),
            ..BridgeConfig::default()
        };
        // A stop signal tears the bridge down like end of input: prompts are cancelled and
        // answered, agents disposed (logs closed); tool processes die at the signal itself.
        let mut stops = dsh_headless::signals::listen()?;
        let (stopped_tx, stopped_rx) = tokio::sync::oneshot::channel();
        let stop = async move {
            let stop = stops.first().await;
            let _ = stopped_tx.send(stop);
        };
        let served = dsh_acp::serve_stdio_until(host.sessions(), identity, stop).await;
        host.shutdown();
        served?;
        Ok(match stopped_rx.await {
            Ok(stop) => stop.exit_code(),
            Err(_) => ExitCode::SUCCESS,
        })
    });
    // Stopped by a signal, stdin is still open and a blocking read of it still pending: do
    // not wait for it.
    runtime.shutdown_background();
    code
}
