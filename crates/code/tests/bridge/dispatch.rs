//! Items 73–76, 78–80: bindings, sub-call identity, events, deferral and the outer result.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use dsh_code::CodeModeConfig;
use dsh_code::QuickJsConfig;
use dsh_kernel::BoxFuture;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_tools::Execution;
use dsh_tools::ExecutionToken;
use dsh_tools::PostDecision;
use dsh_tools::PostInput;
use dsh_tools::PresentationMode;
use dsh_tools::Tool;
use dsh_tools::ToolError;
use dsh_tools::ToolFilter;
use dsh_tools::ToolRun;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn item_73_bindings_are_the_visible_tools_minus_run_code_in_a_null_prototype_table() {
    let env = env(PresentationMode::Code);
    env.register(echo());
    env.register(fail());
    env.register(
        Tool::builder("__proto__")
            .raw_output(json!({"type": "string"}), |_, v| {
                Ok(vec![ContentBlock::text(v.as_str().unwrap_or(""))])
            })
            .run(|_: Value, _| async { Ok::<_, ToolError>("proto ran") })
            .build()
            .unwrap(),
    );
    let _deny = env
        .registry
        .restrict(
            &env.scope,
            ToolFilter {
                allow: None,
                deny: Some(vec!["fail".into()]),
            },
        )
        .unwrap();
    let result = env
        .run("return [Object.keys(tools), Object.getPrototypeOf(tools) === null, await tools['__proto__']({})]")
        .await;
    assert_eq!(
        result.value.as_deref().unwrap()["result"],
        json!([["echo", "__proto__"], true, "proto ran"])
    );
}

#[tokio::test]
async fn item_74_sub_calls_carry_numbered_ids_the_outer_agent_the_parent_token_and_the_run_signal()
{
    let env = env(PresentationMode::Code);
    type Seen = (String, String, Option<ExecutionToken>, bool);
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = seen.clone();
    env.register(
        Tool::builder("probe")
            .raw_output(json!({"type": "string"}), |_, v| {
                Ok(vec![ContentBlock::text(v.as_str().unwrap_or(""))])
            })
            .run(move |_: Value, run: ToolRun| {
                let record = record.clone();
                async move {
                    record.lock().unwrap().push((
                        run.call_id().to_owned(),
                        run.root_call_id().to_owned(),
                        run.parent(),
                        run.agent().is_some_and(|a| a.id() == "main"),
                    ));
                    Ok::<_, ToolError>("ok")
                }
            })
            .build()
            .unwrap(),
    );
    let outer: Arc<Mutex<Option<ExecutionToken>>> = Arc::default();
    let keep = outer.clone();
    env.registry
        .pre_execute()
        .register(&env.root, move |exec: Arc<Execution>, next| {
            if exec.name() == "run_code" {
                *keep.lock().unwrap() = Some(exec.token());
            }
            next.run(exec)
        });
    let result = env
        .run("await tools.probe({}); await tools.probe({}); return 'done'")
        .await;
    assert_eq!(text(&result), "done");
    let outer = outer.lock().unwrap().unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            (
                "call-1:code:1".to_owned(),
                "call-1".to_owned(),
                Some(outer),
                true
            ),
            (
                "call-1:code:2".to_owned(),
                "call-1".to_owned(),
                Some(outer),
                true
            ),
        ]
    );
}

#[tokio::test]
async fn item_75_lossy_arguments_are_never_dispatched_logged_or_numbered() {
    let env = env(PresentationMode::Code);
    env.register(echo());
    let result = env
        .run(
            "const out: string[] = [];\nfor (const a of [undefined, new Date(0), () => 1, 10n, {get x() { throw new Error('getter boom') }}]) {\n  try { await tools.echo(a as any); } catch (e) { out.push(e.message); }\n}\nout.push(await tools.echo({text: 'ok'}));\nreturn out;",
        )
        .await;
    let lossy =
        "tool arguments must be lossless JSON (call the tool with an arguments object, e.g. `{}`)";
    assert_eq!(
        result.value.as_deref().unwrap()["result"],
        json!([
            lossy,
            lossy,
            lossy,
            lossy,
            "tool arguments must be lossless JSON: getter boom",
            "echo:ok"
        ])
    );
    assert_eq!(
        env.log.ids(),
        vec![
            (
                "tool/code-dispatch-start".to_owned(),
                "call-1:code:1".to_owned()
            ),
            ("tool/code-dispatch".to_owned(), "call-1:code:1".to_owned()),
        ]
    );
}

