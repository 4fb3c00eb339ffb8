//! Faults around the sandbox: signals (7), ACP input robustness (8, 9, 10), and that no tool
//! process outlives dsh, whichever way dsh ends and whatever the mode.

use std::io::BufRead;
use std::io::BufReader;
use std::io::Write;
use std::process::Child;
use std::process::ChildStdin;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;
use std::time::Instant;

use serde_json::Value;
use serde_json::json;

use super::support::Case;
use super::support::User;
use super::support::bash;
use super::support::scenario;
use super::support::serve;

const MODES: [&str; 3] = ["read-only", "workspace-write", "danger-full-access"];

/// Host pids of live processes whose command line mentions `marker`.
fn pids_with(marker: &str) -> Vec<u32> {
    let mine = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != mine)
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = state
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next())
                .is_some_and(|s| s == "Z" || s == "X");
            !zombie && String::from_utf8_lossy(&cmdline).contains(marker)
        })
        .collect()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// The child's exit status, failing the test if it takes more than 20 s.
fn exit_of(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "dsh did not exit");
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn send(pid: u32, signal: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
    rustix::process::kill_process(pid, signal).unwrap();
}

/// A command that leaves detached descendants behind, all marked with `marker`.
fn detaching(marker: &str) -> String {
    format!(
        "setsid sleep {marker} & nohup sleep {marker} >/dev/null 2>&1 & (sleep {marker} &) ; sleep {marker}"
    )
}

fn marker(n: u32) -> String {
    format!("{n}.{}", std::process::id() % 100_000 + 1)
}

