//! Checklist items 63–68: cancellation and scheduling.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dsh_protocol::ContentBlock;
use dsh_tools::CancellationToken;
use dsh_tools::ExecutionMode;
use dsh_tools::PostDecision;
use dsh_tools::PreDecision;
use dsh_tools::ToolError;
use pretty_assertions::assert_eq;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;
use tokio::sync::Notify;

use super::support::*;

const BEFORE: &str = "Error: tool call aborted before dispatch";
const AFTER: &str = "Error: tool call aborted";

#[tokio::test]
async fn item_63_a_pre_aborted_call_skips_every_stage() {
    let (root, registry) = setup();
    let stages = Arc::new(AtomicUsize::new(0));
    let s = stages.clone();
    registry.pre_execute().register(&root, move |e, n| {
        s.fetch_add(1, Ordering::SeqCst);
        n.run(e)
    });
    let s = stages.clone();
    registry.post_execute().register(&root, move |i, n| {
        s.fetch_add(1, Ordering::SeqCst);
        n.run(i)
    });
    let observed = Arc::new(AtomicUsize::new(0));
    let o = observed.clone();
    registry.results().register(&root, move |_| {
        o.fetch_add(1, Ordering::SeqCst);
        Ok(())
    });
    let body = Arc::new(AtomicUsize::new(0));
    registry
        .register(&root, counting_tool("echo", body.clone()))
        .unwrap();
    let input = call("echo", json!({}));
    input.signal.cancel();
    let r = registry.execute(input).await;
    assert_eq!(
        r.to_value(),
        json!({"content":[{"type":"text","text":BEFORE}],"isError":true,
               "error":{"message":"tool call aborted before dispatch","info":{"name":"AbortError","code":"ABORTED_BEFORE_DISPATCH"}}})
    );
    assert_eq!(
        (
            stages.load(Ordering::SeqCst),
            body.load(Ordering::SeqCst),
            observed.load(Ordering::SeqCst)
        ),
        (0, 0, 1)
    );
}

#[tokio::test]
async fn item_64_abort_before_the_body_vs_after_it() {
    // abort while pre-execute is pending, then allow: before dispatch, body not run
    let (root, registry) = setup();
    let body = Arc::new(AtomicUsize::new(0));
    registry
        .register(&root, counting_tool("echo", body.clone()))
        .unwrap();
    let signal = CancellationToken::new();
    let s = signal.clone();
    registry.pre_execute().register(&root, move |_e, _n| {
        let s = s.clone();
        Box::pin(async move {
            s.cancel();
            Ok(PreDecision::Allow)
        })
    });
    let r = registry
        .execute(dsh_tools::ToolCallInput::new(
            "c1",
            "echo",
            json!({}),
            signal,
        ))
        .await;
    assert_eq!(text(&r), BEFORE);
    assert_eq!(body.load(Ordering::SeqCst), 0);

    // the body completes successfully after the caller aborted: ABORTED, contexts kept
    let (root, registry) = setup();
    let signal = CancellationToken::new();
    let s = signal.clone();
    let def = content_fixture("echo")
        .run(move |_a: Value, run| {
            let s = s.clone();
            async move {
                run.defer_context(user("deferred"));
                s.cancel();
                Ok::<_, ToolError>(text_value("done anyway"))
            }
        })
        .build()
        .unwrap();
    registry.register(&root, def).unwrap();
    let r = registry
        .execute(dsh_tools::ToolCallInput::new(
            "c1",
            "echo",
            json!({}),
            signal,
        ))
        .await;
    assert_eq!(text(&r), AFTER);
    assert_eq!(r.error_code(), Some("ABORTED"));
    assert_eq!(texts(&r.additional_contexts), vec!["deferred"]);

    // body done, post still waiting when the abort arrives: ABORTED with deferred + post contexts
    let (root, registry) = setup();
    let signal = CancellationToken::new();
    registry.register(&root, deferring_success("echo")).unwrap();
    let s = signal.clone();
    registry.post_execute().register(&root, move |_i, _n| {
        let s = s.clone();
        Box::pin(async move {
            s.cancel();
            Ok(PostDecision::accept().with_contexts(vec![user("post")]))
        })
    });
    let r = registry
        .execute(dsh_tools::ToolCallInput::new(
            "c1",
            "echo",
            json!({}),
            signal,
        ))
        .await;
    assert_eq!(text(&r), AFTER);
    assert_eq!(texts(&r.additional_contexts), vec!["deferred", "post"]);

    // a wrapper short-circuit success overtaken by an abort: before dispatch, wrapper contexts kept
    let (root, registry) = setup();
    registry.register(&root, text_tool("echo", "x")).unwrap();
    let signal = CancellationToken::new();
    let s = signal.clone();
    registry.execute_hook().register(&root, move |_d, _n| {
        let s = s.clone();
        Box::pin(async move {
            s.cancel();
            let r = dsh_tools::ToolResult::success(text_value("cached"), vec![])
                .with_contexts(vec![user("wrapper")]);
            Ok(Arc::new(r))
        })
    });
    let r = registry
        .execute(dsh_tools::ToolCallInput::new(
            "c1",
            "echo",
            json!({}),
            signal,
        ))
        .await;
    assert_eq!(text(&r), BEFORE);
    assert_eq!(texts(&r.additional_contexts), vec!["wrapper"]);
}