#[tokio::test]
async fn item_76_values_resolve_and_failures_reject_with_tool_call_error() {
    let env = env(PresentationMode::Code);
    env.register(echo());
    env.register(fail());
    let result = env
        .run(
            "const v = await tools.echo({text: 'one'});\ntry { await tools.fail({}); } catch (e) {\n  console.log(`caught: ${e.message}`);\n  return [v, e instanceof ToolCallError, e.toolName, e.name, 'code' in e];\n}",
        )
        .await;
    assert_eq!(
        result.to_value(),
        json!({
            "content": [{"type": "text", "text": "caught: deliberate failure\n[\n  \"echo:one\",\n  true,\n  \"fail\",\n  \"ToolCallError\",\n  false\n]"}],
            "isError": false,
            "value": {"logs": ["caught: deliberate failure"], "result": ["echo:one", true, "fail", "ToolCallError", false]}
        })
    );
    // A validation failure is a rejection too, with the pipeline's message.
    let invalid = env
        .run("try { await tools.echo({}) } catch (e) { return e.message }")
        .await;
    assert_eq!(
        text(&invalid),
        "invalid arguments: missing required property \"text\""
    );
}

#[tokio::test]
async fn item_78_start_and_settle_events_pair_up_with_exact_payloads() {
    let env = env(PresentationMode::Code);
    env.register(echo());
    env.register(fail());
    let result = env
        .run("const a = await tools.echo({text: 'one'}); try { await tools.fail({n: 1}) } catch {} ; return a")
        .await;
    assert_eq!(text(&result), "echo:one");
    assert_eq!(
        env.log.data(),
        vec![
            (
                "tool/code-dispatch-start".to_owned(),
                json!({"rootCallId": "call-1", "parentCallId": "call-1", "subCallId": "call-1:code:1", "name": "echo", "arguments": {"text": "one"}})
            ),
            (
                "tool/code-dispatch".to_owned(),
                json!({"rootCallId": "call-1", "parentCallId": "call-1", "subCallId": "call-1:code:1", "name": "echo", "arguments": {"text": "one"}, "isError": false, "content": [{"type": "text", "text": "echo:one"}]})
            ),
            (
                "tool/code-dispatch-start".to_owned(),
                json!({"rootCallId": "call-1", "parentCallId": "call-1", "subCallId": "call-1:code:2", "name": "fail", "arguments": {"n": 1}})
            ),
            (
                "tool/code-dispatch".to_owned(),
                json!({"rootCallId": "call-1", "parentCallId": "call-1", "subCallId": "call-1:code:2", "name": "fail", "arguments": {"n": 1}, "isError": true, "content": [{"type": "text", "text": "Error: deliberate failure"}]})
            ),
        ]
    );
}

#[tokio::test]
async fn item_78_a_throwing_dispatch_log_listener_is_contained() {
    let env = env(PresentationMode::Code);
    env.register(echo());
    env.code_mode.dispatch_log_hook().register(
        &env.root,
        |_input, _next| -> BoxFuture<'static, _> {
            Box::pin(async { Err(ToolError::new("listener broke")) })
        },
    );
    let result = env.run("return await tools.echo({text: 'x'})").await;
    assert_eq!(text(&result), "echo:x");
    let data = env.log.data();
    assert_eq!(
        data[1].1["content"],
        json!([{"type": "text", "text": "echo:x"}])
    );
}

#[tokio::test]
async fn item_78_a_queued_call_abandoned_at_settlement_logs_nothing() {
    let env = env(PresentationMode::Code);
    let tracker = Arc::new(Tracker::default());
    env.register(sleeper("slow", false, 100, tracker.clone()));
    let result = env
        .run("tools.slow({i: 1}); const late = tools.slow({i: 2}).catch((e) => e.message); return 'bye'")
        .await;
    assert_eq!(text(&result), "bye");
    // Call 1 started (and was aborted by settlement); call 2 was still queued.
    assert_eq!(
        env.log.ids(),
        vec![
            (
                "tool/code-dispatch-start".to_owned(),
                "call-1:code:1".to_owned()
            ),
            ("tool/code-dispatch".to_owned(), "call-1:code:1".to_owned()),
        ]
    );
    assert_eq!(env.log.data()[1].1["isError"], json!(true));
}

fn image_tool() -> dsh_tools::ToolDefinition {
    Tool::builder("shot")
        .raw_output(json!({"type": "string"}), |_, v| {
            Ok(vec![
                ContentBlock::text(v.as_str().unwrap_or("")),
                ContentBlock::Image {
                    attachment: json!({"id": "img-1"}),
                },
            ])
        })
        .run(|_: Value, _| async { Ok::<_, ToolError>("screenshot") })
        .build()
        .unwrap()
}

