//! Delegated children through the real `dsh` binary against the replay model server: the
//! Claude Code `SubagentStart` / `SubagentStop` hooks, the stream-json child events, and crash
//! recovery of a parent killed (SIGKILL) while its child ran.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
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
    // The hook file lives in the project folder, which the person trusts: a user setting that
    // runs a folder's files applies only in a trusted folder.
    configure(
        home.path(),
        &format!(
            "[plugins.hooks-claude-code]\nconfig_path = \"hooks.json\"\n\n[projects.{}]\ntrust = \"trusted\"\n",
            toml::Value::String(work.path().to_string_lossy().into_owned())
        ),
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

/// `(sessionId, parentSessionId, event)` of every `session_event` line.
fn stream_events(stdout: &str) -> Vec<(String, Option<String>, Value)> {
    stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["type"] == "session_event")
        .map(|l| {
            (
                l["sessionId"].as_str().unwrap().to_owned(),
                l["parentSessionId"].as_str().map(str::to_owned),
                l["event"].clone(),
            )
        })
        .collect()
}

#[test]
fn stream_json_carries_the_childs_events_tagged_with_its_session() {
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("notes.txt"), "alpha\n").unwrap();
    configure(home.path(), "");
    let parent_task = "Delegate reading the notes.";
    let child_task = "Read notes.txt.";
    let scenario = scenario(
        parent_task,
        child_task,
        vec![
            call(
                0,
                0,
                "call_delegate",
                "subagent_fork",
                json!({"description": "Read", "prompt": child_task}),
            ),
            answer(1, 0, "PARENT_DONE"),
            call(0, 1, "call_read", "read", json!({"path": "notes.txt"})),
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
        &["exec", "--output", "stream-json", parent_task],
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
    let stdout = String::from_utf8(out.stdout).unwrap();
    let events = stream_events(&stdout);
    let stored = sessions(home.path());
    let (parent_header, _) = stored.iter().find(|(h, _)| !is_child(h)).unwrap();
    let (child_header, child_log) = stored.iter().find(|(h, _)| is_child(h)).unwrap();
    let (parent_id, child_id) = (
        parent_header["id"].as_str().unwrap(),
        child_header["id"].as_str().unwrap(),
    );
    let parent_events: Vec<&Value> = events
        .iter()
        .filter(|(s, _, _)| s == parent_id)
        .map(|(_, _, e)| e)
        .collect();
    let child_events: Vec<&(String, Option<String>, Value)> =
        events.iter().filter(|(s, _, _)| s == child_id).collect();
    assert!(!parent_events.is_empty());
    assert!(
        parent_events
            .iter()
            .all(|e| e["type"] != "turn/end" || e["data"]["reason"]["kind"] == "completed")
    );
    // Every child line names its parent, and the child's whole log is there once, in order.
    assert!(
        child_events
            .iter()
            .all(|(_, p, _)| p.as_deref() == Some(parent_id)),
        "{stdout}"
    );
    let seqs: Vec<u64> = child_events
        .iter()
        .map(|(_, _, e)| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "{stdout}");
    assert_eq!(
        seqs.len(),
        child_log.len(),
        "the stream holds the child's whole log"
    );
    let kinds: Vec<&str> = child_events
        .iter()
        .map(|(_, _, e)| e["type"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"tool/call") && kinds.contains(&"turn/end"),
        "{kinds:?}"
    );
    // The child's lines come before the parent's delegation result.
    let result_at = events
        .iter()
        .position(|(s, _, e)| s == parent_id && e["type"] == "tool/result")
        .unwrap();
    let child_end_at = events
        .iter()
        .position(|(s, _, e)| s == child_id && e["type"] == "turn/end")
        .unwrap();
    assert!(child_end_at < result_at, "{stdout}");
    // The result line stays the last line and names the parent.
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "result");
    assert_eq!(last["sessionId"], parent_id);
}

fn wait_for(path: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !path.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `dsh sessions show <id>`: the loaded (crash-repaired) events.
fn show(home: &Path, id: &str) -> Vec<Value> {
    let shown = std::process::Command::new(env!("CARGO_BIN_EXE_dsh"))
        .args(["sessions", "show", "--json", id])
        .env("DSH_HOME", home)
        .output()
        .unwrap();
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let stdout = String::from_utf8(shown.stdout).unwrap();
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// The last three event types and the repaired call's result.
fn assert_closed_as_interrupted(events: &[Value], call_id: &str) {
    for (index, event) in events.iter().enumerate() {
        assert_eq!(event["seq"], json!(index), "seq must equal the line index");
    }
    let tail: Vec<&str> = events[events.len() - 3..]
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(tail, ["tool/result", "step/end", "turn/end"], "{events:#?}");
    let result = &events[events.len() - 3]["data"];
    assert_eq!(result["message"]["content"][0]["toolCallId"], call_id);
    assert_eq!(result["error"]["code"], "TOOL_OUTCOME_UNKNOWN");
    assert_eq!(
        events[events.len() - 1]["data"]["reason"],
        json!({"kind": "interrupted"})
    );
}

#[test]
fn a_sigkill_mid_delegation_leaves_parent_and_child_logs_that_load_closed() {
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    configure(home.path(), "");
    let parent_task = "Delegate the long job.";
    let child_task = "Run the long job.";
    let ready = work.path().join("child-running");
    let pid_file = work.path().join("child-pid");
    let long = format!(
        "echo $$ > {}; touch {}; exec sleep 30",
        pid_file.display(),
        ready.display()
    );
    let scenario = scenario(
        parent_task,
        child_task,
        vec![
            call(
                0,
                0,
                "call_delegate",
                "subagent_fork",
                json!({"description": "Long", "prompt": child_task}),
            ),
            call(
                0,
                1,
                "call_long",
                "bash",
                json!({"command": long, "description": "long"}),
            ),
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
    let mut dsh = command(
        &["exec", "--output", "stream-json", parent_task],
        work.path(),
        home.path(),
        &server.url(),
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    wait_for(&ready);
    dsh.kill().unwrap(); // SIGKILL
    dsh.wait().unwrap();
    // The orphaned tool process is not the harness's any more; end it here.
    if let Ok(pid) = std::fs::read_to_string(&pid_file) {
        let _ = std::process::Command::new("kill")
            .args(["-9", pid.trim()])
            .status();
    }

    let stored = sessions(home.path());
    assert_eq!(stored.len(), 2, "parent and child were both stored");
    let (parent_header, _) = stored.iter().find(|(h, _)| !is_child(h)).unwrap();
    let (child_header, _) = stored.iter().find(|(h, _)| is_child(h)).unwrap();
    assert_eq!(child_header["parentSession"], parent_header["id"]);
    // The parent's open delegation and the child's open bash call are both closed on load.
    let parent = show(home.path(), parent_header["id"].as_str().unwrap());
    assert_closed_as_interrupted(&parent, "call_delegate");
    let child = show(home.path(), child_header["id"].as_str().unwrap());
    assert_closed_as_interrupted(&child, "call_long");
    // The child's descriptor survived: it is still a one-shot child of that parent.
    assert!(
        child.iter().any(|e| e["type"] == "subagent/descriptor"),
        "{child:#?}"
    );
}
