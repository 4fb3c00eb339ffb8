//! The reference server's prompts as slash commands: listed in the registry once the server is
//! connected, and a run sends the fetched prompt to the agent as the user's next prompt.

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
    dsh_mcp::register_prompt_commands(&commands, &server)
        .await
        .unwrap();
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
        let text = serde_json::to_string(&*log.events()).unwrap();
        if text.contains("What's weather in Paris, TX?") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Unmounting the server takes its commands away.
    server.dispose();
    assert!(
        commands
            .find(&h.root, "mcp__everything__args-prompt")
            .is_none()
    );
}
