use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::text_of;
use dsh_tools::AgentGone;
use dsh_tools::AgentHandle;
use dsh_tools::CancellationToken;
use dsh_tools::RegistryConfig;
use dsh_tools::Tool;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolResult;
use dsh_tools::ToolRun;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use crate::Dialect;
use crate::HookEvent;
use crate::HooksConfig;
use crate::Point;
use crate::install;
use dsh_plugin::SessionContext;

struct TestAgent(Scope);

impl AgentHandle for TestAgent {
    fn id(&self) -> &str {
        "session-1"
    }
    fn scope(&self) -> &Scope {
        &self.0
    }
    fn inject(&self, _message: Message) -> Result<(), AgentGone> {
        Ok(())
    }
}

/// Reads a logged `hook/invoked` / `hook/result` back into the bridge's event type.
fn decode(kind: &str, data: &Value) -> HookEvent {
    let point = match data["point"].as_str() {
        Some("PostToolUse") => Point::PostToolUse,
        _ => Point::PreToolUse,
    };
    let handler_id = data["handlerId"].as_str().unwrap().to_owned();
    match kind {
        "hook/invoked" => HookEvent::Invoked {
            point,
            dialect: if data["dialect"] == "codex" {
                Dialect::Codex
            } else {
                Dialect::ClaudeCode
            },
            handler_id,
            matcher: data["matcher"].as_str().map(str::to_owned),
        },
        _ => HookEvent::Result {
            point,
            handler_id,
            decision: Box::leak(
                data["decision"]
                    .as_str()
                    .unwrap()
                    .to_owned()
                    .into_boxed_str(),
            ),
            exit_code: data["exitCode"].as_i64().map(|c| c as i32),
            stderr_summary: data["stderrSummary"].as_str().map(str::to_owned),
            duration_ms: data["durationMs"].as_f64().unwrap(),
        },
    }
}

struct Fixture {
    dir: tempfile::TempDir,
    registry: Arc<ToolRegistry>,
    agent: Arc<TestAgent>,
    session: Arc<SessionContext>,
    runs: Arc<AtomicUsize>,
    _root: Scope,
}

impl Fixture {
    fn new(dialect: Dialect, hooks: Value) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = Scope::root();
        let registry = ToolRegistry::new(RegistryConfig::default());
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = runs.clone();
        let tool = Tool::builder("bash")
            .description("echo text")
            .raw_output(json!({"type": "string"}), |_args, value: &Value| {
                Ok(vec![ContentBlock::text(value.as_str().unwrap_or_default())])
            })
            .run(move |args: Value, _run: ToolRun| {
                counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    Ok(format!(
                        "{}\n",
                        args["command"].as_str().unwrap_or_default()
                    ))
                }
            })
            .build()
            .unwrap();
        registry.register(&root, tool).unwrap();
        let config = HooksConfig::parse(dialect, &hooks.to_string()).unwrap();
        install(&registry, &root, config);
        let agent_scope = root.child(ScopeKind::Agent, "a").unwrap();
        let log =
            dsh_session::SessionLog::in_memory(dsh_session::SessionHeader::new("session-1", None));
        let session = Arc::new(SessionContext::new(
            log,
            dir.path().to_path_buf(),
            None,
            dsh_plugin::Permissions::for_mode(dsh_plugin::SandboxMode::WorkspaceWrite),
        ));
        agent_scope.provide(session.clone()).unwrap();
        Self {
            dir,
            registry,
            agent: Arc::new(TestAgent(agent_scope)),
            session,
            runs,
            _root: root,
        }
    }

    async fn call(&self, tool: &str) -> Arc<ToolResult> {
        let input = ToolCallInput::new(
            "call-1",
            tool,
            json!({"command": "echo HELLO"}),
            CancellationToken::new(),
        )
        .agent(self.agent.clone());
        self.registry.execute(input).await
    }

    fn events(&self) -> Vec<HookEvent> {
        self.session
            .log()
            .events()
            .iter()
            .map(|event| decode(&event.kind, &event.data))
            .collect()
    }

    fn decisions(&self) -> Vec<&'static str> {
        self.events()
            .iter()
            .filter_map(|e| match e {
                HookEvent::Result { decision, .. } => Some(*decision),
                HookEvent::Invoked { .. } => None,
            })
            .collect()
    }

    fn ran(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

fn cc(event: &str, matcher: &str, commands: &[&str]) -> Value {
    let hooks: Vec<Value> = commands
        .iter()
        .map(|c| json!({"type": "command", "command": c}))
        .collect();
    json!({"hooks": {event: [{"matcher": matcher, "hooks": hooks}]}})
}

fn text(result: &ToolResult) -> String {
    text_of(&result.content)
}

#[tokio::test]
async fn exit_2_blocks_with_stderr_as_the_reason() {
    let f = Fixture::new(
        Dialect::ClaudeCode,
        cc(
            "PreToolUse",
            "bash",
            &["echo 'bash is disabled by policy in this session' >&2; exit 2"],
        ),
    );
    let result = f.call("bash").await;
    assert!(result.is_error);
    assert_eq!(
        text(&result),
        "Error: bash is disabled by policy in this session"
    );
    assert_eq!(f.ran(), 0);
    let events = f.events();
    assert_eq!(events.len(), 2);
    assert_eq!(
        events[0].data(1),
        json!({"turn": 1, "point": "PreToolUse", "dialect": "claude-code",
            "handlerId": "claude-code:PreToolUse:1", "matcher": "bash"})
    );
    let HookEvent::Result {
        decision,
        exit_code,
        stderr_summary,
        duration_ms,
        ..
    } = &events[1]
    else {
        panic!("expected a result event");
    };
    assert_eq!(*decision, "block");
    assert_eq!(*exit_code, Some(2));
    assert_eq!(
        stderr_summary.as_deref(),
        Some("bash is disabled by policy in this session")
    );
    assert!(*duration_ms > 0.0);
    let data = events[1].data(1);
    let keys: Vec<&str> = data
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "turn",
            "point",
            "handlerId",
            "decision",
            "exitCode",
            "stderrSummary",
            "durationMs"
        ]
    );
}

