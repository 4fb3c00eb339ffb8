use std::sync::atomic::AtomicUsize;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::DEFAULT_MAX_PARALLEL_TOOL_CALLS;
use dsh_agent::PromptConfig;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_kernel::ScopeKind;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolRegistry;
use pretty_assertions::assert_eq;

use super::*;

fn agent(root: &Scope) -> AgentHandle {
    let log = SessionLog::in_memory(SessionHeader::new("s", None));
    Agent::create(AgentConfig {
        id: "s".into(),
        cwd: None,
        provider: "scripted".into(),
        model: "m".into(),
        max_tokens: None,
        adapter: ScriptedAdapter::new("scripted"),
        tools: ToolRegistry::new(RegistryConfig::default()),
        scope: root.clone(),
        log,
        prompt: PromptConfig::default(),
        max_parallel_tool_calls: DEFAULT_MAX_PARALLEL_TOOL_CALLS,
    })
    .unwrap()
}

fn echo() -> CommandSpec {
    CommandSpec::new("echo", "Say it back", |call: CommandCall| async move {
        Ok(CommandResult::text(call.argument().to_owned()))
    })
    .input("<text>")
}

fn names(list: &[CommandInfo]) -> Vec<(&str, &str)> {
    list.iter()
        .map(|c| (c.name.as_str(), c.description.as_str()))
        .collect()
}

#[test]
fn registration_checks_use_upstream_texts() {
    let root = Scope::root();
    let registry = CommandRegistry::install(&root).unwrap();
    let noop = |_: CommandCall| async { Ok(CommandResult::ok()) };
    let bad = registry
        .register(&root, CommandSpec::new("Bad", "x", noop))
        .unwrap_err();
    assert_eq!(
        bad.to_string(),
        "command name \"Bad\" must match /^[a-z][a-z0-9_-]*$/u"
    );
    assert!(matches!(
        registry.register(&root, CommandSpec::new("a", " ", noop)),
        Err(CommandError::InvalidDescription(_))
    ));
    assert!(matches!(
        registry.register(&root, CommandSpec::new("a", "x", noop).input("")),
        Err(CommandError::InvalidHint(_))
    ));
    registry.register(&root, echo()).unwrap();
    let plugin = root.child(ScopeKind::Plugin, "p").unwrap();
    assert_eq!(
        registry.register(&plugin, echo()).unwrap_err().to_string(),
        "command \"echo\" is already registered (for a per-agent variant, mount a command-injected plugin under that agent's `agent.ctx`)"
    );
    let agent_scope = root.child(ScopeKind::Agent, "a").unwrap();
    registry.register(&agent_scope, echo()).unwrap();
    assert_eq!(
        registry
            .register(&agent_scope, echo())
            .unwrap_err()
            .to_string(),
        "command \"echo\" is already registered in this scope"
    );
    assert_eq!(
        CommandRegistry::of(&agent_scope)
            .unwrap()
            .list(&agent_scope)
            .len(),
        1
    );
}

#[test]
fn scoped_commands_shadow_global_ones_and_disposal_removes_them() {
    let root = Scope::root();
    let registry = CommandRegistry::install(&root).unwrap();
    let changes = Arc::new(AtomicUsize::new(0));
    let seen = changes.clone();
    let _watch = registry.on_change(&root, move || {
        seen.fetch_add(1, Ordering::SeqCst);
    });
    let noop = |_: CommandCall| async { Ok(CommandResult::ok()) };
    let global = registry
        .register(
            &root,
            CommandSpec::new("plan", "Enter or leave plan mode", noop),
        )
        .unwrap();
    registry
        .register(
            &root,
            CommandSpec::new("compact", "Compact older conversation history", noop),
        )
        .unwrap();
    let first = root.child(ScopeKind::Agent, "first").unwrap();
    let second = root.child(ScopeKind::Agent, "second").unwrap();
    let tools = first.child(ScopeKind::Plugin, "tools").unwrap();
    registry
        .register(&tools, CommandSpec::new("plan", "A per-agent plan", noop))
        .unwrap();
    assert_eq!(
        names(&registry.list(&first)),
        vec![
            ("compact", "Compact older conversation history"),
            ("plan", "A per-agent plan")
        ]
    );
    assert_eq!(
        names(&registry.list(&second)),
        vec![
            ("compact", "Compact older conversation history"),
            ("plan", "Enter or leave plan mode")
        ]
    );
    assert_eq!(
        registry.find(&tools, "plan").unwrap().description,
        "A per-agent plan"
    );
    assert_eq!(changes.load(Ordering::SeqCst), 3);
    first.dispose();
    assert_eq!(changes.load(Ordering::SeqCst), 4);
    assert_eq!(
        registry.find(&second, "plan").unwrap().description,
        "Enter or leave plan mode"
    );
    global.dispose();
    assert_eq!(registry.find(&second, "plan"), None);
    assert_eq!(changes.load(Ordering::SeqCst), 5);
    assert!(matches!(
        registry.register(&first, CommandSpec::new("late", "x", noop)),
        Err(CommandError::Disposed(_))
    ));
}

fn kinds(agent: &AgentHandle) -> Vec<serde_json::Value> {
    agent
        .log()
        .events()
        .unwrap()
        .iter()
        .filter(|e| e.kind.starts_with("command/"))
        .map(|e| json!({"type": e.kind, "data": e.data}))
        .collect()
}

