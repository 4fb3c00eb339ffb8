//! References on the real agent loop: checklist B24, B27, B29.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::PromptConfig;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_agent::scripted::text_response;
use dsh_kernel::Scope;
use dsh_protocol::Message;
use dsh_references::SessionReferenceConfig;
use dsh_references::SessionReferences;
use dsh_references::StoreReader;
use dsh_references::encode_session_uri;
use dsh_session::CreateOptions;
use dsh_session::JsonlStore;
use dsh_session::SurfaceIntent;
use dsh_session::data::UserMessage;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolRegistry;

async fn run(agent: &AgentHandle, text: &str) {
    agent.followup(Message::user_text(text)).unwrap();
    tokio::time::timeout(Duration::from_secs(10), agent.when_idle())
        .await
        .unwrap();
}

fn agent(
    store: &JsonlStore,
    refs: Option<&Arc<SessionReferences>>,
) -> (AgentHandle, Arc<ScriptedAdapter>, Scope) {
    let root = Scope::root();
    let tools = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    let hooks = AgentHooks::install(&root).unwrap();
    if let Some(refs) = refs {
        let _keep = refs.install(&root, &hooks);
    }
    let adapter = ScriptedAdapter::new("mock");
    let log = store.create(CreateOptions::default()).unwrap();
    let agent = Agent::create(AgentConfig {
        id: log.id().to_owned(),
        cwd: None,
        provider: "mock".into(),
        model: "m".into(),
        max_tokens: None,
        adapter: adapter.clone(),
        tools,
        scope: root.clone(),
        log,
        prompt: PromptConfig::default(),
        max_parallel_tool_calls: 1,
    })
    .unwrap();
    (agent, adapter, root)
}

#[tokio::test]
async fn a_referenced_session_enters_as_a_snapshot_after_the_readable_prompt() {
    let home = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(home.path());
    let source = store.create(CreateOptions::default()).unwrap();
    source
        .append_data(
            &UserMessage(Message::user_text("earlier work")),
            Some(SurfaceIntent::append()),
        )
        .unwrap();
    let reader = Arc::new(StoreReader::new(Arc::new(store.clone())));
    let refs = SessionReferences::new(SessionReferenceConfig::default(), reader);
    let (agent, adapter, _root) = agent(&store, Some(&refs));
    adapter.push_chunks(text_response("ok"));
    let uri = encode_session_uri(source.id());
    run(&agent, &format!("see @[Build]({uri})")).await;
    let messages: Vec<_> = agent
        .log()
        .events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == "user/message")
        .cloned()
        .collect();
    assert_eq!(messages[0].data["content"][0]["text"], "see @Build");
    assert_eq!(messages[1].data["source"]["kind"], "session-reference");
    assert!(
        messages[1].data["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("## Referenced sessions")
    );
    assert!(
        messages[1].data["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("earlier work")
    );
}

#[tokio::test]
async fn a_self_reference_fails_the_turn_before_anything_is_logged() {
    let home = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(home.path());
    let reader = Arc::new(StoreReader::new(Arc::new(store.clone())));
    let refs = SessionReferences::new(SessionReferenceConfig::default(), reader);
    let (agent, adapter, _root) = agent(&store, Some(&refs));
    let uri = encode_session_uri(agent.id());
    run(&agent, &format!("look at {uri}")).await;
    let events = agent.log().events().unwrap();
    assert!(
        !events
            .iter()
            .any(|e| e.kind == "user/message" || e.kind == "step/start")
    );
    let end = events.iter().find(|e| e.kind == "turn/end").unwrap();
    assert_eq!(
        end.data["reason"]["error"]["message"],
        format!("session \"{}\" cannot reference itself", agent.id())
    );
    assert_eq!(adapter.requests().len(), 0);
}

#[tokio::test]
async fn file_mentions_are_plain_prompt_text() {
    // Checklist B24: nothing reads or attaches the referenced file.
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("secret.txt"), "TOP SECRET CONTENT").unwrap();
    let store = JsonlStore::new(home.path());
    let reader = Arc::new(StoreReader::new(Arc::new(store.clone())));
    let refs = SessionReferences::new(SessionReferenceConfig::default(), reader);
    let (agent, adapter, _root) = agent(&store, Some(&refs));
    adapter.push_chunks(text_response("ok"));
    run(&agent, "summarize @secret.txt please").await;
    let log_text: String = agent
        .log()
        .events()
        .unwrap()
        .iter()
        .map(|e| e.to_json_line())
        .collect();
    assert!(log_text.contains("summarize @secret.txt please"));
    assert!(!log_text.contains("TOP SECRET"));
    let request = &adapter.requests()[0];
    assert_eq!(request.messages.len(), 1);
    assert_eq!(
        dsh_protocol::text_of(&request.messages[0].content),
        "summarize @secret.txt please"
    );
}
