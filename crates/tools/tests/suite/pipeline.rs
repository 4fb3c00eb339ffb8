//! Checklist items 36–62: the pipeline, its decisions and its exact messages.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use dsh_kernel::BoxFuture;
use dsh_protocol::ContentBlock;
use dsh_tools::ApprovalOutcome;
use dsh_tools::ApprovalRequest;
use dsh_tools::ApprovalService;
use dsh_tools::PostDecision;
use dsh_tools::PreDecision;
use dsh_tools::ToolError;
use dsh_tools::ToolResult;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use super::support::*;

fn echo_args_tool(name: &str) -> dsh_tools::ToolDefinition {
    string_tool(name)
        .presentation_meta(|_, v| Ok(json!({"len": v.as_str().map(str::len)})))
        .run(|args: Value, _run| async move {
            Ok::<_, ToolError>(args.get("text").cloned().unwrap_or(json!("none")))
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn item_36_stages_run_in_spec_order() {
    let (root, registry) = setup();
    let log = Log::default();
    let l = log.clone();
    registry.pre_execute().register(&root, move |exec, next| {
        let l = l.clone();
        Box::pin(async move {
            l.push("pre");
            next.run(exec).await
        })
    });
    let l = log.clone();
    registry.guard(&root, move |_| {
        l.push("guard");
        None
    });
    let l = log.clone();
    registry.execute_hook().register(&root, move |d, next| {
        let l = l.clone();
        Box::pin(async move {
            l.push("execute:before");
            let r = next.run(d).await;
            l.push("execute:after");
            r
        })
    });
    let l = log.clone();
    registry.post_execute().register(&root, move |input, next| {
        l.push("post");
        next.run(input)
    });
    let l = log.clone();
    registry.results().register(&root, move |_| {
        l.push("result");
        Ok(())
    });
    let (l1, l2) = (log.clone(), log.clone());
    let def = content_fixture("echo")
        .finalize_content(move |_, _| {
            l1.push("finalize");
            Ok(None)
        })
        .run(move |_a: Value, _run| {
            l2.push("dispatch");
            async { Ok::<_, ToolError>(text_value("x")) }
        })
        .build()
        .unwrap();
    registry.register(&root, def).unwrap();
    registry.execute(call("echo", json!({}))).await;
    assert_eq!(
        log.take(),
        vec![
            "pre",
            "guard",
            "execute:before",
            "dispatch",
            "execute:after",
            "post",
            "finalize",
            "result"
        ]
    );
}

#[tokio::test]
async fn item_37_a_deny_skips_the_around_stage_and_post_still_sees_it() {
    let (root, registry) = setup();
    let log = Log::default();
    registry.pre_execute().register(&root, |_exec, _next| {
        Box::pin(async { Ok(PreDecision::deny("denied by policy")) })
    });
    let l = log.clone();
    registry.execute_hook().register(&root, move |d, next| {
        l.push("execute");
        next.run(d)
    });
    let l = log.clone();
    registry.post_execute().register(&root, move |input, next| {
        l.push(format!("post:{}", input.result.is_error));
        next.run(input)
    });
    registry.register(&root, text_tool("echo", "x")).unwrap();
    let result = registry.execute(call("echo", json!({}))).await;
    assert_eq!(
        result.to_value(),
        json!({"content":[{"type":"text","text":"Error: denied by policy"}],"isError":true,"error":{"message":"denied by policy"}})
    );
    assert_eq!(log.take(), vec!["post:true"]);
}

fn ask_with(registry: &dsh_tools::ToolRegistry, root: &dsh_kernel::Scope, reason: Option<&str>) {
    let reason = reason.map(str::to_owned);
    registry.pre_execute().register(root, move |_exec, _next| {
        let reason = reason.clone();
        Box::pin(async move { Ok(PreDecision::ask(reason)) })
    });
}

#[tokio::test]
async fn item_38_ask_without_an_approval_service_denies() {
    let (root, registry) = setup();
    registry.register(&root, text_tool("echo", "x")).unwrap();
    let (scope, a) = agent(&root, "a");
    ask_with(&registry, &scope, Some("needs a human"));
    assert_eq!(
        text(&registry.execute(call_as("echo", json!({}), &a)).await),
        "Error: needs a human"
    );
    let (root2, registry2) = setup();
    registry2.register(&root2, text_tool("echo", "x")).unwrap();
    ask_with(&registry2, &root2, None);
    assert_eq!(
        text(&registry2.execute(call("echo", json!({}))).await),
        "Error: tool \"echo\" requires approval (not yet supported)"
    );
}

/// (agent id, tool name, reason, signal cancelled) of the last request.
type Seen = (String, String, Option<String>, bool);

struct Approver {
    outcome: ApprovalOutcome,
    asked: Arc<AtomicUsize>,
    last: Arc<std::sync::Mutex<Option<Seen>>>,
}

impl ApprovalService for Approver {
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        *self.last.lock().unwrap() = Some((
            request.agent.id().to_owned(),
            request.tool_name.clone(),
            request.reason.clone(),
            request.signal.is_cancelled(),
        ));
        let outcome = self.outcome;
        Box::pin(async move { outcome })
    }
}

fn approver(root: &dsh_kernel::Scope, outcome: ApprovalOutcome) -> Arc<AtomicUsize> {
    let asked = Arc::new(AtomicUsize::new(0));
    let service: Arc<dyn ApprovalService> = Arc::new(Approver {
        outcome,
        asked: asked.clone(),
        last: Arc::default(),
    });
    root.provide::<dyn ApprovalService>(service).unwrap();
    asked
}

#[tokio::test]
async fn item_39_agentless_ask_is_denied_without_consulting_the_service() {
    let (root, registry) = setup();
    registry.register(&root, text_tool("echo", "x")).unwrap();
    let asked = approver(&root, ApprovalOutcome::AllowedOnce);
    ask_with(&registry, &root, Some("why"));
    assert_eq!(
        text(&registry.execute(call("echo", json!({}))).await),
        "Error: tool \"echo\" requires approval, but the call has no agent to route it through"
    );
    assert_eq!(asked.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn item_40_approval_outcomes_map_to_fixed_results() {
    let cases = [
        (ApprovalOutcome::AllowedOnce, "ran"),
        (
            ApprovalOutcome::Rejected,
            "Error: the user rejected tool \"echo\"",
        ),
        (
            ApprovalOutcome::Cancelled,
            "Error: approval for tool \"echo\" was cancelled",
        ),
        (
            ApprovalOutcome::Unavailable,
            "Error: tool \"echo\" requires approval, but no approval channel is available",
        ),
    ];
    for (outcome, expected) in cases {
        let (root, registry) = setup();
        let body = Arc::new(AtomicUsize::new(0));
        registry
            .register(&root, counting_tool("echo", body.clone()))
            .unwrap();
        let last = Arc::new(std::sync::Mutex::new(None));
        let service: Arc<dyn ApprovalService> = Arc::new(Approver {
            outcome,
            asked: Arc::default(),
            last: last.clone(),
        });
        root.provide::<dyn ApprovalService>(service).unwrap();
        ask_with(&registry, &root, Some("because"));
        // allowed-once continues to the guards
        registry.guard(&root, |exec| {
            (exec.call_id() == "guarded").then(|| "guard says no".to_owned())
        });
        let (_scope, a) = agent(&root, "a");
        let result = registry.execute(call_as("echo", json!({}), &a)).await;
        assert_eq!(text(&result), expected);
        assert_eq!(
            *last.lock().unwrap(),
            Some((
                "a".to_owned(),
                "echo".to_owned(),
                Some("because".to_owned()),
                false
            ))
        );
        if outcome == ApprovalOutcome::AllowedOnce {
            assert_eq!(body.load(Ordering::SeqCst), 1);
            let guarded = registry
                .execute(
                    dsh_tools::ToolCallInput::new("guarded", "echo", json!({}), Default::default())
                        .agent(a),
                )
                .await;
            assert_eq!(text(&guarded), "Error: guard says no");
        }
    }
}

#[tokio::test]
async fn item_41_guards_run_after_pre_execute_first_reason_wins_global_then_chain() {
    let (root, registry) = setup();
    let body = Arc::new(AtomicUsize::new(0));
    registry
        .register(&root, counting_tool("echo", body.clone()))
        .unwrap();
    let log = Log::default();
    let (parent, _) = agent(&root, "parent");
    let (child, a) = agent(&parent, "child");
    let l = log.clone();
    registry.guard(&child, move |_| {
        l.push("child");
        Some("child denies".into())
    });
    let l = log.clone();
    registry.guard(&parent, move |_| {
        l.push("parent");
        None
    });
    let l = log.clone();
    registry.guard(&root, move |_| {
        l.push("global-abstain");
        None
    });
    // a prepended force-allow listener cannot override a guard
    let l = log.clone();
    registry.pre_execute().prepend(&root, move |_exec, _next| {
        l.push("pre-force-allow");
        Box::pin(async { Ok(PreDecision::Allow) })
    });
    let result = registry.execute(call_as("echo", json!({}), &a)).await;
    assert_eq!(text(&result), "Error: child denies");
    assert_eq!(result.error.as_ref().unwrap().info, None);
    assert_eq!(
        log.take(),
        vec!["pre-force-allow", "global-abstain", "parent", "child"]
    );
    assert_eq!(body.load(Ordering::SeqCst), 0);
    // a denied pre-execute never reaches the guards
    let l = log.clone();
    registry.pre_execute().prepend(&root, move |_exec, _next| {
        l.push("deny");
        Box::pin(async { Ok(PreDecision::deny("no")) })
    });
    registry.execute(call_as("echo", json!({}), &a)).await;
    assert_eq!(log.take(), vec!["deny"]);
}

#[tokio::test]
async fn item_42_unknown_names_pass_policy_and_fail_at_dispatch_visible_to_post() {
    let (root, registry) = setup();
    let log = Log::default();
    let l = log.clone();
    registry.pre_execute().register(&root, move |exec, next| {
        l.push(format!("pre:{}", exec.name()));
        next.run(exec)
    });
    let l = log.clone();
    registry.guard(&root, move |exec| {
        l.push(format!("guard:{}", exec.name()));
        None
    });
    let l = log.clone();
    registry.post_execute().register(&root, move |input, next| {
        l.push(format!("post:{}", input.result.error_code().unwrap_or("-")));
        next.run(input)
    });
    let result = registry.execute(call("nope", json!({}))).await;
    assert_eq!(
        result.to_value(),
        json!({"content":[{"type":"text","text":"Error: unknown tool \"nope\""}],"isError":true,
               "error":{"message":"unknown tool \"nope\"","info":{"name":"ToolNotFoundError","code":"UNKNOWN_TOOL"}}})
    );
    assert_eq!(
        log.take(),
        vec!["pre:nope", "guard:nope", "post:UNKNOWN_TOOL"]
    );
}

#[tokio::test]
async fn item_43_a_body_error_is_normalized_before_the_wrapper_sees_it() {
    let (root, registry) = setup();
    let seen = Arc::new(std::sync::Mutex::new(None));
    let s = seen.clone();
    registry.execute_hook().register(&root, move |d, next| {
        let s = s.clone();
        Box::pin(async move {
            let r = next.run(d).await;
            *s.lock().unwrap() = r.as_ref().ok().map(|r| r.to_value());
            r
        })
    });
    let def = content_fixture("boom")
        .run(|_a: Value, _r| async { Err::<Value, _>(ToolError::new("exploded")) })
        .build()
        .unwrap();
    registry.register(&root, def).unwrap();
    let result = registry.execute(call("boom", json!({}))).await;
    assert_eq!(text(&result), "Error: exploded");
    assert_eq!(
        seen.lock().unwrap().clone().unwrap(),
        json!({"content":[{"type":"text","text":"Error: exploded"}],"isError":true,"error":{"message":"exploded"}})
    );
}

#[tokio::test]
async fn item_44_structured_errors_keep_info_plain_ones_only_the_message() {
    let (root, registry) = setup();
    let coded = content_fixture("coded")
        .run(|_a: Value, _r| async { Err::<Value, _>(ToolError::harness("disk full", "ENOSPC")) })
        .build()
        .unwrap();
    let plain = content_fixture("plain")
        .run(|_a: Value, _r| async { Err::<Value, _>("plain failure".into()) })
        .build()
        .unwrap();
    registry.register(&root, coded).unwrap();
    registry.register(&root, plain).unwrap();
    let r = registry.execute(call("coded", json!({}))).await;
    assert_eq!(
        r.to_value()["error"],
        json!({"message":"disk full","info":{"name":"HarnessError","code":"ENOSPC"}})
    );
    let r = registry.execute(call("plain", json!({}))).await;
    assert_eq!(r.to_value()["error"], json!({"message":"plain failure"}));
}

#[tokio::test]
async fn item_45_panics_become_their_message_or_unprintable() {
    let (root, registry) = setup();
    let with_text = content_fixture("kaboom")
        .run(|_a: Value, _r| async { panic!("kaboom") as Result<Value, ToolError> })
        .build()
        .unwrap();
    let opaque = content_fixture("opaque")
        .run(|_a: Value, _r| async { std::panic::panic_any(500_u32) as Result<Value, ToolError> })
        .build()
        .unwrap();
    registry.register(&root, with_text).unwrap();
    registry.register(&root, opaque).unwrap();
    assert_eq!(
        text(&registry.execute(call("kaboom", json!({}))).await),
        "Error: kaboom"
    );
    assert_eq!(
        text(&registry.execute(call("opaque", json!({}))).await),
        "Error: <unprintable thrown value>"
    );
}

#[tokio::test]
async fn item_46_lossy_or_schema_violating_values_are_invalid_tool_output_without_value() {
    let (root, registry) = setup();
    let lossy = string_tool("lossy")
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(json!(-0.0)) })
        .build()
        .unwrap();
    let wrong = string_tool("wrong-output")
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(json!(42)) })
        .build()
        .unwrap();
    registry.register(&root, lossy).unwrap();
    registry.register(&root, wrong).unwrap();
    let r = registry.execute(call("lossy", json!({}))).await;
    assert!(r.value.is_none());
    assert_eq!(r.error_code(), Some("INVALID_TOOL_OUTPUT"));
    assert_eq!(
        text(&r),
        "Error: tool \"lossy\" returned invalid output: value is not lossless JSON"
    );
    let r = registry.execute(call("wrong-output", json!({}))).await;
    assert_eq!(
        r.to_value(),
        json!({"content":[{"type":"text","text":"Error: tool \"wrong-output\" returned invalid output: \"value\" must be a string"}],
               "isError":true,
               "error":{"message":"tool \"wrong-output\" returned invalid output: \"value\" must be a string",
                        "info":{"name":"ToolOutputError","code":"INVALID_TOOL_OUTPUT"}}})
    );
}

