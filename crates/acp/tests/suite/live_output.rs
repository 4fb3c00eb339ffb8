//! A real `bash` call (the shell tool crate, through the bridge's output sink): its output
//! reaches the client as progress `tool_call_update`s while it runs, and the completing update
//! does not repeat it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_protocol::ContentBlock;
use dsh_tool_shell::JobToolsConfig;
use dsh_tool_shell::JobsConfig;
use dsh_tool_shell::JobsRuntime;
use dsh_tool_shell::ShellContext;
use dsh_tool_shell::ShellTools;
use dsh_tool_shell::spill::SpillStore;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use super::harness::TestHost;
use super::harness::Wire;

const COMMAND: &str = "printf 'one\\n'; sleep 0.6; printf 'two\\n' >&2";

/// The harness factory, with the real shell tools instead of the harness's own `bash`.
fn factory(home: &Path, work: &Path) -> Arc<TestHost> {
    let host = TestHost::bare(home, &[]);
    let (root, registry) = (host.root.clone(), host.registry.clone());
    let mut base = ShellContext::new(work, "live");
    base.spill = Arc::new(SpillStore::new(home.join("spill")));
    let tools = ShellTools {
        resolve: Arc::new(move |_run| Ok(base.clone())),
        jobs: JobsRuntime::new(JobsConfig::default()),
        job_config: JobToolsConfig::default(),
        run_in_background: false,
        sandbox: None,
    };
    for disposer in dsh_tool_shell::register_shell_tools(&registry, &root, &tools).unwrap() {
        std::mem::forget(disposer);
    }
    host
}

/// Runs one slow bash turn; returns the call's updates with when each arrived, and the text the
/// model got back as the tool result.
async fn bash_turn(terminal: bool) -> (Vec<(Value, Instant)>, String) {
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("ws");
    std::fs::create_dir(&work).unwrap();
    let factory = factory(home.path(), &work);
    let args = json!({"command": COMMAND, "description": "Print slowly"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_1", "bash", &args, None));
    factory.adapter.push_chunks(text_response("Done."));
    let adapter = factory.adapter.clone();
    let mut wire = Wire::start(factory);
    let session = wire.open(&work, terminal).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}),
    );
    let mut updates = Vec::new();
    loop {
        let frame = wire.next().await;
        if frame.get("id") == Some(&json!(3)) {
            assert_eq!(frame["result"]["stopReason"], "end_turn");
            break;
        }
        let update = &frame["params"]["update"];
        if update["sessionUpdate"] == "tool_call_update" {
            updates.push((update.clone(), Instant::now()));
        }
    }
    // The model's view is today's: the second request carries the plain result text.
    let requests = adapter.requests();
    let result = requests
        .last()
        .and_then(|request| request.messages.last())
        .into_iter()
        .flat_map(|message| &message.content)
        .filter_map(|block| match block {
            ContentBlock::ToolResult { content, .. } => Some(dsh_protocol::text_of(content)),
            _ => None,
        })
        .collect();
    (updates, result)
}

#[tokio::test]
async fn terminal_clients_get_live_data_and_the_completion_only_adds_the_exit() {
    let (updates, result) = bash_turn(true).await;
    assert_eq!(result, "one\n[stderr]\ntwo\n");
    let (done, done_at) = updates.last().unwrap().clone();
    assert_eq!(done["status"], "completed");
    assert_eq!(
        done["_meta"],
        json!({"terminal_exit": {"terminal_id": "call_1", "exit_code": 0}})
    );
    assert_eq!(done.get("content"), None);
    let progress = &updates[..updates.len() - 1];
    assert!(!progress.is_empty(), "{updates:?}");
    let mut data = String::new();
    for (update, _) in progress {
        let keys: Vec<&String> = update.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["sessionUpdate", "toolCallId", "_meta"], "{update}");
        assert_eq!(update["_meta"]["terminal_output"]["terminal_id"], "call_1");
        data.push_str(update["_meta"]["terminal_output"]["data"].as_str().unwrap());
    }
    // Everything exactly once: streamed live, never repeated by the completion.
    assert_eq!(data, "one\ntwo\n");
    let (first, first_at) = &progress[0];
    assert_eq!(first["_meta"]["terminal_output"]["data"], "one\n");
    assert!(done_at.duration_since(*first_at) >= Duration::from_millis(300));
}

#[tokio::test]
async fn clients_without_terminals_get_the_console_text_so_far() {
    let (updates, result) = bash_turn(false).await;
    assert_eq!(result, "one\n[stderr]\ntwo\n");
    let text = |update: &Value| {
        update["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (done, done_at) = updates.last().unwrap().clone();
    assert_eq!(done["status"], "completed");
    assert_eq!(text(&done), "```console\none\n[stderr]\ntwo\n```");
    let (first, first_at) = &updates[0];
    assert_eq!(first.get("status"), None, "{first}");
    assert_eq!(text(first), "```console\none\n```");
    assert!(done_at.duration_since(*first_at) >= Duration::from_millis(300));
    for (update, _) in &updates[..updates.len() - 1] {
        assert_eq!(update.get("status"), None, "{update}");
        assert!(text(update).starts_with("```console\none\n"), "{update}");
    }
}