#[tokio::test]
async fn json_deny_uses_the_permission_reason() {
    let out = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no shell today"}}"#;
    let f = Fixture::new(
        Dialect::ClaudeCode,
        cc("PreToolUse", "", &[&format!("echo '{out}'")]),
    );
    let result = f.call("bash").await;
    assert_eq!(text(&result), "Error: no shell today");
    assert_eq!(f.ran(), 0);
    assert_eq!(f.decisions(), ["deny"]);
}

#[tokio::test]
async fn json_ask_routes_to_approval_and_fails_closed_without_a_service() {
    let out = r#"{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"please confirm"}}"#;
    let f = Fixture::new(
        Dialect::ClaudeCode,
        cc("PreToolUse", "bash", &[&format!("echo '{out}'")]),
    );
    let result = f.call("bash").await;
    assert_eq!(text(&result), "Error: please confirm");
    assert_eq!(f.ran(), 0);
    assert_eq!(f.decisions(), ["ask"]);
}

#[tokio::test]
async fn json_allow_lets_the_call_run() {
    let out = r#"{"hookSpecificOutput":{"permissionDecision":"allow"}}"#;
    let f = Fixture::new(
        Dialect::ClaudeCode,
        cc("PreToolUse", "bash", &[&format!("echo '{out}'")]),
    );
    let result = f.call("bash").await;
    assert!(!result.is_error);
    assert_eq!(text(&result), "echo HELLO\n");
    assert_eq!(f.ran(), 1);
    assert_eq!(f.decisions(), ["allow"]);
}

#[tokio::test]
async fn several_hooks_fold_deny_over_ask_over_allow() {
    let allow = r#"{"hookSpecificOutput":{"permissionDecision":"allow"}}"#;
    let ask = r#"{"hookSpecificOutput":{"permissionDecision":"ask"}}"#;
    let f = Fixture::new(
        Dialect::ClaudeCode,
        cc(
            "PreToolUse",
            "bash",
            &[
                &format!("echo '{allow}'"),
                &format!("echo '{ask}'"),
                "echo nope >&2; exit 2",
            ],
        ),
    );
    let result = f.call("bash").await;
    assert_eq!(text(&result), "Error: nope");
    assert_eq!(f.decisions(), ["allow", "ask", "block"]);
    let ids: Vec<String> = f
        .events()
        .iter()
        .filter_map(|e| match e {
            HookEvent::Invoked { handler_id, .. } => Some(handler_id.clone()),
            HookEvent::Result { .. } => None,
        })
        .collect();
    assert_eq!(
        ids,
        [
            "claude-code:PreToolUse:1",
            "claude-code:PreToolUse:2",
            "claude-code:PreToolUse:3"
        ]
    );
}

