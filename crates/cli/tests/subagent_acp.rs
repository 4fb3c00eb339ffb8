//! The `acp` subagent provider driving `dsh acp` itself as the out-of-process child, against the
//! replay server: a completed run, and a cancelled one that leaves no process behind.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHandle;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use dsh_subagent::StartRequest;
use dsh_subagent::StopReason;
use dsh_subagent::SubagentProvider;
use dsh_subagent_remote::AcpConfig;
use dsh_subagent_remote::AcpProvider;
use dsh_testkit::replay::ReplayServer;
use dsh_testkit::scenario::ModelEntry;
use dsh_testkit::scenario::Scenario;
use dsh_testkit::scenario::ScenarioSpec;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn scenario(task: &str, entry: serde_json::Value) -> Scenario {
    let spec: ScenarioSpec = serde_json::from_value(json!({
        "suite": "acp",
        "name": "acp-child",
        "sessions": [{"session": 0, "first_user_text": task}]
    }))
    .unwrap();
    let mut entry = entry;
    entry["session"] = json!(0);
    entry["route"] = json!("main");
    entry["index"] = json!(0);
    Scenario::from_parts(
        spec,
        vec![serde_json::from_value::<ModelEntry>(entry).unwrap()],
    )
}

fn parent(cwd: &Path) -> AgentHandle {
    let root = Scope::root();
    let tools =
        dsh_tools::ToolRegistry::install(&root, dsh_tools::RegistryConfig::default()).unwrap();
    let log = SessionLog::in_memory(SessionHeader::new(
        "parent",
        Some(cwd.to_string_lossy().into_owned()),
    ));
    Agent::create(AgentConfig {
        id: "parent".into(),
        cwd: None,
        provider: "deepseek".into(),
        model: "deepseek-v4-flash".into(),
        max_tokens: None,
        adapter: dsh_agent::scripted::ScriptedAdapter::new("deepseek"),
        tools,
        scope: root,
        log,
        prompt: dsh_agent::PromptConfig::default(),
        max_parallel_tool_calls: 4,
    })
    .unwrap()
}

fn provider(home: &Path, url: &str) -> Arc<AcpProvider> {
    std::fs::write(
        home.join("config.toml"),
        "[plugins.session-title]\nenabled = false\n",
    )
    .unwrap();
    let mut config = AcpConfig::new(env!("CARGO_BIN_EXE_dsh"));
    config.args = vec!["acp".into()];
    config.env = BTreeMap::from([
        ("DSH_HOME".to_owned(), home.to_string_lossy().into_owned()),
        ("DEEPSEEK_BASE_URL".to_owned(), url.to_owned()),
        ("DEEPSEEK_API_KEY".to_owned(), "replay-key".to_owned()),
    ]);
    config.dispose_eof_grace_ms = 2000;
    config.dispose_grace_ms = 1000;
    AcpProvider::new(config).unwrap()
}