fn deferring_success(name: &str) -> dsh_tools::ToolDefinition {
    content_fixture(name)
        .run(|_a: Value, run| async move {
            run.defer_context(user("deferred"));
            Ok::<_, ToolError>(text_value("ok"))
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn item_65_specific_outcomes_win_over_cancellation() {
    // deny settling after an abort
    let (root, registry) = setup();
    registry.register(&root, text_tool("echo", "x")).unwrap();
    let signal = CancellationToken::new();
    let s = signal.clone();
    registry.pre_execute().register(&root, move |_e, _n| {
        let s = s.clone();
        Box::pin(async move {
            s.cancel();
            Ok(PreDecision::deny("denied late"))
        })
    });
    let r = registry
        .execute(dsh_tools::ToolCallInput::new(
            "c1",
            "echo",
            json!({}),
            signal,
        ))
        .await;
    assert_eq!(text(&r), "Error: denied late");

    // a tool failure raised because of the abort
    let (root, registry) = setup();
    let signal = CancellationToken::new();
    let s = signal.clone();
    let def = content_fixture("echo")
        .run(move |_a: Value, run| {
            let s = s.clone();
            async move {
                s.cancel();
                run.signal().cancelled().await;
                Err::<Value, _>(ToolError::harness("stopped by signal", "TOOL_STOPPED"))
            }
        })
        .build()
        .unwrap();
    registry.register(&root, def).unwrap();
    let r = registry
        .execute(dsh_tools::ToolCallInput::new(
            "c1",
            "echo",
            json!({}),
            signal,
        ))
        .await;
    assert_eq!(r.error_code(), Some("TOOL_STOPPED"));

    // wrapper failure and a timeout after an abort
    for (code, message) in [
        ("WRAPPER_FAILURE", "wrapper failed"),
        ("TOOL_TIMEOUT", "tool call timed out after 5ms"),
    ] {
        let (root, registry) = setup();
        registry.register(&root, text_tool("echo", "x")).unwrap();
        let signal = CancellationToken::new();
        let s = signal.clone();
        registry.execute_hook().register(&root, move |d, n| {
            let s = s.clone();
            Box::pin(async move {
                let _ = n.run(d).await;
                s.cancel();
                let name = if code == "TOOL_TIMEOUT" {
                    "ToolTimeoutError"
                } else {
                    "HarnessError"
                };
                let failure = ToolError::coded(name, code, message);
                if code == "TOOL_TIMEOUT" {
                    Ok(Arc::new(dsh_tools::ToolResult::from_error(&failure)))
                } else {
                    Err(failure)
                }
            })
        });
        let r = registry
            .execute(dsh_tools::ToolCallInput::new(
                "c1",
                "echo",
                json!({}),
                signal,
            ))
            .await;
        assert_eq!(r.error_code(), Some(code));
        assert_eq!(text(&r), format!("Error: {message}"));
    }

    // a post-execute failure after an abort
    let (root, registry) = setup();
    registry.register(&root, text_tool("echo", "x")).unwrap();
    let signal = CancellationToken::new();
    let s = signal.clone();
    registry.post_execute().register(&root, move |_i, _n| {
        let s = s.clone();
        Box::pin(async move {
            s.cancel();
            Err(ToolError::new("post failed"))
        })
    });
    let r = registry
        .execute(dsh_tools::ToolCallInput::new(
            "c1",
            "echo",
            json!({}),
            signal,
        ))
        .await;
    assert_eq!(text(&r), "Error: post failed");
}

#[tokio::test]
async fn item_66_a_started_body_is_awaited_after_cancellation() {
    let (root, registry) = setup();
    let started = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let finished = Arc::new(AtomicUsize::new(0));
    let (st, rel, fin) = (started.clone(), release.clone(), finished.clone());
    let def = content_fixture("stubborn")
        .run(move |_a: Value, run| {
            let (st, rel, fin) = (st.clone(), rel.clone(), fin.clone());
            async move {
                run.defer_context(user("ctx"));
                st.notify_one();
                rel.notified().await; // ignores the signal on purpose
                fin.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ToolError>(text_value("late"))
            }
        })
        .build()
        .unwrap();
    registry.register(&root, def).unwrap();
    let signal = CancellationToken::new();
    let reg = registry.clone();
    let task = tokio::spawn({
        let signal = signal.clone();
        async move {
            reg.execute(dsh_tools::ToolCallInput::new(
                "c1",
                "stubborn",
                json!({}),
                signal,
            ))
            .await
        }
    });
    started.notified().await;
    signal.cancel();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        !task.is_finished(),
        "execute must stay pending while the body runs"
    );
    release.notify_one();
    let r = task.await.unwrap();
    assert_eq!(finished.load(Ordering::SeqCst), 1);
    assert_eq!(text(&r), AFTER);
    assert_eq!(texts(&r.additional_contexts), vec!["ctx"]);
}

#[tokio::test]
async fn item_67_the_body_signal_fuses_caller_and_wrapper_tokens() {
    let (root, registry) = setup();
    let replacement = CancellationToken::new();
    let r = replacement.clone();
    registry.execute_hook().register(&root, move |mut d, next| {
        d.set_signal(r.clone());
        next.run(d)
    });
    let started = Arc::new(Notify::new());
    let st = started.clone();
    let def = content_fixture("waits")
        .run(move |_a: Value, run| {
            let st = st.clone();
            async move {
                st.notify_one();
                run.signal().cancelled().await;
                Ok::<_, ToolError>(text_value("saw cancel"))
            }
        })
        .build()
        .unwrap();
    registry.register(&root, def).unwrap();

    // caller abort reaches the body but not the wrapper's token
    let signal = CancellationToken::new();
    let reg = registry.clone();
    let s = signal.clone();
    let task = tokio::spawn(async move {
        reg.execute(dsh_tools::ToolCallInput::new("c1", "waits", json!({}), s))
            .await
    });
    started.notified().await;
    signal.cancel();
    let result = task.await.unwrap();
    assert_eq!(text(&result), AFTER);
    assert!(!replacement.is_cancelled());

    // the wrapper's token alone also reaches the body; the caller stays live
    let signal = CancellationToken::new();
    let reg = registry.clone();
    let s = signal.clone();
    let task = tokio::spawn(async move {
        reg.execute(dsh_tools::ToolCallInput::new("c2", "waits", json!({}), s))
            .await
    });
    started.notified().await;
    replacement.cancel();
    let result = task.await.unwrap();
    // The body saw the wrapper's cancellation and returned a success; the caller is not
    // aborted, but the fused signal is, so the success is replaced with ABORTED.
    assert_eq!(text(&result), AFTER);
    assert!(!signal.is_cancelled());
}

#[derive(Deserialize, schemars::JsonSchema)]
struct FsArgs {
    path: String,
    mode: Option<String>,
}

#[test]
fn item_68_parallel_only_when_the_classifier_says_exactly_true() {
    let (root, registry) = setup();
    let safe = content_fixture("safe")
        .concurrency_safe(|_| true)
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(json!([])) })
        .build()
        .unwrap();
    let plain = text_tool("plain", "x");
    let sensitive = content_fixture("fs")
        .validated_parameters(json!({"type":"object","properties":{"path":{"type":"string"},"mode":{"type":"string"}},"required":["path"]}))
        .concurrency_safe(|a: &Value| a["mode"] == "read")
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(json!([])) })
        .build()
        .unwrap();
    let throwing = content_fixture("throwing")
        .concurrency_safe(|_| panic!("classifier exploded"))
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(json!([])) })
        .build()
        .unwrap();
    let seen = Arc::new(std::sync::Mutex::new(None));
    let s = seen.clone();
    let raw = content_fixture("raw")
        .raw_parameters(
            json!({"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}),
        )
        .concurrency_safe(move |a: &Value| {
            *s.lock().unwrap() = Some(a.clone());
            true
        })
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(json!([])) })
        .build()
        .unwrap();
    for def in [safe, plain, sensitive, throwing, raw] {
        registry.register(&root, def).unwrap();
    }
    let mode = |name: &str, args: Value| registry.execution_mode(name, &args, None);
    assert_eq!(mode("safe", json!({})), ExecutionMode::Parallel);
    assert_eq!(mode("plain", json!({})), ExecutionMode::Exclusive);
    assert_eq!(mode("unknown", json!({})), ExecutionMode::Exclusive);
    assert_eq!(
        mode("fs", json!({"path":"a","mode":"read"})),
        ExecutionMode::Parallel
    );
    assert_eq!(
        mode("fs", json!({"path":"a","mode":"write"})),
        ExecutionMode::Exclusive
    );
    assert_eq!(
        mode("fs", json!({"mode":"read"})),
        ExecutionMode::Exclusive,
        "invalid args are exclusive"
    );
    assert_eq!(mode("throwing", json!({})), ExecutionMode::Exclusive);
    // raw classifiers receive the arguments unchanged (not validated)
    assert_eq!(mode("raw", json!({"y": [1, 2]})), ExecutionMode::Parallel);
    assert_eq!(*seen.lock().unwrap(), Some(json!({"y": [1, 2]})));
    // a typed classifier on a serde-derived argument type
    let typed = content_fixture("typed")
        .params::<FsArgs>()
        .concurrency_safe(|a: &FsArgs| a.mode.as_deref() == Some("read") && !a.path.is_empty())
        .run(|_a: FsArgs, _r| async {
            Ok::<_, ToolError>(json!([ContentBlock::text("x").to_value()]))
        })
        .build()
        .unwrap();
    registry.register(&root, typed).unwrap();
    assert_eq!(
        mode("typed", json!({"path":"p","mode":"read"})),
        ExecutionMode::Parallel
    );
    assert_eq!(mode("typed", json!({"path": 3})), ExecutionMode::Exclusive);
}
