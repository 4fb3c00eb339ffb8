//! The five session-query tools over real stored and live sessions (context-spec §15 H).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_kernel::Plugin;
use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_protocol::Message;
use dsh_session::CreateOptions;
use dsh_session::JsonlStore;
use dsh_session::SessionLog;
use dsh_session::SurfaceIntent;
use dsh_session_query::SessionQuery;
use dsh_session_query::SessionQueryPlugin;
use dsh_tools::AgentGone;
use dsh_tools::AgentHandle;
use dsh_tools::CancellationToken;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolRegistry;
use serde_json::Value;
use serde_json::json;

struct Agent {
    id: String,
    scope: Scope,
}

impl AgentHandle for Agent {
    fn id(&self) -> &str {
        &self.id
    }
    fn scope(&self) -> &Scope {
        &self.scope
    }
    fn inject(&self, _message: Message) -> Result<(), AgentGone> {
        Ok(())
    }
}

fn user(log: &SessionLog, text: &str) {
    log.append(
        "user/message",
        json!({"content": [{"type": "text", "text": text}], "source": {"kind": "user"}, "role": "user", "id": format!("u-{}", log.len())}),
        Some(SurfaceIntent::append()),
    )
    .unwrap();
}

fn title(log: &SessionLog, title: &str) {
    log.append(
        "session/title",
        json!({"title": title, "source": "heuristic"}),
        None,
    )
    .unwrap();
}

struct Setup {
    _home: tempfile::TempDir,
    root: Scope,
    registry: Arc<ToolRegistry>,
    current: SessionLog,
    agent: Arc<dyn AgentHandle>,
}

fn setup(config: Value) -> Setup {
    let home = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(home.path());
    let workspace = home.path().join("ws");
    let elsewhere = home.path().join("other");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let create = |id: &str, cwd: &std::path::Path, parent: Option<&str>| {
        store
            .create(CreateOptions {
                id: Some(id.to_owned()),
                cwd: Some(cwd.to_path_buf()),
                parent_session: parent.map(str::to_owned),
                ..CreateOptions::default()
            })
            .unwrap()
    };
    let old = create("session-old", &workspace, None);
    title(&old, "Fix the parser");
    user(&old, "please fix the tokenizer bug in the parser");
    user(&old, "the tokenizer bug is in lexer.rs");
    old.flush().unwrap();
    let child = create("session-child", &workspace, Some("session-old"));
    user(&child, "child work on the tokenizer");
    child.flush().unwrap();
    let foreign = create("session-foreign", &elsewhere, None);
    user(&foreign, "the tokenizer bug elsewhere");
    foreign.flush().unwrap();
    drop((old, child, foreign));

    let current = create("session-now", &workspace, None);
    user(&current, "what about the tokenizer bug");

    let root = Scope::root();
    let registry = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    let scope = root.child(ScopeKind::Plugin, "session-query").unwrap();
    SessionQueryPlugin { store: Some(store) }
        .apply(&scope, serde_json::from_value(config).unwrap())
        .unwrap();
    root.service::<SessionQuery>()
        .unwrap()
        .register_live(&current);
    let agent: Arc<dyn AgentHandle> = Arc::new(Agent {
        id: "session-now".into(),
        scope: root.child(ScopeKind::Agent, "session-now").unwrap(),
    });
    Setup {
        _home: home,
        root,
        registry,
        current,
        agent,
    }
}

impl Setup {
    async fn call(&self, name: &str, args: Value) -> (bool, String) {
        let input =
            ToolCallInput::new("c", name, args, CancellationToken::new()).agent(self.agent.clone());
        let result = self.registry.execute(input).await;
        (result.is_error, result.text())
    }
}

#[tokio::test]
async fn session_search_finds_workspace_sessions_but_never_the_caller() {
    let s = setup(json!({}));
    let (err, text) = s
        .call("session_search", json!({"query": "tokenizer bug"}))
        .await;
    assert!(!err, "{text}");
    assert!(
        text.starts_with(
            "Session search results (1):\n\n1. Session session-old — Fix the parser\n   Created: "
        ),
        "{text}"
    );
    assert!(
        text.contains("\n   Parent: root\n   Availability: persisted\n   Best match: seq "),
        "{text}"
    );
    assert!(text.contains(" | user/message | current | "), "{text}");
    assert!(text.contains("\n   Snippet: "), "{text}");
    assert!(
        !text.contains("session-now"),
        "the caller is excluded: {text}"
    );
    assert!(
        !text.contains("session-foreign"),
        "other workspaces are excluded: {text}"
    );

    let (_, text) = s
        .call("session_search", json!({"query": "no such words anywhere"}))
        .await;
    assert_eq!(text, "No prior session matches found.");
    // Token recall, not substrings.
    let (_, text) = s.call("session_search", json!({"query": "okeniz"})).await;
    assert_eq!(text, "No prior session matches found.");
    // The child is found through its parent filter.
    let (_, text) = s
        .call(
            "session_search",
            json!({"query": "tokenizer", "parent_session_ids": ["session-old"]}),
        )
        .await;
    assert!(
        text.contains("1. Session session-child — untitled"),
        "{text}"
    );
    assert!(text.contains("   Parent: session-old\n"), "{text}");
}

