//! Delegated children through the real `dsh` binary against the replay model server: the
//! Claude Code `SubagentStart` / `SubagentStop` hooks, the stream-json child events, and crash
//! recovery of a parent killed while its child ran.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::path::PathBuf;

use dsh_testkit::replay::ReplayServer;
use dsh_testkit::scenario::ModelEntry;
use dsh_testkit::scenario::Scenario;
use dsh_testkit::scenario::ScenarioSpec;
use serde_json::Value;
use serde_json::json;

/// A two-session scenario: the parent (session 0) and one child (session 1).
fn scenario(parent_task: &str, child_task: &str, entries: Vec<Value>) -> Scenario {
    let spec: ScenarioSpec = serde_json::from_value(json!({
        "suite": "headless", "name": "subagent-e2e",
        "sessions": [
            {"session": 0, "first_user_text": parent_task},
            {"session": 1, "first_user_text": child_task}
        ]
    }))
    .unwrap();
    let model: Vec<ModelEntry> = entries
        .into_iter()
        .map(|e| serde_json::from_value(e).unwrap())
        .collect();
    Scenario::from_parts(spec, model)
}

fn call(index: usize, session: usize, id: &str, name: &str, args: Value) -> Value {
    let args = args.to_string();
    json!({"session": session, "route": "main", "index": index, "kind": "response",
           "tool_calls": [{"id": id, "name": name, "arguments": args}], "finish_reason": "tool_calls",
           "usage": {"prompt_tokens": 5, "completion_tokens": 5}})
}

fn answer(index: usize, session: usize, text: &str) -> Value {
    json!({"session": session, "route": "main", "index": index, "kind": "response",
           "content": text, "finish_reason": "stop",
           "usage": {"prompt_tokens": 5, "completion_tokens": 5}})
}

fn configure(home: &Path, extra: &str) {
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[plugins.session-title]\nenabled = false\n\n[plugins.sandbox]\nmode = \"danger-full-access\"\n\n{extra}"
        ),
    )
    .unwrap();
}

fn command(args: &[&str], work: &Path, home: &Path, url: &str) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_dsh"));
    command
        .args(args)
        .current_dir(work)
        .env("HOME", home)
        .env("DSH_HOME", home)
        .env("DEEPSEEK_API_KEY", "replay-key")
        .env("DEEPSEEK_BASE_URL", url)
        .env_remove("DSH_LOG");
    command
}

/// Every stored session: `(header, events)`.
fn sessions(home: &Path) -> Vec<(Value, Vec<Value>)> {
    fn find(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                find(&path, out);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    find(&home.join("sessions"), &mut files);
    files
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(file).unwrap();
            let mut lines = text
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap());
            let header = lines.next().unwrap();
            (header, lines.collect())
        })
        .collect()
}

fn is_child(header: &Value) -> bool {
    header.get("parentSession").is_some_and(|p| !p.is_null())
}

#[test]
fn subagent_hooks_see_the_child_and_their_context_reaches_it() {
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let parent_task = "Delegate the check.";
    let child_task = "Wait for the marker, then report.";
    // SubagentStart records its payload and gives the child context; SubagentStop records
    // its payload. The child's first command waits for the start hook to have run.
    std::fs::write(
        work.path().join("hooks.json"),
        json!({"hooks": {
            "SubagentStart": [{"matcher": "general-purpose", "hooks": [{"type": "command",
                "command": "cat > start.json; echo '{\"hookSpecificOutput\":{\"hookEventName\":\"SubagentStart\",\"additionalContext\":\"NOTE-FROM-SUBAGENT-START\"}}'; touch start.done"}]}],
            "SubagentStop": [{"hooks": [{"type": "command", "command": "cat > stop.json.part && mv stop.json.part stop.json"}]}],
        }})
        .to_string(),
    )
    .unwrap();
    configure(
        home.path(),
        "[plugins.hooks-claude-code]\nconfig_path = \"hooks.json\"\n",
    );
    let wait = "for i in $(seq 200); do [ -f start.done ] && break; sleep 0.05; done; sleep 0.5; echo waited";
    let scenario = scenario(
        parent_task,
        child_task,
        vec![
            call(
                0,
                0,
                "call_delegate",
                "subagent",
                json!({"description": "Check", "prompt": child_task, "run_in_background": false}),
            ),
            answer(1, 0, "PARENT_DONE"),
            call(
                0,
                1,
                "call_wait",
                "bash",
                json!({"command": wait, "description": "wait"}),
            ),
            answer(1, 1, "CHILD_DONE"),
        ],
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ReplayServer::start(
            &scenario,
            ([127, 0, 0, 1], 0).into(),
            None,
        ))
        .unwrap();
    let out = command(
        &["exec", parent_task],
        work.path(),
        home.path(),
        &server.url(),
    )
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stored = sessions(home.path());
    assert!(
        server.unconsumed().is_empty(),
        "{:?} {stored:#?}",
        server.unconsumed()
    );
    let (child_header, child_events) = stored.iter().find(|(h, _)| is_child(h)).unwrap();
    let child_id = child_header["id"].as_str().unwrap();

    let start: Value =
        serde_json::from_str(&std::fs::read_to_string(work.path().join("start.json")).unwrap())
            .unwrap();
    assert_eq!(start["hook_event_name"], "SubagentStart");
    assert_eq!(start["agent_type"], "general-purpose");
    assert_eq!(start["agent_id"], child_id);
    // The payload describes the child's session, not the parent's.
    assert_eq!(start["session_id"], child_id);
    // The context reached the child before its second step.
    let injected = child_events
        .iter()
        .any(|e| e.to_string().contains("NOTE-FROM-SUBAGENT-START"));
    assert!(injected, "{child_events:#?}");

    let stop_file = work.path().join("stop.json");
    for _ in 0..100 {
        if stop_file.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let stop: Value = serde_json::from_str(&std::fs::read_to_string(&stop_file).unwrap()).unwrap();
    assert_eq!(stop["hook_event_name"], "SubagentStop");
    assert_eq!(stop["agent_id"], child_id);
    assert_eq!(stop["stop_hook_active"], false);
    // Neither point writes hook/* events (they pass no turn).
    for (_, events) in &stored {
        assert!(
            !events.iter().any(|e| e["kind"] == "hook/invoked"),
            "{events:#?}"
        );
    }
}
