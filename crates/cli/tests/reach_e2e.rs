//! Issue #17's capability plugins through the real `dsh` binary against the replay server:
//! a scripted model calls the tools, the log shows the exact results.
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

/// A scenario: one response per list of tool calls, then a final answer.
fn scenario(task: &str, steps: &[Vec<(&str, Value)>]) -> Scenario {
    let spec: ScenarioSpec = serde_json::from_value(json!({
        "suite": "checklist", "name": "reach",
        "sessions": [{"session": 0, "first_user_text": task}]
    }))
    .unwrap();
    let mut entries: Vec<Value> = Vec::new();
    for (index, calls) in steps.iter().enumerate() {
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| {
                json!({"id": format!("call_{index}_{i}"), "name": name, "arguments": args.to_string()})
            })
            .collect();
        entries.push(
            json!({"session": 0, "route": "main", "index": index, "kind": "response",
            "tool_calls": calls, "finish_reason": "tool_calls",
            "usage": {"prompt_tokens": 5, "completion_tokens": 6}}),
        );
    }
    entries.push(
        json!({"session": 0, "route": "main", "index": steps.len(), "kind": "response",
        "content": "Done.", "finish_reason": "stop",
        "usage": {"prompt_tokens": 7, "completion_tokens": 2}}),
    );
    let entries = entries
        .into_iter()
        .map(|e| serde_json::from_value::<ModelEntry>(e).unwrap())
        .collect();
    Scenario::from_parts(spec, entries)
}

fn session_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            session_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            out.push(path);
        }
    }
}

/// The `tool/result` texts of the only stored session, in order.
fn results(home: &Path) -> Vec<String> {
    let mut files = Vec::new();
    session_files(&home.join("sessions"), &mut files);
    assert_eq!(files.len(), 1, "{files:?}");
    results_of(&files[0])
}

fn results_of(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .skip(1)
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|e| e["type"] == "tool/result")
        .map(|e| {
            e["data"]["message"]["content"][0]["content"]
                .as_array()
                .unwrap_or_else(|| panic!("{e}"))
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<String>()
        })
        .collect()
}

/// Runs `dsh exec` with `config` as the user config against `scenario`.
async fn run(
    config: &str,
    task: &str,
    scenario: &Scenario,
) -> (tempfile::TempDir, tempfile::TempDir, std::process::Output) {
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = run_in(workspace.path(), home.path(), config, task, scenario).await;
    (workspace, home, out)
}

