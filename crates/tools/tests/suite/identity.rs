//! Checklist items 31–35: execution identity.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use dsh_tools::ExecutionToken;
use dsh_tools::PreDecision;
use dsh_tools::ToolError;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use super::support::*;

#[tokio::test]
async fn item_31_one_fresh_token_per_execution_shared_by_every_stage() {
    let (root, registry) = setup();
    let tokens: Arc<Mutex<Vec<(&'static str, ExecutionToken)>>> = Arc::default();
    let t = tokens.clone();
    registry.pre_execute().register(&root, move |exec, next| {
        t.lock().unwrap().push(("pre", exec.token()));
        next.run(exec)
    });
    let t = tokens.clone();
    registry.guard(&root, move |exec| {
        t.lock().unwrap().push(("guard", exec.token()));
        None
    });
    let t = tokens.clone();
    registry.execute_hook().register(&root, move |d, next| {
        t.lock().unwrap().push(("wrapper", d.execution().token()));
        next.run(d)
    });
    let t = tokens.clone();
    registry.post_execute().register(&root, move |input, next| {
        t.lock().unwrap().push(("post", input.exec.token()));
        next.run(input)
    });
    let t = tokens.clone();
    registry.results().register(&root, move |event| {
        t.lock().unwrap().push(("result", event.exec.token()));
        Ok(())
    });
    let t = tokens.clone();
    let def = content_fixture("echo")
        .run(move |_a: Value, run| {
            t.lock().unwrap().push(("body", run.token()));
            async { Ok::<_, ToolError>(text_value("x")) }
        })
        .build()
        .unwrap();
    registry.register(&root, def).unwrap();
    registry.execute(call("echo", json!({}))).await;
    let first = tokens.lock().unwrap().drain(..).collect::<Vec<_>>();
    let stages: Vec<&str> = first.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        stages,
        vec!["pre", "guard", "wrapper", "body", "post", "result"]
    );
    assert!(first.iter().all(|(_, token)| *token == first[0].1));
    registry.execute(call("echo", json!({}))).await;
    let second = tokens.lock().unwrap().clone();
    assert_ne!(second[0].1, first[0].1);
}

#[tokio::test]
async fn item_32_every_input_field_is_consumed_once_and_the_caller_copy_is_untouched() {
    let (root, registry) = setup();
    let seen: Arc<Mutex<Option<Value>>> = Arc::default();
    let s = seen.clone();
    let def = content_fixture("echo")
        .raw_parameters(json!({"type":"object"}))
        .run(move |args: Value, run| {
            *s.lock().unwrap() = Some(args);
            assert_eq!(run.call_id(), "c1");
            assert_eq!(run.root_call_id(), "c1");
            async { Ok::<_, ToolError>(text_value("x")) }
        })
        .build()
        .unwrap();
    registry.register(&root, def).unwrap();
    let mut original = json!({"nested": {"k": [1, 2, 3]}, "z": 1, "a": 2});
    let input = call("echo", original.clone()).root_call_id("root-1");
    registry.execute(input).await;
    original["nested"]["k"][0] = json!(99); // the caller's value is its own
    let received = seen.lock().unwrap().clone().unwrap();
    assert_eq!(
        received,
        json!({"nested": {"k": [1, 2, 3]}, "z": 1, "a": 2})
    );
    let keys: Vec<&String> = received.as_object().unwrap().keys().collect();
    assert_eq!(keys, vec!["nested", "z", "a"], "key order is kept");
}

