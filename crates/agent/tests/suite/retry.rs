//! §10 items 37–42: errors, recovery and the retry executor.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dsh_agent::AbortReason;
use dsh_agent::PreStepDecision;
use dsh_agent::Recovery;
use dsh_agent::prompt::Section;
use dsh_agent::prompt::Slot;
use dsh_agent::scripted::error_response;
use dsh_agent::scripted::text_response;
use dsh_kernel::HookError;
use dsh_llm::RetryPolicy;
use dsh_protocol::LlmFailure;
use dsh_protocol::Message;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::Options;
use super::support::Rig;
use super::support::idle;
use super::support::until;

fn fast_policy(max_retries: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(10),
        jitter_ratio: 0.0,
        ..RetryPolicy::default()
    }
}

#[tokio::test]
async fn item_37_an_error_finish_is_logged_and_ends_the_turn_with_the_failure() {
    let rig = Rig::new();
    let mut failure = LlmFailure::new("AUTH", "bad key");
    failure.status = Some(401);
    rig.adapter.push_chunks(error_response(failure.clone()));
    rig.prompt("go").await;
    let chunks = rig.of("assistant/chunk");
    assert_eq!(chunks.len(), 1);
    assert_eq!(
        chunks[0].data["chunk"],
        json!({"type": "finish", "reason": {"kind": "error", "failure": {"message": "bad key", "code": "AUTH", "status": 401}}})
    );
    assert!(rig.of("assistant/message").is_empty());
    assert_eq!(
        rig.turn_ends(),
        [json!({"kind": "error", "error": {"message": "bad key", "code": "AUTH", "status": 401}})]
    );
    assert!(rig.of("llm/retry").is_empty());
    let kinds = rig.kinds();
    assert_eq!(
        kinds[kinds.len() - 3..],
        ["assistant/chunk", "step/end", "turn/end"]
    );
}

#[tokio::test]
async fn item_38_a_retry_decision_re_requests_in_the_same_step() {
    let rig = Rig::with(Options {
        setup: Some(Box::new(|root, hooks, _| {
            hooks
                .request_error
                .register(root, |_, _| Box::pin(async { Ok(Some(Recovery::Retry)) }));
        })),
        ..Options::default()
    });
    rig.adapter
        .push_chunks(error_response(LlmFailure::new("AUTH", "flaky")));
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("go").await;
    assert_eq!(rig.of("turn/start").len(), 1);
    assert_eq!(rig.of("step/start").len(), 1);
    let chunks: Vec<u64> = rig.of("assistant/chunk").iter().map(|e| e.seq).collect();
    let message = &rig.of("assistant/message")[0];
    assert_eq!(message.source_event_seqs(), Some(&chunks[1..]));
    assert_eq!(rig.turn_ends(), [json!({"kind": "completed"})]);
    assert_eq!(rig.adapter.requests().len(), 2);
}

#[tokio::test]
async fn item_39_hook_and_render_failures_end_the_turn_without_request_error() {
    let recoveries = Arc::new(AtomicUsize::new(0));
    let mode = Arc::new(AtomicUsize::new(0));
    let (count, which) = (recoveries.clone(), mode.clone());
    let rig = Rig::with(Options {
        setup: Some(Box::new(move |root, hooks, _| {
            let which2 = which.clone();
            hooks.request.register(root, move |input, next| {
                if which2.load(Ordering::SeqCst) == 1 {
                    return Box::pin(async { Err(HookError::msg("request listener failed")) });
                }
                next.run(input)
            });
            let which3 = which.clone();
            hooks.pre_step.register(root, move |input, next| {
                if which3.load(Ordering::SeqCst) == 2 {
                    return Box::pin(async { Err(HookError::msg("pre-step failed")) });
                }
                next.run(input)
            });
            hooks.request_error.register(root, move |_, _| {
                count.fetch_add(1, Ordering::SeqCst);
                Box::pin(async { Err(HookError::msg("recovery failed")) })
            });
        })),
        ..Options::default()
    });
    // 0: a section's variable is undefined → render error.
    let bad = rig.prompts.register_section(
        &rig.root,
        Section::new("bad", Slot::Tools, "{{persona_var}}"),
    );
    rig.prompt("render").await;
    bad.dispose();
    // 1: agent/request throws. 2: agent/pre-step throws.
    mode.store(1, Ordering::SeqCst);
    rig.prompt("request").await;
    mode.store(2, Ordering::SeqCst);
    rig.prompt("prestep").await;
    let messages: Vec<String> = rig
        .turn_ends()
        .iter()
        .map(|r| r["error"]["message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        messages,
        [
            "system prompt variable \"persona_var\" is not defined",
            "request listener failed",
            "pre-step failed"
        ]
    );
    assert_eq!(recoveries.load(Ordering::SeqCst), 0);
    assert!(rig.adapter.requests().is_empty());
    let errors = rig
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, dsh_agent::AgentEvent::Error { .. }))
        .count();
    assert_eq!(errors, 3);
    // 3: a throwing recovery listener → turn error, no retry.
    mode.store(3, Ordering::SeqCst);
    rig.adapter
        .push_chunks(error_response(LlmFailure::new("SERVER", "down")));
    rig.prompt("recovery").await;
    assert_eq!(recoveries.load(Ordering::SeqCst), 1);
    assert_eq!(rig.turn_ends()[3]["error"]["message"], "recovery failed");
    // The agent still serves later prompts.
    rig.adapter.push_chunks(text_response("fine"));
    rig.prompt("later").await;
    assert_eq!(rig.turn_ends()[4], json!({"kind": "completed"}));
}