#[tokio::test]
async fn item_79_contexts_and_images_defer_in_order_and_survive_failure() {
    let env = env(PresentationMode::Code);
    env.register(echo());
    env.register(image_tool());
    env.registry.post_execute().register(
        &env.root,
        |input: PostInput, next| -> BoxFuture<'static, _> {
            Box::pin(async move {
                if input.exec.name() == "echo" {
                    let tag = input.exec.call_id().to_owned();
                    return Ok(PostDecision::accept()
                        .with_contexts(vec![Message::user_text(format!("context from {tag}"))]));
                }
                next.run(input).await
            })
        },
    );
    let result = env
        .run("await tools.echo({text: 'a'}); await tools.shot({}); await tools.echo({text: 'b'}); throw new Error('late failure')")
        .await;
    assert!(result.is_error);
    assert!(
        text(&result).starts_with("Error: code run failed (exception): Error: late failure"),
        "{}",
        text(&result)
    );
    let contexts: Vec<Value> = result.additional_contexts.iter().map(|m| json!({"content": m.content.iter().map(ContentBlock::to_value).collect::<Vec<_>>(), "source": m.source})).collect();
    assert_eq!(contexts.len(), 3);
    assert_eq!(
        contexts[0]["content"],
        json!([{"type": "text", "text": "context from call-1:code:1"}])
    );
    assert_eq!(
        contexts[1],
        json!({"content": [{"type": "text", "text": "screenshot"}, {"type": "image", "attachment": {"id": "img-1"}}], "source": MessageSource::plugin("tools-code-mode")})
    );
    assert_eq!(
        contexts[2]["content"],
        json!([{"type": "text", "text": "context from call-1:code:3"}])
    );
}

#[tokio::test]
async fn item_79_a_post_block_or_content_replacement_removes_the_forwarded_image() {
    let env = env(PresentationMode::Code);
    env.register(image_tool());
    env.registry.post_execute().register(
        &env.root,
        |input: PostInput, next| -> BoxFuture<'static, _> {
            Box::pin(async move {
                if input.exec.call_id().ends_with(":code:1") {
                    return Ok(PostDecision::replace_content(vec![ContentBlock::text(
                        "redacted",
                    )]));
                }
                if input.exec.call_id().ends_with(":code:2") {
                    return Ok(PostDecision::block(vec![ContentBlock::text("blocked")]));
                }
                next.run(input).await
            })
        },
    );
    let result = env
        .run("await tools.shot({}); try { await tools.shot({}) } catch (e) { return e.message }")
        .await;
    assert_eq!(text(&result), "blocked");
    assert!(result.additional_contexts.is_empty());
}

#[tokio::test]
async fn item_80_outer_result_rendering() {
    let env = env(PresentationMode::Code);
    let cases = [
        ("console.log('a'); console.log('b')", "a\nb"),
        (
            "return {n: 42, ok: true}",
            "{\n  \"n\": 42,\n  \"ok\": true\n}",
        ),
        (
            "console.log('x'); return 'raw \"string\"'",
            "x\nraw \"string\"",
        ),
        ("return null", "null"),
        ("return []", "[]"),
        ("return {}", "{}"),
        ("", "(run_code completed with no output)"),
        (
            "return [[[[[[1]]]]]]",
            "[\n  [\n    [\n      [\n        [\n          [1]\n        ]\n      ]\n    ]\n  ]\n]",
        ),
    ];
    for (program, expected) in cases {
        let result = env.run(program).await;
        assert_eq!(text(&result), expected, "{program}");
        assert!(!result.is_error);
    }
    let empty = env.run("").await;
    assert_eq!(empty.value.as_deref(), Some(&json!({"logs": []})));
}