#[tokio::test]
async fn item_33_body_policies_and_observers_share_one_immutable_argument_value() {
    let (root, registry) = setup();
    let pointers: Arc<Mutex<Vec<usize>>> = Arc::default();
    let record = |p: &Arc<Mutex<Vec<usize>>>, v: &Arc<Value>| {
        p.lock().unwrap().push(Arc::as_ptr(v) as usize)
    };
    let p = pointers.clone();
    registry.pre_execute().register(&root, move |exec, next| {
        record(&p, exec.arguments().unwrap());
        next.run(exec)
    });
    let p = pointers.clone();
    registry.post_execute().register(&root, move |input, next| {
        record(&p, input.exec.arguments().unwrap());
        next.run(input)
    });
    let p = pointers.clone();
    registry.results().register(&root, move |event| {
        record(&p, event.exec.arguments().unwrap());
        Ok(())
    });
    let p = pointers.clone();
    let def = content_fixture("echo")
        .run(move |_a: Value, run| {
            record(&p, run.arguments().unwrap());
            async { Ok::<_, ToolError>(text_value("x")) }
        })
        .build()
        .unwrap();
    registry.register(&root, def).unwrap();
    registry.execute(call("echo", json!({"a": 1}))).await;
    let pointers = pointers.lock().unwrap();
    assert_eq!(pointers.len(), 4);
    assert!(pointers.iter().all(|p| *p == pointers[0]));
}

#[tokio::test]
async fn item_34_lossy_arguments_fail_before_policy_with_one_notification() {
    let (root, registry) = setup();
    let policy = Arc::new(AtomicUsize::new(0));
    let observed = Arc::new(AtomicUsize::new(0));
    let body = Arc::new(AtomicUsize::new(0));
    let p = policy.clone();
    registry.pre_execute().register(&root, move |exec, next| {
        p.fetch_add(1, Ordering::SeqCst);
        next.run(exec)
    });
    let o = observed.clone();
    registry.results().register(&root, move |event| {
        assert!(event.exec.arguments().is_none());
        o.fetch_add(1, Ordering::SeqCst);
        Ok(())
    });
    registry
        .register(&root, counting_tool("echo", body.clone()))
        .unwrap();
    let result = registry.execute(call("echo", json!({"n": -0.0}))).await;
    assert_eq!(
        result.to_value(),
        json!({
            "content":[{"type":"text","text":"Error: tool execution arguments must be losslessly JSON-serializable"}],
            "isError":true,
            "error":{"message":"tool execution arguments must be losslessly JSON-serializable"}
        })
    );
    assert_eq!(
        (
            policy.load(Ordering::SeqCst),
            body.load(Ordering::SeqCst),
            observed.load(Ordering::SeqCst)
        ),
        (0, 0, 1)
    );
}

#[tokio::test]
async fn item_35_only_the_around_stage_replaces_the_signal_and_identity_never_changes() {
    let (root, registry) = setup();
    let log = Log::default();
    let replacement = dsh_tools::CancellationToken::new();
    let r = replacement.clone();
    let l = log.clone();
    registry.execute_hook().register(&root, move |mut d, next| {
        d.set_signal(r.clone());
        l.push(format!(
            "wrapper:{}:{}",
            d.execution().name(),
            d.execution().call_id()
        ));
        next.run(d)
    });
    let l = log.clone();
    registry.pre_execute().register(&root, move |exec, next| {
        l.push(format!("pre:{}", exec.name()));
        next.run(exec)
    });
    let l = log.clone();
    registry.post_execute().register(&root, move |input, next| {
        // post observes the caller's signal: cancelling the replacement did not reach it
        l.push(format!(
            "post-caller-cancelled:{}",
            input.exec.signal().is_cancelled()
        ));
        next.run(input)
    });
    let l = log.clone();
    let def = content_fixture("echo")
        .run(move |_a: Value, run| {
            let l = l.clone();
            let r = run.signal().clone();
            async move {
                l.push(format!("body-sees-wrapper-cancel:{}", r.is_cancelled()));
                Ok::<_, ToolError>(text_value("x"))
            }
        })
        .build()
        .unwrap();
    registry.register(&root, def).unwrap();
    replacement.cancel();
    let result = registry.execute(call("echo", json!({}))).await;
    // An already-cancelled replacement never lets the body run.
    assert_eq!(result.error_code(), Some("ABORTED_BEFORE_DISPATCH"));
    assert_eq!(
        log.take(),
        vec!["pre:echo", "wrapper:echo:c1", "post-caller-cancelled:false"]
    );
}

#[allow(dead_code)]
fn _pre_decision_is_closed(d: PreDecision) -> &'static str {
    match d {
        PreDecision::Allow => "allow",
        PreDecision::Deny { .. } => "deny",
        PreDecision::Ask { .. } => "ask",
    }
}