#[tokio::test]
async fn item_47_throwing_render_or_meta_fails_only_that_call() {
    let (root, registry) = setup();
    let render = dsh_tools::Tool::builder("throwing-render")
        .raw_output(json!({"type":"string"}), |_, v| {
            if v == "bad" {
                Err(ToolError::new("render exploded"))
            } else {
                Ok(vec![ContentBlock::text("fine")])
            }
        })
        .run(|args: Value, _r| async move { Ok::<_, ToolError>(args["v"].clone()) })
        .build()
        .unwrap();
    let meta = string_tool("throwing-meta")
        .presentation_meta(|_, _| panic!("meta exploded"))
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(json!("x")) })
        .build()
        .unwrap();
    registry.register(&root, render).unwrap();
    registry.register(&root, meta).unwrap();
    let r = registry
        .execute(call("throwing-render", json!({"v":"bad"})))
        .await;
    assert_eq!(
        text(&r),
        "Error: tool \"throwing-render\" returned invalid output: output.render failed: render exploded"
    );
    assert!(r.value.is_none());
    let ok = registry
        .execute(call("throwing-render", json!({"v":"good"})))
        .await;
    assert_eq!(text(&ok), "fine");
    let r = registry.execute(call("throwing-meta", json!({}))).await;
    assert_eq!(
        text(&r),
        "Error: tool \"throwing-meta\" returned invalid output: output.presentationMeta failed: meta exploded"
    );
    assert_eq!(r.error_code(), Some("INVALID_TOOL_OUTPUT"));
}

