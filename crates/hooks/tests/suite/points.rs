//! UserPromptSubmit, Stop, SessionStart, Subagent* and loading (checklist §A.12 items 1–4,
//! 36–42, 49).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use dsh_agent::scripted::text_response;
use dsh_hooks::Dialect;
use dsh_hooks::SubagentRun;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use super::support::Rig;
use super::support::Setup;
use super::support::group;

async fn until(mut cond: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("condition never held");
}

#[tokio::test]
async fn item_01_04_load_failures_register_nothing_and_warn() {
    let rig = Rig::cc(json!({"hooks": {
        "UserPromptSubmit": [group(None, &["exit 2"])],
        "PreToolUse": [group(Some("["), &["exit 2"])],
    }}));
    assert!(rig.bridge.is_none());
    let path = rig.dir.path().join("hooks.json");
    assert_eq!(
        rig.warnings,
        [format!(
            "hooks-claude-code: could not load hook config \"{}\": SyntaxError: invalid claude-code regex matcher \"[\" on event \"PreToolUse\" — no hooks registered",
            path.display()
        )]
    );
    rig.adapter.push_chunks(text_response("fine"));
    rig.prompt("hello").await;
    assert!(rig.of("hook/invoked").is_empty());
    assert_eq!(rig.of("turn/end")[0]["reason"]["kind"], "completed");

    let missing = Rig::with(Setup {
        settings: Some(Box::new(|s| s.config_path = "no-such-hooks.json".into())),
        ..Setup::new(Dialect::Codex, json!({}))
    });
    assert_eq!(
        missing.warnings,
        [
            "hooks-codex: could not load hook config \"no-such-hooks.json\": Error: ENOENT: no such file or directory, open 'no-such-hooks.json' — no hooks registered"
        ]
    );
}

#[tokio::test]
async fn item_36_a_blocking_prompt_hook_ends_the_turn_without_a_step() {
    let rig = Rig::cc(
        json!({"UserPromptSubmit": [group(None, &["cat > prompt.json; echo no >&2; exit 2"])]}),
    );
    rig.prompt("forbidden words").await;
    assert_eq!(
        rig.skeleton(),
        [
            "agent/inbox/spliced",
            "turn/start",
            "agent/inbox/spliced",
            "hook/invoked",
            "hook/result",
            "turn/end"
        ]
    );
    assert_eq!(rig.of("turn/end")[0]["reason"]["kind"], "blocked");
    assert!(rig.adapter.requests().is_empty());
    assert_eq!(rig.of("hook/result")[0]["stderrSummary"], "no");
    let payload = rig.json("prompt.json");
    assert_eq!(payload["prompt"], "forbidden words");
    let keys: Vec<&str> = payload
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "session_id",
            "transcript_path",
            "cwd",
            "hook_event_name",
            "prompt"
        ]
    );
}

#[tokio::test]
async fn item_37_prompt_context_follows_the_prompt_in_the_same_step() {
    let ctx = r#"echo '{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"remember X"}}'"#;
    let rig = Rig::cc(json!({"UserPromptSubmit": [group(None, &[ctx])]}));
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("hi").await;
    let texts = rig.user_texts();
    assert_eq!(texts[0].0, "hi");
    let last = texts.last().unwrap();
    assert_eq!(last.0, "remember X");
    assert_eq!(
        last.1,
        json!({"kind": "plugin", "plugin": "hooks-claude-code"})
    );
    assert_eq!(rig.of("step/start").len(), 1);
    let request = &rig.adapter.requests()[0];
    assert!(format!("{:?}", request.messages).contains("remember X"));
}

#[tokio::test]
async fn item_38_39_plain_stdout_is_context_for_codex_only() {
    let script = |cmd: &str| json!({"UserPromptSubmit": [group(None, &[cmd])]});
    let codex = Rig::codex(script("echo 'plain context'"));
    codex.adapter.push_chunks(text_response("ok"));
    codex.prompt("hi").await;
    assert_eq!(codex.user_texts().last().unwrap().0, "plain context");
    for (dialect, cmd) in [
        (Dialect::Codex, "echo 'plain context'; exit 1"),
        (Dialect::Codex, "echo '{not json'"),
        (Dialect::ClaudeCode, "echo 'plain context'"),
    ] {
        let rig = Rig::with(Setup::new(dialect, script(cmd)));
        rig.adapter.push_chunks(text_response("ok"));
        rig.prompt("hi").await;
        let texts = rig.user_texts();
        assert!(
            texts
                .iter()
                .all(|(t, _)| !t.contains("context") && !t.contains("not json")),
            "{cmd}: {texts:?}"
        );
    }
    let turn = Rig::codex(script("cat > p.json"));
    turn.adapter.push_chunks(text_response("ok"));
    turn.prompt("hi").await;
    let payload = turn.json("p.json");
    assert_eq!(payload["turn_id"], "1");
    assert_eq!(payload["transcript_path"], turn.transcript().as_str());
}

