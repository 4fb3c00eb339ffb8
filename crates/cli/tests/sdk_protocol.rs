//! `dsh --profile sdk`: the SDK runtime protocol spoken directly to the real binary against the
//! replay model server: initialize, prompts with a tool call, the receipt before the answer,
//! events and whole-agent status, a delegated child's notifications, a failed model request,
//! resume in a second runtime, the working directory, unknown methods, and each way the
//! process ends (shutdown, end of input, SIGTERM, SIGINT) with no process left behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]

use std::io::BufRead;
use std::io::BufReader;
use std::io::Write;
use std::path::Path;
use std::process::Child;
use std::process::ChildStdin;
use std::process::Command;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;
use std::time::Instant;

use dsh_testkit::replay::ReplayServer;
use dsh_testkit::scenario::ModelEntry;
use dsh_testkit::scenario::Scenario;
use dsh_testkit::scenario::ScenarioSpec;
use serde_json::Value;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

fn scenario(first_texts: &[&str], entries: Vec<Value>) -> Scenario {
    let sessions: Vec<Value> = first_texts
        .iter()
        .enumerate()
        .map(|(i, text)| json!({"session": i, "first_user_text": text}))
        .collect();
    let spec: ScenarioSpec = serde_json::from_value(
        json!({"suite": "headless", "name": "sdk-protocol", "sessions": sessions}),
    )
    .unwrap();
    let model: Vec<ModelEntry> = entries
        .into_iter()
        .map(|e| serde_json::from_value(e).unwrap())
        .collect();
    Scenario::from_parts(spec, model)
}

fn call(index: usize, session: usize, id: &str, name: &str, args: Value) -> Value {
    json!({"session": session, "route": "main", "index": index, "kind": "response",
           "tool_calls": [{"id": id, "name": name, "arguments": args.to_string()}],
           "finish_reason": "tool_calls", "usage": {"prompt_tokens": 5, "completion_tokens": 5}})
}

fn answer(index: usize, session: usize, text: &str) -> Value {
    json!({"session": session, "route": "main", "index": index, "kind": "response",
           "content": text, "finish_reason": "stop",
           "usage": {"prompt_tokens": 5, "completion_tokens": 5}})
}

fn failure(index: usize, session: usize) -> Value {
    json!({"session": session, "route": "main", "index": index, "kind": "error",
           "error": {"status": 400, "message": "replayed bad request"}})
}

fn configure(home: &Path) {
    std::fs::write(
        home.join("config.toml"),
        "[plugins.session-title]\nenabled = false\n\n[plugins.sandbox]\nmode = \"danger-full-access\"\n",
    )
    .unwrap();
}

/// The runtime as the published client starts it, with a JSON-RPC line client on its stdio.
struct Runtime {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: mpsc::Receiver<Value>,
    next_id: u64,
    /// Every frame read so far, in wire order.
    seen: Vec<Value>,
}