/// Live (non-zombie) processes whose environment names `home` as `DSH_HOME`.
fn processes_of(home: &Path) -> Vec<u32> {
    let needle = format!("DSH_HOME={}", home.display());
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if !zombie && environ.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_acp_provider_runs_dsh_acp_as_a_child() {
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let task = "Reply with ACP_CHILD_OK.";
    let scenario = scenario(
        task,
        json!({"kind": "response", "content": "ACP_CHILD_OK", "finish_reason": "stop",
               "stream": [{"content": "ACP_CHILD_OK"}]}),
    );
    let server = ReplayServer::start(&scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap();
    let provider = provider(home.path(), &server.url());
    // Product providers advertise nothing (checklist 81).
    assert_eq!(provider.capabilities(), dsh_subagent::Capabilities::NONE);
    assert!(!provider.inherits_parent_context());
    let parent = parent(workspace.path());
    let run = provider
        .start(StartRequest::new(
            parent.clone(),
            vec![ContentBlock::text(task)],
            CancellationToken::new(),
        ))
        .await
        .unwrap();
    assert!(run.local_agent.is_none());
    let result = tokio::time::timeout(Duration::from_secs(20), run.result())
        .await
        .unwrap()
        .unwrap();
    run.dispose().await.unwrap();
    assert_eq!(result.stop_reason, StopReason::Completed);
    assert_eq!(result.output, vec![ContentBlock::text("ACP_CHILD_OK")]);
    assert!(server.unconsumed().is_empty());
    assert!(
        processes_of(home.path()).is_empty(),
        "no child process is left"
    );
    // The child's own session lives in the child's home, not as a local subagent session.
    let store = dsh_session::JsonlStore::new(home.path());
    let sessions = store.list().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].parent_session, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_an_acp_child_settles_aborted_and_reaps_it() {
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let task = "Think for a long time.";
    let scenario = scenario(
        task,
        json!({"kind": "hang", "ready_file": "hanging", "stream": [{"content": "partial"}]}),
    );
    let server = ReplayServer::start(
        &scenario,
        ([127, 0, 0, 1], 0).into(),
        Some(workspace.path().to_path_buf()),
    )
    .await
    .unwrap();
    let provider = provider(home.path(), &server.url());
    let parent = parent(workspace.path());
    let signal = CancellationToken::new();
    let run = provider
        .start(StartRequest::new(
            parent,
            vec![ContentBlock::text(task)],
            signal.clone(),
        ))
        .await
        .unwrap();
    let ready = workspace.path().join("hanging");
    for _ in 0..500 {
        if ready.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ready.exists(), "the child never reached the model");
    assert!(!processes_of(home.path()).is_empty());
    signal.cancel();
    let result = tokio::time::timeout(Duration::from_secs(20), run.result())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result.stop_reason, StopReason::Aborted);
    run.dispose().await.unwrap();
    assert!(
        processes_of(home.path()).is_empty(),
        "no child process is left"
    );
}

/// A minimal ACP client over a `dsh acp` child's stdio.
struct Client {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    next: u64,
}

impl Client {
    fn start(home: &Path, workspace: &Path, url: &str) -> Self {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_dsh"))
            .arg("acp")
            .current_dir(workspace)
            .env("DSH_HOME", home)
            .env("DEEPSEEK_BASE_URL", url)
            .env("DEEPSEEK_API_KEY", "replay-key")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        Self {
            child,
            stdin,
            lines: tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout)),
            next: 0,
        }
    }

    /// Sends a request and collects every line up to its response.
    async fn call(&mut self, method: &str, params: serde_json::Value) -> Vec<serde_json::Value> {
        use tokio::io::AsyncWriteExt;
        self.next += 1;
        let id = self.next;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let mut seen = Vec::new();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            let value: serde_json::Value = serde_json::from_str(&line).unwrap();
            let done = value.get("id") == Some(&json!(id)) && value.get("method").is_none();
            seen.push(value);
            if done {
                return seen;
            }
        }
    }

    async fn close(mut self) {
        drop(self.stdin);
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

fn tool_call_entry(
    index: usize,
    session: usize,
    id: &str,
    name: &str,
    args: serde_json::Value,
) -> serde_json::Value {
    let args = args.to_string();
    json!({"session": session, "route": "main", "index": index, "kind": "response",
           "tool_calls": [{"id": id, "name": name, "arguments": args}], "finish_reason": "tool_calls",
           "stream": [{"tool_call": 0, "id": id, "name": name, "arguments": args}]})
}

fn text_entry(index: usize, session: usize, text: &str) -> serde_json::Value {
    json!({"session": session, "route": "main", "index": index, "kind": "response",
           "content": text, "finish_reason": "stop", "stream": [{"content": text}]})
}

/// The card updates of call `id` among `lines`.
fn card_updates<'a>(lines: &'a [serde_json::Value], id: &str) -> Vec<&'a serde_json::Value> {
    lines
        .iter()
        .filter(|l| {
            l.pointer("/params/update/toolCallId")
                .and_then(|v| v.as_str())
                == Some(id)
        })
        .collect()
}

