//! The QuickJS backend through the seam: bindings, logs and every failure kind.
// Helpers outside `#[test]` functions unwrap fixture setup; a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use dsh_code::BindingError;
use dsh_code::BindingFn;
use dsh_code::CodeBindingNamespace;
use dsh_code::CodeErrorKind;
use dsh_code::CodeRunRequest;
use dsh_code::CodeRunResult;
use dsh_code::CodeRuntime;
use dsh_code::ErrorClass;
use dsh_code::QuickJsConfig;
use dsh_code::QuickJsRuntime;
use indexmap::IndexMap;
use serde_json::Value;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn echo() -> BindingFn {
    Arc::new(|args: Value| {
        Box::pin(async move {
            let mut map = serde_json::Map::new();
            map.insert("echo".to_owned(), args);
            Ok(Value::Object(map))
        })
    })
}

fn failing() -> BindingFn {
    Arc::new(|_| Box::pin(async { Err(BindingError::Failed("deliberate failure".to_owned())) }))
}

fn tools(functions: Vec<(&str, BindingFn)>) -> Vec<CodeBindingNamespace> {
    vec![CodeBindingNamespace {
        global: "tools".into(),
        functions: functions
            .into_iter()
            .map(|(n, f)| (n.to_owned(), f))
            .collect::<IndexMap<_, _>>(),
        error_class: Some(ErrorClass {
            name: "ToolCallError".into(),
            member_name_property: "toolName".into(),
        }),
    }]
}

async fn run_with(
    config: QuickJsConfig,
    program: &str,
    signal: Option<CancellationToken>,
) -> CodeRunResult {
    let runtime = QuickJsRuntime::new(config).unwrap();
    runtime
        .run(CodeRunRequest {
            program: program.into(),
            bindings: tools(vec![
                ("echo", echo()),
                ("fail", failing()),
                ("__proto__", echo()),
            ]),
            signal,
        })
        .await
        .unwrap()
}

async fn run(program: &str) -> CodeRunResult {
    run_with(QuickJsConfig::default(), program, None).await
}

fn kind(result: &CodeRunResult) -> Option<(CodeErrorKind, String)> {
    result.error.as_ref().map(|e| (e.kind, e.message.clone()))
}

#[tokio::test]
async fn bindings_logs_and_the_completion_value() {
    let result = run(
        "const a: number = 1;\nconst r = await tools.echo({n: a});\nconsole.log('saw', r.echo.n, {k: [1, 'x']});\nreturn r;",
    )
    .await;
    assert_eq!(result.error, None);
    assert_eq!(result.logs, vec!["saw 1 { k: [ 1, 'x' ] }"]);
    assert_eq!(result.value, Some(json!({"echo": {"n": 1}})));
    let nothing = run("console.info('only');").await;
    assert_eq!(
        (nothing.value, nothing.logs),
        (None, vec!["only".to_owned()])
    );
}

#[tokio::test]
async fn a_failed_binding_is_a_tool_call_error_with_the_tool_name() {
    let result = run(
        "try { await tools.fail({}); } catch (e) { return [e instanceof ToolCallError, e instanceof Error, e.name, e.toolName, e.message]; }",
    )
    .await;
    assert_eq!(
        result.value,
        Some(json!([
            true,
            true,
            "ToolCallError",
            "fail",
            "deliberate failure"
        ]))
    );
}

#[tokio::test]
async fn lossy_arguments_are_rejected_before_the_host() {
    let result = run(
        "const out = [];\nfor (const a of [undefined, new Date(0), () => 1, 1n, -0, {get x() { throw new Error('boom') }}]) {\n  try { await tools.echo(a); out.push('sent'); } catch (e) { out.push(e.message); }\n}\nconst c: any = {}; c.self = c;\ntry { await tools.echo(c) } catch (e) { out.push(e.message) }\nreturn out;",
    )
    .await;
    let lossy =
        "tool arguments must be lossless JSON (call the tool with an arguments object, e.g. `{}`)";
    assert_eq!(
        result.value,
        Some(json!([
            lossy,
            lossy,
            lossy,
            lossy,
            lossy,
            "tool arguments must be lossless JSON: boom",
            lossy
        ]))
    );
}

