//! §10 items 53–57: system prompt assembly and the runtime-context snapshot.

use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::PromptConfig;
use dsh_agent::prompt::Section;
use dsh_agent::prompt::SectionText;
use dsh_agent::prompt::Slot;
use dsh_agent::scripted::text_response;
use dsh_protocol::Message;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::Options;
use super::support::Rig;
use super::support::idle;
use super::support::text;
use super::support::tool;

#[tokio::test]
async fn item_53_sections_render_in_order_with_the_default_opener() {
    let rig = Rig::new();
    rig.adapter.push_chunks(text_response("a"));
    rig.prompt("go").await;
    assert_eq!(
        rig.adapter.requests()[0].system.as_deref(),
        Some("You are an AI agent powered by DeepSeek Harness.")
    );

    let rig = Rig::with(Options {
        prompt: PromptConfig {
            persona: "You are a test agent on {{model}}.".into(),
            ..Default::default()
        },
        ..Options::default()
    });
    let _ = rig.prompts.register_section(
        &rig.root,
        Section::new("guide", Slot::Tools, "Use the noop tool wisely."),
    );
    let _ = rig
        .prompts
        .register_section(&rig.root, Section::new("empty", Slot::Policy, ""));
    rig.adapter.push_chunks(text_response("a"));
    rig.prompt("go").await;
    let expected = "You are an AI agent powered by DeepSeek Harness.\n\nYou are a test agent on mock.\n\nUse the noop tool wisely.";
    assert_eq!(rig.adapter.requests()[0].system.as_deref(), Some(expected));
    assert_eq!(
        rig.of("request/header")[0].data["header"]["system"],
        expected
    );
}

#[tokio::test]
async fn item_54_an_unknown_variable_fails_the_turn_before_any_request() {
    let rig = Rig::new();
    let _ = rig.prompts.register_section(
        &rig.root,
        Section::new("bad", Slot::Tools, "Hello {{nobody}}"),
    );
    rig.prompt("go").await;
    assert!(rig.adapter.requests().is_empty());
    assert!(rig.of("request/header").is_empty());
    assert_eq!(
        rig.turn_ends()[0]["error"]["message"],
        "system prompt variable \"nobody\" is not defined"
    );
}

#[tokio::test]
async fn item_55_a_scoped_section_shadows_the_global_one_for_that_agent_only() {
    let rig = Rig::new();
    let _ = rig.prompts.register_section(
        &rig.root,
        Section::new("guide", Slot::Tools, "global guide"),
    );
    let _ = rig.prompts.register_section(
        rig.agent.scope(),
        Section::new("guide", Slot::Tools, "scoped guide"),
    );
    let other_log =
        dsh_session::SessionLog::in_memory(dsh_session::SessionHeader::new("other", None));
    let other_adapter = dsh_agent::scripted::ScriptedAdapter::new("mock");
    let other = dsh_agent::Agent::create(dsh_agent::AgentConfig {
        id: "other".into(),
        cwd: None,
        provider: "mock".into(),
        model: "mock".into(),
        max_tokens: None,
        adapter: other_adapter.clone(),
        tools: rig.tools.clone(),
        scope: rig.root.clone(),
        log: other_log,
        prompt: PromptConfig::default(),
        max_parallel_tool_calls: 10,
    })
    .unwrap();
    rig.adapter.push_chunks(text_response("a"));
    other_adapter.push_chunks(text_response("b"));
    rig.prompt("go").await;
    other.followup(Message::user_text("go")).unwrap();
    idle(&other).await;
    let mine = rig.adapter.requests()[0].system.clone().unwrap();
    let theirs = other_adapter.requests()[0].system.clone().unwrap();
    assert!(
        mine.ends_with("scoped guide") && !mine.contains("global guide"),
        "{mine}"
    );
    assert!(theirs.ends_with("global guide"), "{theirs}");
}

