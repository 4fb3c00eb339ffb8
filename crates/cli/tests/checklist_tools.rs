//! tool-catalog-spec §11 gaps that need the real `dsh` binary: job notices injected into the
//! next step (46) or waking an idle owner (47), jobs dying with their agent (51), and
//! `todo_write` appending one `todo/write` event (73). See `docs/checklists.md`.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
// Helpers outside `#[test]` functions panic on broken fixtures by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::path::PathBuf;

use dsh_testkit::replay::ReplayServer;
use dsh_testkit::scenario::ModelEntry;
use dsh_testkit::scenario::Scenario;
use dsh_testkit::scenario::ScenarioSpec;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

fn scenario(task: &str, entries: Vec<Value>) -> Scenario {
    let spec: ScenarioSpec = serde_json::from_value(json!({
        "suite": "checklist",
        "name": "background-notice",
        "sessions": [{"session": 0, "first_user_text": task}]
    }))
    .unwrap();
    let entries = entries
        .into_iter()
        .map(|e| serde_json::from_value::<ModelEntry>(e).unwrap())
        .collect();
    Scenario::from_parts(spec, entries)
}

fn session_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            session_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
}

/// The events of the only stored session (the header line is skipped).
fn events(home: &Path) -> Vec<Value> {
    let mut files = Vec::new();
    session_files(&home.join("sessions"), &mut files);
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::read_to_string(&files[0])
        .unwrap()
        .lines()
        .skip(1)
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The scripted model servers answer the agent's requests in order; the LLM session-title side
/// request would consume one of them.
fn no_llm_titles(home: &Path) {
    let path = home.join("config.toml");
    if !path.exists() {
        std::fs::write(path, "[plugins.session-title]\nenabled = false\n").unwrap();
    }
}

/// `dsh exec <task>` in `workspace` with an isolated home against the replay server.
fn exec(task: &str, workspace: &Path, home: &Path, base_url: &str) -> std::process::Output {
    no_llm_titles(home);
    std::process::Command::new(env!("CARGO_BIN_EXE_dsh"))
        .args(["exec", task])
        .current_dir(workspace)
        .env("HOME", home)
        .env("DSH_HOME", home)
        .env("DEEPSEEK_API_KEY", "replay-key")
        .env("DEEPSEEK_BASE_URL", base_url)
        .env_remove("DSH_LOG")
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_46_a_job_settling_while_the_owner_is_busy_is_injected_into_the_next_step() {
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let task = "start a job and wait";
    let background = json!({"command": "echo hi", "description": "Say hi",
                            "run_in_background": true})
    .to_string();
    // The foreground call keeps the owner busy until the job has long settled.
    let foreground = json!({"command": "sleep 1", "description": "Wait"}).to_string();
    let scenario = scenario(
        task,
        vec![
            json!({"session": 0, "route": "main", "index": 0, "kind": "response",
                   "tool_calls": [
                       {"id": "call_bg", "name": "bash", "arguments": background},
                       {"id": "call_fg", "name": "bash", "arguments": foreground}],
                   "finish_reason": "tool_calls",
                   "usage": {"prompt_tokens": 5, "completion_tokens": 6}}),
            json!({"session": 0, "route": "main", "index": 1, "kind": "response",
                   "content": "All done.", "finish_reason": "stop",
                   "usage": {"prompt_tokens": 7, "completion_tokens": 2}}),
        ],
    );
    let server = ReplayServer::start(&scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap();
    let out = exec(task, workspace.path(), home.path(), &server.url());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "All done.\n");

    let events = events(home.path());
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let notice_text = "background job bash-1 (bash: echo hi) finished [status: completed, exit code: 0]. Read its output with job_output.";
    let notices: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            e["type"] == "user/message"
                && e["data"]["source"]["plugin"] == "tool-jobs"
                && e["data"]["content"][0]["text"] == notice_text
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(notices.len(), 1, "{kinds:?}");
    let notice = &events[notices[0]];
    assert_eq!(notice["data"]["source"]["kind"], "plugin");
    assert_eq!(notice["data"]["source"]["form"], "notice");
    assert_eq!(notice["data"]["role"], "user");
    // Injected into the next step: after both results of step 1, right after step 2 starts,
    // and before that step's model answer; the turn opened only once (no wake).
    let last_result = kinds.iter().rposition(|k| *k == "tool/result").unwrap();
    let step_starts: Vec<usize> = kinds
        .iter()
        .enumerate()
        .filter(|(_, k)| **k == "step/start")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(step_starts.len(), 2, "{kinds:?}");
    assert!(last_result < step_starts[1], "{kinds:?}");
    assert!(step_starts[1] < notices[0], "{kinds:?}");
    let answer = kinds
        .iter()
        .rposition(|k| *k == "assistant/message")
        .unwrap();
    assert!(notices[0] < answer, "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "turn/start").count(), 1);
}

/// A `dsh acp` child driven over its stdio.
struct Acp {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::sync::mpsc::UnboundedReceiver<Value>,
}

impl Acp {
    fn start(workspace: &Path, home: &Path, base_url: &str) -> Self {
        use tokio::io::AsyncBufReadExt;
        no_llm_titles(home);
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_dsh"))
            .arg("acp")
            .current_dir(workspace)
            .env("HOME", home)
            .env("DSH_HOME", home)
            .env("DEEPSEEK_API_KEY", "replay-key")
            .env("DEEPSEEK_BASE_URL", base_url)
            .env_remove("DSH_LOG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if let Ok(value) = serde_json::from_str::<Value>(&line)
                    && tx.send(value).is_err()
                {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
        }
    }

    async fn send(&mut self, message: Value) {
        use tokio::io::AsyncWriteExt;
        self.stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// Waits for the response to request `id`, collecting agent message texts meanwhile.
    async fn response(&mut self, id: u64, texts: &mut Vec<String>) -> Value {
        loop {
            let line = tokio::time::timeout(std::time::Duration::from_secs(20), self.lines.recv())
                .await
                .expect("no response in time")
                .expect("dsh acp closed its stdout");
            collect_text(&line, texts);
            if line["id"] == id && line.get("method").is_none() {
                return line;
            }
        }
    }

    /// Collects agent message texts for `within`.
    async fn drain(&mut self, within: std::time::Duration, texts: &mut Vec<String>) {
        let deadline = tokio::time::Instant::now() + within;
        while let Ok(Some(line)) = tokio::time::timeout_at(deadline, self.lines.recv()).await {
            collect_text(&line, texts);
        }
    }
}

fn collect_text(line: &Value, texts: &mut Vec<String>) {
    let update = &line["params"]["update"];
    if line["method"] == "session/update" && update["sessionUpdate"] == "agent_message_chunk" {
        texts.push(
            update["content"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
    }
}

fn bg_call(id: &str, command: &str) -> Value {
    json!({"id": id, "name": "bash", "arguments": json!({"command": command,
        "description": "Background wait", "run_in_background": true}).to_string()})
}

fn answer(index: usize, text: &str) -> Value {
    json!({"session": 0, "route": "main", "index": index, "kind": "response",
           "content": text, "finish_reason": "stop", "stream": [{"content": text}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_47_idle_settlements_wake_at_most_three_times_until_user_input() {
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let first = "start four jobs";
    let tool_step = |index: usize, calls: Vec<Value>| {
        json!({"session": 0, "route": "main", "index": index, "kind": "response",
               "tool_calls": calls, "finish_reason": "tool_calls"})
    };
    let scenario = scenario(
        first,
        vec![
            // Turn 1: four jobs settling about a second apart while the owner is idle.
            tool_step(
                0,
                vec![
                    bg_call("c1", "sleep 1"),
                    bg_call("c2", "sleep 2"),
                    bg_call("c3", "sleep 3"),
                    bg_call("c4", "sleep 4"),
                ],
            ),
            answer(1, "started"),
            // Three wakes; the fourth settlement is only injected.
            answer(2, "wake one"),
            answer(3, "wake two"),
            answer(4, "wake three"),
            // User input resets the budget: the next idle settlement wakes again.
            tool_step(5, vec![bg_call("c5", "sleep 1")]),
            answer(6, "started again"),
            answer(7, "wake four"),
        ],
    );
    let server = ReplayServer::start(&scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap();
    let mut acp = Acp::start(workspace.path(), home.path(), &server.url());
    let mut texts = Vec::new();
    acp.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": 1, "clientCapabilities": {}}}))
        .await;
    acp.response(1, &mut texts).await;
    acp.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                    "params": {"cwd": workspace.path(), "mcpServers": []}}))
        .await;
    let session = acp.response(2, &mut texts).await["result"]["sessionId"].clone();
    let prompt = |id: u64, text: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
               "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}})
    };
    acp.send(prompt(3, first)).await;
    let settled = acp.response(3, &mut texts).await;
    assert_eq!(settled["result"]["stopReason"], "end_turn", "{settled}");
    acp.drain(std::time::Duration::from_millis(5500), &mut texts)
        .await;
    assert_eq!(
        texts,
        ["started", "wake one", "wake two", "wake three"],
        "served {}",
        server.served()
    );
    assert_eq!(server.served(), 5, "the fourth settlement opened no turn");

    acp.send(prompt(4, "one more job")).await;
    let settled = acp.response(4, &mut texts).await;
    assert_eq!(settled["result"]["stopReason"], "end_turn", "{settled}");
    acp.drain(std::time::Duration::from_millis(3000), &mut texts)
        .await;
    assert_eq!(
        texts,
        [
            "started",
            "wake one",
            "wake two",
            "wake three",
            "started again",
            "wake four"
        ]
    );
    assert_eq!(server.served(), 8);
    drop(acp.stdin);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), acp.child.wait()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_51_ending_the_owning_agent_kills_its_running_jobs() {
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let task = "leave a job running";
    // The job may run in a pid namespace (bwrap), so liveness is a heartbeat file, not a pid.
    let beat = workspace.path().join("beat");
    let command = format!(
        "n=0; while true; do n=$((n+1)); echo $n > {f}; sleep 0.05; done",
        f = beat.display()
    );
    // The foreground wait lets the job start beating before the agent ends.
    let wait = format!(
        "while [ ! -s {f} ]; do sleep 0.05; done",
        f = beat.display()
    );
    let scenario = scenario(
        task,
        vec![
            json!({"session": 0, "route": "main", "index": 0, "kind": "response",
                   "tool_calls": [bg_call("c1", &command)], "finish_reason": "tool_calls"}),
            json!({"session": 0, "route": "main", "index": 1, "kind": "response",
                   "tool_calls": [{"id": "c2", "name": "bash", "arguments":
                       json!({"command": wait, "description": "Wait for the job"}).to_string()}],
                   "finish_reason": "tool_calls"}),
            answer(2, "left running"),
        ],
    );
    let server = ReplayServer::start(&scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap();
    let out = exec(task, workspace.path(), home.path(), &server.url());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "left running\n");
    let read = || std::fs::read_to_string(&beat).unwrap_or_default();
    // A live job would bump the counter about 20 times a second.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let before = read();
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    assert_eq!(read(), before, "the job kept running after its agent ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_73_todo_write_validates_and_appends_one_todo_write_event() {
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let task = "plan the work";
    let call = |id: &str, todos: Value| {
        json!({"session": 0, "route": "main", "index": 0, "kind": "response",
               "tool_calls": [{"id": id, "name": "todo_write",
                               "arguments": json!({"todos": todos}).to_string()}],
               "finish_reason": "tool_calls"})
    };
    let mut duplicate = call(
        "c1",
        json!([{"content": "fix it", "status": "pending"},
               {"content": "fix it", "status": "completed"}]),
    );
    duplicate["index"] = json!(0);
    let mut valid = call(
        "c2",
        json!([{"content": "read", "status": "completed"},
               {"content": "fix", "status": "in_progress"},
               {"content": "test", "status": "pending"},
               {"content": "ship", "status": "pending"}]),
    );
    valid["index"] = json!(1);
    let scenario = scenario(task, vec![duplicate, valid, answer(2, "planned")]);
    let server = ReplayServer::start(&scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap();
    let out = exec(task, workspace.path(), home.path(), &server.url());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");

    let events = events(home.path());
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .collect();
    assert_eq!(results.len(), 2);
    let texts: Vec<String> = results.iter().map(|e| e.to_string()).collect();
    assert!(
        texts[0].contains(r#"Error: invalid todos: duplicate content \"fix it\""#),
        "{}",
        texts[0]
    );
    assert!(
        texts[1].contains("Updated todo list: 2 pending, 1 in progress, 1 completed."),
        "{}",
        texts[1]
    );
    let writes: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "todo/write")
        .collect();
    assert_eq!(writes.len(), 1, "only the valid call is logged");
    assert_eq!(
        writes[0]["data"]["todos"][1],
        json!({"content": "fix", "status": "in_progress"})
    );
    assert_eq!(writes[0]["data"]["todos"].as_array().unwrap().len(), 4);
}
