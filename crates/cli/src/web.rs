//! `dsh web`: the browser app on a local server (`dsh-web`), until Ctrl-C or SIGTERM.

use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(Debug, clap::Args)]
pub struct WebArgs {
    /// The address to listen on. Anything but loopback needs an access secret in
    /// DSH_ACCESS_SECRET (at least 16 characters).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// The port (0: any free port, printed at start).
    #[arg(long, default_value_t = 3080)]
    port: u16,
    /// More `Host` authorities to accept (`host` or `host:port`), e.g. a reverse proxy's
    /// public name. Repeatable.
    #[arg(long = "trusted-host", value_name = "AUTHORITY")]
    trusted_hosts: Vec<String>,
    /// A folder the workspace picker may browse (default: your home folder). Repeatable.
    #[arg(long = "root", value_name = "DIR")]
    roots: Vec<PathBuf>,
    /// The folder whose configuration the server loads (default: the current folder).
    /// Sessions choose their own folders.
    #[arg(long, short = 'C')]
    cwd: Option<PathBuf>,
}

fn bind_address(host: &str) -> anyhow::Result<IpAddr> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.eq_ignore_ascii_case("localhost") {
        return Ok(IpAddr::from([127, 0, 0, 1]));
    }
    bare.parse().with_context(|| {
        format!("--host must be an IP address (127.0.0.1, 0.0.0.0, ::1, ...), got {host:?}")
    })
}

pub fn run(args: WebArgs) -> anyhow::Result<ExitCode> {
    let cwd = match args.cwd {
        Some(cwd) => std::fs::canonicalize(&cwd)
            .with_context(|| format!("-C {}: no such folder", cwd.display()))?,
        None => std::env::current_dir()?,
    };
    let ip = bind_address(&args.host)?;
    let secret = dsh_secrets::var(dsh_web::ACCESS_SECRET_VAR);
    let runtime = crate::host::runtime()?;
    let code = runtime.block_on(async move {
        // Bind first: a taken port or a refused bind fails before any host work.
        let listener = tokio::net::TcpListener::bind((ip, args.port))
            .await
            .with_context(|| {
                format!(
                    "cannot listen on {}",
                    std::net::SocketAddr::from((ip, args.port))
                )
            })?;
        let local = listener.local_addr()?;
        let config = dsh_web::WebConfig {
            bridge: dsh_acp::BridgeConfig {
                agent_version: env!("CARGO_PKG_VERSION").to_owned(),
                ..dsh_acp::BridgeConfig::default()
            },
            host: Some(args.host.clone()),
            trusted_hosts: args.trusted_hosts,
            access_secret: secret,
            viewer_queue_bytes: None,
            roots: if args.roots.is_empty() {
                std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .into_iter()
                    .collect()
            } else {
                args.roots
            },
        };
        dsh_web::check(&config, local)?;
        let host = crate::host::start(&cwd, crate::host::overrides()).await?;
        let _watch = host.watch_and_log();
        let mut stops = dsh_headless::signals::listen()?;
        let (stopped_tx, stopped_rx) = tokio::sync::oneshot::channel();
        let stop = async move {
            let stop = stops.first().await;
            let _ = stopped_tx.send(stop);
        };
        let shown = if ip.is_unspecified() || ip.is_loopback() {
            format!("http://127.0.0.1:{}", local.port())
        } else {
            format!("http://{local}")
        };
        {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "dsh web: {shown}");
            let _ = out.flush();
        }
        let served = dsh_web::serve(listener, host.sessions(), config, stop).await;
        host.shutdown();
        served?;
        anyhow::Ok(match stopped_rx.await {
            Ok(stop) => stop.exit_code(),
            Err(_) => ExitCode::SUCCESS,
        })
    });
    runtime.shutdown_background();
    code
}