fn session_tail(case: &Case) -> Vec<String> {
    let mut logs = Vec::new();
    collect_logs(&case.home_path().join("sessions"), &mut logs);
    assert_eq!(logs.len(), 1, "{logs:?}");
    std::fs::read_to_string(&logs[0])
        .unwrap()
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["type"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

fn collect_logs(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_logs(&path, out);
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_tool_process_outlives_dsh_exec() {
    let mut n = 10;
    // Unconfined commands once more with `dsh` installed without `dsh-tool-guard`: it guards
    // them by re-executing itself, with the same guarantees.
    let runs = MODES
        .map(|mode| (mode, false))
        .into_iter()
        .chain([("danger-full-access", true)]);
    for user in User::all() {
        for (mode, alone) in runs.clone() {
            for signal in [rustix::process::Signal::TERM, rustix::process::Signal::KILL] {
                n += 1;
                let mut case = Case::new(user);
                case.alone = alone;
                let marker = marker(n);
                let task = "start the long job";
                let server = serve(&scenario(task, &[bash(&detaching(&marker))])).await;
                let mut command = case.command(&["exec", task], &server.url());
                command
                    .env("DSH_PERMISSION_MODE", mode)
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped());
                let mut child = command.spawn().unwrap();
                wait_until("the tool processes", || pids_with(&marker).len() >= 4);
                let started = Instant::now();
                send(child.id(), signal);
                let status = exit_of(&mut child);
                let took = started.elapsed();
                wait_until(
                    &format!("{user:?} {mode} {signal:?} alone={alone}: no survivor"),
                    || pids_with(&marker).is_empty(),
                );
                if signal == rustix::process::Signal::TERM {
                    assert_eq!(status.code(), Some(143), "{user:?} {mode}");
                    assert!(
                        took < Duration::from_secs(10),
                        "{user:?} {mode}: took {took:?}"
                    );
                    let tail = session_tail(&case);
                    assert_eq!(
                        tail.last().map(String::as_str),
                        Some("turn/end"),
                        "{user:?} {mode}: {tail:?}"
                    );
                }
            }
        }
    }
}

/// `dsh acp` with piped stdio, read line by line on a thread.
struct Acp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
}

impl Acp {
    fn start(case: &Case, base_url: &str, mode: &str) -> Self {
        let mut command = case.command(&["acp"], base_url);
        command
            .env("DSH_PERMISSION_MODE", mode)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        Self {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    fn request(&mut self, id: u64, method: &str, params: Value) {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.write(format!("{line}\n").as_bytes());
    }

    /// The response with `id` (skipping notifications); `None` if stdout closed first.
    fn response(&self, id: &Value) -> Option<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            match self.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(line) if &line["id"] == id && line.get("method").is_none() => return Some(line),
                Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            }
        }
        None
    }

    fn session(&mut self, cwd: &std::path::Path) -> String {
        self.request(
            1,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        assert!(self.response(&json!(1)).unwrap()["result"].is_object());
        self.request(2, "session/new", json!({"cwd": cwd, "mcpServers": []}));
        let created = self.response(&json!(2)).unwrap();
        created["result"]["sessionId"].as_str().unwrap().to_owned()
    }

    fn prompt(&mut self, id: u64, session: &str, text: &str) {
        self.request(
            id,
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        );
    }

    fn close_stdin(&mut self) {
        self.stdin = None;
    }
}

impl Drop for Acp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_tool_process_outlives_dsh_acp() {
    let mut n = 40;
    for user in User::all() {
        for mode in MODES {
            for signal in [rustix::process::Signal::TERM, rustix::process::Signal::KILL] {
                n += 1;
                let case = Case::new(user);
                let marker = marker(n);
                let task = "start the long job";
                let server = serve(&scenario(task, &[bash(&detaching(&marker))])).await;
                let mut acp = Acp::start(&case, &server.url(), mode);
                let session = acp.session(&case.ws());
                acp.prompt(3, &session, task);
                wait_until("the tool processes", || pids_with(&marker).len() >= 4);
                send(acp.child.id(), signal);
                if signal == rustix::process::Signal::TERM {
                    // The pending prompt is answered (cancelled) before dsh exits.
                    let answer = acp.response(&json!(3));
                    assert_eq!(
                        answer.as_ref().map(|a| a["result"]["stopReason"].clone()),
                        Some(json!("cancelled")),
                        "{user:?} {mode}: {answer:?}"
                    );
                }
                let status = exit_of(&mut acp.child);
                wait_until(&format!("{user:?} {mode} {signal:?}: no survivor"), || {
                    pids_with(&marker).is_empty()
                });
                if signal == rustix::process::Signal::TERM {
                    assert_eq!(status.code(), Some(143), "{user:?} {mode}");
                    let tail = session_tail(&case);
                    assert_eq!(
                        tail.last().map(String::as_str),
                        Some("turn/end"),
                        "{tail:?}"
                    );
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acp_answers_a_bad_line_with_a_parse_error_and_keeps_serving() {
    let case = Case::new(User::Current);
    let server = serve(&scenario("hello", &[])).await;
    let mut acp = Acp::start(&case, &server.url(), "workspace-write");
    let session = acp.session(&case.ws());
    // One invalid UTF-8 byte inside an otherwise valid request.
    acp.write(
        b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"session/list\",\"params\":{\"x\":\"\xff\"}}\n",
    );
    let refused = acp
        .response(&Value::Null)
        .expect("an answer to the bad line");
    assert_eq!(refused["error"]["code"], json!(-32700), "{refused}");
    // Still serving: the session answers a prompt.
    acp.prompt(10, &session, "hello");
    let answer = acp.response(&json!(10)).expect("the prompt is answered");
    assert_eq!(
        answer["result"]["stopReason"],
        json!("end_turn"),
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acp_refuses_an_oversized_line_without_buffering_it() {
    let case = Case::new(User::Current);
    let server = serve(&scenario("hello", &[])).await;
    let mut acp = Acp::start(&case, &server.url(), "workspace-write");
    let session = acp.session(&case.ws());
    let mut huge =
        b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"session/prompt\",\"params\":{\"text\":\""
            .to_vec();
    huge.resize(huge.len() + 65 * 1024 * 1024, b'a');
    huge.extend_from_slice(b"\"}}\n");
    acp.write(&huge);
    let refused = acp
        .response(&Value::Null)
        .expect("an answer to the oversized line");
    assert_eq!(refused["error"]["code"], json!(-32700), "{refused}");
    assert!(
        refused["error"]["data"]["reason"]
            .as_str()
            .unwrap()
            .contains("limit"),
        "{refused}"
    );
    acp.prompt(8, &session, "hello");
    let answer = acp.response(&json!(8)).expect("still serving");
    assert_eq!(
        answer["result"]["stopReason"],
        json!("end_turn"),
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_closed_right_after_a_prompt_still_gets_its_answer() {
    for run in 0..20 {
        let case = Case::new(User::Current);
        let server = serve(&scenario("hello", &[])).await;
        let mut acp = Acp::start(&case, &server.url(), "workspace-write");
        let session = acp.session(&case.ws());
        acp.prompt(5, &session, "hello");
        acp.close_stdin();
        let answer = acp.response(&json!(5));
        let stop = answer.as_ref().map(|a| a["result"]["stopReason"].clone());
        assert!(
            stop == Some(json!("end_turn")) || stop == Some(json!("cancelled")),
            "run {run}: the pending prompt was not answered: {answer:?}"
        );
        let status = exit_of(&mut acp.child);
        assert!(status.success(), "run {run}: {status:?}");
    }
}

fn entry(value: Value) -> dsh_testkit::scenario::ModelEntry {
    serde_json::from_value(value).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_totals_saturate_instead_of_wrapping() {
    let case = Case::new(User::Current);
    let task = "count";
    let huge = u64::MAX - 5;
    let mut scenario = scenario(task, &[bash("echo one")]);
    for (index, model) in scenario.model.iter_mut().enumerate() {
        model.usage = Some(json!({"prompt_tokens": huge, "completion_tokens": 10 + index}));
    }
    let server = serve(&scenario).await;
    let out = tokio::task::spawn_blocking({
        let mut command = case.command(&["exec", "--output", "stream-json", task], &server.url());
        move || command.output().unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(result["usage"]["inputTokens"], json!(u64::MAX), "{result}");
    assert_eq!(result["usage"]["outputTokens"], json!(21), "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_max_tokens_end_prints_the_code_line() {
    let case = Case::new(User::Current);
    let task = "write a lot";
    let spec = serde_json::from_value(json!({
        "suite": "headless", "name": "max-tokens",
        "sessions": [{"session": 0, "first_user_text": task}]
    }))
    .unwrap();
    let scenario = dsh_testkit::scenario::Scenario::from_parts(
        spec,
        vec![entry(
            json!({"session": 0, "route": "main", "index": 0, "kind": "response",
            "content": "It was a dark and", "finish_reason": "length"}),
        )],
    );
    let server = serve(&scenario).await;
    let out = tokio::task::spawn_blocking({
        let mut command = case.command(&["exec", task], &server.url());
        move || command.output().unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.lines().any(|l| l.starts_with("dsh: MAX_TOKENS: ")),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_spills_into_the_session_folder_and_leaves_no_temp_folder() {
    use std::os::unix::fs::PermissionsExt;
    let case = Case::new(User::Current);
    let temp = tempfile::tempdir().unwrap();
    let task = "spill";
    let server = serve(&scenario(
        task,
        &[
            bash("echo SPILL-MARKER; head -c 200000 /dev/zero | tr '\\0' 'x'; echo"),
            bash("cat \"$(dirname \"$DSH_SESSION_JSONL\")\"/spill/*bash-stdout* | grep -c SPILL-MARKER"),
        ],
    ))
    .await;
    let out = tokio::task::spawn_blocking({
        let mut command = case.command(&["exec", "--output", "stream-json", task], &server.url());
        command
            .env("DSH_PERMISSION_MODE", "workspace-write")
            .env("TMPDIR", temp.path());
        move || command.output().unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = super::support::tool_results(&out);
    let line = results[0]
        .lines()
        .find(|l| l.starts_with("[output truncated; full output: "))
        .unwrap_or_else(|| panic!("{}", &results[0][results[0].len().saturating_sub(300)..]));
    let path = line
        .trim_start_matches("[output truncated; full output: ")
        .trim_end_matches(']');
    let sessions = case.home_path().join("sessions");
    assert!(std::path::Path::new(path).starts_with(&sessions), "{path}");
    assert!(path.contains("/spill/"), "{path}");
    let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // The confined command can read its own session's spill folder (dsh's home is hidden).
    assert_eq!(results[1].trim(), "1", "{results:?}");
    // No per-process spill folder is left behind.
    let left: Vec<_> = std::fs::read_dir(temp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        left.iter()
            .all(|name| !name.to_string_lossy().starts_with("dsh-spill-")),
        "{left:?}"
    );
}

fn one_call_scenario(
    task: &str,
    arguments: &str,
    deltas: usize,
) -> dsh_testkit::scenario::Scenario {
    one_tool_scenario(task, "bash", arguments, deltas)
}

fn one_tool_scenario(
    task: &str,
    tool: &str,
    arguments: &str,
    deltas: usize,
) -> dsh_testkit::scenario::Scenario {
    let spec = serde_json::from_value(json!({
        "suite": "headless", "name": "caps",
        "sessions": [{"session": 0, "first_user_text": task}]
    }))
    .unwrap();
    let step = arguments.len().div_ceil(deltas);
    let mut stream = Vec::new();
    let mut start = 0;
    while start < arguments.len() {
        let end = (start + step).min(arguments.len());
        let mut delta = json!({"tool_call": 0, "arguments": &arguments[start..end]});
        if start == 0 {
            delta["id"] = json!("call_big");
            delta["name"] = json!(tool);
        }
        stream.push(delta);
        start = end;
    }
    dsh_testkit::scenario::Scenario::from_parts(
        spec,
        vec![
            entry(
                json!({"session": 0, "route": "main", "index": 0, "kind": "response",
                "tool_calls": [{"id": "call_big", "name": tool, "arguments": arguments}],
                "finish_reason": "tool_calls", "stream": stream}),
            ),
            entry(
                json!({"session": 0, "route": "main", "index": 1, "kind": "response",
                "content": "done", "finish_reason": "stop"}),
            ),
        ],
    )
}

pub(super) fn log_bytes(case: &Case) -> u64 {
    let mut logs = Vec::new();
    collect_logs(&case.home_path().join("sessions"), &mut logs);
    logs.iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_argument_is_not_logged_once_per_delta() {
    let case = Case::new(User::Current);
    let content = "x".repeat(2 * 1024 * 1024);
    let arguments = json!({"file_path": "big.txt", "content": content}).to_string();
    // 100-byte deltas: each logged chunk event costs its envelope on top.
    let scenario = one_tool_scenario("big", "write", &arguments, arguments.len() / 100);
    let server = serve(&scenario).await;
    let out = tokio::task::spawn_blocking({
        let mut command = case.command(&["exec", "--output", "stream-json", "big"], &server.url());
        command.env("DSH_PERMISSION_MODE", "danger-full-access");
        move || command.output().unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = super::support::tool_results(&out);
    assert!(
        results[0].contains("big.txt"),
        "{}",
        &results[0][..200.min(results[0].len())]
    );
    assert_eq!(
        std::fs::metadata(case.ws().join("big.txt")).unwrap().len(),
        2 * 1024 * 1024
    );
    // The argument is in the call's blockEnd, the assistant message and tool/call: about
    // three times its size, not a chunk event per 100-byte delta on top.
    let size = log_bytes(&case);
    assert!(
        size < 4 * arguments.len() as u64,
        "log of {size} bytes for a {}-byte argument",
        arguments.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_argument_is_refused_with_a_clear_error() {
    let case = Case::new(User::Current);
    // The refused call stays in the history: the next request is about 17 MiB, which would
    // make compaction ask the (scripted) model for a summary first. Not what this tests.
    case.write_home(
        "config.toml",
        "[plugins.session-title]\nenabled = false\n\n[plugins.compaction]\nenabled = false\n",
    );
    let command = format!("echo {}", "x".repeat(17 * 1024 * 1024));
    let arguments = json!({"command": command, "description": "huge"}).to_string();
    let scenario = one_call_scenario("huge", &arguments, 17);
    let server = serve(&scenario).await;
    let out = tokio::task::spawn_blocking({
        let mut command = case.command(&["exec", "--output", "stream-json", "huge"], &server.url());
        command.env("DSH_PERMISSION_MODE", "danger-full-access");
        move || command.output().unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = super::support::tool_results(&out);
    assert!(
        results[0].contains("over the 16777216-byte limit of one tool call"),
        "{}",
        results[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runaway_answer_is_stopped_with_a_clear_error() {
    let case = Case::new(User::Current);
    let task = "talk forever";
    let spec = serde_json::from_value(json!({
        "suite": "headless", "name": "runaway",
        "sessions": [{"session": 0, "first_user_text": task}]
    }))
    .unwrap();
    let text = "y".repeat(4 * 1024 * 1024);
    let stream: Vec<Value> = (0..10).map(|_| json!({"content": &text})).collect();
    let scenario = dsh_testkit::scenario::Scenario::from_parts(
        spec,
        vec![entry(
            json!({"session": 0, "route": "main", "index": 0, "kind": "response",
            "content": text.repeat(10), "finish_reason": "stop", "stream": stream}),
        )],
    );
    let server = serve(&scenario).await;
    let out = tokio::task::spawn_blocking({
        let mut command = case.command(&["exec", task], &server.url());
        move || command.output().unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("dsh: OUTPUT_TOO_LARGE: ")),
        "{stderr}"
    );
    assert!(log_bytes(&case) < 40 * 1024 * 1024);
}
