//! Agent presets on the real host (context-spec §12.4, checklist I.102): a switch before the
//! first prompt changes the tools and the system prompt the next request carries, is logged,
//! and resume and fork see it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dsh_agent::AgentHandle;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_agent::scripted::text_response;
use dsh_commands::CommandRegistry;
use dsh_commands::CommandResult;
use dsh_host::Config;
use dsh_host::Host;
use dsh_host::HostOptions;
use dsh_host::Layer;
use dsh_host::NewSession;
use dsh_llm::ModelRequest;
use dsh_protocol::Message;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct Rig {
    host: Host,
    adapter: Arc<ScriptedAdapter>,
    _home: tempfile::TempDir,
    cwd: tempfile::TempDir,
}

fn write_preset(home: &Path, id: &str, text: &str) {
    let dir = home.join(".agent-presets").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("preset.toml"), text).unwrap();
}

const REVIEW: &str = r#"
description = "Reads and searches, never writes"
[persona]
text = "You review code in {{cwd}}."
[tools]
allow = ["read", "grep", "not_a_tool_here"]
"#;

const BARE: &str = r#"
[persona]
text = "Only the persona, on {{model}}."
complete = true
include_runtime_context = false
"#;

fn options(home: &Path, cwd: &Path, plugins: Value) -> (HostOptions, Arc<ScriptedAdapter>) {
    let mut config = Config::empty(home.to_path_buf(), cwd.to_path_buf());
    let mut rows = serde_json::Map::new();
    rows.insert("session-title".into(), json!({"enabled": false}));
    if let Value::Object(extra) = plugins {
        rows.extend(extra);
    }
    let mut table = serde_json::Map::new();
    table.insert("plugins".into(), Value::Object(rows));
    config.merge(Layer::User, table, None);
    let adapter = ScriptedAdapter::new("deepseek");
    let mut options = HostOptions::new(config);
    // The default JSONL store under the home: resume reads what was written.
    options.adapter = Some(adapter.clone());
    (options, adapter)
}

fn build(home: &Path, cwd: &Path, plugins: Value) -> Result<Host, dsh_host::HostError> {
    Host::build(options(home, cwd, plugins).0)
}

impl Rig {
    fn new(plugins: Value) -> Self {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        write_preset(home.path(), "review", REVIEW);
        write_preset(home.path(), "bare", BARE);
        let (options, adapter) = options(home.path(), cwd.path(), plugins);
        let host = Host::build(options).unwrap();
        Self {
            host,
            adapter,
            _home: home,
            cwd,
        }
    }

    fn session(&self) -> AgentHandle {
        self.host
            .sessions()
            .create(NewSession {
                id: None,
                cwd: self.cwd.path().to_path_buf(),
            })
            .unwrap()
    }

    async fn command(&self, agent: &AgentHandle, line: &str) -> CommandResult {
        let registry = CommandRegistry::of(agent.scope()).unwrap();
        registry
            .execute(agent, line, Vec::new(), CancellationToken::new())
            .await
            .unwrap()
            .expect("a known command")
            .result
    }

    /// Runs one prompt and returns the request it made.
    async fn ask(&self, agent: &AgentHandle, prompt: &str) -> ModelRequest {
        let before = self.adapter.requests().len();
        self.adapter.push_chunks(text_response("ok"));
        agent.followup(Message::user_text(prompt)).unwrap();
        tokio::time::timeout(Duration::from_secs(20), agent.when_idle())
            .await
            .unwrap();
        let requests = self.adapter.requests();
        assert_eq!(requests.len(), before + 1, "one request per prompt");
        requests.last().unwrap().clone()
    }

    fn cwd(&self) -> String {
        self.cwd
            .path()
            .canonicalize()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }
}

fn tool_names(request: &ModelRequest) -> Vec<String> {
    let mut names: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
    names.sort();
    names
}

fn text(result: &CommandResult) -> String {
    result.display_text().unwrap_or_default()
}

