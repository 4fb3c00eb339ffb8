//! Codex and Claude Code providers. The prompt rules need no CLI; the live runs need the real
//! CLIs (and their own sign-in) and skip, loudly, when they are not installed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHandle;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_subagent::StartRequest;
use dsh_subagent::StopReason;
use dsh_subagent::SubagentProvider;
use dsh_subagent_remote::claude::ClaudeConfig;
use dsh_subagent_remote::claude::ClaudeProvider;
use dsh_subagent_remote::codex::CodexConfig;
use dsh_subagent_remote::codex::CodexProvider;
use tokio_util::sync::CancellationToken;

fn parent(cwd: &std::path::Path) -> AgentHandle {
    let root = Scope::root();
    let tools =
        dsh_tools::ToolRegistry::install(&root, dsh_tools::RegistryConfig::default()).unwrap();
    let log = dsh_session::SessionLog::in_memory(dsh_session::SessionHeader::new(
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

fn request(parent: &AgentHandle, prompt: Vec<ContentBlock>) -> StartRequest {
    StartRequest::new(parent.clone(), prompt, CancellationToken::new())
}

#[tokio::test]
async fn product_prompts_must_be_non_empty_text() {
    let dir = tempfile::tempdir().unwrap();
    let parent = parent(dir.path());
    let codex = CodexProvider::new(CodexConfig::default()).unwrap();
    let claude = ClaudeProvider::new(ClaudeConfig::default()).unwrap();
    let image = ContentBlock::Image {
        attachment: serde_json::json!({"sha256": "x"}),
    };
    // Checklist 82 (no CLI is started for a rejected prompt).
    let error = codex
        .start(request(
            &parent,
            vec![ContentBlock::text("look"), image.clone()],
        ))
        .await
        .unwrap_err();
    assert_eq!(
        error.message,
        "subagent-codex: the one-shot task must contain only text blocks"
    );
    let error = codex.start(request(&parent, vec![])).await.unwrap_err();
    assert_eq!(
        error.message,
        "subagent-codex: the one-shot task must not be empty"
    );
    let error = claude
        .start(request(&parent, vec![image]))
        .await
        .unwrap_err();
    assert_eq!(
        error.message,
        "subagent-claude-code: the one-shot task must contain only text blocks"
    );
    let error = claude
        .start(request(&parent, vec![ContentBlock::text(" \n")]))
        .await
        .unwrap_err();
    assert_eq!(
        error.message,
        "subagent-claude-code: the one-shot task must not be empty"
    );
    // Checklist 81: no capabilities, no inherited context.
    for provider in [codex as std::sync::Arc<dyn SubagentProvider>, claude] {
        assert_eq!(provider.capabilities(), dsh_subagent::Capabilities::NONE);
        assert!(!provider.inherits_parent_context());
    }
}

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(name).is_file()))
}

/// The CLI to run: `$DSH_TEST_<NAME>` when set, else `name` on `PATH`.
fn cli(name: &str, var: &str) -> Option<String> {
    if let Some(path) = std::env::var_os(var) {
        return Some(path.to_string_lossy().into_owned());
    }
    on_path(name).then(|| name.to_owned())
}

/// One real turn through `codex app-server`. Without network or sign-in the turn fails, and
/// the run must then be an error with the product diagnostic; with them it must complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_codex_turn() {
    let Some(command) = cli("codex", "DSH_TEST_CODEX") else {
        eprintln!(
            "SKIPPED a_live_codex_turn: the Codex CLI is not installed (put `codex` on PATH or set DSH_TEST_CODEX)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let parent = parent(dir.path());
    let codex = CodexProvider::new(CodexConfig {
        command,
        env: std::collections::BTreeMap::from([(
            "CODEX_HOME".to_owned(),
            home.path().to_string_lossy().into_owned(),
        )]),
        ..CodexConfig::default()
    })
    .unwrap();
    let run = codex
        .start(request(
            &parent,
            vec![ContentBlock::text("Reply with exactly CODEX_OK.")],
        ))
        .await
        .unwrap();
    let result = tokio::time::timeout(std::time::Duration::from_secs(120), run.result())
        .await
        .unwrap()
        .unwrap();
    run.dispose().await.unwrap();
    match result.stop_reason {
        StopReason::Completed => {
            assert!(dsh_protocol::text_of(&result.output).contains("CODEX_OK"))
        }
        StopReason::Error => assert!(
            result
                .diagnostic
                .as_deref()
                .unwrap_or_default()
                .starts_with("Product subagent failure (product: Codex; stage: turn; category: "),
            "{:?}",
            result.diagnostic
        ),
        other => panic!("unexpected stop reason {other}: {:?}", result.diagnostic),
    }
}

/// One real query through the `claude` CLI. Without sign-in the CLI answers with an error
/// result, and the run must then be an error with the product diagnostic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_claude_code_query() {
    let Some(command) = cli("claude", "DSH_TEST_CLAUDE") else {
        eprintln!(
            "SKIPPED a_live_claude_code_query: the Claude Code CLI is not installed (put `claude` on PATH or set DSH_TEST_CLAUDE)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let parent = parent(dir.path());
    let claude = ClaudeProvider::new(ClaudeConfig {
        command,
        env: std::collections::BTreeMap::from([(
            "HOME".to_owned(),
            home.path().to_string_lossy().into_owned(),
        )]),
        ..ClaudeConfig::default()
    })
    .unwrap();
    let run = claude
        .start(request(
            &parent,
            vec![ContentBlock::text("Reply with exactly CLAUDE_OK.")],
        ))
        .await
        .unwrap();
    let result = tokio::time::timeout(std::time::Duration::from_secs(120), run.result())
        .await
        .unwrap()
        .unwrap();
    run.dispose().await.unwrap();
    match result.stop_reason {
        StopReason::Completed => {
            assert!(dsh_protocol::text_of(&result.output).contains("CLAUDE_OK"))
        }
        StopReason::Error => assert!(
            result
                .diagnostic
                .as_deref()
                .unwrap_or_default()
                .starts_with("Product subagent failure (product: Claude Code; stage: "),
            "{:?}",
            result.diagnostic
        ),
        other => panic!("unexpected stop reason {other}: {:?}", result.diagnostic),
    }
}
