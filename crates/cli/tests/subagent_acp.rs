//! The `acp` subagent provider driving `dsh acp` itself as the out-of-process child, against the
//! replay server: a completed run, and a cancelled one that leaves no process behind.

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