#[tokio::test]
async fn execution_is_logged_as_run_and_done() {
    let root = Scope::root();
    let registry = CommandRegistry::install(&root).unwrap();
    registry.register(&root, echo()).unwrap();
    registry
        .register(
            &root,
            CommandSpec::new("secret", "Takes a token", |_: CommandCall| async {
                Err("no vault".to_owned())
            })
            .input("<token>")
            .record_input(false),
        )
        .unwrap();
    let agent = agent(&root);
    let signal = CancellationToken::new();
    assert_eq!(
        registry
            .execute(&agent, "/unknown x", Vec::new(), signal.clone())
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        registry
            .execute(&agent, "echo hi", Vec::new(), signal.clone())
            .await
            .unwrap(),
        None
    );
    assert!(kinds(&agent).is_empty(), "nothing logged for non-commands");
    let done = registry
        .execute(&agent, "/echo  hello", Vec::new(), signal.clone())
        .await
        .unwrap()
        .unwrap();
    assert!(done.command_id.starts_with("cmd-"));
    assert!(done.command_id.ends_with("-1"));
    assert_eq!(done.result.display_text().as_deref(), Some("hello"));
    let failed = registry
        .execute(&agent, "/secret abc", Vec::new(), signal.clone())
        .await
        .unwrap_err();
    assert_eq!(failed, CommandError::Failed("no vault".into()));
    let image = ContentBlock::Image {
        attachment: json!({"attachmentId": "sha256:x"}),
    };
    let refused = registry
        .execute(&agent, "/echo look", vec![image], signal.clone())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        refused.result,
        CommandResult::error("/echo does not accept image attachments")
    );
    let id = |n: u64| format!("{}-{n}", &done.command_id[..done.command_id.len() - 2]);
    assert_eq!(
        kinds(&agent),
        vec![
            json!({"type": "command/run", "data": {"commandId": id(1), "name": "echo", "args": "  hello", "source": {"kind": "user"}}}),
            json!({"type": "command/done", "data": {"commandId": id(1), "kind": "success", "text": "hello"}}),
            json!({"type": "command/run", "data": {"commandId": id(2), "name": "secret", "source": {"kind": "user"}}}),
            json!({"type": "command/done", "data": {"commandId": id(2), "kind": "error", "text": "no vault"}}),
            json!({"type": "command/run", "data": {"commandId": id(3), "name": "echo", "args": " look", "source": {"kind": "user"}}}),
            json!({"type": "command/done", "data": {"commandId": id(3), "kind": "error", "text": "/echo does not accept image attachments"}}),
        ]
    );
    agent.dispose().await;
}

#[tokio::test]
async fn a_cancelled_handler_settles_as_an_error() {
    let root = Scope::root();
    let registry = CommandRegistry::install(&root).unwrap();
    registry
        .register(
            &root,
            CommandSpec::new("wait", "Never finishes", |_: CommandCall| {
                std::future::pending::<Result<CommandResult, String>>()
            }),
        )
        .unwrap();
    let agent = agent(&root);
    let signal = CancellationToken::new();
    let cancel = signal.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        cancel.cancel();
    });
    let error = registry
        .execute(&agent, "/wait", Vec::new(), signal)
        .await
        .unwrap_err();
    assert_eq!(error, CommandError::Cancelled);
    let last = agent.log().last().unwrap();
    assert_eq!(last.kind, "command/done");
    assert_eq!(last.data["text"], "the command was cancelled");
    agent.dispose().await;
}

#[tokio::test]
async fn a_switch_is_logged_as_a_success_that_names_the_session_and_choices_go_step_by_step() {
    let root = Scope::root();
    let registry = CommandRegistry::install(&root).unwrap();
    registry
        .register(
            &root,
            CommandSpec::new(
                "branch",
                "Continue elsewhere",
                |call: CommandCall| async move {
                    Ok(CommandResult::Switch {
                        text: Some(format!("continuing at {}", call.argument())),
                        session: "s-2".into(),
                    })
                },
            )
            .input("N [part]")
            .choices(|_agent: &AgentHandle, partial: &str| match partial {
                "" => vec![CommandChoice {
                    value: "1".into(),
                    label: "1. first".into(),
                    detail: String::new(),
                }],
                "1" => ["a", "b"]
                    .map(|part| CommandChoice {
                        value: format!("1 {part}"),
                        label: part.into(),
                        detail: String::new(),
                    })
                    .to_vec(),
                _ => Vec::new(),
            }),
        )
        .unwrap();
    registry.register(&root, echo()).unwrap();
    let agent = agent(&root);
    let step = |partial: &str| -> Vec<String> {
        registry
            .choices(&agent, "branch", partial)
            .unwrap()
            .into_iter()
            .map(|c| c.value)
            .collect()
    };
    assert_eq!(step(""), vec!["1"]);
    assert_eq!(step("1"), vec!["1 a", "1 b"]);
    assert!(step("1 a").is_empty(), "the argument is complete");
    assert_eq!(registry.choices(&agent, "echo", ""), None);
    assert_eq!(registry.choices(&agent, "nope", ""), None);
    let done = registry
        .execute(&agent, "/branch 1 a", Vec::new(), CancellationToken::new())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.result.switch_to(), Some("s-2"));
    assert_eq!(
        done.result.display_text().as_deref(),
        Some("continuing at 1 a")
    );
    let logged = kinds(&agent);
    assert_eq!(logged[1]["data"]["kind"], "success");
    assert_eq!(logged[1]["data"]["switchTo"], "s-2");
    agent.dispose().await;
}
