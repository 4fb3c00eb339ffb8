//! The rest of the protocol against the reference server: instructions, resources, prompts,
//! progress as live output, and roots.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use dsh_kernel::ScopeKind;
use dsh_mcp::McpOptions;
use dsh_mcp::McpServer;
use dsh_mcp::ServerState;
use dsh_tools::OutputStream;
use dsh_tools::ToolOutputSink;
use serde_json::json;

use super::support::*;

#[derive(Default)]
struct Recorder(Mutex<Vec<(String, String)>>);

impl ToolOutputSink for Recorder {
    fn output(&self, call_id: &str, _stream: OutputStream, chunk: &[u8]) {
        self.0.lock().unwrap().push((
            call_id.to_owned(),
            String::from_utf8_lossy(chunk).into_owned(),
        ));
    }
}

struct Agent(dsh_kernel::Scope);

impl dsh_tools::AgentHandle for Agent {
    fn id(&self) -> &str {
        "agent"
    }
    fn scope(&self) -> &dsh_kernel::Scope {
        &self.0
    }
    fn inject(&self, _m: dsh_protocol::Message) -> Result<(), dsh_tools::AgentGone> {
        Ok(())
    }
}

#[tokio::test]
async fn instructions_resources_and_prompts() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let server = McpServer::mount(
        &h.root,
        &h.registry,
        stdio_config("everything", &bin),
        &McpOptions::default(),
    )
    .await
    .unwrap();
    let instructions = server
        .instructions()
        .expect("server-everything sends instructions");
    assert!(!instructions.trim().is_empty());

    let resources = server.resources().await.unwrap();
    assert!(!resources.is_empty());
    let uri = resources[0].uri.clone();
    let contents = server.read_resource(&uri).await.unwrap();
    assert_eq!(contents[0]["uri"], json!(uri));
    let attachment = server.resource_attachment(&uri).await.unwrap();
    assert!(
        attachment.starts_with(&format!("Resource {uri} from MCP server \"everything\":\n"))
            || attachment.starts_with(&format!("[binary resource {uri} ")),
        "{attachment}"
    );
    let missing = server.read_resource("demo://nope/none").await;
    assert!(missing.is_err());

    let prompts = server.prompts().await.unwrap();
    assert!(
        prompts.iter().any(|p| p.name == "simple-prompt"),
        "{prompts:?}"
    );
    let messages = server
        .get_prompt("simple-prompt", serde_json::Map::new())
        .await
        .unwrap();
    assert!(!messages.is_empty());
    assert_eq!(
        dsh_mcp::prompt_command("everything", "simple-prompt"),
        "mcp__everything__simple-prompt"
    );

    let listed = dsh_mcp::list_servers(&[stdio_config("everything", &bin)]).await;
    assert_eq!(listed[0].state, ServerState::Connected);
    assert!(listed[0].resources.contains(&uri));
    assert!(listed[0].prompts.iter().any(|p| p == "simple-prompt"));
    server.dispose();
}

#[tokio::test]
async fn progress_becomes_live_output_and_roots_are_the_workspace() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let workspace = tempfile::tempdir().unwrap();
    let options = McpOptions {
        roots: vec![workspace.path().to_path_buf()],
        ..McpOptions::default()
    };
    let server = McpServer::mount(
        &h.root,
        &h.registry,
        stdio_config("everything", &bin),
        &options,
    )
    .await
    .unwrap();
    let agent_scope = h.root.child(ScopeKind::Agent, "agent").unwrap();
    let recorder = Arc::new(Recorder::default());
    agent_scope
        .provide::<dyn ToolOutputSink>(recorder.clone())
        .unwrap();
    let agent: Arc<dyn dsh_tools::AgentHandle> = Arc::new(Agent(agent_scope));
    let input = dsh_tools::ToolCallInput::new(
        "call-progress",
        "mcp__everything__trigger-long-running-operation",
        json!({"duration": 2, "steps": 2}),
        dsh_tools::CancellationToken::new(),
    )
    .agent(agent.clone());
    let result = tokio::time::timeout(Duration::from_secs(20), h.registry.execute(input))
        .await
        .unwrap();
    assert!(!result.is_error, "{}", result.text());
    let lines = recorder.0.lock().unwrap().clone();
    assert!(!lines.is_empty(), "progress reached the sink");
    assert!(lines.iter().all(|(id, _)| id == "call-progress"));
    assert!(
        lines.iter().any(|(_, l)| l.starts_with("progress 1/2")),
        "{lines:?}"
    );

    let input = dsh_tools::ToolCallInput::new(
        "call-roots",
        "mcp__everything__get-roots-list",
        json!({}),
        dsh_tools::CancellationToken::new(),
    )
    .agent(agent);
    let result = h.registry.execute(input).await;
    let text = result.text();
    assert!(
        text.contains(&format!("file://{}", workspace.path().display())),
        "{text}"
    );
    server.dispose();
}

/// Two slow calls to one server overlap on its one connection: each call's progress lines
/// interleave with the other's (sequential calls would give all of one call's lines first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_slow_calls_to_one_server_run_at_the_same_time() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let server = McpServer::mount(
        &h.root,
        &h.registry,
        stdio_config("everything", &bin),
        &McpOptions::default(),
    )
    .await
    .unwrap();
    let agent_scope = h.root.child(ScopeKind::Agent, "agent").unwrap();
    let recorder = Arc::new(Recorder::default());
    agent_scope
        .provide::<dyn ToolOutputSink>(recorder.clone())
        .unwrap();
    let agent: Arc<dyn dsh_tools::AgentHandle> = Arc::new(Agent(agent_scope));
    let call = |id: &str| {
        dsh_tools::ToolCallInput::new(
            id,
            "mcp__everything__trigger-long-running-operation",
            json!({"duration": 2, "steps": 4}),
            dsh_tools::CancellationToken::new(),
        )
        .agent(agent.clone())
    };
    let (a, b) = tokio::time::timeout(
        Duration::from_secs(30),
        futures::future::join(h.registry.execute(call("a")), h.registry.execute(call("b"))),
    )
    .await
    .unwrap();
    assert!(!a.is_error && !b.is_error, "{} / {}", a.text(), b.text());
    let order: Vec<String> = recorder
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|(id, _)| id.clone())
        .collect();
    let last = |id: &str| order.iter().rposition(|o| o == id).unwrap();
    let first = |id: &str| order.iter().position(|o| o == id).unwrap();
    assert!(
        first("b") < last("a") && first("a") < last("b"),
        "the calls ran one after the other: {order:?}"
    );
    server.dispose();
}
