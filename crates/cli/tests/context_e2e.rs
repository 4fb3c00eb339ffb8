//! Context capabilities through the real `dsh` binary against a local model server
//! (`dsh_testkit::long_session`, which answers whatever the harness asks): the context plugins
//! as mounted by the host (`@file` guidance, `@session` snapshots, time readings), and
//! compaction over a long `dsh exec` run followed by resume and fork after the last checkpoint
//! (context-spec §8.11; checklist E66 end to end, see `docs/checklists.md`).
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
// Helpers outside `#[test]` functions panic on broken fixtures by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::path::PathBuf;
use std::process::Output;

use dsh_testkit::long_session::LongSessionPlan;
use dsh_testkit::long_session::LongSessionServer;
use serde_json::Value;

const PREAMBLE: &str = "This is an automatically generated checkpoint";

async fn server(steps: usize, result_bytes: usize, window: u64) -> LongSessionServer {
    LongSessionServer::start(
        LongSessionPlan {
            steps,
            result_bytes,
            context_window: window,
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

fn write_config(home: &Path, window: u64, extra: &str) {
    let text = format!(
        "[plugins.sandbox]\nmode = \"danger-full-access\"\n\n[plugins.session-title]\nenabled = false\n\n[[model.catalog]]\nid = \"deepseek-v4-flash\"\ncontext_window = {window}\n\n{extra}"
    );
    std::fs::write(home.join("config.toml"), text).unwrap();
}

/// `dsh exec --output stream-json <args…>` in `workspace`, off the test's thread.
async fn exec(args: Vec<String>, workspace: PathBuf, home: PathBuf, url: String) -> Output {
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_dsh"))
            .arg("exec")
            .args(["--output", "stream-json"])
            .args(args)
            .current_dir(workspace)
            .env("HOME", &home)
            .env("DSH_HOME", &home)
            .env("DEEPSEEK_API_KEY", "replay-key")
            .env("DEEPSEEK_BASE_URL", url)
            .env_remove("DSH_LOG")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// The stream-json `result` line.
fn result_line(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["type"] == "result")
        .unwrap_or_else(|| {
            panic!(
                "no result line; stdout:\n{stdout}\nstderr:\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        })
}

/// The stored events of `session_id` (the header line skipped).
fn session_events(home: &Path, session_id: &str) -> Vec<Value> {
    fn walk(dir: &Path, id: &str) -> Option<Vec<Value>> {
        for entry in std::fs::read_dir(dir).ok()? {
            let path = entry.ok()?.path();
            if path.is_dir() {
                if let Some(found) = walk(&path, id) {
                    return Some(found);
                }
            } else if path.file_name().is_some_and(|n| n == "session.jsonl") {
                let text = std::fs::read_to_string(&path).ok()?;
                let lines: Vec<Value> = text
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect();
                if lines.first().is_some_and(|h| h["id"] == id) {
                    return Some(lines[1..].to_vec());
                }
            }
        }
        None
    }
    walk(&home.join("sessions"), session_id)
        .unwrap_or_else(|| panic!("no stored log for session {session_id}"))
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

fn text_of(event: &Value) -> String {
    event["data"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .collect()
}

fn plugin_messages<'a>(events: &'a [Value], plugin: &str) -> Vec<&'a Value> {
    of_kind(events, "user/message")
        .into_iter()
        .filter(|e| e["data"]["source"]["plugin"] == plugin)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_guidance_session_snapshots_and_time_readings_reach_the_log() {
    let server = server(0, 0, 1_000_000).await;
    let (home, workspace) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::create_dir(workspace.path().join("src")).unwrap();
    std::fs::write(workspace.path().join("src/main.rs"), "fn main() {}\n").unwrap();
    write_config(
        home.path(),
        1_000_000,
        "[plugins.session-references]\nenabled = true\n\n[plugins.time-context]\nenabled = true\ntime_zone = \"UTC\"\n",
    );
    let run = |prompt: String| {
        exec(
            vec![prompt],
            workspace.path().to_path_buf(),
            home.path().to_path_buf(),
            server.url(),
        )
    };

    let first = run("Remember the word heliotrope.".to_owned()).await;
    assert!(first.status.success(), "{first:?}");
    let first_id = result_line(&first)["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let events = session_events(home.path(), &first_id);
    let header = of_kind(&events, "request/header")[0];
    let system = header["data"]["header"]["system"]
        .as_str()
        .unwrap_or_default();
    assert!(
        system.contains(dsh_references::FILE_REFERENCE_GUIDANCE),
        "the read guidance is in the system prompt: {system}"
    );
    let time = plugin_messages(&events, "time-context");
    assert_eq!(time.len(), 1, "one reading for the one step");
    let reading = text_of(time[0]);
    assert!(
        reading.starts_with("Time sampled while preparing turn 1, step 1: ")
            && reading.contains("[UTC]\nBrowser time zone for this request: unavailable."),
        "{reading}"
    );

    let mention = dsh_references::format_session_mention("the first one", &first_id);
    let second = run(format!("Open @src/main.rs and see {mention}.")).await;
    assert!(second.status.success(), "{second:?}");
    let second_id = result_line(&second)["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let events = session_events(home.path(), &second_id);
    let users = of_kind(&events, "user/message");
    let direct = users
        .iter()
        .find(|e| e["data"]["source"]["kind"] == "user")
        .unwrap();
    assert_eq!(
        text_of(direct),
        "Open @src/main.rs and see @the first one.",
        "the @file mention stays plain text; the session mention becomes its label"
    );
    let snapshot = users
        .iter()
        .position(|e| e["data"]["source"]["kind"] == "session-reference")
        .expect("a snapshot message");
    let direct_at = users
        .iter()
        .position(|e| e["data"]["source"]["kind"] == "user")
        .unwrap();
    assert_eq!(snapshot, direct_at + 1, "the snapshot follows the prompt");
    let text = text_of(users[snapshot]);
    assert!(text.starts_with("## Referenced sessions\n"), "{text}");
    assert!(text.contains("Remember the word heliotrope."), "{text}");
    assert!(
        text.contains(&format!("\"sessionId\":\"{first_id}\"")),
        "{text}"
    );
    assert!(
        of_kind(&events, "tool/call").is_empty(),
        "nothing was read on the model's behalf"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_exec_compacts_then_resumes_and_forks_after_the_last_checkpoint() {
    const WINDOW: u64 = 32_000;
    let server = server(30, 20_000, WINDOW).await;
    let (home, workspace) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_config(home.path(), WINDOW, "");
    let run = |args: Vec<&str>| {
        exec(
            args.into_iter().map(str::to_owned).collect(),
            workspace.path().to_path_buf(),
            home.path().to_path_buf(),
            server.url(),
        )
    };

    let long = run(vec![dsh_testkit::long_session::LONG_SESSION_PROMPT]).await;
    assert!(long.status.success(), "{long:?}");
    let result = result_line(&long);
    assert_eq!(result["output"], "DONE");
    let id = result["sessionId"].as_str().unwrap().to_owned();
    let usage = &result["usage"];
    assert_eq!(usage["contextWindow"], WINDOW, "{usage}");
    assert!(
        usage["contextTokens"].as_u64().unwrap() < WINDOW,
        "the context fill stays inside the window: {usage}"
    );
    let events = session_events(home.path(), &id);
    let summaries = of_kind(&events, "compaction/summary");
    assert!(
        summaries.len() >= 2,
        "compactions happened: {}",
        summaries.len()
    );
    assert!(
        server.served().iter().all(|s| s.kind != "overflow"),
        "pressure compaction always ran before the window was exceeded"
    );
    let served_before = server.served().len();

    let resumed = run(vec!["--resume", &id, "Anything left?"]).await;
    assert!(resumed.status.success(), "{resumed:?}");
    assert_eq!(result_line(&resumed)["output"], "DONE");
    let served = server.served();
    let request = served[served_before..]
        .iter()
        .find(|s| s.kind == "step")
        .unwrap();
    assert!(
        request.first_text.starts_with(PREAMBLE),
        "the resumed request starts with the checkpoint: {:?}",
        request.first_text
    );
    assert!(
        request.body_bytes < (WINDOW as usize) * 4,
        "the resumed request fits the window"
    );

    // Fork the stored session through the host (as `session/fork` and `--fork` do), then
    // continue the fork with the binary: it starts from the same checkpointed history.
    let fork_id = {
        let config = dsh_host::Config::empty(home.path().to_path_buf(), workspace.path().into());
        let host = dsh_host::Host::build(dsh_host::HostOptions::new(config)).unwrap();
        let fork = host.sessions().fork(&id).unwrap();
        let original = host.sessions().load(&id).unwrap();
        assert_eq!(
            fork.log().derive_messages(),
            original.log().derive_messages(),
            "the fork sees exactly the original's history"
        );
        let fork_id = fork.id().to_owned();
        host.shutdown();
        fork_id
    };
    assert_ne!(fork_id, id);
    let served_before = server.served().len();
    let forked = run(vec!["--resume", &fork_id, "Anything left in the fork?"]).await;
    assert!(forked.status.success(), "{forked:?}");
    let served = server.served();
    let request = served[served_before..]
        .iter()
        .find(|s| s.kind == "step")
        .unwrap();
    assert!(
        request.first_text.starts_with(PREAMBLE),
        "{:?}",
        request.first_text
    );
    let original = session_events(home.path(), &id);
    assert_eq!(
        of_kind(&original, "user/message")
            .iter()
            .filter(|e| text_of(e) == "Anything left in the fork?")
            .count(),
        0,
        "the original is untouched by the fork's turn"
    );
}