#[tokio::test]
async fn switching_presets_changes_the_tools_and_prompt_of_the_next_request() {
    let rig = Rig::new(json!({}));
    let standard = rig.session();
    let reviewed = rig.session();

    let listing = rig.command(&reviewed, "/preset").await;
    assert!(matches!(listing, CommandResult::Success { .. }));
    let listing = text(&listing);
    assert!(
        listing.starts_with("Agent presets (current: standard):\n"),
        "{listing}"
    );
    assert!(
        listing.contains("  review — Reads and searches, never writes"),
        "{listing}"
    );

    let switched = rig.command(&reviewed, "/preset review").await;
    assert_eq!(text(&switched), "Switched to preset review.");
    // Logged between the command's own records, as a standalone event.
    let kinds: Vec<String> = reviewed
        .log()
        .events()
        .unwrap()
        .iter()
        .map(|e| e.kind.to_string())
        .filter(|k| k.starts_with("command/") || k.starts_with("agent-preset/"))
        .collect();
    assert_eq!(
        kinds,
        [
            "command/run",
            "command/done",
            "command/run",
            "agent-preset/selected",
            "command/done"
        ]
    );
    assert_eq!(
        reviewed
            .log()
            .last_of_kind("agent-preset/selected")
            .unwrap()
            .data,
        json!({"preset": "review"})
    );

    let plain = rig.ask(&standard, "hello").await;
    let review = rig.ask(&reviewed, "hello").await;
    // The filter keeps the named tools the session has and drops the unknown name.
    assert_eq!(tool_names(&review), ["grep", "read"]);
    assert!(tool_names(&plain).contains(&"bash".to_owned()));
    let persona = format!("You review code in {}.", rig.cwd());
    assert!(review.system.as_deref().unwrap().contains(&persona));
    assert!(!plain.system.as_deref().unwrap_or("").contains(&persona));
    // The identity and the other sections stay (the persona is not complete).
    assert!(
        review
            .system
            .as_deref()
            .unwrap()
            .starts_with(dsh_agent::prompt::HARNESS_IDENTITY)
    );

    // After the first prompt the preset is fixed.
    let refused = rig.command(&reviewed, "/preset standard").await;
    assert_eq!(
        refused,
        CommandResult::error("The preset can only be switched before the session's first prompt.")
    );
    let again = rig.command(&reviewed, "/preset review").await;
    assert_eq!(text(&again), "Already using preset review.");
    let unknown = rig.command(&standard, "/preset nope").await;
    assert_eq!(unknown, CommandResult::error("Unknown preset: nope"));

    // A fork reads the preset from the copied log.
    let sessions = rig.host.sessions();
    let fork = sessions.fork(reviewed.id()).unwrap();
    let forked = rig.ask(&fork, "again").await;
    assert_eq!(tool_names(&forked), ["grep", "read"]);
    assert!(forked.system.as_deref().unwrap().contains(&persona));

    // So does a resume.
    let id = reviewed.id().to_owned();
    reviewed.dispose().await;
    drop(reviewed);
    let resumed = sessions.load(&id).unwrap();
    let request = rig.ask(&resumed, "and again").await;
    assert_eq!(tool_names(&request), ["grep", "read"]);
    assert!(request.system.as_deref().unwrap().contains(&persona));
}

#[tokio::test]
async fn a_complete_persona_is_the_whole_system_prompt() {
    // Checklist I.102, and `include_runtime_context = false` suppressing the snapshot.
    let rig = Rig::new(json!({}));
    let agent = rig.session();
    let plain = rig.ask(&rig.session(), "hello").await;
    assert!(
        plain
            .messages
            .iter()
            .any(|m| dsh_protocol::text_of(&m.content).starts_with("Current runtime context.")),
        "a plain session carries a runtime-context snapshot"
    );
    assert_eq!(
        text(&rig.command(&agent, "/preset bare").await),
        "Switched to preset bare."
    );
    let request = rig.ask(&agent, "hello").await;
    let model = rig.host.sessions().route().1;
    assert_eq!(
        request.system.as_deref(),
        Some(format!("Only the persona, on {model}.").as_str())
    );
    assert!(
        !request
            .messages
            .iter()
            .any(|m| dsh_protocol::text_of(&m.content).starts_with("Current runtime context."))
    );
}

#[tokio::test]
async fn the_code_preset_offers_run_code_only() {
    let rig = Rig::new(json!({}));
    let agent = rig.session();
    rig.command(&agent, "/preset code").await;
    let request = rig.ask(&agent, "hello").await;
    assert_eq!(tool_names(&request), ["run_code"]);
    let sdk = request.system.unwrap();
    assert!(sdk.contains("read"), "the SDK declares the native tools");
}

#[tokio::test]
async fn the_default_preset_is_configured_and_checked() {
    let rig = Rig::new(json!({"agent-presets": {"default": "review"}}));
    let agent = rig.session();
    let request = rig.ask(&agent, "hello").await;
    assert_eq!(tool_names(&request), ["grep", "read"]);
    // Nothing is logged for a session that never switched.
    assert!(agent.log().last_of_kind("agent-preset/selected").is_none());

    let home = tempfile::tempdir().unwrap();
    let error = build(
        home.path(),
        home.path(),
        json!({"agent-presets": {"default": "nope"}}),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("default preset \"nope\" is not in the roster"),
        "{error}"
    );
    let error = build(
        home.path(),
        home.path(),
        json!({"agent-presets": {"defaults": "code"}}),
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("defaults"), "{error}");
}

#[tokio::test]
async fn the_command_is_in_the_one_registry_with_its_hint() {
    let rig = Rig::new(json!({}));
    let agent = rig.session();
    let registry = CommandRegistry::of(agent.scope()).unwrap();
    let info = registry.find(agent.scope(), "preset").unwrap();
    assert_eq!(info.description, "Show or switch the agent preset");
    assert_eq!(info.input.unwrap().hint, "[<preset>]");
    // Switched off, the command and the preset pieces go.
    let off = Rig::new(json!({"agent-presets": {"enabled": false}}));
    let agent = off.session();
    assert!(
        CommandRegistry::of(agent.scope())
            .unwrap()
            .find(agent.scope(), "preset")
            .is_none()
    );
}
