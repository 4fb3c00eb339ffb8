//! The reference server's prompts as slash commands: listed in the registry once the server is
//! connected, and a run sends the fetched prompt to the agent as the user's next prompt.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::DEFAULT_MAX_PARALLEL_TOOL_CALLS;
use dsh_agent::PromptConfig;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_commands::CommandRegistry;
use dsh_mcp::McpOptions;
use dsh_mcp::McpServer;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolRegistry;

use super::support::*;

#[tokio::test]
async fn prompts_become_commands_that_prompt_the_agent() {
    let Some(bin) = server_bin() else { return };
    let h = Harness::new();
    let commands = CommandRegistry::install(&h.root).unwrap();
    let server = McpServer::mount(
        &h.root,
        &h.registry,
        stdio_config("everything", &bin),
        &McpOptions::default(),
    )
    .await
    .unwrap();
    let task = dsh_mcp::register_prompt_commands(&commands, &server);
    wait_command(&commands, &h.root, "mcp__everything__simple-prompt", true).await;
    let listed: Vec<String> = commands.list(&h.root).into_iter().map(|c| c.name).collect();
    assert!(
        listed.contains(&"mcp__everything__simple-prompt".to_owned()),
        "{listed:?}"
    );
    let args = commands
        .find(&h.root, "mcp__everything__args-prompt")
        .unwrap();
    assert_eq!(
        args.description,
        "A prompt with two arguments, one required and one optional"
    );

    let log = SessionLog::in_memory(SessionHeader::new("s", None));
    let agent = Agent::create(AgentConfig {
        id: "s".into(),
        cwd: None,
        provider: "scripted".into(),
        model: "m".into(),
        max_tokens: None,
        adapter: ScriptedAdapter::new("scripted"),
        tools: ToolRegistry::new(RegistryConfig::default()),
        scope: h.root.clone(),
        log: log.clone(),
        prompt: PromptConfig::default(),
        max_parallel_tool_calls: DEFAULT_MAX_PARALLEL_TOOL_CALLS,
    })
    .unwrap();
    let signal = tokio_util::sync::CancellationToken::new();
    // A missing required argument is the command's error; nothing reaches the agent.
    let missing = commands
        .execute(
            &agent,
            "/mcp__everything__args-prompt",
            Vec::new(),
            signal.clone(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        missing.result.display_text().as_deref(),
        Some("Error: prompt args-prompt needs city (write name=value)")
    );
    let ran = commands
        .execute(
            &agent,
            "/mcp__everything__args-prompt city=Paris state=TX",
            Vec::new(),
            signal,
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ran.result.display_text(), None, "{:?}", ran.result);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = serde_json::to_string(&*log.events().unwrap()).unwrap();
        if text.contains("What's weather in Paris, TX?") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Unmounting the server takes its commands away, and the follower ends.
    server.dispose();
    assert!(
        commands
            .find(&h.root, "mcp__everything__args-prompt")
            .is_none()
    );
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the prompt follower ends with the server")
        .unwrap();
}

/// Waits (bounded) until `name` is (or is no longer) a command `scope` sees.
async fn wait_command(
    commands: &CommandRegistry,
    scope: &dsh_kernel::Scope,
    name: &str,
    present: bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while commands.find(scope, name).is_some() != present {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} present={present} never held; commands: {:?}",
            commands
                .list(scope)
                .into_iter()
                .map(|c| c.name)
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `notifications/prompts/list_changed` re-lists: a prompt added at run time becomes a command,
/// a removed one goes, and the registry's change listeners (the TUI palette, ACP
/// `available_commands_update`) hear about each. A reconnect re-lists too.
#[tokio::test]
async fn a_prompt_list_change_updates_the_commands() {
    let Some(_) = server_bin() else { return };
    let script = repo_root().join("tests/mcp-server/changing-prompts.mjs");
    let h = Harness::new();
    let commands = CommandRegistry::install(&h.root).unwrap();
    let changes = Arc::new(AtomicUsize::new(0));
    let counter = changes.clone();
    let _listening = commands.on_change(&h.root, move || {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    let mut config =
        dsh_mcp::McpServerConfig::stdio("changing", "node", vec![script.display().to_string()]);
    config.reconnect = fast_reconnect();
    let server = McpServer::mount(&h.root, &h.registry, config, &McpOptions::default())
        .await
        .unwrap();
    let _task = dsh_mcp::register_prompt_commands(&commands, &server);
    wait_command(&commands, &h.root, "mcp__changing__first", true).await;
    assert!(commands.find(&h.root, "mcp__changing__second").is_none());
    let before = changes.load(Ordering::SeqCst);

    let added = h
        .call(
            "mcp__changing__add-prompt",
            serde_json::json!({"name": "second", "description": "Added later"}),
        )
        .await;
    assert_eq!(added.text(), "first,second");
    wait_command(&commands, &h.root, "mcp__changing__second", true).await;
    assert_eq!(
        commands
            .find(&h.root, "mcp__changing__second")
            .unwrap()
            .description,
        "Added later"
    );
    assert!(
        changes.load(Ordering::SeqCst) > before,
        "listeners were told"
    );

    let removed = h
        .call(
            "mcp__changing__remove-prompt",
            serde_json::json!({"name": "first"}),
        )
        .await;
    assert_eq!(removed.text(), "second");
    wait_command(&commands, &h.root, "mcp__changing__first", false).await;
    assert!(commands.find(&h.root, "mcp__changing__second").is_some());

    // The restarted server lists only its initial prompt: the reconnect re-lists.
    kill(server.pid().unwrap());
    wait_command(&commands, &h.root, "mcp__changing__first", true).await;
    wait_command(&commands, &h.root, "mcp__changing__second", false).await;

    server.dispose();
    assert!(commands.find(&h.root, "mcp__changing__first").is_none());
}