#[tokio::test]
async fn item_80_failures_render_kind_message_and_captured_output() {
    let env = env_with(
        PresentationMode::Code,
        CodeModeConfig::default(),
        QuickJsConfig {
            compute_ms: 300,
            memory_mb: 32,
            ..QuickJsConfig::default()
        },
    );
    let thrown = env
        .run("console.log('captured before failure'); throw 'plain string'")
        .await;
    assert_eq!(
        thrown.to_value(),
        json!({
            "content": [{"type": "text", "text": "Error: code run failed (exception): plain string\nCaptured output:\ncaptured before failure"}],
            "isError": true,
            "error": {"message": "code run failed (exception): plain string\nCaptured output:\ncaptured before failure", "info": {"name": "CodeRunFailedError", "code": "CODE_RUN_FAILED"}}
        })
    );
    let runaway = env.run("for (;;) {}").await;
    assert!(
        text(&runaway).starts_with("Error: code run failed (timeout): compute budget exhausted ("),
        "{}",
        text(&runaway)
    );
    let huge = env
        .run("const parts = []; for (;;) parts.push(new Array(1 << 20).fill(7));")
        .await;
    assert!(
        text(&huge)
            .starts_with("Error: code run failed (worker-exit): worker error: out of memory"),
        "{}",
        text(&huge)
    );
    let syntax = env.run("const = ;").await;
    assert!(
        text(&syntax).starts_with("Error: code run failed (exception): SyntaxError"),
        "{}",
        text(&syntax)
    );
    let object = env.run("throw {reason: 'not an Error'}").await;
    assert_eq!(
        text(&object),
        "Error: code run failed (exception): { reason: 'not an Error' }"
    );
    let date = env.run("return new Date(0)").await;
    assert_eq!(
        text(&date),
        "Error: code run failed (invalid-output): program completion must be lossless JSON"
    );
    let blank = env
        .registry
        .execute(
            dsh_tools::ToolCallInput::new(
                "c",
                "run_code",
                json!({"code": "return 1", "description": "  "}),
                Default::default(),
            )
            .agent(env.agent.clone()),
        )
        .await;
    assert_eq!(
        text(&blank),
        "Error: invalid description: expected a non-empty string"
    );
    assert_eq!(blank.error_code(), None);
}

#[tokio::test]
async fn cancelling_the_outer_call_interrupts_the_program_and_drains_sub_calls() {
    let env = env(PresentationMode::Code);
    let tracker = Arc::new(Tracker::default());
    env.register(sleeper("slow", false, 5_000, tracker.clone()));
    let input =
        env.run_code_input("await tools.slow({i: 1}); await tools.slow({i: 2}); return 'never'");
    let signal = input.signal.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        signal.cancel();
    });
    let started = std::time::Instant::now();
    let result = env.registry.execute(input).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the sleeping body must observe the abort"
    );
    assert!(result.is_error);
    assert!(
        text(&result).starts_with("Error: code run failed (abort)")
            || result.error_code() == Some("ABORTED"),
        "{}",
        text(&result)
    );
    assert_eq!(
        env.log.ids(),
        vec![
            (
                "tool/code-dispatch-start".to_owned(),
                "call-1:code:1".to_owned()
            ),
            ("tool/code-dispatch".to_owned(), "call-1:code:1".to_owned()),
        ]
    );
    assert_eq!(env.log.data()[1].1["isError"], json!(true));
}

#[tokio::test]
async fn a_pre_aborted_outer_call_never_runs_the_program() {
    let env = env(PresentationMode::Code);
    let input = env.run_code_input("return 1");
    input.signal.cancel();
    let result = env.registry.execute(input).await;
    assert_eq!(result.error_code(), Some("ABORTED_BEFORE_DISPATCH"));
}

#[tokio::test]
async fn the_recorded_code_mode_turn_is_reproduced() {
    let env = env(PresentationMode::Code);
    env.register(
        Tool::builder("bash")
            .raw_output(json!({"type": "object"}), |_, v| {
                Ok(vec![ContentBlock::text(v["stdout"]["text"].as_str().unwrap_or(""))])
            })
            .run(|args: Value, _| async move {
                let command = args["command"].as_str().unwrap_or("");
                let out = format!("{}\n", command.trim_start_matches("echo "));
                Ok::<_, ToolError>(json!({"kind": "foreground", "exitCode": 0, "stdout": {"text": out, "truncated": false}, "stderr": {"text": "", "truncated": false}}))
            })
            .build()
            .unwrap(),
    );
    let code = "\nconst out1 = await tools.bash({command: \"echo CODE_ONE\", description: \"Print CODE_ONE\"});\nconst out2 = await tools.bash({command: \"echo CODE_TWO\", description: \"Print CODE_TWO\"});\nconsole.log(\"captured output\");\nconst text1 = out1.stdout.text.trim();\nconst text2 = out2.stdout.text.trim();\nreturn text1 + \"+\" + text2;\n";
    let id = "call_00_UiQPVqoELyzBZCY5pm1z7875";
    let result = env
        .registry
        .execute(
            dsh_tools::ToolCallInput::new(
                id,
                "run_code",
                json!({"code": code, "description": "Run two echo commands and join outputs"}),
                Default::default(),
            )
            .agent(env.agent.clone()),
        )
        .await;
    assert_eq!(
        result.content,
        vec![ContentBlock::text("captured output\nCODE_ONE+CODE_TWO")]
    );
    let data = env.log.data();
    assert_eq!(
        data[0].1,
        json!({"rootCallId": id, "parentCallId": id, "subCallId": format!("{id}:code:1"), "name": "bash", "arguments": {"command": "echo CODE_ONE", "description": "Print CODE_ONE"}})
    );
    assert_eq!(
        data[3].1,
        json!({"rootCallId": id, "parentCallId": id, "subCallId": format!("{id}:code:2"), "name": "bash", "arguments": {"command": "echo CODE_TWO", "description": "Print CODE_TWO"}, "isError": false, "content": [{"type": "text", "text": "CODE_TWO\n"}]})
    );
}