#[tokio::test]
async fn item_40_41_a_blocking_stop_hook_steers_another_step() {
    let once =
        "cat > stop.json; if [ ! -f seen ]; then touch seen; echo 'keep going' >&2; exit 2; fi";
    let rig = Rig::cc(json!({"Stop": [group(None, &[once])]}));
    rig.adapter.push_chunks(text_response("first"));
    rig.adapter.push_chunks(text_response("second"));
    rig.prompt("go").await;
    assert_eq!(rig.of("turn/start").len(), 1);
    assert_eq!(rig.of("step/start").len(), 2);
    let steer = rig
        .user_texts()
        .into_iter()
        .find(|(t, _)| t == "keep going")
        .unwrap();
    assert_eq!(
        steer.1,
        json!({"kind": "plugin", "plugin": "hooks-claude-code"})
    );
    let payload = rig.json("stop.json");
    assert_eq!(payload["stop_hook_active"], false);
    // Stop events come after step/end, before turn/end.
    let skeleton = rig.skeleton();
    let end = skeleton.iter().rposition(|k| k == "turn/end").unwrap();
    assert_eq!(
        &skeleton[end - 3..end],
        ["step/end", "hook/invoked", "hook/result"]
    );

    let default = "if [ ! -f seen ]; then touch seen; exit 2; fi";
    let codex =
        Rig::codex(json!({"Stop": [group(None, &[&format!("cat > stop.json; {default}")])]}));
    codex.adapter.push_chunks(text_response("first"));
    codex.adapter.push_chunks(text_response("second"));
    codex.prompt("go").await;
    assert!(
        codex
            .user_texts()
            .iter()
            .any(|(t, _)| t == "continue: blocked by Stop hook")
    );
    let payload = codex.json("stop.json");
    assert_eq!(payload["last_assistant_message"], Value::Null);
    assert_eq!(payload["stop_hook_active"], false);
    assert_eq!(payload["turn_id"], "1");
}

#[tokio::test]
async fn item_42_session_start_context_is_injected_without_hook_events() {
    let ctx = r#"cat > start.json; echo '{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"project rules"}}'"#;
    let rig = Rig::cc(
        json!({"SessionStart": [group(Some("startup"), &[ctx]), group(Some("resume"), &["touch resumed"])]}),
    );
    let work = rig.work.clone();
    until(|| work.join("start.json").exists()).await;
    let agent = rig.agent.clone();
    until(|| !agent.pending().0.is_empty() || !agent.pending().1.is_empty()).await;
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("hi").await;
    assert!(
        rig.user_texts()
            .iter()
            .any(|(t, s)| t == "project rules" && s["plugin"] == "hooks-claude-code")
    );
    assert!(rig.of("hook/invoked").is_empty());
    assert!(!rig.work.join("resumed").exists());
    let payload = rig.json("start.json");
    assert_eq!(payload["source"], "startup");
    assert_eq!(payload["hook_event_name"], "SessionStart");
}

#[tokio::test]
async fn item_49_shutdown_aborts_a_running_detached_hook_and_waits() {
    let rig = Rig::cc(
        json!({"SessionStart": [group(None, &["touch started; sleep 30; touch finished"])]}),
    );
    let work = rig.work.clone();
    until(|| work.join("started").exists()).await;
    let bridge = rig.bridge.clone().unwrap();
    tokio::time::timeout(Duration::from_secs(5), bridge.shutdown())
        .await
        .expect("shutdown must not wait for the hook's sleep");
    assert!(!rig.work.join("finished").exists());
}

#[tokio::test]
async fn subagent_hooks_see_the_child_and_inject_into_it() {
    let ctx = r#"cat > sub-start.json; echo '{"hookSpecificOutput":{"hookEventName":"SubagentStart","additionalContext":"child note"}}'"#;
    let rig = Rig::cc(json!({
        "SubagentStart": [group(Some("general-purpose"), &[ctx])],
        "SubagentStop": [group(None, &["cat > sub-stop.json"])],
    }));
    let bridge = rig.bridge.clone().unwrap();
    bridge.subagent_start(SubagentRun {
        run_id: "run-1".into(),
        agent_id: "child-1".into(),
        child: Some(rig.agent.clone()),
    });
    let work = rig.work.clone();
    until(|| work.join("sub-start.json").exists()).await;
    let agent = rig.agent.clone();
    until(|| !agent.pending().0.is_empty() || !agent.pending().1.is_empty()).await;
    let payload = rig.json("sub-start.json");
    assert_eq!(payload["agent_id"], "child-1");
    assert_eq!(payload["agent_type"], "general-purpose");
    assert_eq!(payload["session_id"], rig.agent.log().header().id.as_str());
    bridge.subagent_end(SubagentRun {
        run_id: "run-1".into(),
        agent_id: "child-1".into(),
        child: None,
    });
    until(|| {
        work.join("sub-stop.json").exists()
            && std::fs::metadata(work.join("sub-stop.json")).unwrap().len() > 0
    })
    .await;
    let stop = rig.json("sub-stop.json");
    assert_eq!(stop["stop_hook_active"], false);
    // The remembered child still supplies the cwd after the run ended.
    assert_eq!(stop["cwd"], rig.work.to_str().unwrap());
    assert!(rig.of("hook/invoked").is_empty());
}