#[tokio::test]
async fn post_tool_use_context_keeps_the_result_and_adds_a_message() {
    let out = r#"{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"Note: verified."}}"#;
    let f = Fixture::new(
        Dialect::ClaudeCode,
        cc("PostToolUse", "bash", &[&format!("echo '{out}'")]),
    );
    let result = f.call("bash").await;
    assert!(!result.is_error);
    assert_eq!(text(&result), "echo HELLO\n");
    assert_eq!(result.additional_contexts.len(), 1);
    let message = serde_json::to_value(&result.additional_contexts[0]).unwrap();
    assert_eq!(
        message["content"],
        json!([{"type": "text", "text": "Note: verified."}])
    );
    assert_eq!(
        message["source"],
        json!({"kind": "plugin", "plugin": "hooks-claude-code"})
    );
    assert_eq!(message["role"], "user");
    assert_eq!(f.decisions(), ["pass"]);
    let HookEvent::Result {
        exit_code,
        stderr_summary,
        ..
    } = &f.events()[1]
    else {
        panic!("expected a result event");
    };
    assert_eq!((*exit_code, stderr_summary.clone()), (Some(0), None));
}

#[tokio::test]
async fn post_tool_use_block_replaces_the_result_verbatim() {
    let f = Fixture::new(
        Dialect::ClaudeCode,
        cc(
            "PostToolUse",
            "",
            &[r#"echo '{"decision":"block","reason":"output rejected"}'"#],
        ),
    );
    let result = f.call("bash").await;
    assert!(result.is_error);
    assert_eq!(text(&result), "output rejected");
    assert_eq!(result.error.as_ref().unwrap().message, "output rejected");
    assert_eq!(f.ran(), 1);

    let f = Fixture::new(Dialect::ClaudeCode, cc("PostToolUse", "", &["exit 2"]));
    let result = f.call("bash").await;
    assert_eq!(text(&result), "blocked by PostToolUse hook");
    assert_eq!(f.decisions(), ["block"]);
}

#[tokio::test]
async fn the_hook_gets_the_payload_on_stdin_in_the_session_cwd() {
    let f = Fixture::new(
        Dialect::ClaudeCode,
        cc(
            "PostToolUse",
            "bash",
            &["cat > payload.json; pwd > where.txt"],
        ),
    );
    f.call("bash").await;
    let payload: Value =
        serde_json::from_str(&std::fs::read_to_string(f.dir.path().join("payload.json")).unwrap())
            .unwrap();
    let cwd = f.dir.path().to_string_lossy().into_owned();
    assert_eq!(
        payload,
        json!({
            "session_id": "session-1",
            "cwd": cwd,
            "hook_event_name": "PostToolUse",
            "tool_name": "bash",
            "tool_input": {"command": "echo HELLO"},
            "tool_response": {"content": [{"type": "text", "text": "echo HELLO\n"}], "isError": false},
        })
    );
    let where_ = std::fs::read_to_string(f.dir.path().join("where.txt")).unwrap();
    assert_eq!(
        Path::new(where_.trim()).canonicalize().unwrap(),
        f.dir.path().canonicalize().unwrap()
    );
    assert_eq!(f.decisions(), ["pass"]);
}

#[tokio::test]
async fn a_slow_hook_times_out_and_does_not_block() {
    let hooks = json!({"hooks": {"PreToolUse": [{"hooks": [
        {"type": "command", "command": "sleep 30; exit 2", "timeout": 0.3}
    ]}]}});
    let f = Fixture::new(Dialect::ClaudeCode, hooks);
    let started = Instant::now();
    let result = f.call("bash").await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(!result.is_error);
    assert_eq!(f.ran(), 1);
    assert_eq!(f.decisions(), ["timeout"]);
    let HookEvent::Invoked { matcher, .. } = &f.events()[0] else {
        panic!("expected an invoked event");
    };
    assert_eq!(*matcher, None);
}

#[tokio::test]
async fn other_exit_codes_are_non_blocking_errors() {
    let f = Fixture::new(
        Dialect::ClaudeCode,
        cc("PreToolUse", "bash", &["echo oops >&2; exit 1"]),
    );
    let result = f.call("bash").await;
    assert!(!result.is_error);
    assert_eq!(f.ran(), 1);
    assert_eq!(f.decisions(), ["error"]);
}

#[tokio::test]
async fn a_non_matching_matcher_runs_nothing() {
    let f = Fixture::new(
        Dialect::ClaudeCode,
        cc("PreToolUse", "Edit|Write", &["exit 2"]),
    );
    let result = f.call("bash").await;
    assert!(!result.is_error);
    assert_eq!(f.ran(), 1);
    assert!(f.events().is_empty());
}

#[tokio::test]
async fn codex_dialect_ids_snake_case_events_and_context_source() {
    let out = r#"{"hookSpecificOutput":{"additionalContext":"codex says hi"}}"#;
    let hooks = json!({"hooks": {
        "PreToolUse": [{"matcher": "bash", "hooks": [
            {"type": "command", "command": "echo 'bash is disabled by codex policy' >&2; exit 2"}
        ]}],
        "post_tool_use": [{"hooks": [{"type": "command", "command": format!("echo '{out}'")}]}]
    }});
    let config = HooksConfig::parse(Dialect::Codex, &hooks.to_string()).unwrap();
    assert_eq!(config.post_tool_use[0].id, "codex:PostToolUse:1");
    assert_eq!(config.post_tool_use[0].point, Point::PostToolUse);
    let f = Fixture::new(Dialect::Codex, hooks.clone());
    let result = f.call("bash").await;
    assert_eq!(text(&result), "Error: bash is disabled by codex policy");
    assert_eq!(
        f.events()[0].data(3),
        json!({"turn": 3, "point": "PreToolUse", "dialect": "codex",
            "handlerId": "codex:PreToolUse:1", "matcher": "bash"})
    );

    let f = Fixture::new(
        Dialect::Codex,
        json!({"hooks": {"post_tool_use": hooks["hooks"]["post_tool_use"].clone()}}),
    );
    let result = f.call("bash").await;
    let message = serde_json::to_value(&result.additional_contexts[0]).unwrap();
    assert_eq!(
        message["source"],
        json!({"kind": "plugin", "plugin": "hooks-codex"})
    );
}

#[test]
fn a_missing_file_registers_nothing_and_a_bad_one_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("hooks.json");
    assert!(
        HooksConfig::load(Dialect::ClaudeCode, &missing)
            .unwrap()
            .is_none()
    );
    std::fs::write(&missing, "{not json").unwrap();
    assert!(HooksConfig::load(Dialect::ClaudeCode, &missing).is_err());
    std::fs::write(
        &missing,
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}"#,
    )
    .unwrap();
    let config = HooksConfig::load(Dialect::ClaudeCode, &missing)
        .unwrap()
        .unwrap();
    assert!(config.is_empty());
    let registry = ToolRegistry::new(RegistryConfig::default());
    assert!(install(&registry, &Scope::root(), config).is_empty());
    assert!(registry.pre_execute().is_empty());
}

#[tokio::test]
async fn nothing_the_hook_started_outlives_it() {
    let f = Fixture::new(
        Dialect::ClaudeCode,
        cc("PreToolUse", "bash", &["(sleep 1; touch late) & echo '{}'"]),
    );
    let started = Instant::now();
    let result = f.call("bash").await;
    assert!(started.elapsed() < Duration::from_millis(900));
    assert!(!result.is_error);
    assert_eq!(f.decisions(), ["pass"]);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!f.dir.path().join("late").exists());
}

#[tokio::test]
async fn a_cancelled_call_stops_its_hook() {
    let f = Fixture::new(
        Dialect::ClaudeCode,
        cc("PreToolUse", "bash", &["sleep 30; exit 2"]),
    );
    let signal = CancellationToken::new();
    let input = ToolCallInput::new("call-1", "bash", json!({"command": "x"}), signal.clone())
        .agent(f.agent.clone());
    let cancel = signal.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let result = f.registry.execute(input).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(result.is_error);
    assert_eq!(f.ran(), 0);
    assert_eq!(f.decisions(), ["cancelled"]);
}