#[tokio::test]
async fn item_56_tool_schemas_are_lexicographic_unless_ordered() {
    let names = |rig: &Rig| -> Vec<String> {
        rig.adapter.requests()[0]
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    let register = |rig: &Rig| {
        for name in ["zeta", "alpha", "mid"] {
            rig.register(tool(name, false, |_, _| async { Ok(String::new()) }));
        }
    };
    let rig = Rig::new();
    register(&rig);
    rig.adapter.push_chunks(text_response("a"));
    rig.prompt("go").await;
    assert_eq!(names(&rig), ["alpha", "mid", "zeta"]);
    let header_tools: Vec<String> = rig.of("request/header")[0].data["header"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(header_tools, ["alpha", "mid", "zeta"]);

    let rig = Rig::with(Options {
        prompt: PromptConfig {
            tool_order: Some(vec!["zeta".into(), "<unlisted-tools>".into()]),
            ..Default::default()
        },
        ..Options::default()
    });
    register(&rig);
    rig.adapter.push_chunks(text_response("a"));
    rig.prompt("go").await;
    assert_eq!(names(&rig), ["zeta", "alpha", "mid"]);
}

#[tokio::test]
async fn item_57_runtime_context_snapshots_track_changes() {
    let policy = Arc::new(Mutex::new("Sandbox: workspace-write.".to_owned()));
    let source = policy.clone();
    let context = Section {
        name: "sandbox:policy".into(),
        slot: Slot::Sandbox,
        text: SectionText::Dynamic(Arc::new(move |_| source.lock().unwrap().clone())),
        complete: false,
    };
    let rig = Rig::with(Options {
        prompt: PromptConfig {
            contexts: vec![context],
            ..Default::default()
        },
        ..Options::default()
    });
    for t in ["a", "b", "c", "d"] {
        rig.adapter.push_chunks(text_response(t));
    }
    rig.prompt("one").await;
    rig.prompt("two").await;
    *policy.lock().unwrap() = "Sandbox: read-only.".into();
    rig.prompt("three").await;
    *policy.lock().unwrap() = String::new();
    rig.prompt("four").await;
    let messages: Vec<(String, serde_json::Value)> = rig
        .of("user/message")
        .iter()
        .map(|e| (text(&e.data), e.data["source"].clone()))
        .collect();
    let header =
        "Current runtime context. This snapshot supersedes earlier runtime-context snapshots.";
    assert_eq!(messages.len(), 7);
    assert_eq!(messages[0].0, "one");
    assert_eq!(
        messages[1].0,
        format!("{header}\n\nSandbox: workspace-write.")
    );
    assert_eq!(
        messages[1].1,
        json!({"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt", "form": "snapshot", "sections": [{"name": "sandbox:policy", "text": "Sandbox: workspace-write."}]})
    );
    assert_eq!(messages[2].0, "two");
    assert_eq!(messages[3].0, "three");
    assert_eq!(messages[4].0, format!("{header}\n\nSandbox: read-only."));
    assert_eq!(messages[5].0, "four");
    assert_eq!(
        messages[6].0,
        "Current runtime context: none. Earlier runtime-context snapshots no longer apply."
    );
    assert_eq!(
        messages[6].1,
        json!({"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt"})
    );
    // The snapshot is its own user message after the claimed prompt, before the header.
    let kinds = rig.kinds();
    let first_header = kinds.iter().position(|k| k == "request/header").unwrap();
    assert_eq!(
        kinds[first_header - 2..first_header],
        ["user/message", "user/message"]
    );
}

#[tokio::test]
async fn a_complete_persona_is_the_whole_system_prompt() {
    // context-spec checklist I102.
    let rig = Rig::with(Options {
        prompt: PromptConfig {
            persona: "Only me, on {{model}}.".into(),
            persona_complete: true,
            sections: vec![Section::new("own", Slot::Tools, "agent section")],
            ..Default::default()
        },
        ..Options::default()
    });
    let _ = rig
        .prompts
        .register_section(&rig.root, Section::new("guide", Slot::Tools, "registered"));
    rig.adapter.push_chunks(text_response("a"));
    rig.prompt("go").await;
    assert_eq!(
        rig.adapter.requests()[0].system.as_deref(),
        Some("Only me, on mock.")
    );
}