#[tokio::test]
async fn input_errors_have_the_exact_messages() {
    let s = setup(json!({}));
    let (err, text) = s.call("session_search", json!({"query": "  "})).await;
    assert!(err);
    assert_eq!(
        text,
        "Error: session-search query must contain non-whitespace text"
    );
    let (_, text) = s
        .call(
            "session_search",
            json!({"query": "x", "event_time_from": "2024-01-01T00:00:00"}),
        )
        .await;
    assert_eq!(
        text,
        "Error: session event_time_from range must be an ISO 8601 timestamp with Z or a numeric offset"
    );
    let (_, text) = s
        .call("session_search", json!({"query": "x", "event_types": []}))
        .await;
    assert_eq!(
        text,
        "Error: event_types must contain at least one value when supplied"
    );
    let (_, text) = s
        .call(
            "session_search",
            json!({"query": "x", "event_seq_from": 5, "event_seq_to": 2}),
        )
        .await;
    assert_eq!(
        text,
        "Error: session sequence range from must be less than or equal to to"
    );
}

#[tokio::test]
async fn a_foreign_workspace_is_unauthorized() {
    let s = setup(json!({}));
    for tool in ["session_trace", "session_event_read"] {
        let (err, text) = s
            .call(tool, json!({"session_id": "session-foreign", "seq": 0}))
            .await;
        assert!(err);
        assert_eq!(
            text,
            "Error: session target is outside the caller workspace"
        );
    }
    let (_, text) = s.call("session_trace", json!({"session_id": "nope"})).await;
    assert_eq!(text, "Error: session was not found");
}

#[tokio::test]
async fn with_search_disabled_exact_reads_still_work() {
    let s = setup(json!({"index": {"open_at": "never"}}));
    let (err, text) = s
        .call("session_search", json!({"query": "tokenizer"}))
        .await;
    assert!(err);
    assert_eq!(text, "Error: session search is disabled in this deployment");
    let (err, text) = s
        .call(
            "session_event_read",
            json!({"session_id": "session-old", "seq": 1}),
        )
        .await;
    assert!(!err, "{text}");
    assert!(text.starts_with("Session session-old — Fix the parser\nTarget event seq 1:\n```json\n{\n  \"type\": \"user/message\",\n  \"seq\": 1,"), "{text}");
    assert!(text.ends_with("\n```"), "{text}");
}

#[tokio::test]
async fn event_read_shows_neighbours_and_trace_shows_lineage() {
    let s = setup(json!({}));
    let (_, text) = s
        .call(
            "session_event_read",
            json!({"session_id": "session-old", "seq": 1, "before": 1, "after": 1}),
        )
        .await;
    assert!(
        text.contains("\n```\n\nBefore:\n- seq 0 | session/title | "),
        "{text}"
    );
    assert!(
        text.contains(" | (no semantic text)\n\nAfter:\n- seq 2 | user/message | "),
        "{text}"
    );
    assert!(
        text.ends_with("\n  the tokenizer bug is in lexer.rs"),
        "{text}"
    );

    let (_, text) = s
        .call("session_trace", json!({"session_id": "session-old"}))
        .await;
    assert!(
        text.starts_with("Session session-old — Fix the parser\nCreated: "),
        "{text}"
    );
    assert!(text.contains("\nAvailability: persisted\n\nAncestors (nearest first):\n- none (target is a root session)\n\nDescendants:\n- session-child — untitled | "), "{text}");
    let (_, text) = s
        .call("session_trace", json!({"session_id": "session-child"}))
        .await;
    assert!(
        text.contains("Ancestors (nearest first):\n- session-old — Fix the parser | "),
        "{text}"
    );
    assert!(text.ends_with("Descendants:\n- none"), "{text}");

    let (_, text) = s
        .call(
            "session_event_trace",
            json!({"session_id": "session-old", "seq": 1}),
        )
        .await;
    assert!(
        text.contains("\nTarget: seq 1 | user/message | current | "),
        "{text}"
    );
    assert!(text.ends_with("Replaced by: none\nReplacement chain: none\nEvents replaced by target: none\nEvents cited directly as sources: none\nDirect derived events: none"), "{text}");
}

#[tokio::test]
async fn current_session_search_excludes_the_invoking_step() {
    let s = setup(json!({}));
    let (err, text) = s
        .call("session_event_search", json!({"query": "tokenizer"}))
        .await;
    assert!(err);
    assert_eq!(
        text,
        "Error: current-session search requires an active step boundary"
    );
    s.current
        .append("turn/start", json!({"turn": 1}), None)
        .unwrap();
    s.current
        .append("step/start", json!({"turn": 1, "step": 1}), None)
        .unwrap();
    user(&s.current, "tokenizer mentioned inside the step");
    let (err, text) = s
        .call("session_event_search", json!({"query": "tokenizer"}))
        .await;
    assert!(!err, "{text}");
    assert!(text.starts_with("Session session-now — untitled\n\nEvent search results (1):\n1. seq 0 | user/message | current | "), "{text}");
    assert!(!text.contains("inside the step"), "{text}");
    let (_, text) = s
        .call(
            "session_event_search",
            json!({"session_id": "session-old", "query": "zebra"}),
        )
        .await;
    assert_eq!(
        text,
        "Session session-old — Fix the parser\n\nNo prior event matches found."
    );
    drop(s.root);
}
