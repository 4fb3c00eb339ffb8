//! PreToolUse / PostToolUse through the real pipeline (checklist §A.12 items 13–35, 43–48, 50).
#![allow(clippy::unwrap_used)]

use std::sync::atomic::Ordering;

use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_hooks::Dialect;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use super::support::Rig;
use super::support::Setup;
use super::support::group;

fn pre(rig_hooks: Value) -> Value {
    json!({"hooks": {"PreToolUse": rig_hooks}})
}

async fn call_bash(rig: &Rig) {
    rig.adapter.push_chunks(tool_call_response(
        "c1",
        "bash",
        r#"{"command":"echo HELLO"}"#,
        None,
    ));
    rig.adapter.push_chunks(text_response("done"));
    rig.prompt("go").await;
}

#[tokio::test]
async fn item_13_14_15_stdin_framing_cwd_and_project_dir() {
    let hooks = pre(json!([group(
        Some("bash"),
        &["cat > stdin.bin; pwd > cwd.txt; printf %s \"${CLAUDE_PROJECT_DIR-unset}\" > env.txt"]
    )]));
    let cc = Rig::cc(hooks.clone());
    call_bash(&cc).await;
    let stdin = cc.read("stdin.bin");
    assert!(
        stdin.ends_with("}\n") && !stdin.ends_with("\n\n"),
        "{stdin:?}"
    );
    let payload: Value = serde_json::from_str(stdin.trim_end()).unwrap();
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
            "tool_name",
            "tool_input",
            "tool_use_id"
        ]
    );
    assert_eq!(payload["session_id"], cc.agent.log().header().id.as_str());
    assert_eq!(payload["transcript_path"], cc.transcript().as_str());
    assert_eq!(payload["cwd"], cc.work.to_str().unwrap());
    assert_eq!(payload["tool_input"], json!({"command": "echo HELLO"}));
    assert_eq!(payload["tool_use_id"], "c1");
    assert_eq!(cc.read("cwd.txt").trim(), cc.work.to_str().unwrap());
    assert_eq!(cc.read("env.txt"), cc.work.to_str().unwrap());

    let configured = Rig::with(Setup {
        settings: Some(Box::new(|s| s.project_dir = Some("/proj".into()))),
        ..Setup::new(Dialect::ClaudeCode, hooks.clone())
    });
    call_bash(&configured).await;
    assert_eq!(configured.read("env.txt"), "/proj");

    let codex = Rig::with(Setup {
        settings: Some(Box::new(|s| s.model = "m-1".into())),
        ..Setup::new(Dialect::Codex, hooks)
    });
    call_bash(&codex).await;
    let stdin = codex.read("stdin.bin");
    assert!(stdin.ends_with('}'), "{stdin:?}");
    let payload: Value = serde_json::from_str(&stdin).unwrap();
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
            "model",
            "permission_mode",
            "turn_id",
            "tool_name",
            "tool_input",
            "tool_use_id"
        ]
    );
    assert_eq!(
        (
            payload["model"].clone(),
            payload["permission_mode"].clone(),
            payload["turn_id"].clone()
        ),
        (json!("m-1"), json!("default"), json!("1"))
    );
    assert_eq!(codex.read("env.txt"), "unset");
}

#[tokio::test]
async fn item_17_18_exit_2_denies_with_stderr_or_the_default() {
    let rig = Rig::cc(pre(json!([group(Some("bash"), &["echo x >&2; exit 2"])])));
    call_bash(&rig).await;
    assert_eq!(rig.result_text(0), ("Error: x".into(), true));
    assert_eq!(rig.body_runs.load(Ordering::SeqCst), 0);
    let rig = Rig::cc(pre(json!([group(Some("bash"), &["exit 2"])])));
    call_bash(&rig).await;
    assert_eq!(rig.result_text(0).0, "Error: blocked by PreToolUse hook");
}

#[tokio::test]
async fn item_19_failures_and_timeouts_are_non_blocking_passes() {
    let rig = Rig::cc(pre(json!([
        group(Some("bash"), &["echo oops >&2; exit 1", "exit 127"]),
        {"matcher": "bash", "hooks": [{"type": "command", "command": "sleep 30", "timeout": 0.3}]},
    ])));
    call_bash(&rig).await;
    assert_eq!(rig.result_text(0), ("ran echo HELLO".into(), false));
    let results = rig.of("hook/result");
    assert_eq!(results.len(), 3);
    for r in &results {
        assert_eq!(r["decision"], "pass");
    }
    assert_eq!(results[0]["exitCode"], 1);
    assert_eq!(results[0]["stderrSummary"], "oops");
    assert_eq!(results[1]["exitCode"], 127);
    // item 45: a timeout kill has no exit code.
    assert!(results[2].get("exitCode").is_none());
    assert!(results[2]["durationMs"].as_f64().unwrap() >= 250.0);
}

