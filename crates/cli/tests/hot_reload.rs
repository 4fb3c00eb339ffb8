//! Hot reload through the real binary over ACP: with a session open, editing `.dsh/config.toml`
//! re-applies exactly the changed plugins (the next request's tool list and bash's behaviour
//! follow), a call in flight during the reload ends in exactly one result, and a broken edit is
//! reported on stderr while the previous configuration keeps running.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use dsh_testkit::chat::ChatServer;
use dsh_testkit::chat::Reply;
use serde_json::Value;
use serde_json::json;
use tokio::io::AsyncBufReadExt;
use tokio::io::AsyncWriteExt;
use tokio::io::BufReader;

struct Acp {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    stderr: Arc<Mutex<String>>,
}

impl Acp {
    fn start(workspace: &Path, home: &Path, model_url: &str) -> Self {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_dsh"));
        for (name, _) in std::env::vars() {
            if name.starts_with("DEEPSEEK_") || name.starts_with("DSH_") {
                command.env_remove(name);
            }
        }
        let mut child = command
            .arg("acp")
            .current_dir(workspace)
            .env("DSH_HOME", home)
            .env("DSH_LOG", "info")
            .env("DEEPSEEK_BASE_URL", model_url)
            .env("DEEPSEEK_API_KEY", "test-key")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let mut text = sink.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        Self {
            child,
            stdin,
            stdout,
            stderr,
        }
    }

    async fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), self.stdout.next_line())
                .await
                .expect("dsh answers in time")
                .unwrap()
                .expect("dsh stdout open");
            let frame: Value = serde_json::from_str(&line).unwrap();
            if frame["id"] == json!(id) && frame.get("method").is_none() {
                return frame;
            }
        }
    }

    /// Waits until stderr has had `needle` written `count` times.
    async fn wait_stderr(&self, needle: &str, count: usize) -> String {
        for _ in 0..200 {
            let text = self.stderr.lock().unwrap().clone();
            if text.matches(needle).count() >= count {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "stderr never said {needle:?} {count} times:\n{}",
            self.stderr.lock().unwrap()
        );
    }

    async fn stop(mut self) {
        drop(self.stdin);
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

/// The tool messages of request `body` for `call_id`.
fn tool_results(body: &Value, call_id: &str) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_the_project_config_reapplies_the_changed_plugins_of_a_live_session() {
    let server = ChatServer::start(vec![
        Reply::tool_call(
            "call_slow",
            "bash",
            json!({"command": "sleep 2; echo in-flight-done", "description": "slow"}),
        ),
        Reply::text("first done"),
        Reply::tool_call(
            "call_sleep",
            "bash",
            json!({"command": "sleep 5; echo never", "description": "sleeps"}),
        ),
        Reply::text("second done"),
        Reply::text("third done"),
    ])
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[plugins.session-title]\nenabled = false\n",
    )
    .unwrap();
    let workspace = tempfile::tempdir().unwrap();
    // The person trusts this folder, so its broken edit is reported at its line rather than
    // ignored as an untrusted folder's file would be.
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[plugins.session-title]\nenabled = false\n\n[projects.{}]\ntrust = \"trusted\"\n",
            toml::Value::String(workspace.path().to_string_lossy().into_owned())
        ),
    )
    .unwrap();
    let project = workspace.path().join(".dsh/config.toml");
    std::fs::create_dir_all(project.parent().unwrap()).unwrap();
    std::fs::write(&project, "# nothing yet\n").unwrap();

    let mut acp = Acp::start(workspace.path(), home.path(), &server.url());
    acp.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )
    .await;
    let session = acp
        .request(
            2,
            "session/new",
            json!({"cwd": workspace.path(), "mcpServers": []}),
        )
        .await["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();

    // Turn 1: the config changes while `bash` runs; the call still ends in one result.
    let edit = {
        let project = project.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(600)).await;
            std::fs::write(
                &project,
                "[plugins.web]\nenabled = false\n\n[plugins.bash]\ntimeout_ms = 1000\n",
            )
            .unwrap();
        })
    };
    let answer = acp
        .request(
            3,
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "go slow"}]}),
        )
        .await;
    edit.await.unwrap();
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = server.requests();
    assert!(server.offered_tools(0).contains(&"web_fetch".to_owned()));
    let slow = tool_results(&requests[1], "call_slow");
    assert_eq!(slow.len(), 1, "exactly one result: {slow:?}");
    assert!(slow[0].contains("in-flight-done"), "{slow:?}");
    let log = acp.wait_stderr("configuration reloaded", 1).await;
    assert!(log.contains("web") && log.contains("bash"), "{log}");

    // Turn 2: no web_fetch any more, and bash times out after the new 1000 ms.
    let answer = acp
        .request(
            4,
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "sleep"}]}),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    for index in [2, 3] {
        let tools = server.offered_tools(index);
        assert!(!tools.contains(&"web_fetch".to_owned()), "{tools:?}");
        assert!(tools.contains(&"bash".to_owned()), "{tools:?}");
    }
    let requests = server.requests();
    let slept = tool_results(&requests[3], "call_sleep");
    assert_eq!(slept.len(), 1, "{slept:?}");
    assert!(slept[0].contains("[timed out after 1000ms]"), "{slept:?}");

    // A broken edit is reported with its file and line; the running configuration stays.
    std::fs::write(&project, "[plugins.web]\nenabled = \"nope\"\n").unwrap();
    let log = acp.wait_stderr("not reloaded", 1).await;
    assert!(
        log.contains(&format!("{}:2: plugins.web.enabled", project.display())),
        "{log}"
    );
    let answer = acp
        .request(
            5,
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "again"}]}),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let tools = server.offered_tools(4);
    assert!(!tools.contains(&"web_fetch".to_owned()), "{tools:?}");
    assert!(tools.contains(&"bash".to_owned()), "{tools:?}");
    acp.stop().await;
}
