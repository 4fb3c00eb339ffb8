//! Locating and running the reference server, plus small harness helpers.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]

use std::path::Path;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use dsh_kernel::Scope;
use dsh_mcp::AttachmentStore;
use dsh_mcp::ImageAttachment;
use dsh_mcp::ImageSupport;
use dsh_mcp::McpOptions;
use dsh_mcp::McpServer;
use dsh_mcp::McpServerConfig;
use dsh_mcp::ReconnectConfig;
use dsh_mcp::ServerStatus;
use dsh_tools::CancellationToken;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolResult;
use serde_json::Value;
use tokio::io::AsyncBufReadExt;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The installed reference server, or `None` (with a notice) when `npm ci --prefix
/// tests/mcp-server` has not been run.
pub fn server_bin() -> Option<PathBuf> {
    let bin = repo_root().join("tests/mcp-server/node_modules/.bin/mcp-server-everything");
    if bin.exists() {
        Some(bin)
    } else {
        eprintln!(
            "SKIPPED: {} is not installed; run `npm ci --prefix tests/mcp-server`",
            bin.display()
        );
        None
    }
}

/// `NODE_OPTIONS` that make the server bind 127.0.0.1 only.
pub fn loopback_node_options() -> String {
    let preload = repo_root().join("tests/mcp-server/loopback.cjs");
    format!("--require {}", preload.display())
}

/// Quick backoff so reconnect tests finish in seconds.
pub fn fast_reconnect() -> ReconnectConfig {
    ReconnectConfig {
        enabled: true,
        initial_delay_ms: 200,
        max_delay_ms: 1_000,
        max_attempts: 30,
        ping_interval_ms: 500,
    }
}

pub fn stdio_config(name: &str, bin: &Path) -> McpServerConfig {
    let mut config = McpServerConfig::stdio(name, bin.display().to_string(), vec!["stdio".into()]);
    config.timeout_ms = 20_000;
    config.reconnect = fast_reconnect();
    config
}

#[derive(Default)]
pub struct MemoryStore(pub Mutex<Vec<(ImageAttachment, Vec<u8>)>>);

impl AttachmentStore for MemoryStore {
    fn save_image(
        &self,
        attachment: &ImageAttachment,
        bytes: &[u8],
    ) -> Result<(), dsh_tools::AttachmentStoreError> {
        self.0
            .lock()
            .unwrap()
            .push((attachment.clone(), bytes.to_vec()));
        Ok(())
    }
}

pub fn options_with_images(store: Arc<MemoryStore>) -> McpOptions {
    McpOptions {
        images: Some(ImageSupport {
            store,
            accepted_media_types: dsh_mcp::default_media_types(),
            accepts_images: Arc::new(|| true),
        }),
        startup_budget: None,
        roots: Vec::new(),
        questions: None,
    }
}

pub struct Harness {
    pub root: Scope,
    pub registry: Arc<ToolRegistry>,
}

impl Harness {
    pub fn new() -> Self {
        let root = Scope::root();
        let registry = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
        Self { root, registry }
    }

    pub async fn call(&self, name: &str, arguments: Value) -> Arc<ToolResult> {
        self.call_with(name, arguments, CancellationToken::new())
            .await
    }

    pub async fn call_with(
        &self,
        name: &str,
        arguments: Value,
        signal: CancellationToken,
    ) -> Arc<ToolResult> {
        let input = ToolCallInput::new("call-1", name, arguments, signal);
        self.registry.execute(input).await
    }

    pub fn has(&self, name: &str) -> bool {
        self.registry.get(name, None).is_some()
    }
}

/// Waits (bounded) until the server's status satisfies `pred`; returns that status.
pub async fn wait_status(
    server: &McpServer,
    within: Duration,
    pred: impl Fn(&ServerStatus) -> bool,
) -> ServerStatus {
    let mut rx = server.watch();
    let seen = tokio::time::timeout(within, rx.wait_for(|s| pred(s))).await;
    match seen {
        Ok(Ok(status)) => status.clone(),
        _ => panic!(
            "status never matched within {within:?}; last: {:?}",
            server.status()
        ),
    }
}

pub fn kill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -KILL {pid}");
}

pub fn alive(pid: u32) -> bool {
    // A zombie still has a /proc entry; its state letter is Z.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| !stat.contains(") Z "))
        .unwrap_or(false)
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The reference server in streamable-HTTP (or legacy SSE) mode on `127.0.0.1:<port>`,
/// started and ready.
pub struct HttpServer {
    pub child: tokio::process::Child,
    pub port: u16,
    /// `/mcp` or `/sse`.
    path: &'static str,
}

impl HttpServer {
    pub async fn start(bin: &Path, port: u16) -> Self {
        Self::start_mode(bin, port, "streamableHttp", "/mcp").await
    }

    /// The legacy HTTP+SSE mode: the event stream is `/sse`, messages go to `/message`.
    pub async fn start_sse(bin: &Path, port: u16) -> Self {
        Self::start_mode(bin, port, "sse", "/sse").await
    }

    async fn start_mode(bin: &Path, port: u16, mode: &str, path: &'static str) -> Self {
        let mut child = tokio::process::Command::new(bin)
            .arg(mode)
            .env("PORT", port.to_string())
            .env("NODE_OPTIONS", loopback_node_options())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        let ready = tokio::time::timeout(Duration::from_secs(20), async {
            while let Ok(Some(line)) = lines.next_line().await {
                // streamableHttp says "listening on port", sse "Server is running on port".
                if line.contains("listening on port") || line.contains("running on port") {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(ready, Ok(true), "the HTTP server did not come up");
        // Keep draining so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self { child, port, path }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}{}", self.port, self.path)
    }

    pub async fn kill(&mut self) {
        self.child.kill().await.unwrap();
    }
}
