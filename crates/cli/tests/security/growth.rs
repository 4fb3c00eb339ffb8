//! Growth a model drives (issue #27 §4): thousands of tool calls in one response.

use std::time::Duration;
use std::time::Instant;

use dsh_testkit::scenario::ModelEntry;
use dsh_testkit::scenario::Scenario;
use dsh_testkit::scenario::ScenarioSpec;
use serde_json::Value;
use serde_json::json;

use super::support::Case;
use super::support::User;
use super::support::serve;
use super::support::tool_results;

/// A scenario whose model asks for `count` `glob` calls in one response, then answers `done`.
fn many_calls(task: &str, count: usize) -> Scenario {
    let spec: ScenarioSpec = serde_json::from_value(json!({
        "suite": "headless",
        "name": "security",
        "sessions": [{"session": 0, "first_user_text": task}]
    }))
    .unwrap();
    let arguments = json!({"pattern": "*.txt"}).to_string();
    let calls: Vec<Value> = (0..count)
        .map(|i| json!({"id": format!("call_{i}"), "name": "glob", "arguments": arguments}))
        .collect();
    let stream: Vec<Value> = (0..count)
        .map(|i| {
            json!({"tool_call": i, "id": format!("call_{i}"), "name": "glob", "arguments": arguments})
        })
        .collect();
    let entries: Vec<ModelEntry> = vec![
        serde_json::from_value(json!({
            "session": 0, "route": "main", "index": 0, "kind": "response",
            "tool_calls": calls, "finish_reason": "tool_calls", "stream": stream
        }))
        .unwrap(),
        serde_json::from_value(json!({
            "session": 0, "route": "main", "index": 1, "kind": "response",
            "content": "done", "finish_reason": "stop"
        }))
        .unwrap(),
    ];
    Scenario::from_parts(spec, entries)
}

async fn run(case: &Case, count: usize) -> std::process::Output {
    let server = serve(&many_calls("probe", count)).await;
    let mut command = case.command(&["exec", "--output", "stream-json", "probe"], &server.url());
    command.env("DSH_PERMISSION_MODE", "read-only");
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

fn assert_capped(out: &std::process::Output, count: usize, cap: usize, who: &str) {
    let results = tool_results(out);
    assert_eq!(
        results.len(),
        count,
        "{who}: every call gets a result\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let refusal =
        format!("this response made {count} tool calls and at most {cap} run per response");
    for (index, result) in results.iter().enumerate() {
        assert_eq!(
            result.contains(&refusal),
            index >= cap,
            "{who}: call {index}: {result}"
        );
    }
    assert_eq!(out.status.code(), Some(0), "{who}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_past_the_per_response_cap_are_refused_not_run() {
    for user in User::all() {
        // The default cap.
        let case = Case::new(user);
        case.write_ws("a.txt", "a");
        let out = run(&case, 300).await;
        assert_capped(&out, 300, 128, &format!("{user:?} default"));
        // A configured one.
        let case = Case::new(user);
        case.write_home(
            "config.toml",
            "[plugins.session-title]\nenabled = false\n\n[plugins.compaction]\nenabled = false\n\n[tools]\nmax_calls_per_response = 3\n",
        );
        let out = run(&case, 10).await;
        assert_capped(&out, 10, 3, &format!("{user:?} configured"));
    }
}

/// A model server that answers every request with an event stream of keepalive comments only,
/// one every 100 ms, for at most a minute.
async fn keepalive_server() -> String {
    use tokio::io::AsyncReadExt;
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut read, mut write) = socket.into_split();
                tokio::spawn(async move {
                    let mut sink = vec![0u8; 64 * 1024];
                    while read.read(&mut sink).await.is_ok_and(|n| n > 0) {}
                });
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                if write.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let comment = ": keepalive\n\n";
                let chunk = format!("{:x}\r\n{comment}\r\n", comment.len());
                for _ in 0..600 {
                    if write.write_all(chunk.as_bytes()).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            });
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalives_do_not_hold_a_model_attempt_past_its_deadline() {
    let case = Case::new(User::Current);
    case.write_home(
        "config.toml",
        "[model]\nattempt_timeout_secs = 2\n\n[plugins.session-title]\nenabled = false\n\n[plugins.compaction]\nenabled = false\n",
    );
    let url = keepalive_server().await;
    let mut command = case.command(&["exec", "say hello"], &url);
    let started = Instant::now();
    let out = tokio::task::spawn_blocking(move || {
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let begun = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if begun.elapsed() > Duration::from_secs(40) {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(took < Duration::from_secs(30), "took {took:?}: {stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("dsh: MODEL_ATTEMPT_TIMEOUT: ")),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nul_output_is_stored_as_binary_not_as_an_escaped_flood() {
    for user in User::all() {
        let case = Case::new(user);
        // Each call prints 60,000 NULs (under the 64,000-byte tail): shown as text, each NUL
        // would be six bytes of JSON (`\u0000`) in the result and the log.
        let calls: Vec<_> = (0..20)
            .map(|_| super::support::bash("head -c 60000 /dev/zero"))
            .collect();
        let (out, results) = super::support::exec(&case, "read-only", &calls).await;
        assert_eq!(
            results.len(),
            20,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for result in &results {
            assert!(
                result.contains("binary output (60000 bytes) not shown"),
                "{user:?}: {result}"
            );
        }
        let bytes = super::faults::log_bytes(&case);
        assert!(bytes < 512 * 1024, "{user:?}: the log holds {bytes} bytes");
    }
}

/// Appends `count` lines of about 1 MiB each to `log`, shaped like stored events.
fn grow_log(log: &std::path::Path, count: u64) {
    use std::io::Write;
    let text = "y".repeat(1024 * 1024);
    let mut file = std::fs::OpenOptions::new().append(true).open(log).unwrap();
    let start = std::fs::read_to_string(log).unwrap().lines().count() as u64;
    for n in 0..count {
        let line = json!({"type": "assistant/chunk", "seq": start + n, "data": {"text": text}});
        writeln!(file, "{line}").unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_sessions_does_not_read_a_huge_log_into_memory() {
    for user in User::all() {
        let case = Case::new(user);
        let (out, _) = super::support::exec(&case, "read-only", &[]).await;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut logs = Vec::new();
        let mut dirs = vec![case.home_path().join("sessions")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "jsonl") {
                    logs.push(path);
                }
            }
        }
        assert_eq!(logs.len(), 1);
        // A 384 MiB log; dsh may hold at most 192 MiB of data (heap and anonymous maps).
        grow_log(&logs[0], 384);
        let limit = 192 * 1024 * 1024;
        let mut command = case.command_under(
            &["prlimit", &format!("--data={limit}")],
            &["sessions", "list"],
            "http://127.0.0.1:9",
        );
        let out = tokio::task::spawn_blocking(move || command.output().unwrap())
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{user:?}: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        let row = stdout.lines().nth(1).unwrap_or_default();
        assert!(row.contains(" 1 "), "{user:?}: one turn listed: {stdout}");
        std::fs::remove_file(&logs[0]).unwrap();
    }
}