#[tokio::test]
async fn item_48_meta_is_computed_only_without_a_parent() {
    let (root, registry) = setup();
    registry.register(&root, echo_args_tool("echo")).unwrap();
    let direct = registry.execute(call("echo", json!({"text":"hey"}))).await;
    assert_eq!(
        direct.to_value(),
        json!({"content":[{"type":"text","text":"hey"}],"isError":false,"value":"hey","meta":{"len":3}})
    );
    let parent_token = registry.prepare(call("echo", json!({}))).await;
    let token = match parent_token {
        dsh_tools::Prepared::Dispatch(exec) => exec.token(),
        _ => panic!("expected dispatch"),
    };
    let nested = registry
        .execute(call("echo", json!({"text":"hey"})).parent(token))
        .await;
    assert_eq!(
        nested.to_value(),
        json!({"content":[{"type":"text","text":"hey"}],"isError":false,"value":"hey"})
    );
}

#[tokio::test]
async fn item_49_wrapper_successes_are_revalidated_and_rerendered_keeping_contexts() {
    let (root, registry) = setup();
    let body = Arc::new(AtomicUsize::new(0));
    let b = body.clone();
    let def = string_tool("echo")
        .run(move |_a: Value, _r| {
            b.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, ToolError>(json!("from body")) }
        })
        .build()
        .unwrap();
    registry.register(&root, def).unwrap();
    let object_tool = dsh_tools::Tool::builder("object-out")
        .raw_output(json!({"type":"object"}), |_, _| Ok(vec![]))
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(json!({})) })
        .build()
        .unwrap();
    registry.register(&root, object_tool).unwrap();
    registry.execute_hook().register(&root, |_d, _next| {
        Box::pin(async {
            let authored = ToolResult::success(
                json!("short-circuited"),
                vec![ContentBlock::text("authored content")],
            )
            .with_contexts(vec![user("wrapper ctx")]);
            Ok(Arc::new(authored))
        })
    });
    let r = registry.execute(call("echo", json!({}))).await;
    assert_eq!(text(&r), "short-circuited");
    assert_eq!(texts(&r.additional_contexts), vec!["wrapper ctx"]);
    // the same cached string result for a tool whose output is an object
    let r = registry.execute(call("object-out", json!({}))).await;
    assert_eq!(
        text(&r),
        "Error: tool \"object-out\" returned invalid output: \"value\" must be an object"
    );
    assert_eq!(body.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn item_50_wrapper_failures_pass_through_verbatim() {
    let (root, registry) = setup();
    registry.register(&root, text_tool("echo", "x")).unwrap();
    let authored = ToolResult::failure("wrapped failure", vec![ContentBlock::text("custom text")])
        .with_meta(json!({"m": 1}))
        .with_contexts(vec![user("ctx")]);
    let expected = authored.to_value();
    registry.execute_hook().register(&root, move |_d, _next| {
        let authored = authored.clone();
        Box::pin(async move { Ok(Arc::new(authored)) })
    });
    let r = registry.execute(call("echo", json!({}))).await;
    assert_eq!(r.to_value(), expected);
}

#[tokio::test]
async fn item_51_a_throwing_wrapper_is_final_and_skips_post() {
    let (root, registry) = setup();
    let post = Arc::new(AtomicUsize::new(0));
    let p = post.clone();
    registry.post_execute().register(&root, move |input, next| {
        p.fetch_add(1, Ordering::SeqCst);
        next.run(input)
    });
    registry.execute_hook().register(&root, |_d, _next| {
        Box::pin(async { Err(ToolError::new("wrapper broke")) })
    });
    registry.register(&root, text_tool("echo", "x")).unwrap();
    let r = registry.execute(call("echo", json!({}))).await;
    assert_eq!(
        r.to_value(),
        json!({"content":[{"type":"text","text":"Error: wrapper broke"}],"isError":true,"error":{"message":"wrapper broke"}})
    );
    assert_eq!(post.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn item_52_post_content_replacement_keeps_value_and_meta() {
    let (root, registry) = setup();
    registry.register(&root, echo_args_tool("echo")).unwrap();
    registry.post_execute().register(&root, |_input, _next| {
        Box::pin(async {
            Ok(PostDecision::replace_content(vec![ContentBlock::text(
                "redacted",
            )]))
        })
    });
    let r = registry
        .execute(call("echo", json!({"text":"secret"})))
        .await;
    assert_eq!(
        r.to_value(),
        json!({"content":[{"type":"text","text":"redacted"}],"isError":false,"value":"secret","meta":{"len":6}})
    );
}

#[tokio::test]
async fn item_53_post_value_replacement_revalidates_and_recomputes() {
    let (root, registry) = setup();
    registry.register(&root, echo_args_tool("echo")).unwrap();
    registry.post_execute().register(&root, |_input, _next| {
        Box::pin(async {
            Ok(PostDecision::replace_value(json!("replaced!"))
                .with_contexts(vec![user("post ctx")]))
        })
    });
    let r = registry
        .execute(call("echo", json!({"text":"original"})))
        .await;
    assert_eq!(text(&r), "replaced!");
    assert_eq!(r.value.as_deref(), Some(&json!("replaced!")));
    assert_eq!(r.meta, Some(json!({"len": 9})));
    assert_eq!(texts(&r.additional_contexts), vec!["post ctx"]);

    let (root, registry) = setup();
    registry.register(&root, echo_args_tool("echo")).unwrap();
    registry.post_execute().register(&root, |_input, _next| {
        Box::pin(async { Ok(PostDecision::replace_value(json!(7))) })
    });
    let r = registry
        .execute(call("echo", json!({"text":"original"})))
        .await;
    assert_eq!(r.error_code(), Some("INVALID_TOOL_OUTPUT"));
    assert!(r.value.is_none());
}

#[tokio::test]
async fn item_54_replacing_both_or_a_failed_value_is_an_error() {
    let (root, registry) = setup();
    registry.register(&root, echo_args_tool("echo")).unwrap();
    registry.post_execute().register(&root, |_input, _next| {
        Box::pin(async {
            Ok(PostDecision::Accept {
                content: Some(vec![]),
                value: Some(json!("v")),
                additional_contexts: vec![],
            })
        })
    });
    let r = registry.execute(call("echo", json!({}))).await;
    assert_eq!(
        text(&r),
        "Error: tools/post-execute accept decision cannot replace both value and content"
    );

    let (root, registry) = setup();
    registry.post_execute().register(&root, |_input, _next| {
        Box::pin(async { Ok(PostDecision::replace_value(json!("v"))) })
    });
    let r = registry.execute(call("missing", json!({}))).await;
    assert_eq!(
        r.to_value(),
        json!({"content":[{"type":"text","text":"Error: tools/post-execute cannot replace the value of a failed result"}],
               "isError":true,"error":{"message":"tools/post-execute cannot replace the value of a failed result"}})
    );
}

#[tokio::test]
async fn item_55_block_is_a_valueless_failure_with_derived_message() {
    let (root, registry) = setup();
    registry.register(&root, text_tool("echo", "x")).unwrap();
    registry.post_execute().register(&root, |input, _next| {
        let feedback = if input.exec.call_id() == "empty" {
            vec![]
        } else {
            vec![
                ContentBlock::text("blocked: nope"),
                ContentBlock::Reasoning { text: "r".into() },
            ]
        };
        Box::pin(async move { Ok(PostDecision::block(feedback)) })
    });
    let r = registry.execute(call("echo", json!({}))).await;
    assert_eq!(
        r.to_value(),
        json!({"content":[{"type":"text","text":"blocked: nope"},{"type":"reasoning","text":"r"}],"isError":true,
               "error":{"message":"blocked: nope\n[reasoning content]"}})
    );
    let empty = registry
        .execute(dsh_tools::ToolCallInput::new(
            "empty",
            "echo",
            json!({}),
            Default::default(),
        ))
        .await;
    assert_eq!(
        empty.to_value(),
        json!({"content":[],"isError":true,"error":{"message":"tool result blocked by post-execute policy"}})
    );
}

#[tokio::test]
async fn item_56_throwing_or_panicking_listeners_give_error_results() {
    // pre-execute Err keeps HarnessError info
    let (root, registry) = setup();
    registry.register(&root, text_tool("echo", "x")).unwrap();
    registry.pre_execute().register(&root, |_e, _n| {
        Box::pin(async { Err(ToolError::harness("policy failed", "POLICY_FAILED")) })
    });
    let r = registry.execute(call("echo", json!({}))).await;
    assert_eq!(
        r.to_value(),
        json!({"content":[{"type":"text","text":"Error: policy failed"}],"isError":true,
               "error":{"message":"policy failed","info":{"name":"HarnessError","code":"POLICY_FAILED"}}})
    );
    // guard panic
    let (root, registry) = setup();
    registry.register(&root, text_tool("echo", "x")).unwrap();
    registry.guard(&root, |_| panic!("guard exploded"));
    assert_eq!(
        text(&registry.execute(call("echo", json!({}))).await),
        "Error: guard exploded"
    );
    // approval panic
    struct Broken;
    impl ApprovalService for Broken {
        fn request(&self, _r: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome> {
            Box::pin(async { panic!("approval exploded") })
        }
    }
    let (root, registry) = setup();
    registry.register(&root, text_tool("echo", "x")).unwrap();
    root.provide::<dyn ApprovalService>(Arc::new(Broken))
        .unwrap();
    ask_with(&registry, &root, None);
    let (_s, a) = agent(&root, "a");
    assert_eq!(
        text(&registry.execute(call_as("echo", json!({}), &a)).await),
        "Error: approval exploded"
    );
    // post-execute Err
    let (root, registry) = setup();
    registry.register(&root, text_tool("echo", "x")).unwrap();
    registry.post_execute().register(&root, |_i, _n| {
        Box::pin(async { Err(ToolError::new("post broke")) })
    });
    let r = registry.execute(call("echo", json!({}))).await;
    assert_eq!(
        r.to_value(),
        json!({"content":[{"type":"text","text":"Error: post broke"}],"isError":true,"error":{"message":"post broke"}})
    );
    // pre-execute synchronous panic while building its future
    let (root, registry) = setup();
    registry.register(&root, text_tool("echo", "x")).unwrap();
    registry
        .pre_execute()
        .register(&root, |_e, _n| panic!("sync pre panic"));
    assert_eq!(
        text(&registry.execute(call("echo", json!({}))).await),
        "Error: sync pre panic"
    );
}

fn deferring_tool(name: &str, fail: bool) -> dsh_tools::ToolDefinition {
    content_fixture(name)
        .run(move |_a: Value, run| async move {
            run.defer_context(user("nested-1"));
            run.defer_context(user("nested-2"));
            if fail {
                Err(ToolError::new("body failed"))
            } else {
                Ok(text_value("ok"))
            }
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn item_57_contexts_are_deferred_then_wrapper_then_post_and_survive_body_failure() {
    let (root, registry) = setup();
    registry
        .register(&root, deferring_tool("echo", false))
        .unwrap();
    registry
        .register(&root, deferring_tool("failing", true))
        .unwrap();
    registry.execute_hook().register(&root, |d, next| {
        Box::pin(async move {
            let r = next.run(d).await?;
            let mut with = (*r).clone();
            with.additional_contexts.push(user("wrapper"));
            Ok(Arc::new(with))
        })
    });
    registry.post_execute().register(&root, |_i, _n| {
        Box::pin(async { Ok(PostDecision::accept().with_contexts(vec![user("post")])) })
    });
    let r = registry.execute(call("echo", json!({}))).await;
    assert_eq!(
        texts(&r.additional_contexts),
        vec!["nested-1", "nested-2", "wrapper", "post"]
    );
    let r = registry.execute(call("failing", json!({}))).await;
    assert!(r.is_error);
    assert_eq!(
        texts(&r.additional_contexts),
        vec!["nested-1", "nested-2", "wrapper", "post"]
    );
}

#[tokio::test]
async fn item_58_a_block_discards_earlier_contexts() {
    let (root, registry) = setup();
    registry
        .register(&root, deferring_tool("echo", false))
        .unwrap();
    registry.post_execute().register(&root, |_i, _n| {
        Box::pin(async {
            Ok(PostDecision::block(vec![ContentBlock::text("no")])
                .with_contexts(vec![user("block ctx")]))
        })
    });
    let r = registry.execute(call("echo", json!({}))).await;
    assert_eq!(texts(&r.additional_contexts), vec!["block ctx"]);
}

#[tokio::test]
async fn item_59_conclusion_rides_only_on_a_success() {
    let (root, registry) = setup();
    let def = content_fixture("finish")
        .run(|_a: Value, run| async move {
            run.conclude_turn();
            Ok::<_, ToolError>(text_value("done"))
        })
        .build()
        .unwrap();
    registry.register(&root, def).unwrap();
    let r = registry.execute(call("finish", json!({}))).await;
    assert!(r.concludes_turn);
    assert_eq!(r.to_value()["concludesTurn"], json!(true));
    registry.post_execute().register(&root, |_i, _n| {
        Box::pin(async { Ok(PostDecision::block(vec![])) })
    });
    let r = registry.execute(call("finish", json!({}))).await;
    assert!(!r.concludes_turn);
    assert!(r.to_value().get("concludesTurn").is_none());
}

#[tokio::test]
async fn item_60_the_captured_finalizer_runs_once_for_every_outcome_and_replaces_only_content() {
    let (root, registry) = setup();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let def = content_fixture("echo")
        .finalize_content(move |_exec, result| {
            c.fetch_add(1, Ordering::SeqCst);
            let t = dsh_protocol::text_of(&result.content);
            Ok(Some(vec![ContentBlock::text(
                t.chars().take(12).collect::<String>(),
            )]))
        })
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(text_value("a long successful output")) })
        .build()
        .unwrap();
    let disposer = registry.register(&root, def).unwrap();
    let r = registry.execute(call("echo", json!({}))).await;
    assert_eq!(text(&r), "a long succe");
    assert_eq!(
        r.value.as_deref(),
        Some(&text_value("a long successful output"))
    );
    // pre-pipeline failure: the tool is disposed by a pre-execute listener that then throws
    let d = disposer.clone();
    registry.pre_execute().register(&root, move |_e, _n| {
        d.dispose();
        Box::pin(async { Err(ToolError::harness("policy failed", "POLICY_FAILED")) })
    });
    let r = registry.execute(call("echo", json!({}))).await;
    assert_eq!(text(&r), "Error: polic");
    assert_eq!(r.error_code(), Some("POLICY_FAILED"));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // pre-aborted and lossy-argument entries still finalize
    let (root, registry) = setup();
    let c = calls.clone();
    let def = content_fixture("echo")
        .finalize_content(move |_e, _r| {
            c.fetch_add(1, Ordering::SeqCst);
            Ok(None)
        })
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(text_value("x")) })
        .build()
        .unwrap();
    registry.register(&root, def).unwrap();
    let aborted = call("echo", json!({}));
    aborted.signal.cancel();
    assert_eq!(
        text(&registry.execute(aborted).await),
        "Error: tool call aborted before dispatch"
    );
    registry.execute(call("echo", json!({"x": -0.0}))).await;
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn item_61_a_throwing_finalizer_gives_an_error_and_is_not_called_again() {
    let (root, registry) = setup();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let def = content_fixture("echo")
        .finalize_content(move |_e, _r| {
            c.fetch_add(1, Ordering::SeqCst);
            Err(ToolError::new("finalizer violated its total contract"))
        })
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(text_value("x")) })
        .build()
        .unwrap();
    registry.register(&root, def).unwrap();
    let r = registry.execute(call("echo", json!({}))).await;
    assert_eq!(
        r.to_value(),
        json!({"content":[{"type":"text","text":"Error: finalizer violated its total contract"}],"isError":true,
               "error":{"message":"finalizer violated its total contract"}})
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn item_62_observers_get_the_returned_object_and_cannot_change_it() {
    let (root, registry) = setup();
    registry.register(&root, text_tool("echo", "x")).unwrap();
    let seen: Arc<std::sync::Mutex<Vec<Arc<ToolResult>>>> = Arc::default();
    let s = seen.clone();
    registry.results().register(&root, move |event| {
        s.lock().unwrap().push(event.result.clone());
        Ok(())
    });
    registry.results().register(&root, |_| {
        Err(dsh_kernel::HookError::msg("observer failed"))
    });
    registry
        .results()
        .register(&root, |_| panic!("observer panicked"));
    let r = registry.execute(call("echo", json!({}))).await;
    assert_eq!(text(&r), "x");
    assert!(!r.is_error);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert!(Arc::ptr_eq(&seen[0], &r));
}