#[tokio::test]
async fn proto_named_bindings_and_keys_are_ordinary() {
    let result = run(
        "const table = tools as any;\nconst own = Object.prototype.hasOwnProperty.call(table, '__proto__');\nconst r = await table['__proto__'](JSON.parse('{\"__proto__\": 1}'));\nreturn [own, Object.getPrototypeOf(table) === null, r];",
    )
    .await;
    assert_eq!(
        result.value,
        Some(json!([true, true, {"echo": {"__proto__": 1}}]))
    );
}

#[tokio::test]
async fn deep_values_cross_both_ways() {
    let result = run(
        "let v: any = 0; for (let i = 0; i < 5000; i++) v = [v];\nconst r = await tools.echo({v});\nlet d = 0; let x = r.echo.v; while (Array.isArray(x)) { d++; x = x[0]; }\nreturn d;",
    )
    .await;
    assert_eq!(result.value, Some(json!(5000)));
}

#[tokio::test]
async fn failure_kinds() {
    let thrown = run("throw new TypeError('bad thing');").await;
    let (k, m) = kind(&thrown).unwrap();
    assert_eq!(k, CodeErrorKind::Exception);
    assert!(m.starts_with("TypeError: bad thing"), "{m}");

    let non_error = run("console.log('before'); throw {code: 42};").await;
    assert_eq!(
        kind(&non_error),
        Some((CodeErrorKind::Exception, "{ code: 42 }".into()))
    );
    assert_eq!(non_error.logs, vec!["before"]);

    let syntax = run("const = ;").await;
    assert_eq!(kind(&syntax).unwrap().0, CodeErrorKind::Exception);
    assert!(kind(&syntax).unwrap().1.starts_with("SyntaxError"));

    let namespaced = run("namespace N { export const x = 1 }").await;
    assert!(
        kind(&namespaced)
            .unwrap()
            .1
            .starts_with("SyntaxError: TypeScript namespaces are not supported")
    );

    let invalid = run("return new Date(0);").await;
    assert_eq!(
        kind(&invalid),
        Some((
            CodeErrorKind::InvalidOutput,
            "program completion must be lossless JSON".into()
        ))
    );
}

#[tokio::test]
async fn a_runaway_loop_exhausts_the_compute_budget() {
    let config = QuickJsConfig {
        compute_ms: 200,
        ..QuickJsConfig::default()
    };
    let started = Instant::now();
    let result = run_with(config, "console.log('spinning'); for (;;) {}", None).await;
    let (k, m) = kind(&result).unwrap();
    assert_eq!(k, CodeErrorKind::Timeout);
    assert!(m.starts_with("compute budget exhausted ("), "{m}");
    assert_eq!(result.logs, vec!["spinning"]);
    assert!(started.elapsed() < Duration::from_secs(10));
    // A caught interrupt cannot resurrect the program.
    let caught = run_with(
        config,
        "while (true) { try { for (;;) {} } catch (e) {} }",
        None,
    )
    .await;
    assert_eq!(kind(&caught).unwrap().0, CodeErrorKind::Timeout);
}

#[tokio::test]
async fn the_wall_clock_ceiling_ends_an_idle_program() {
    let config = QuickJsConfig {
        max_wall_ms: 300,
        ..QuickJsConfig::default()
    };
    // A pending timer keeps the program alive (not stalled) until the ceiling.
    let result = run_with(
        config,
        "await new Promise((resolve) => setTimeout(resolve, 60000));",
        None,
    )
    .await;
    assert_eq!(
        kind(&result),
        Some((
            CodeErrorKind::Timeout,
            "wall-clock ceiling reached (300ms)".into()
        ))
    );
}