fn content_text(update: &serde_json::Value) -> String {
    update
        .pointer("/params/update/content")
        .and_then(|c| c.as_array())
        .into_iter()
        .flatten()
        .filter_map(|c| c.pointer("/content/text").and_then(|t| t.as_str()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_is_a_tool_card_that_shows_its_work_live_and_on_load() {
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[plugins.session-title]\nenabled = false\n",
    )
    .unwrap();
    let parent_task = "Delegate reading the notes.";
    let child_task = "Read notes.txt and say what it lists.";
    let spec: ScenarioSpec = serde_json::from_value(json!({
        "suite": "acp", "name": "child-card",
        "sessions": [
            {"session": 0, "first_user_text": parent_task},
            {"session": 1, "first_user_text": child_task}
        ]
    }))
    .unwrap();
    let entries = vec![
        tool_call_entry(
            0,
            0,
            "call_delegate",
            "subagent_fork",
            json!({"description": "Read the notes", "prompt": child_task}),
        ),
        text_entry(1, 0, "PARENT_DONE"),
        tool_call_entry(0, 1, "call_read", "read", json!({"path": "notes.txt"})),
        text_entry(1, 1, "It lists alpha and beta."),
    ];
    let model: Vec<ModelEntry> = entries
        .into_iter()
        .map(|e| serde_json::from_value(e).unwrap())
        .collect();
    let scenario = Scenario::from_parts(spec, model);
    let server = ReplayServer::start(&scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap();
    let mut client = Client::start(home.path(), workspace.path(), &server.url());
    client
        .call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
    let created = client
        .call(
            "session/new",
            json!({"cwd": workspace.path(), "mcpServers": []}),
        )
        .await;
    let session = created.last().unwrap()["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let lines = client
        .call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": parent_task}]}),
        )
        .await;
    client.close().await;
    assert!(server.unconsumed().is_empty(), "{:?}", server.unconsumed());
    let updates = card_updates(&lines, "call_delegate");
    assert!(
        !updates.is_empty(),
        "no card for the delegation: {lines:#?}"
    );
    // The completing update: the child's tool call, then its answer as the result.
    let last = updates.last().unwrap();
    assert_eq!(
        last.pointer("/params/update/status"),
        Some(&json!("completed"))
    );
    let finished = content_text(last);
    assert!(finished.contains("▸ read"), "{finished}");
    assert!(finished.ends_with("It lists alpha and beta."), "{finished}");

    // session/load replays the same card.
    let mut client = Client::start(home.path(), workspace.path(), &server.url());
    client
        .call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
    let replayed = client
        .call(
            "session/load",
            json!({"sessionId": session, "cwd": workspace.path(), "mcpServers": []}),
        )
        .await;
    client.close().await;
    let updates = card_updates(&replayed, "call_delegate");
    let last = updates
        .last()
        .expect("the replay shows the delegation card");
    assert_eq!(content_text(last), finished);
}

impl Client {
    async fn send(&mut self, message: serde_json::Value) {
        use tokio::io::AsyncWriteExt;
        self.stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }

    async fn next(&mut self) -> serde_json::Value {
        let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        serde_json::from_str(&line).unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_child_streams_its_progress_into_the_card() {
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("notes.txt"), "alpha\n").unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[plugins.session-title]\nenabled = false\n",
    )
    .unwrap();
    let parent_task = "Delegate a slow read.";
    let child_task = "Read notes.txt, then think for a long time.";
    let spec: ScenarioSpec = serde_json::from_value(json!({
        "suite": "acp", "name": "child-progress",
        "sessions": [
            {"session": 0, "first_user_text": parent_task},
            {"session": 1, "first_user_text": child_task}
        ]
    }))
    .unwrap();
    let entries = vec![
        tool_call_entry(
            0,
            0,
            "call_delegate",
            "subagent_fork",
            json!({"description": "Slow read", "prompt": child_task}),
        ),
        text_entry(1, 0, "PARENT_DONE"),
        tool_call_entry(0, 1, "call_read", "read", json!({"path": "notes.txt"})),
        json!({"session": 1, "route": "main", "index": 1, "kind": "hang",
               "ready_file": "child-waiting", "stream": [{"content": "partial"}]}),
    ];
    let model: Vec<ModelEntry> = entries
        .into_iter()
        .map(|e| serde_json::from_value(e).unwrap())
        .collect();
    let scenario = Scenario::from_parts(spec, model);
    let server = ReplayServer::start(
        &scenario,
        ([127, 0, 0, 1], 0).into(),
        Some(workspace.path().to_path_buf()),
    )
    .await
    .unwrap();
    let mut client = Client::start(home.path(), workspace.path(), &server.url());
    client
        .call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
    let created = client
        .call(
            "session/new",
            json!({"cwd": workspace.path(), "mcpServers": []}),
        )
        .await;
    let session = created.last().unwrap()["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    client
        .send(json!({"jsonrpc": "2.0", "id": 99, "method": "session/prompt",
                     "params": {"sessionId": session, "prompt": [{"type": "text", "text": parent_task}]}}))
        .await;
    // The child is now waiting on the model, after its read: the card shows the read.
    let mut progress = None;
    for _ in 0..200 {
        let line = client.next().await;
        if line.pointer("/params/update/toolCallId") == Some(&json!("call_delegate")) {
            let text = content_text(&line);
            if text.contains("▸ read") {
                progress = Some(text);
                break;
            }
        }
    }
    let progress = progress.expect("a progress update with the child's tool call");
    assert!(progress.contains("notes.txt"), "{progress}");
    client
        .send(
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
        )
        .await;
    loop {
        let line = client.next().await;
        if line.get("id") == Some(&json!(99)) {
            assert_eq!(line["result"]["stopReason"], "cancelled");
            break;
        }
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_bridge_settles_a_running_continuable_child_in_its_own_log() {
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[plugins.session-title]\nenabled = false\n",
    )
    .unwrap();
    let parent_task = "Start a background helper.";
    let child_task = "Think for a very long time.";
    let spec: ScenarioSpec = serde_json::from_value(json!({
        "suite": "acp", "name": "child-teardown",
        "sessions": [
            {"session": 0, "first_user_text": parent_task},
            {"session": 1, "first_user_text": child_task}
        ]
    }))
    .unwrap();
    let entries = vec![
        tool_call_entry(
            0,
            0,
            "call_delegate",
            "subagent",
            json!({"description": "Helper", "prompt": child_task}),
        ),
        text_entry(1, 0, "PARENT_DONE"),
        json!({"session": 1, "route": "main", "index": 0, "kind": "hang",
               "ready_file": "child-waiting", "stream": [{"content": "thinking"}]}),
    ];
    let model: Vec<ModelEntry> = entries
        .into_iter()
        .map(|e| serde_json::from_value(e).unwrap())
        .collect();
    let scenario = Scenario::from_parts(spec, model);
    let server = ReplayServer::start(
        &scenario,
        ([127, 0, 0, 1], 0).into(),
        Some(workspace.path().to_path_buf()),
    )
    .await
    .unwrap();
    let mut client = Client::start(home.path(), workspace.path(), &server.url());
    client
        .call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
    let created = client
        .call(
            "session/new",
            json!({"cwd": workspace.path(), "mcpServers": []}),
        )
        .await;
    let session = created.last().unwrap()["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let lines = client
        .call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": parent_task}]}),
        )
        .await;
    assert_eq!(lines.last().unwrap()["result"]["stopReason"], "end_turn");
    let waiting = workspace.path().join("child-waiting");
    for _ in 0..400 {
        if waiting.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(waiting.exists(), "the child never reached the model");
    // EOF on stdin: the bridge tears down while the child waits on the model.
    drop(client.stdin);
    let status = tokio::time::timeout(Duration::from_secs(15), client.child.wait())
        .await
        .expect("dsh acp exits after EOF")
        .unwrap();
    assert!(status.success(), "{status:?}");
    // The child's own log (not crash repair) closes its turn.
    let mut logs = Vec::new();
    let mut stack = vec![home.path().join("sessions")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                logs.push(path);
            }
        }
    }
    let child = logs
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .find(|text| text.lines().next().unwrap().contains("\"parentSession\""))
        .expect("the child's log");
    let events: Vec<serde_json::Value> = child
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for (index, event) in events.iter().enumerate() {
        assert_eq!(event["seq"], json!(index));
    }
    let last = events.last().unwrap();
    assert_eq!(last["type"], "turn/end", "{events:#?}");
    assert_eq!(last["data"]["reason"]["kind"], "aborted", "{last}");
}