#[tokio::test]
async fn item_40_the_retry_executor_retries_retryable_codes_with_a_per_step_budget() {
    let rig = Rig::new();
    rig.adapter.set_retry_policy(fast_policy(2));
    for _ in 0..2 {
        rig.adapter
            .push_chunks(error_response(LlmFailure::new("RATE_LIMIT", "slow down")));
    }
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("go").await;
    assert_eq!(rig.turn_ends(), [json!({"kind": "completed"})]);
    let retries = rig.of("llm/retry");
    let started = rig.of("llm/retry-started");
    assert_eq!(retries.len(), 2);
    assert_eq!(started.len(), 2);
    let first = &retries[0].data;
    let keys: Vec<&String> = first.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "retryId",
            "turn",
            "step",
            "provider",
            "mode",
            "policyKey",
            "retry",
            "maxRetries",
            "delayMs",
            "failure"
        ]
    );
    assert_eq!(first["mode"], "normal");
    assert_eq!(
        first["policyKey"],
        r#"["normal",2,["EMPTY_RESPONSE","RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],1,10,0]"#
    );
    assert_eq!(retries[1].data["retry"], 2);
    assert_eq!(retries[1].data["retryId"], first["retryId"]);
    assert_eq!(
        started[0].data,
        json!({"retryId": first["retryId"], "turn": 1, "step": 1, "retry": 1})
    );
    assert!(retries[0].seq < started[0].seq && started[0].seq < retries[1].seq);

    // Budget spent: the third failure of a step ends the turn.
    for _ in 0..3 {
        rig.adapter
            .push_chunks(error_response(LlmFailure::new("SERVER", "down")));
    }
    rig.prompt("again").await;
    assert_eq!(rig.turn_ends()[1]["error"]["code"], "SERVER");
    assert_eq!(rig.of("llm/retry").len(), 4);

    // A non-retryable code is not retried.
    rig.adapter
        .push_chunks(error_response(LlmFailure::new("INVALID_REQUEST", "no")));
    rig.prompt("third").await;
    assert_eq!(rig.of("llm/retry").len(), 4);
    assert_eq!(rig.turn_ends()[2]["error"]["code"], "INVALID_REQUEST");
}

#[tokio::test]
async fn item_41_retry_after_is_used_verbatim_or_gives_up() {
    let rig = Rig::new();
    rig.adapter.set_retry_policy(fast_policy(5));
    let mut short = LlmFailure::new("RATE_LIMIT", "wait");
    short.provider_retry_after_ms = Some(7);
    rig.adapter.push_chunks(error_response(short));
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("go").await;
    assert_eq!(rig.of("llm/retry")[0].data["delayMs"], 7);
    let mut long = LlmFailure::new("RATE_LIMIT", "wait long");
    long.provider_retry_after_ms = Some(60_000);
    rig.adapter.push_chunks(error_response(long));
    rig.prompt("again").await;
    assert_eq!(rig.of("llm/retry").len(), 1);
    assert_eq!(rig.turn_ends()[1]["error"]["code"], "RATE_LIMIT");
}

#[tokio::test]
async fn item_42_cancelling_during_a_retry_wait_aborts_without_retry_started() {
    let rig = Rig::new();
    rig.adapter.set_retry_policy(RetryPolicy {
        base_delay: Duration::from_secs(30),
        max_delay: Duration::from_secs(60),
        ..RetryPolicy::default()
    });
    rig.adapter
        .push_chunks(error_response(LlmFailure::new("TIMEOUT", "stalled")));
    rig.agent.followup(Message::user_text("go")).unwrap();
    until(|| !rig.of("llm/retry").is_empty()).await;
    rig.agent.cancel(AbortReason::User, false);
    idle(&rig.agent).await;
    assert!(rig.of("llm/retry-started").is_empty());
    assert_eq!(
        rig.turn_ends(),
        [json!({"kind": "aborted", "reason": {"kind": "user"}})]
    );
    let _ = PreStepDecision::Reject;
}