#[tokio::test]
async fn an_await_nothing_can_settle_fails_at_once() {
    let started = Instant::now();
    for program in [
        "await new Promise(() => {});",
        "console.log('a'); await tools.echo({}); await new Promise(() => {});",
        "const p = new Promise((r) => setTimeout(() => {}, 10)); await p;",
    ] {
        let result = run(program).await;
        let (k, m) = kind(&result).unwrap();
        assert_eq!(k, CodeErrorKind::Exception, "{program}");
        assert!(
            m.starts_with("the program is awaiting a promise that nothing can settle"),
            "{program}: {m}"
        );
    }
    // Ten minutes is the default ceiling: at once means well under it.
    assert!(started.elapsed() < Duration::from_secs(30));
    // Work that settles later is not a stall.
    let waited = run("await new Promise((r) => setTimeout(r, 50)); return 'done';").await;
    assert_eq!(waited.value, Some(json!("done")));
}

#[tokio::test]
async fn typescript_enums_and_parameter_properties_run() {
    let result = run(
        "enum Color { Red, Green = 5, Blue }\nclass P { constructor(public x: number, private readonly y: string = 'y') {} get both() { return this.x + this.y; } }\nreturn [Color.Green, Color.Blue, Color[5], new P(1).both];",
    )
    .await;
    assert_eq!(result.error, None);
    assert_eq!(result.value, Some(json!([5, 6, "Green", "1y"])));
}

#[tokio::test]
async fn errors_name_the_users_line() {
    let result = run("const a = 1;\n\n// note\nconst b = a + 1;\nnotDefined(b);\n").await;
    let (k, m) = kind(&result).unwrap();
    assert_eq!(k, CodeErrorKind::Exception);
    assert!(m.starts_with("ReferenceError"), "{m}");
    assert!(m.contains("program.ts:5:"), "{m}");
    let thrown = run("\n\nthrow new Error('boom');").await;
    assert!(
        kind(&thrown).unwrap().1.contains("program.ts:3:"),
        "{:?}",
        kind(&thrown)
    );
}

#[tokio::test]
async fn an_unknown_tool_and_an_import_say_what_is_wrong() {
    let unknown = run("await tools.nope({});").await;
    let (k, m) = kind(&unknown).unwrap();
    assert_eq!(k, CodeErrorKind::Exception);
    assert!(
        m.starts_with(
            "TypeError: tools.nope is not an available tool; tools has: echo, fail, __proto__"
        ),
        "{m}"
    );
    // Known names, awaiting the namespace, and Object.prototype names still work.
    let ok =
        run("const t = await tools; return [typeof tools.echo, 'echo' in tools, typeof t];").await;
    assert_eq!(ok.value, Some(json!(["function", true, "object"])));
    let imported = run("import fs from 'fs';\nreturn fs;").await;
    assert!(
        kind(&imported)
            .unwrap()
            .1
            .starts_with("SyntaxError: `import` is not available in Code Mode"),
        "{:?}",
        kind(&imported)
    );
}

#[tokio::test]
async fn a_huge_allocation_hits_the_memory_limit() {
    let config = QuickJsConfig {
        memory_mb: 16,
        ..QuickJsConfig::default()
    };
    let result = run_with(
        config,
        "const a = []; for (;;) a.push('x'.repeat(1 << 16) + a.length);",
        None,
    )
    .await;
    let (k, m) = kind(&result).unwrap();
    assert_eq!(k, CodeErrorKind::WorkerExit, "{m}");
    assert!(m.contains("out of memory"), "{m}");
    let buffer = run_with(config, "return new ArrayBuffer(1 << 30).byteLength;", None).await;
    assert!(buffer.error.is_some());
}

#[tokio::test]
async fn output_beyond_the_ledger_fails_keeping_the_prefix() {
    let config = QuickJsConfig {
        max_output_bytes: 20,
        ..QuickJsConfig::default()
    };
    let result = run_with(
        config,
        "console.log('12345'); for (;;) console.log('more output');",
        None,
    )
    .await;
    assert_eq!(
        kind(&result),
        Some((
            CodeErrorKind::OutputLimit,
            "outer output exceeded 20 bytes".into()
        ))
    );
    assert_eq!(result.logs, vec!["12345"]);
    let value = run_with(config, "return 'x'.repeat(100);", None).await;
    assert_eq!(kind(&value).unwrap().0, CodeErrorKind::OutputLimit);
}

