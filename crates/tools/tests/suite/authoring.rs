//! defineTool behaviour through the registry (upstream tools.spec "defineTool validation"),
//! deep structures, the staged scheduler API and the code-mode collapse seam.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use dsh_protocol::ContentBlock;
use dsh_tools::CodeModeTransport;
use dsh_tools::Dispatched;
use dsh_tools::Prepared;
use dsh_tools::PresentationMode;
use dsh_tools::Tool;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use pretty_assertions::assert_eq;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;
use serde_json::json;

use super::support::*;

#[derive(Deserialize, schemars::JsonSchema)]
struct ReadArgs {
    path: String,
    limit: Option<u32>,
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct ReadOutput {
    text: String,
    lines: u32,
}

fn typed_read(body_runs: Arc<AtomicUsize>) -> ToolDefinition {
    Tool::builder("read")
        .description("Read a file.")
        .params::<ReadArgs>()
        .output::<ReadOutput>(|_args, out| {
            Ok(vec![ContentBlock::text(format!(
                "{} ({} lines)",
                out.text, out.lines
            ))])
        })
        .run(move |args: ReadArgs, _run| {
            body_runs.fetch_add(1, Ordering::SeqCst);
            async move {
                Ok::<_, ToolError>(ReadOutput {
                    text: args.path.to_uppercase(),
                    lines: args.limit.unwrap_or(1),
                })
            }
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn typed_round_trip_and_invalid_args_never_reach_the_body() {
    let (root, registry) = setup();
    let runs = Arc::new(AtomicUsize::new(0));
    registry.register(&root, typed_read(runs.clone())).unwrap();
    let ok = registry
        .execute(call("read", json!({"path": "hello", "limit": 2})))
        .await;
    assert_eq!(
        ok.to_value(),
        json!({"content":[{"type":"text","text":"HELLO (2 lines)"}],"isError":false,"value":{"text":"HELLO","lines":2}})
    );
    let missing = registry.execute(call("read", json!({}))).await;
    assert_eq!(
        missing.to_value(),
        json!({"content":[{"type":"text","text":"Error: invalid arguments: missing required property \"path\""}],"isError":true,
               "error":{"message":"invalid arguments: missing required property \"path\"","info":{"name":"ToolArgsError","code":"INVALID_ARGS"}}})
    );
    let null = registry.execute(call("read", json!({"path": null}))).await;
    assert_eq!(
        text(&null),
        "Error: invalid arguments: \"path\" must be a string"
    );
    let unparsable = registry.execute(call("read", json!("{not json"))).await;
    assert_eq!(
        text(&unparsable),
        "Error: invalid arguments: \"arguments\" must be an object"
    );
    // schema-valid but out of range for u32: a serde failure after validation is INVALID_ARGS too
    let negative = registry
        .execute(call("read", json!({"path": "a", "limit": -1})))
        .await;
    assert_eq!(negative.error_code(), Some("INVALID_ARGS"));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn upstream_dsl_tools_validate_and_raw_tools_do_not() {
    let (root, registry) = setup();
    let dsl = Tool::builder("read_file")
        .author_parameters(
            &json!({"path": {"type": "string", "required": true}, "limit": {"type": "number"}}),
        )
        .author_output(&json!({"type": "string"}), |_, v| {
            Ok(vec![ContentBlock::text(v.as_str().unwrap_or(""))])
        })
        .run(|args: Value, _r| async move { Ok::<_, ToolError>(args["path"].clone()) })
        .build()
        .unwrap();
    let raw = content_fixture("raw")
        .raw_parameters(
            json!({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}),
        )
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(text_value("raw ran")) })
        .build()
        .unwrap();
    registry.register(&root, dsl).unwrap();
    registry.register(&root, raw).unwrap();
    assert_eq!(
        text(&registry.execute(call("read_file", json!({}))).await),
        "Error: invalid arguments: missing required property \"path\""
    );
    assert_eq!(
        text(
            &registry
                .execute(call("read_file", json!({"path": "/x", "extra": 1})))
                .await
        ),
        "/x"
    );
    assert_eq!(
        text(&registry.execute(call("raw", json!({}))).await),
        "raw ran"
    );
}

#[tokio::test]
async fn thousands_of_levels_never_overflow_the_stack() {
    const DEPTH: usize = 5_000;
    // `json!` interpolation serialises recursively, so deep values are built by hand.
    let object = |pairs: Vec<(&str, Value)>| {
        Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    };
    let mut schema = json!({"type": "string"});
    let mut value = json!("leaf");
    for _ in 0..DEPTH {
        schema = object(vec![("type", json!("array")), ("items", schema)]);
        value = Value::Array(vec![value]);
    }
    let (root, registry) = setup();
    let def = Tool::builder("deep")
        .validated_parameters(object(vec![
            ("type", json!("object")),
            (
                "properties",
                object(vec![("v", dsh_schema::clone_deep(&schema))]),
            ),
        ]))
        .raw_output(dsh_schema::clone_deep(&schema), |_, _| {
            Ok(vec![ContentBlock::text("deep ok")])
        })
        .run(
            |args: Value, _r| async move { Ok::<_, ToolError>(dsh_schema::clone_deep(&args["v"])) },
        )
        .build()
        .unwrap();
    registry.register(&root, def).unwrap();
    let schemas = registry.schemas(None).unwrap();
    assert_eq!(schemas.len(), 1);
    let r = registry
        .execute(call(
            "deep",
            object(vec![("v", dsh_schema::clone_deep(&value))]),
        ))
        .await;
    assert_eq!(text(&r), "deep ok", "{:?}", r.error);
    let mut wrong = json!(1);
    for _ in 0..DEPTH {
        wrong = Value::Array(vec![wrong]);
    }
    let r = registry
        .execute(call("deep", object(vec![("v", wrong)])))
        .await;
    assert_eq!(r.error_code(), Some("INVALID_ARGS"));
    // Everything deep (schemas, arguments, values, definitions) is dropped iteratively.
    for s in schemas {
        dsh_schema::drop_deep(s.parameters);
    }
    dsh_schema::drop_deep(schema);
    dsh_schema::drop_deep(value);
    root.dispose();
}

#[tokio::test]
async fn the_staged_api_composes_to_execute() {
    let (root, registry) = setup();
    registry
        .register(&root, text_tool("echo", "staged"))
        .unwrap();
    let observed = Arc::new(AtomicUsize::new(0));
    let o = observed.clone();
    registry.results().register(&root, move |_| {
        o.fetch_add(1, Ordering::SeqCst);
        Ok(())
    });
    let Prepared::Dispatch(exec) = registry.prepare(call("echo", json!({}))).await else {
        panic!("expected dispatch")
    };
    let Dispatched::Post(result) = registry.dispatch(&exec).await else {
        panic!("expected post")
    };
    assert_eq!(observed.load(Ordering::SeqCst), 0);
    let done = registry.finalize(&exec, result).await;
    assert_eq!(text(&done), "staged");
    assert_eq!(observed.load(Ordering::SeqCst), 1);
    let aborted = call("echo", json!({}));
    aborted.signal.cancel();
    let Prepared::Final(exec, result) = registry.prepare(aborted).await else {
        panic!("expected final")
    };
    assert_eq!(
        text(&registry.finish(&exec, result)),
        "Error: tool call aborted before dispatch"
    );
}

struct FakeTransport(Arc<ToolDefinition>);
impl CodeModeTransport for FakeTransport {
    fn definition(&self) -> Arc<ToolDefinition> {
        self.0.clone()
    }
}

#[tokio::test]
async fn code_mode_collapses_direct_calls_and_lists_run_code() {
    let (root, registry) = setup();
    registry
        .register(&root, text_tool("echo", "direct"))
        .unwrap();
    let run_code = Arc::new(text_tool("run_code", "program ran"));
    registry.set_code_mode_transport(&root, Arc::new(FakeTransport(run_code.clone())));
    let (scope, a) = agent(&root, "coder");
    let finalized = Arc::new(AtomicUsize::new(0));
    registry.present_as(&scope, PresentationMode::Code).unwrap();
    let names: Vec<String> = registry
        .schemas(Some(&scope))
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, vec!["echo", "run_code"]);
    assert!(Arc::ptr_eq(
        &registry.get("run_code", Some(&scope)).unwrap(),
        &run_code
    ));
    assert!(registry.get("run_code", None).is_none());
    let r = registry.execute(call_as("echo", json!({}), &a)).await;
    assert_eq!(
        text(&r),
        "Error: unknown tool \"echo\": only `run_code` is callable directly — call `echo` from inside a `run_code` program instead"
    );
    assert_eq!(r.error_code(), Some("UNKNOWN_TOOL"));
    assert_eq!(
        text(&registry.execute(call_as("run_code", json!({}), &a)).await),
        "program ran"
    );
    // a nested sub-dispatch is exempt from the collapse
    let Prepared::Dispatch(outer) = registry.prepare(call_as("run_code", json!({}), &a)).await
    else {
        panic!()
    };
    let nested = registry
        .execute(call_as("echo", json!({}), &a).parent(outer.token()))
        .await;
    assert_eq!(text(&nested), "direct");
    assert_eq!(
        registry.execution_mode("echo", &json!({}), Some(&scope)),
        dsh_tools::ExecutionMode::Exclusive
    );
    let _ = finalized;
}
