//! A `dsh exec` killed with SIGKILL mid-turn leaves a log that `dsh sessions show` loads, with
//! the open turn closed the way crash repair specifies (TOOL_OUTCOME_UNKNOWN for the call that
//! was running, then `step/end` and `turn/end {interrupted}`), and that resume can continue.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead;
use std::io::BufReader;
use std::path::Path;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

use dsh_testkit::replay::ReplayServer;
use dsh_testkit::scenario::ModelEntry;
use dsh_testkit::scenario::Scenario;
use dsh_testkit::scenario::ScenarioSpec;
use serde_json::Value;
use serde_json::json;

fn scenario(command: &str) -> Scenario {
    let arguments =
        json!({ "command": command, "description": "Wait for a long time" }).to_string();
    let spec: ScenarioSpec = serde_json::from_value(json!({
        "suite": "headless",
        "name": "crash",
        "sessions": [{"session": 0, "first_user_text": "start the long job"}]
    }))
    .unwrap();
    let entry: ModelEntry = serde_json::from_value(json!({
        "session": 0, "route": "main", "index": 0, "kind": "response",
        "tool_calls": [{"id": "call_long", "name": "bash", "arguments": arguments}],
        "finish_reason": "tool_calls",
        "stream": [{"tool_call": 0, "id": "call_long", "name": "bash", "arguments": arguments}]
    }))
    .unwrap();
    Scenario::from_parts(spec, vec![entry])
}

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_exec_leaves_a_repairable_log() {
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let ready = workspace.path().join("started");
    let scenario = scenario(&format!("touch {} && sleep 30", ready.display()));
    let server = ReplayServer::start(
        &scenario,
        ([127, 0, 0, 1], 0).into(),
        Some(workspace.path().to_path_buf()),
    )
    .await
    .unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[plugins.sandbox]\nmode = \"danger-full-access\"\n\n[plugins.session-title]\nenabled = false\n",
    )
    .unwrap();

    let dsh = env!("CARGO_BIN_EXE_dsh");
    let mut child = Command::new(dsh)
        .args(["exec", "--output", "stream-json", "start the long job"])
        .current_dir(workspace.path())
        .env("DSH_HOME", home.path())
        .env("DEEPSEEK_BASE_URL", server.url())
        .env("DEEPSEEK_API_KEY", "replay-key")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let first: Value = {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    let session = first["sessionId"].as_str().unwrap().to_owned();
    wait_for(&ready);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let shown = Command::new(dsh)
        .args(["sessions", "show", &session, "--json"])
        .env("DSH_HOME", home.path())
        .output()
        .unwrap();
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let events: Vec<Value> = String::from_utf8(shown.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    for (index, event) in events.iter().enumerate() {
        assert_eq!(event["seq"], json!(index), "seq must equal the line index");
    }
    let tail: Vec<&str> = events
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(tail, ["tool/result", "step/end", "turn/end"]);
    let result = &events[events.len() - 3]["data"];
    assert_eq!(result["error"]["code"], "TOOL_OUTCOME_UNKNOWN");
    assert_eq!(result["message"]["content"][0]["isError"], true);
    assert_eq!(
        events[events.len() - 1]["data"]["reason"],
        json!({"kind": "interrupted"})
    );
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool/call" && e["data"]["callId"] == "call_long")
    );
}