#[tokio::test]
async fn abort_interrupts_busy_and_idle_programs() {
    for program in [
        "for (;;) {}",
        // Idle on a timer (an await nothing can settle now fails at once on its own).
        "await new Promise((resolve) => setTimeout(resolve, 60000))",
        "await tools.echo({}); for (;;) {}",
    ] {
        let signal = CancellationToken::new();
        let trigger = signal.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            trigger.cancel();
        });
        let result = run_with(QuickJsConfig::default(), program, Some(signal)).await;
        assert_eq!(
            kind(&result),
            Some((
                CodeErrorKind::Abort,
                "AbortError: This operation was aborted".into()
            )),
            "{program}"
        );
    }
    let pre = CancellationToken::new();
    pre.cancel();
    let result = run_with(QuickJsConfig::default(), "return 1", Some(pre)).await;
    assert_eq!(kind(&result).unwrap().0, CodeErrorKind::Abort);
}

#[tokio::test]
async fn no_state_survives_between_runs_and_disposal_refuses_new_runs() {
    let runtime = QuickJsRuntime::new(QuickJsConfig::default()).unwrap();
    let first = runtime
        .run(CodeRunRequest {
            program: "globalThis.leak = 1; return 1".into(),
            bindings: vec![],
            signal: None,
        })
        .await
        .unwrap();
    assert_eq!(first.value, Some(json!(1)));
    let second = runtime
        .run(CodeRunRequest {
            program: "return typeof globalThis.leak".into(),
            bindings: vec![],
            signal: None,
        })
        .await
        .unwrap();
    assert_eq!(second.value, Some(json!("undefined")));
    runtime.dispose().await;
    assert!(
        runtime
            .run(CodeRunRequest {
                program: "return 1".into(),
                bindings: vec![],
                signal: None
            })
            .await
            .is_err()
    );
}

#[tokio::test]
async fn timers_wait_on_the_wall_clock_and_runaway_recursion_is_an_exception() {
    let timed = run(
        "const order: string[] = [];\nconst t = setTimeout(() => order.push('cancelled'), 5);\nclearTimeout(t);\nsetTimeout((x: string) => order.push(x), 10, 'late');\nsetTimeout(() => order.push('early'), 1);\nawait new Promise((r) => setTimeout(r, 40));\nreturn order;",
    )
    .await;
    assert_eq!(timed.value, Some(json!(["early", "late"])));
    let deep = run("function f(n: number): number { return f(n + 1) + 1 }\nreturn f(0)").await;
    let (k, m) = kind(&deep).unwrap();
    assert_eq!(k, CodeErrorKind::Exception);
    assert!(
        m.contains("stack overflow") || m.contains("call stack"),
        "{m}"
    );
}

#[tokio::test]
async fn a_microtask_storm_is_stopped_by_the_compute_budget() {
    let config = QuickJsConfig {
        compute_ms: 200,
        ..QuickJsConfig::default()
    };
    let result = run_with(config, "for (;;) await null;", None).await;
    assert_eq!(kind(&result).unwrap().0, CodeErrorKind::Timeout);
    let idle = QuickJsConfig {
        compute_ms: 100,
        max_wall_ms: 5_000,
        ..QuickJsConfig::default()
    };
    let waits = run_with(
        idle,
        "for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 40)); return 'waited'",
        None,
    )
    .await;
    assert_eq!(waits.value, Some(json!("waited")), "{:?}", waits.error);
}

#[tokio::test]
async fn deeply_nested_programs_never_crash_the_host() {
    let program = format!("return {}1{};", "[".repeat(3_000), "]".repeat(3_000));
    let result = run(&program).await;
    match (&result.value, &result.error) {
        (Some(_), None) => {}
        (None, Some(error)) => assert_eq!(error.kind, CodeErrorKind::Exception),
        other => panic!("unexpected outcome {other:?}"),
    }
    let absurd = format!("return {}1{};", "(".repeat(50_000), ")".repeat(50_000));
    let refused = run(&absurd).await;
    assert!(kind(&refused).unwrap().1.contains("nests deeper"));
}