#[tokio::test]
async fn without_an_agent_dispatch_works_and_nothing_is_logged() {
    let env = env(PresentationMode::Code);
    env.register(echo());
    let result = env
        .registry
        .execute(dsh_tools::ToolCallInput::new(
            "c",
            "run_code",
            json!({"code": "return await tools.echo({text: 'q'})", "description": "d"}),
            Default::default(),
        ))
        .await;
    assert_eq!(text(&result), "echo:q");
    assert!(env.log.ids().is_empty());
}

/// A backend that submits two exclusive calls, completes at once, and reports what the
/// bindings later resolve to (plus one call made after the run is over).
struct Racer {
    seen: Arc<tokio::sync::Mutex<Vec<Result<Value, String>>>>,
}

impl dsh_code::CodeRuntime for Racer {
    fn language(&self) -> &str {
        "typescript"
    }
    fn isolation(&self) -> &str {
        "worker-thread"
    }
    fn run(
        &self,
        request: dsh_code::CodeRunRequest,
    ) -> futures::future::BoxFuture<
        'static,
        Result<dsh_code::CodeRunResult, dsh_code::CodeRuntimeError>,
    > {
        let seen = self.seen.clone();
        Box::pin(async move {
            let slow = request.bindings[0].functions.get("slow").unwrap().clone();
            let first = slow(json!({"i": 1}));
            let second = slow(json!({"i": 2}));
            let guard = seen.clone().lock_owned().await;
            tokio::spawn(async move {
                let mut guard = guard;
                guard.push(first.await.map_err(|e| e.to_string()));
                guard.push(second.await.map_err(|e| e.to_string()));
                guard.push(slow(json!({"i": 3})).await.map_err(|e| e.to_string()));
            });
            Ok(dsh_code::CodeRunResult::default())
        })
    }
}

#[tokio::test]
async fn item_78_abandoned_and_late_calls_reject_with_the_exact_messages() {
    let root = dsh_kernel::Scope::root();
    let registry = dsh_tools::ToolRegistry::install(
        &root,
        dsh_tools::RegistryConfig {
            mode: PresentationMode::Code,
        },
    )
    .unwrap();
    dsh_code::CodeMode::install(&root, &registry, CodeModeConfig::default()).unwrap();
    let seen: Arc<tokio::sync::Mutex<Vec<Result<Value, String>>>> = Arc::default();
    let runtime: Arc<dyn dsh_code::CodeRuntime> = Arc::new(Racer { seen: seen.clone() });
    root.provide::<dyn dsh_code::CodeRuntime>(runtime).unwrap();
    let log = Arc::new(EventLog::default());
    log.provide(&root);
    let tracker = Arc::new(Tracker::default());
    registry
        .register(&root, sleeper("slow", false, 5_000, tracker))
        .unwrap();
    let (_, agent_handle) = agent(&root, "main");
    let result = registry
        .execute(
            dsh_tools::ToolCallInput::new(
                "call-1",
                "run_code",
                json!({"code": "", "description": "d"}),
                Default::default(),
            )
            .agent(agent_handle),
        )
        .await;
    assert_eq!(text(&result), "(run_code completed with no output)");
    let seen = seen.lock().await.clone();
    assert_eq!(seen.len(), 3);
    assert_eq!(
        seen[0],
        Err("run_code run is over (run_code settled); slow result discarded".to_owned())
    );
    assert_eq!(
        seen[1],
        Err("run_code run is over (run_code settled); slow tool call abandoned".to_owned())
    );
    assert_eq!(
        seen[2],
        Err("run_code run is over (run_code settled); slow not dispatched".to_owned())
    );
    assert_eq!(
        log.ids(),
        vec![
            (
                "tool/code-dispatch-start".to_owned(),
                "call-1:code:1".to_owned()
            ),
            ("tool/code-dispatch".to_owned(), "call-1:code:1".to_owned()),
        ]
    );
}
