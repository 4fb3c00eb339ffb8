//! `dsh mcp list` against the reference MCP server (`npm ci --prefix tests/mcp-server`) over
//! stdio and the legacy HTTP+SSE transport: tools, resources and prompts of each, a normal
//! exit that logs no warning, and a header value that never reaches a log.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead;
use std::path::PathBuf;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;

fn server_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp-server")
}

/// The reference server in `sse` mode on a free loopback port; killed on drop.
struct SseServer {
    child: std::process::Child,
    port: u16,
}

impl SseServer {
    fn start(bin: &std::path::Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let preload = server_dir().join("loopback.cjs");
        let mut child = Command::new(bin)
            .arg("sse")
            .env("PORT", port.to_string())
            .env("NODE_OPTIONS", format!("--require {}", preload.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Keeps draining after the ready line so the server never blocks on the pipe.
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if line.contains("running on port") {
                    let _ = ready_tx.send(());
                }
            }
        });
        ready_rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the SSE server did not come up");
        Self { child, port }
    }
}

impl Drop for SseServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn mcp_list(home: &std::path::Path, log: Option<&str>, json: bool) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dsh"));
    command
        .args(["mcp", "list"])
        .current_dir(home)
        .env("DSH_HOME", home)
        .env_remove("DSH_LOG")
        .env_remove("DEEPSEEK_API_KEY")
        .stdin(Stdio::null());
    if json {
        command.arg("--json");
    }
    if let Some(log) = log {
        command.env("DSH_LOG", log);
    }
    command.output().unwrap()
}

#[test]
fn lists_tools_resources_and_prompts_over_stdio_and_sse_and_exits_quietly() {
    let bin = server_dir().join("node_modules/.bin/mcp-server-everything");
    if !bin.exists() {
        eprintln!(
            "SKIPPED: {} is not installed; run `npm ci --prefix tests/mcp-server`",
            bin.display()
        );
        return;
    }
    let sse = SseServer::start(&bin);
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            r#"[[mcp.servers]]
name = "everything"
command = "{bin}"
args = ["stdio"]

[[mcp.servers]]
name = "legacy"
transport = "sse"
url = "http://127.0.0.1:{port}/sse"
headers = {{ X-Api-Key = "k-never-logged-4711" }}
"#,
            bin = bin.display(),
            port = sse.port
        ),
    )
    .unwrap();

    let out = mcp_list(home.path(), None, false);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // A normal run (connect, list, disconnect) logs nothing at the default level (warn).
    assert_eq!(stderr, "", "stdout: {stdout}");
    for (server, transport) in [("everything", "stdio"), ("legacy", "sse")] {
        assert!(
            stdout.contains(&format!("{server} ({transport}): connected")),
            "{stdout}"
        );
        assert!(stdout.contains(&format!("mcp__{server}__echo")), "{stdout}");
        assert!(
            stdout.contains(&format!("/mcp__{server}__simple-prompt")),
            "{stdout}"
        );
    }
    assert_eq!(stdout.matches("  resources:\n").count(), 2, "{stdout}");
    assert_eq!(
        stdout.matches("  prompts (slash commands):\n").count(),
        2,
        "{stdout}"
    );
    assert!(
        stdout.contains("    demo://resource/static/document/"),
        "{stdout}"
    );

    let json = mcp_list(home.path(), None, true);
    assert!(json.status.success());
    let listed: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(listed[1]["name"], "legacy");
    assert_eq!(listed[1]["transport"], "sse");
    assert_eq!(listed[1]["state"], "connected");
    assert!(!listed[1]["resources"].as_array().unwrap().is_empty());
    assert!(!listed[1]["prompts"].as_array().unwrap().is_empty());

    // Even at the most verbose level, the configured header value is never logged.
    let traced = mcp_list(home.path(), Some("trace"), false);
    assert!(traced.status.success());
    let trace = String::from_utf8_lossy(&traced.stderr);
    assert!(!trace.is_empty(), "DSH_LOG=trace logs something");
    assert!(!trace.contains("k-never-logged-4711"), "the header leaked");
}
