//! agent-loop-spec §10 items 76–77 through the real `dsh exec` binary: what text mode prints,
//! the exit rule, the stderr failure line, and that a missing task is a usage error that
//! creates no session (see `docs/checklists.md`).
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
// Helpers outside `#[test]` functions panic on broken fixtures by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;

use dsh_testkit::replay::ReplayServer;
use dsh_testkit::scenario::ModelEntry;
use dsh_testkit::scenario::Scenario;
use dsh_testkit::scenario::ScenarioSpec;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

fn scenario(task: &str, entry: Value) -> Scenario {
    let spec: ScenarioSpec = serde_json::from_value(json!({
        "suite": "headless",
        "name": "headless-rules",
        "sessions": [{"session": 0, "first_user_text": task}]
    }))
    .unwrap();
    let entry: ModelEntry = serde_json::from_value(entry).unwrap();
    Scenario::from_parts(spec, vec![entry])
}

/// Runs `dsh <args>` in `workspace` with an isolated home; `base_url` of the model, if any.
fn dsh(args: &[&str], workspace: &Path, home: &Path, base_url: Option<&str>) -> Output {
    // The scripted model answers requests in order; the LLM title side request would take one.
    let config = home.join("config.toml");
    if !config.exists() {
        std::fs::write(config, "[plugins.session-title]\nenabled = false\n").unwrap();
    }
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_dsh"));
    command
        .args(args)
        .current_dir(workspace)
        .env("HOME", home)
        .env("DSH_HOME", home)
        .env("DEEPSEEK_API_KEY", "replay-key")
        .env_remove("DSH_LOG");
    match base_url {
        Some(url) => command.env("DEEPSEEK_BASE_URL", url),
        None => command.env("DEEPSEEK_BASE_URL", "http://127.0.0.1:9"),
    };
    command.output().unwrap()
}

fn stored_sessions(home: &Path) -> usize {
    let root = home.join("sessions");
    if !root.exists() {
        return 0;
    }
    walk(&root)
}

fn walk(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path)
            } else {
                usize::from(path.extension().is_some_and(|e| e == "jsonl"))
            }
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_76_text_mode_prints_the_final_answer_and_exits_zero_on_completion() {
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let task = "say the answer";
    let scenario = scenario(
        task,
        json!({"session": 0, "route": "main", "index": 0, "kind": "response",
               "content": "The answer is 42.", "finish_reason": "stop",
               "usage": {"prompt_tokens": 5, "completion_tokens": 6}}),
    );
    let server = ReplayServer::start(&scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap();
    let out = dsh(
        &["exec", task],
        workspace.path(),
        home.path(),
        Some(&server.url()),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "The answer is 42.\n",
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stored_sessions(home.path()), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_76_an_error_end_prints_code_and_message_to_stderr_and_exits_one() {
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let task = "fail please";
    let scenario = scenario(
        task,
        json!({"session": 0, "route": "main", "index": 0, "kind": "error",
               "error": {"status": 401, "message": "Authentication Fails, invalid key"}}),
    );
    let server = ReplayServer::start(&scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap();
    let out = dsh(
        &["exec", task],
        workspace.path(),
        home.path(),
        Some(&server.url()),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l == "dsh: AUTH: Authentication Fails, invalid key"),
        "stderr: {stderr}"
    );
    // A failed run prints nothing on stdout, not even a lone newline.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
}

#[test]
fn item_77_no_task_is_a_usage_error_and_creates_no_session() {
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    for args in [&["exec"][..], &["exec", "   "][..], &["exec", "", "\t"][..]] {
        let out = dsh(args, workspace.path(), home.path(), None);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(
            stderr.contains("required") || stderr.contains("Usage"),
            "{args:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(
            stored_sessions(home.path()),
            0,
            "{args:?} created a session"
        );
    }
}
