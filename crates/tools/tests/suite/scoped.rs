//! Upstream scoped.spec.ts: hook filtering by the calling agent's scope.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use dsh_tools::PreDecision;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::*;

#[tokio::test]
async fn an_agent_scoped_pre_execute_listener_sees_only_its_agents_calls() {
    let (root, registry) = setup();
    registry.register(&root, text_tool("echo", "x")).unwrap();
    let (a_scope, a) = agent(&root, "a");
    let (_b_scope, b) = agent(&root, "b");
    let (_child_scope, child) = agent(&a_scope, "a-child");
    let log = Log::default();
    let l = log.clone();
    registry
        .pre_execute()
        .register(&a_scope, move |exec, next| {
            l.push(format!(
                "scoped:{}",
                exec.agent().map_or("none", |a| a.id())
            ));
            next.run(exec)
        });
    let l = log.clone();
    registry.results().register(&a_scope, move |event| {
        l.push(format!(
            "result:{}:{}",
            event.exec.agent().map_or("none", |a| a.id()),
            event.result.is_error
        ));
        Ok(())
    });
    registry.execute(call_as("echo", json!({}), &a)).await;
    registry.execute(call_as("echo", json!({}), &b)).await;
    registry.execute(call_as("echo", json!({}), &child)).await;
    registry.execute(call("echo", json!({}))).await;
    assert_eq!(
        log.take(),
        vec![
            "scoped:a",
            "result:a:false",
            "scoped:a-child",
            "result:a-child:false"
        ]
    );
    // scoped observers also see denied calls
    registry.pre_execute().register(&a_scope, |_e, _n| {
        Box::pin(async { Ok(PreDecision::deny("no")) })
    });
    registry.execute(call_as("echo", json!({}), &a)).await;
    assert_eq!(log.take(), vec!["scoped:a", "result:a:true"]);
    a_scope.dispose();
    registry.execute(call_as("echo", json!({}), &child)).await;
    assert!(log.take().is_empty());
}

#[tokio::test]
async fn bodies_reach_their_agent_and_a_disposed_agent_refuses_injection() {
    let (root, registry) = setup();
    let injected = Arc::new(AtomicUsize::new(0));
    let i = injected.clone();
    let def = content_fixture("notify")
        .run(move |_a: serde_json::Value, run| {
            let i = i.clone();
            async move {
                if let Some(agent) = run.agent()
                    && agent.inject(user("background job done")).is_ok()
                {
                    i.fetch_add(1, Ordering::SeqCst);
                }
                Ok::<_, dsh_tools::ToolError>(text_value("queued"))
            }
        })
        .build()
        .unwrap();
    registry.register(&root, def).unwrap();
    let (scope, a) = agent(&root, "a");
    registry.execute(call_as("notify", json!({}), &a)).await;
    assert_eq!(injected.load(Ordering::SeqCst), 1);
    scope.dispose();
    let r = registry.execute(call_as("notify", json!({}), &a)).await;
    assert_eq!(text(&r), "queued");
    assert_eq!(injected.load(Ordering::SeqCst), 1);
}