async fn run_in(
    workspace: &Path,
    home: &Path,
    config: &str,
    task: &str,
    scenario: &Scenario,
) -> std::process::Output {
    std::fs::write(
        home.join("config.toml"),
        format!("[plugins.session-title]\nenabled = false\n\n[plugins.sandbox]\nmode = \"danger-full-access\"\n\n{config}"),
    )
    .unwrap();
    let server = ReplayServer::start(scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap();
    let out = dsh(workspace, home)
        .args(["exec", task])
        .env("DEEPSEEK_BASE_URL", server.url())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn dsh(workspace: &Path, home: &Path) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_dsh"));
    command
        .current_dir(workspace)
        .env("HOME", home)
        .env("DSH_HOME", home)
        .env("DEEPSEEK_API_KEY", "replay-key")
        .env_remove("DSH_LOG");
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_tools_and_persistent_bash_run_in_the_session() {
    let task = "use a terminal";
    let scenario = scenario(
        task,
        &[
            vec![("terminal_open", json!({"type": "shell"}))],
            vec![(
                "terminal_send",
                json!({"sessionId": "pty-1", "text": "echo from-pty"}),
            )],
            vec![("bash", json!({"command": "cd /tmp"}))],
            vec![("bash", json!({"command": "pwd"}))],
            vec![("terminal_close", json!({"sessionId": "pty-1"}))],
        ],
    );
    let config =
        "[plugins.terminal]\nenabled = true\n\n[plugins.bash-persistent]\nenabled = true\n";
    let (_workspace, home, _out) = run(config, task, &scenario).await;
    let results = results(home.path());
    assert_eq!(results.len(), 5, "{results:?}");
    assert!(
        results[0].starts_with("started terminal session pty-1 [type: shell]\n"),
        "{results:?}"
    );
    assert!(results[1].contains("\nfrom-pty\n"), "{results:?}");
    assert!(
        results[1].ends_with("\n[wait: stdin_read]\n[session: running]"),
        "{results:?}"
    );
    assert_eq!(results[2], "");
    assert_eq!(results[3], "/tmp");
    assert_eq!(results[4], "closed terminal session pty-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_session_finds_an_earlier_one_and_exports_it() {
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let config = "[plugins.session-query]\nenabled = true\n";
    let first = scenario("remember the zanzibar migration plan", &[]);
    run_in(
        workspace.path(),
        home.path(),
        config,
        "remember the zanzibar migration plan",
        &first,
    )
    .await;
    let listed = dsh(workspace.path(), home.path())
        .args(["sessions", "list"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    // A header line, then one row per session; the id is the first column.
    let first_id = listed
        .lines()
        .nth(1)
        .and_then(|row| row.split_whitespace().next())
        .unwrap()
        .to_owned();

    let task = "what did we plan";
    let second = scenario(
        task,
        &[vec![(
            "session_search",
            json!({"query": "zanzibar migration"}),
        )]],
    );
    run_in(workspace.path(), home.path(), config, task, &second).await;
    let mut files = Vec::new();
    session_files(&home.path().join("sessions"), &mut files);
    let later = files
        .iter()
        .find(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .contains("what did we plan")
        })
        .unwrap();
    let results = results_of(later);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].starts_with(&format!(
            "Session search results (1):\n\n1. Session {first_id} — "
        )),
        "{results:?}"
    );
    assert!(
        results[0].contains("Snippet: remember the zanzibar migration plan"),
        "{results:?}"
    );

    let out = dsh(workspace.path(), home.path())
        .args(["sessions", "export", &first_id, "-o", "out.zip"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let unzip = std::process::Command::new("unzip")
        .arg("-p")
        .arg(workspace.path().join("out.zip"))
        .arg(format!("{first_id}.jsonl"))
        .output()
        .unwrap();
    let original = std::fs::read(files.iter().find(|f| **f != *later).unwrap()).unwrap();
    assert_eq!(unzip.stdout, original);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lsp_tool_asks_a_real_language_server_in_the_session_workspace() {
    let pyright = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/lsp-servers/node_modules/.bin/pyright-langserver");
    if !pyright.exists() {
        eprintln!("SKIPPED: run `npm ci --prefix tests/lsp-servers`");
        return;
    }
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        workspace.path().join("app.py"),
        "def area(w, h):\n    return w * h\n\nprint(area(1, 2))\n",
    )
    .unwrap();
    let config = format!(
        "[plugins.lsp]\nenabled = true\n\n[plugins.lsp.servers.py]\ncommand = {:?}\nargs = [\"--stdio\"]\nextension_to_language = {{ \".py\" = \"python\" }}\n",
        pyright.display().to_string()
    );
    let task = "where is area defined";
    let scenario = scenario(
        task,
        &[
            vec![(
                "lsp",
                json!({"operation": "goToDefinition", "file_path": "app.py", "line": 4, "character": 7}),
            )],
            vec![(
                "lsp",
                json!({"operation": "hover", "file_path": "notes.md", "line": 1, "character": 1}),
            )],
        ],
    );
    run_in(workspace.path(), home.path(), &config, task, &scenario).await;
    let results = results(home.path());
    assert_eq!(
        results,
        vec![
            "app.py:1:5".to_owned(),
            "Error: no LSP provider handles \"notes.md\"".to_owned()
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_search_logs_the_deepseek_side_request_in_the_session_without_the_key() {
    let app = axum::Router::new().route(
        "/messages",
        axum::routing::post(|| async {
            axum::Json(json!({"content": [
                {"type": "web_search_tool_result", "tool_use_id": "s", "content": [
                    {"type": "web_search_result", "url": "https://found.example/page", "title": "Found"}]}
            ]}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let config = format!(
        "[plugins.web-search.deepseek]\napi_key = \"search-secret-key\"\nbase_url = {base:?}\n"
    );
    let task = "search the web";
    let scenario = scenario(
        task,
        &[vec![("web_search", json!({"queries": ["dsh harness"]}))]],
    );
    run_in(workspace.path(), home.path(), &config, task, &scenario).await;
    assert_eq!(
        results(home.path()),
        vec!["Sources:\n- [Found](https://found.example/page)\n\nCite the relevant URLs above as markdown links in your answer.".to_owned()]
    );
    let mut files = Vec::new();
    session_files(&home.path().join("sessions"), &mut files);
    let log = std::fs::read_to_string(&files[0]).unwrap();
    let event = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "web/deepseek-search-llm-request")
        .expect("the side request is logged");
    assert_eq!(
        event["data"]["body"]["messages"][0]["content"][0]["text"],
        "Perform a web search for the query: dsh harness"
    );
    assert!(
        !log.contains("search-secret-key"),
        "the key never reaches the log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedule_tools_record_reminders_in_the_session_log() {
    let task = "remind me";
    let scenario = scenario(
        task,
        &[
            vec![(
                "schedule_create",
                json!({"prompt": "check the build", "after_seconds": 3600}),
            )],
            vec![("schedule_delete", json!({"id": "schedule-9"}))],
        ],
    );
    let (_workspace, home, _out) =
        run("[plugins.schedule]\nenabled = true\n", task, &scenario).await;
    let results = results(home.path());
    let view: Value = serde_json::from_str(&results[0]).unwrap();
    assert_eq!(view["id"], "schedule-1");
    assert_eq!(view["state"], "scheduled");
    assert_eq!(
        results[1],
        r#"{"id":"schedule-9","deleted":false,"code":"schedule_not_found"}"#
    );
}