#[tokio::test]
async fn item_20_21_22_23_json_decisions() {
    let deny_json = r#"echo '{"decision":"block","reason":"r"}'"#;
    let rig = Rig::cc(pre(json!([group(None, &[deny_json])])));
    call_bash(&rig).await;
    assert_eq!(rig.result_text(0).0, "Error: r");
    for ignored in [
        r#"echo '{"decision":"deny"}'"#,
        r#"echo '{"hookSpecificOutput":{"permissionDecision":"deny"}}'"#,
        r#"echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","permissionDecision":"deny"}}'"#,
        "echo '{garbage'",
        "echo plain words",
    ] {
        let rig = Rig::cc(pre(json!([group(None, &[ignored])])));
        call_bash(&rig).await;
        assert_eq!(rig.result_text(0).0, "ran echo HELLO", "{ignored}");
        assert_eq!(rig.of("hook/result")[0]["decision"], "pass");
    }
    let named = r#"echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"p"}}'"#;
    let rig = Rig::cc(pre(json!([group(None, &[named])])));
    call_bash(&rig).await;
    assert_eq!(rig.result_text(0).0, "Error: p");
    assert_eq!(rig.of("hook/result")[0]["decision"], "deny");
}

#[tokio::test]
async fn item_24_47_48_every_hook_runs_and_reasons_join() {
    let rig = Rig::cc(json!({"hooks": {
        "PreToolUse": [group(Some("bash"), &["echo a >&2; exit 2"]), group(None, &["echo b >&2; exit 2"])],
        "PostToolUse": [group(Some(""), &["true"])],
    }}));
    call_bash(&rig).await;
    assert_eq!(rig.result_text(0).0, "Error: a\n\nb");
    let invoked = rig.of("hook/invoked");
    let results = rig.of("hook/result");
    assert_eq!(invoked.len(), 3);
    assert_eq!(results.len(), 3);
    let ids: Vec<&str> = invoked
        .iter()
        .map(|e| e["handlerId"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "claude-code:PreToolUse:1",
            "claude-code:PreToolUse:2",
            "claude-code:PostToolUse:3"
        ]
    );
    assert_eq!(invoked[0]["matcher"], "bash");
    assert!(invoked[1].get("matcher").is_none());
    assert_eq!(invoked[2]["matcher"], "");
    assert_eq!(invoked[0]["turn"], 1);
    assert_eq!(invoked[0]["dialect"], "claude-code");
    // Pairs are adjacent and sit between tool/call and tool/result.
    let skeleton = rig.skeleton();
    let call = skeleton.iter().position(|k| k == "tool/call").unwrap();
    assert_eq!(
        &skeleton[call..call + 8],
        [
            "tool/call",
            "hook/invoked",
            "hook/result",
            "hook/invoked",
            "hook/result",
            "hook/invoked",
            "hook/result",
            "tool/result"
        ]
    );
    // The next call continues the process counter.
    call_bash(&rig).await;
    let ids: Vec<String> = rig
        .of("hook/invoked")
        .iter()
        .map(|e| e["handlerId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids[3], "claude-code:PreToolUse:4");
}

#[tokio::test]
async fn item_25_28_ask_without_an_approval_service_and_allow_does_not_bypass_it() {
    let ask = r#"echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask"}}'"#;
    let allow = r#"echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}'"#;
    let rig = Rig::cc(pre(json!([group(None, &[allow, ask])])));
    call_bash(&rig).await;
    assert_eq!(
        rig.result_text(0).0,
        "Error: tool \"bash\" requires approval (not yet supported)"
    );
    assert_eq!(rig.body_runs.load(Ordering::SeqCst), 0);
    let reasoned = r#"echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"check"}}'"#;
    let rig = Rig::cc(pre(json!([group(None, &[reasoned])])));
    call_bash(&rig).await;
    assert_eq!(rig.result_text(0).0, "Error: check");
}

#[tokio::test]
async fn item_27_codex_ask_and_allow_let_the_tool_run() {
    for decision in ["ask", "allow"] {
        let out = format!(
            r#"echo '{{"hookSpecificOutput":{{"hookEventName":"PreToolUse","permissionDecision":"{decision}"}}}}'"#
        );
        let rig = Rig::codex(pre(json!([group(None, &[&out])])));
        call_bash(&rig).await;
        assert_eq!(rig.result_text(0).0, "ran echo HELLO");
        assert!(rig.of("approval/asked").is_empty());
    }
    // Codex deny works like Claude Code's.
    let rig = Rig::codex(pre(json!([group(Some("bash"), &["echo no >&2; exit 2"])])));
    call_bash(&rig).await;
    assert_eq!(rig.result_text(0).0, "Error: no");
}

#[tokio::test]
async fn item_29_pre_tool_use_context_is_not_injected() {
    let ctx = r#"echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","additionalContext":"secret note"}}'"#;
    let rig = Rig::cc(pre(json!([group(None, &[ctx])])));
    call_bash(&rig).await;
    assert!(
        rig.user_texts()
            .iter()
            .all(|(t, _)| !t.contains("secret note"))
    );
}

#[tokio::test]
async fn item_30_31_32_post_tool_use_block_and_context() {
    let post = |cmds: &[&str]| json!({"hooks": {"PostToolUse": [group(Some("bash"), cmds)]}});
    let rig = Rig::cc(post(&["echo f >&2; exit 2"]));
    call_bash(&rig).await;
    assert_eq!(rig.result_text(0), ("f".into(), true));
    assert_eq!(rig.body_runs.load(Ordering::SeqCst), 1);
    let rig = Rig::cc(post(&["exit 2"]));
    call_bash(&rig).await;
    assert_eq!(
        rig.result_text(0),
        ("blocked by PostToolUse hook".into(), true)
    );
    let c1 = r#"echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"one"}}'"#;
    let c2 = r#"echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"two"}}'"#;
    let rig = Rig::cc(post(&[c1, c2]));
    call_bash(&rig).await;
    assert_eq!(rig.result_text(0), ("ran echo HELLO".into(), false));
    let skeleton = rig.skeleton();
    let result = skeleton.iter().position(|k| k == "tool/result").unwrap();
    // Deferred through the next-step inbox: the next surface event after the result.
    let next = skeleton[result + 1..]
        .iter()
        .find(|k| *k == "user/message" || *k == "assistant/message")
        .unwrap();
    assert_eq!(next, "user/message");
    let messages = rig.of("user/message");
    let context = messages
        .iter()
        .find(|m| m["source"]["kind"] == "plugin" && m["source"]["plugin"] == "hooks-claude-code")
        .unwrap();
    assert_eq!(
        context["content"],
        json!([{"type": "text", "text": "one"}, {"type": "text", "text": "two"}])
    );
}

#[tokio::test]
async fn item_33_34_35_post_tool_use_sees_denials_and_codex_reduces_the_input() {
    let hooks = json!({"hooks": {
        "PreToolUse": [group(None, &["echo nope >&2; exit 2"])],
        "PostToolUse": [group(None, &["cat > post.json"])],
    }});
    let rig = Rig::cc(hooks.clone());
    call_bash(&rig).await;
    let payload = rig.json("post.json");
    assert_eq!(payload["tool_response"], "Error: nope");
    assert_eq!(payload["hook_event_name"], "PostToolUse");
    assert_eq!(payload["tool_input"], json!({"command": "echo HELLO"}));
    let codex = Rig::codex(json!({"PostToolUse": [group(None, &["cat > post.json"])]}));
    codex.adapter.push_chunks(tool_call_response(
        "c9",
        "bash",
        r#"{"cmd":"x","n":1}"#,
        None,
    ));
    codex.adapter.push_chunks(text_response("done"));
    codex.prompt("go").await;
    let payload = codex.json("post.json");
    assert_eq!(payload["tool_input"], json!({"command": ""}));
    assert_eq!(payload["tool_response"], "ran ");
    assert_eq!(payload["tool_use_id"], "c9");
    assert_eq!(payload["transcript_path"], codex.transcript().as_str());
}

#[tokio::test]
async fn item_43_continue_false_is_recorded_as_stop_and_halts_nothing() {
    let rig = Rig::cc(pre(json!([group(
        None,
        &[r#"echo '{"continue":false,"stopReason":"halt"}'"#]
    )])));
    call_bash(&rig).await;
    assert_eq!(rig.of("hook/result")[0]["decision"], "stop");
    assert_eq!(rig.result_text(0).0, "ran echo HELLO");
    assert_eq!(rig.of("turn/end")[0]["reason"]["kind"], "completed");
}

#[tokio::test]
async fn item_44_46_the_summary_cap_is_configurable_and_validated() {
    let rig = Rig::with(Setup {
        settings: Some(Box::new(|s| s.stderr_summary_max_chars = 3.0)),
        ..Setup::new(
            Dialect::ClaudeCode,
            pre(json!([group(None, &["echo '  abcdef  ' >&2"])])),
        )
    });
    call_bash(&rig).await;
    assert_eq!(rig.of("hook/result")[0]["stderrSummary"], "abc…");
    for (dialect, bad) in [
        (Dialect::ClaudeCode, 0.0),
        (Dialect::ClaudeCode, 1.5),
        (Dialect::Codex, -2.0),
    ] {
        let mut settings = dsh_hooks::BridgeSettings::new("/nonexistent.json");
        settings.stderr_summary_max_chars = bad;
        let executor =
            std::sync::Arc::new(dsh_hooks::LocalExecutor::new(std::sync::Arc::new(Vec::new)));
        let error = dsh_hooks::HookBridge::load(dialect, settings, executor, None)
            .err()
            .unwrap();
        assert_eq!(
            error.to_string(),
            format!(
                "{}: stderrSummaryMaxChars must be a positive integer",
                dialect.plugin()
            )
        );
    }
}

#[tokio::test]
async fn item_50_a_zero_timeout_is_an_executor_refusal_recorded_as_pass() {
    let rig = Rig::cc(pre(
        json!([{"hooks": [{"type": "command", "command": "exit 2", "timeout": 0}]}]),
    ));
    call_bash(&rig).await;
    let result = &rig.of("hook/result")[0];
    assert_eq!(result["decision"], "pass");
    assert_eq!(
        result["stderrSummary"],
        "bash-local: request.timeoutMs must be a positive finite number"
    );
    assert!(result.get("exitCode").is_none());
    assert_eq!(rig.result_text(0).0, "ran echo HELLO");
}

#[tokio::test]
async fn matchers_pick_the_tools_their_groups_apply_to() {
    let rig = Rig::cc(pre(json!([
        group(Some("Bash"), &["echo cc-literal >&2; exit 2"]),
        group(Some("^ba"), &["touch regex-ran"]),
    ])));
    call_bash(&rig).await;
    assert_eq!(rig.result_text(0).0, "ran echo HELLO");
    assert!(rig.work.join("regex-ran").exists());
    assert_eq!(rig.of("hook/invoked").len(), 1);
}

struct Never;

impl dsh_approval::PolicySource for Never {
    fn standing(&self) -> dsh_approval::Policy {
        dsh_approval::Policy::Never
    }
}

struct Loud(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl dsh_tools::ApprovalService for Loud {
    fn request(
        &self,
        _: dsh_tools::ApprovalRequest,
    ) -> dsh_kernel::BoxFuture<'static, dsh_tools::ApprovalOutcome> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { dsh_tools::ApprovalOutcome::AllowedOnce })
    }
}

#[tokio::test]
async fn item_26_ask_under_policy_never_is_an_audited_rejection_without_a_client() {
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let client = asked.clone();
    let reasoned = r#"echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"needs a human"}}'"#;
    let rig = Rig::with(Setup {
        before_agent: Some(Box::new(move |root, _| {
            root.provide::<dyn dsh_tools::ApprovalService>(std::sync::Arc::new(
                dsh_approval::UserApproval::new(
                    Some(std::sync::Arc::new(Loud(client))),
                    Some(std::sync::Arc::new(Never)),
                ),
            ))
            .unwrap();
        })),
        ..Setup::new(Dialect::ClaudeCode, pre(json!([group(None, &[reasoned])])))
    });
    call_bash(&rig).await;
    // Upstream's text here is "the user rejected tool", though no one was asked; dsh tells the
    // model the truth (issue #29): the policy refused it, and which setting. The audit pair
    // keeps upstream's `rejected`.
    assert_eq!(
        rig.result_text(0).0,
        "Error: tool \"bash\" was refused by policy: it needs approval, and the approval policy is \"never\" (set by `-a never` / `[plugins.approval] policy = \"never\"`), so no one was asked"
    );
    assert_eq!(asked.load(Ordering::SeqCst), 0);
    assert_eq!(rig.body_runs.load(Ordering::SeqCst), 0);
    let asked_event = &rig.of("approval/asked")[0];
    assert_eq!(asked_event["reason"], "needs a human");
    assert_eq!(asked_event["toolName"], "bash");
    assert_eq!(rig.of("approval/decided")[0]["outcome"], "rejected");
    let skeleton = rig.skeleton();
    let call = skeleton.iter().position(|k| k == "tool/call").unwrap();
    assert_eq!(
        &skeleton[call..call + 6],
        [
            "tool/call",
            "hook/invoked",
            "hook/result",
            "approval/asked",
            "approval/decided",
            "tool/result"
        ]
    );
}