impl Runtime {
    fn start(work: &Path, home: &Path, url: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_dsh"))
            .args(["--profile", "sdk"])
            .current_dir(work)
            .env("HOME", home)
            .env("DSH_HOME", home)
            .env("DEEPSEEK_API_KEY", "replay-key")
            .env("DEEPSEEK_BASE_URL", url)
            .env_remove("DSH_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, frames) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let line = line.unwrap();
                // stdout carries only frames.
                let frame: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not a JSON-RPC frame on stdout: {line:?}: {e}"));
                assert_eq!(frame["jsonrpc"], "2.0", "{line}");
                if tx.send(frame).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        Self {
            child,
            stdin,
            frames,
            next_id: 0,
            seen: Vec::new(),
        }
    }

    fn write(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn next_frame(&mut self) -> Value {
        let frame = self
            .frames
            .recv_timeout(WAIT)
            .expect("no frame from the runtime in time");
        self.seen.push(frame.clone());
        frame
    }

    /// Sends a request and reads up to its answer; returns `(answer, frames before it)`.
    fn request(&mut self, method: &str, params: Option<Value>) -> (Value, Vec<Value>) {
        self.next_id += 1;
        let id = format!("req-{}", self.next_id);
        let mut request = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(params) = params {
            request["params"] = params;
        }
        self.write(&request.to_string());
        let mut before = Vec::new();
        loop {
            let frame = self.next_frame();
            if frame.get("id") == Some(&json!(id)) {
                return (frame, before);
            }
            before.push(frame);
        }
    }

    fn ok(&mut self, method: &str, params: Option<Value>) -> (Value, Vec<Value>) {
        let (answer, before) = self.request(method, params);
        assert!(answer.get("error").is_none(), "{method}: {answer}");
        (answer["result"].clone(), before)
    }

    fn error(&mut self, method: &str, params: Option<Value>) -> String {
        let (answer, _) = self.request(method, params);
        assert_eq!(answer["error"]["code"], -32603, "{method}: {answer}");
        answer["error"]["message"].as_str().unwrap().to_owned()
    }

    fn initialize(&mut self, work: &Path) -> Value {
        self.ok(
            "initialize",
            Some(
                json!({"cwd": work, "provider": "deepseek-official", "model": "deepseek-v4-flash"}),
            ),
        )
        .0
    }

    /// Reads notifications until `session.status idle` of `session`.
    fn until_idle(&mut self, session: &str) -> Vec<Value> {
        let mut frames = Vec::new();
        loop {
            let frame = self.next_frame();
            let idle = frame["method"] == "session.status"
                && frame["params"]["sessionId"] == session
                && frame["params"]["status"] == "idle";
            frames.push(frame);
            if idle {
                return frames;
            }
        }
    }

    /// `session/prompt` and its activity: `(messageId, frames from before the answer on)`.
    fn prompt(&mut self, session: &str, text: &str) -> (String, Vec<Value>) {
        let (result, mut frames) = self.ok(
            "session/prompt",
            Some(json!({"sessionId": session, "contentBlocks": [{"type": "text", "text": text}]})),
        );
        let message_id = result["messageId"].as_str().unwrap().to_owned();
        // The receipt is written before the answer.
        assert!(
            frames.iter().any(|f| is_receipt(f, session, &message_id)),
            "no receipt before the answer: {frames:#?}"
        );
        if !frames.iter().any(|f| is_idle(f, session)) {
            frames.extend(self.until_idle(session));
        }
        (message_id, frames)
    }

    fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the runtime did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([format!("-{name}"), self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is_receipt(frame: &Value, session: &str, message_id: &str) -> bool {
    frame["method"] == "session.event"
        && frame["params"]["sessionId"] == session
        && frame["params"]["event"]["type"] == "agent/inbox/spliced"
        && frame["params"]["event"]["data"]["inserted"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["id"] == message_id))
}

fn is_idle(frame: &Value, session: &str) -> bool {
    frame["method"] == "session.status"
        && frame["params"]["sessionId"] == session
        && frame["params"]["status"] == "idle"
}

fn events_of<'a>(frames: &'a [Value], session: &str) -> Vec<&'a Value> {
    frames
        .iter()
        .filter(|f| f["method"] == "session.event" && f["params"]["sessionId"] == session)
        .map(|f| &f["params"]["event"])
        .collect()
}

fn last_answer(events: &[&Value]) -> String {
    let message = events
        .iter()
        .rev()
        .find(|e| e["type"] == "assistant/message")
        .expect("no assistant/message");
    message["data"]["message"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "text")
        .map(|b| b["text"].as_str().unwrap())
        .collect()
}

/// Processes whose parent is `pid` (none may outlive the runtime's own exit).
fn children_of(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp …`: split after the last ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(pid)
            || fields.get(2).and_then(|p| p.parse::<u32>().ok()) == Some(pid)
        {
            found.push(entry.file_name().to_string_lossy().parse().unwrap_or(0));
        }
    }
    found
}

fn replay(scenario: &Scenario) -> (tokio::runtime::Runtime, ReplayServer) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ReplayServer::start(
            scenario,
            ([127, 0, 0, 1], 0).into(),
            None,
        ))
        .unwrap();
    (rt, server)
}

#[test]
fn a_prompt_with_a_tool_call_streams_its_events_and_a_second_runtime_resumes_it() {
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    configure(home.path());
    let first = "List the marker.";
    let scenario = scenario(
        &[first],
        vec![
            call(
                0,
                0,
                "call_echo",
                "bash",
                json!({"command": "echo SDK-MARKER", "description": "echo"}),
            ),
            answer(1, 0, "The marker is SDK-MARKER."),
            answer(2, 0, "Second answer."),
            answer(3, 0, "Resumed answer."),
        ],
    );
    let (_rt, server) = replay(&scenario);
    let session = "session-sdk-e2e";

    let mut runtime = Runtime::start(work.path(), home.path(), &server.url());
    // A line that is not JSON is ignored; the next request is answered.
    runtime.write("not json");
    let init = runtime.initialize(work.path());
    assert_eq!(init["serverInfo"]["name"], "deepseek-harness-sdk-runtime");
    let unknown = runtime.error("foo/bar", None);
    assert_eq!(
        unknown,
        "unknown DeepSeek Harness SDK runtime method: foo/bar"
    );
    assert!(
        runtime
            .error(
                "initialize",
                Some(json!({"cwd": work.path(), "provider": "deepseek-official", "model": "m"}))
            )
            .contains("already answered")
    );

    let (message_id, frames) = runtime.prompt(session, first);
    let receipt = frames
        .iter()
        .position(|f| is_receipt(f, session, &message_id))
        .unwrap();
    let running = frames
        .iter()
        .position(|f| f["method"] == "session.status" && f["params"]["status"] == "running")
        .unwrap();
    assert!(receipt < running, "{frames:#?}");
    let events = events_of(&frames, session);
    let call = events
        .iter()
        .find(|e| e["type"] == "tool/call")
        .expect("the tool call among the events");
    assert_eq!(call["data"]["name"], "bash", "{call}");
    let result = events.iter().find(|e| e["type"] == "tool/result").unwrap();
    assert!(result.to_string().contains("SDK-MARKER"), "{result}");
    // Full envelopes, in the log's own vocabulary.
    for event in &events {
        assert!(event["seq"].is_u64() && event["time"].is_u64(), "{event}");
    }
    assert_eq!(last_answer(&events), "The marker is SDK-MARKER.");
    let end = events
        .iter()
        .rev()
        .find(|e| e["type"] == "turn/end")
        .unwrap();
    assert_eq!(end["data"]["reason"]["kind"], "completed");
    // Whole-agent status: one running, one idle, the idle last.
    let statuses: Vec<&Value> = frames
        .iter()
        .filter(|f| f["method"] == "session.status")
        .map(|f| &f["params"]["status"])
        .collect();
    assert_eq!(statuses, [&json!("running"), &json!("idle")]);

    // The receipt is durable by the time it is answered.
    let (second_id, frames) = runtime.prompt(session, "Again.");
    assert_eq!(last_answer(&events_of(&frames, session)), "Second answer.");
    let log = find_log(home.path(), session);
    assert!(
        std::fs::read_to_string(&log).unwrap().contains(&second_id),
        "the prompt is in the file"
    );

    // The working directory: the initialize cwd; a move elsewhere is refused and says why.
    let cwd = std::fs::canonicalize(work.path()).unwrap();
    let (got, _) = runtime.ok(
        "session/working-directory/get",
        Some(json!({"sessionId": session})),
    );
    assert_eq!(got["cwd"], json!(cwd));
    let (same, _) = runtime.ok(
        "session/working-directory/set",
        Some(json!({"sessionId": session, "path": "."})),
    );
    assert_eq!(same["cwd"], json!(cwd));
    std::fs::create_dir(work.path().join("sub")).unwrap();
    let moved = runtime.error(
        "session/working-directory/set",
        Some(json!({"sessionId": session, "path": "sub"})),
    );
    assert!(moved.contains("cannot move session"), "{moved}");
    let missing = runtime.error(
        "session/working-directory/set",
        Some(json!({"sessionId": session, "path": "nowhere"})),
    );
    assert!(missing.contains("no such directory"), "{missing}");

    // shutdown: `{}` (params that are not an object count as none), then exit 0.
    runtime.write(r#"{"jsonrpc":"2.0","id":"bye","method":"shutdown","params":[1,2]}"#);
    loop {
        let frame = runtime.next_frame();
        if frame["id"] == "bye" {
            assert_eq!(frame["result"], json!({}));
            break;
        }
    }
    let pid = runtime.child.id();
    assert!(runtime.wait_exit().success());
    assert!(children_of(pid).is_empty(), "{:?}", children_of(pid));

    // A second runtime on the same home resumes the stored session and continues it.
    let mut runtime = Runtime::start(work.path(), home.path(), &server.url());
    runtime.initialize(work.path());
    let missing = runtime.error("session/resume", Some(json!({"sessionId": "session-none"})));
    assert!(missing.contains("session-none"), "{missing}");
    assert!(
        find_log_opt(home.path(), "session-none").is_none(),
        "a failed resume creates nothing"
    );
    let (resumed, _) = runtime.ok("session/resume", Some(json!({"sessionId": session})));
    assert_eq!(resumed, json!({}));
    let occupied = runtime.error("session/resume", Some(json!({"sessionId": session})));
    assert!(occupied.contains("already open"), "{occupied}");
    let (_, frames) = runtime.prompt(session, "After resume.");
    let events = events_of(&frames, session);
    assert_eq!(last_answer(&events), "Resumed answer.");
    let start = events.iter().find(|e| e["type"] == "turn/start").unwrap();
    assert_eq!(start["data"]["turn"], 3, "{start}");
    // End of input: the runtime disposes and exits 0.
    runtime.stdin.take();
    assert!(runtime.wait_exit().success());
    assert!(server.unconsumed().is_empty(), "{:?}", server.unconsumed());
}

fn find_log_opt(home: &Path, session: &str) -> Option<std::path::PathBuf> {
    let sessions = home.join("sessions");
    for project in std::fs::read_dir(sessions).ok()?.flatten() {
        let path = project.path().join(session).join("session.jsonl");
        if path.is_file() {
            return Some(path);
        }
    }
    None
}

fn find_log(home: &Path, session: &str) -> std::path::PathBuf {
    find_log_opt(home, session).expect("the session's log")
}

#[test]
fn a_child_is_announced_before_its_events_and_a_model_failure_ends_in_error_then_idle() {
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    configure(home.path());
    let parent_task = "Delegate the check.";
    let child_task = "Check it.";
    let failing = "This one fails.";
    let scenario = scenario(
        &[parent_task, child_task, failing],
        vec![
            call(
                0,
                0,
                "call_delegate",
                "subagent",
                json!({"description": "Check", "prompt": child_task, "run_in_background": false}),
            ),
            answer(1, 0, "PARENT_DONE"),
            answer(0, 1, "CHILD_DONE"),
            failure(0, 2),
        ],
    );
    let (_rt, server) = replay(&scenario);
    let mut runtime = Runtime::start(work.path(), home.path(), &server.url());
    runtime.initialize(work.path());
    let (_, frames) = runtime.prompt("session-parent", parent_task);
    let started = frames
        .iter()
        .position(|f| f["method"] == "subagent.started")
        .expect("subagent.started");
    let child = frames[started]["params"]["childSessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        frames[started]["params"]["parentSessionId"],
        "session-parent"
    );
    let first_child_event = frames
        .iter()
        .position(|f| f["method"] == "session.event" && f["params"]["sessionId"] == child)
        .expect("the child's events reach the client");
    assert!(started < first_child_event);
    let child_events = events_of(&frames, &child);
    assert_eq!(last_answer(&child_events), "CHILD_DONE");
    let finished = frames
        .iter()
        .find(|f| f["method"] == "subagent.finished")
        .expect("subagent.finished");
    let p = &finished["params"];
    assert_eq!(p["agentId"], json!(child));
    assert_eq!(p["childSessionId"], json!(child));
    assert_eq!(p["parentSessionId"], "session-parent");
    assert_eq!(p["status"], "ok");
    assert_eq!(p["stopReason"], "completed");
    assert!(
        p["lastAssistantMessage"].to_string().contains("CHILD_DONE"),
        "{p}"
    );
    assert!(
        frames
            .iter()
            .any(|f| f["method"] == "session.status" && f["params"]["sessionId"] == child),
        "the child's own status"
    );
    assert_eq!(
        last_answer(&events_of(&frames, "session-parent")),
        "PARENT_DONE"
    );

    let (_, frames) = runtime.prompt("session-failing", failing);
    let events = events_of(&frames, "session-failing");
    let end = events
        .iter()
        .rev()
        .find(|e| e["type"] == "turn/end")
        .unwrap();
    assert_eq!(end["data"]["reason"]["kind"], "error", "{end}");
    assert!(is_idle(frames.last().unwrap(), "session-failing"));

    // SIGTERM: an orderly end, exit 0, nothing left behind.
    let pid = runtime.child.id();
    runtime.signal("TERM");
    let status = runtime.wait_exit();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(children_of(pid).is_empty());
    assert!(server.unconsumed().is_empty(), "{:?}", server.unconsumed());
}

#[test]
fn initialize_checks_what_it_is_given_and_sigint_exits_130() {
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let scenario = scenario(&["unused"], Vec::new());
    let (_rt, server) = replay(&scenario);
    let mut runtime = Runtime::start(work.path(), home.path(), &server.url());
    let before = runtime.error(
        "session/prompt",
        Some(json!({"sessionId": "s", "contentBlocks": [{"type": "text", "text": "x"}]})),
    );
    assert!(before.contains("before initialize"), "{before}");
    for bad in [json!(0), json!(1.5), json!(-3)] {
        let message = runtime.error(
            "initialize",
            Some(json!({"cwd": work.path(), "provider": "deepseek-official", "model": "m", "maxTokens": bad})),
        );
        assert_eq!(
            message,
            "initialize maxTokens must be a positive safe integer"
        );
    }
    let provider = runtime.error(
        "initialize",
        Some(json!({"cwd": work.path(), "provider": "no-such-provider", "model": "m"})),
    );
    assert!(provider.contains("no-such-provider"), "{provider}");
    let effort = runtime.error(
        "initialize",
        Some(json!({"cwd": work.path(), "provider": "deepseek-official", "model": "m", "reasoningEffort": "extreme"})),
    );
    assert!(effort.contains("extreme"), "{effort}");
    runtime.initialize(work.path());
    runtime.signal("INT");
    assert_eq!(runtime.wait_exit().code(), Some(130));
    // Nothing was stored: no prompt ran.
    assert!(find_log_opt(home.path(), "s").is_none());
}

#[test]
fn upstream_launcher_flags_dsh_cannot_honour_are_refused_with_what_to_use() {
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_dsh"));
        command
            .args(args)
            .env("DSH_HOME", home.path())
            .env_remove("DSH_CORDIS_CONFIG")
            .stdin(Stdio::null());
        for (key, value) in env {
            command.env(key, value);
        }
        command.output().unwrap()
    };
    let out = run(&["--profile", "sdk", "--patch", "/tmp/a.yml"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains("--patch /tmp/a.yml") && stderr.contains("config.toml"),
        "{stderr}"
    );
    let out = run(
        &["--profile", "sdk"],
        &[("DSH_CORDIS_CONFIG", "/tmp/c.yml")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("DSH_CORDIS_CONFIG"),
        "{stderr}"
    );
    let out = run(&["--profile", "gui"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("unknown profile `gui`") && stderr.contains("sdk"),
        "{stderr}"
    );
}

#[test]
fn profile_headless_runs_a_task_like_exec() {
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    configure(home.path());
    let task = "Say hello.";
    let scenario = scenario(&[task], vec![answer(0, 0, "Hello from headless.")]);
    let (_rt, server) = replay(&scenario);
    let out = Command::new(env!("CARGO_BIN_EXE_dsh"))
        .args(["--profile", "headless", task])
        .current_dir(work.path())
        .env("HOME", home.path())
        .env("DSH_HOME", home.path())
        .env("DEEPSEEK_API_KEY", "replay-key")
        .env("DEEPSEEK_BASE_URL", server.url())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Hello from headless.\n"
    );
}
