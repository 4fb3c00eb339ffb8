//! Pipeline benchmarks: one trivial call through every stage with three hooks installed (alone,
//! and with 1,000 other tools registered), a call whose arguments fail validation, validating a
//! 20-field argument object, and registering + disposing 1 000 tools.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::Criterion;
use criterion::criterion_group;
use criterion::criterion_main;
use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_protocol::ContentBlock;
use dsh_tools::CancellationToken;
use dsh_tools::RegistryConfig;
use dsh_tools::Tool;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use serde_json::Map;
use serde_json::Value;
use serde_json::json;

fn echo(name: &str) -> ToolDefinition {
    Tool::builder(name)
        .description("echo")
        .validated_parameters(
            json!({"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}),
        )
        .raw_output(json!({"type":"string"}), |_, v| {
            Ok(vec![ContentBlock::text(v.as_str().unwrap_or(""))])
        })
        .run(|args: Value, _run| async move { Ok::<_, ToolError>(args["text"].clone()) })
        .build()
        .unwrap()
}

fn trivial_call(c: &mut Criterion) {
    let root = Scope::root();
    let registry = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    registry.register(&root, echo("echo")).unwrap();
    registry
        .pre_execute()
        .register(&root, |exec, next| next.run(exec));
    registry
        .execute_hook()
        .register(&root, |d, next| next.run(d));
    registry
        .post_execute()
        .register(&root, |input, next| next.run(input));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let signal = CancellationToken::new();
    c.bench_function("pipeline/trivial_call_three_hooks", |b| {
        b.to_async(&runtime).iter(|| {
            let input = ToolCallInput::new("c1", "echo", json!({"text": "hi"}), signal.clone());
            let registry = registry.clone();
            async move {
                let result = registry.execute(input).await;
                assert!(!result.is_error);
                black_box(result)
            }
        });
    });
}

/// The same call with 1,000 other tools registered: a lookup must not scan them.
fn call_among_many_tools(c: &mut Criterion) {
    let root = Scope::root();
    let registry = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    for i in 0..1_000 {
        registry
            .register(&root, echo(&format!("other_{i}")))
            .unwrap();
    }
    registry.register(&root, echo("echo")).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let signal = CancellationToken::new();
    c.bench_function("pipeline/trivial_call_1000_other_tools", |b| {
        b.to_async(&runtime).iter(|| {
            let input = ToolCallInput::new("c1", "echo", json!({"text": "hi"}), signal.clone());
            let registry = registry.clone();
            async move {
                let result = registry.execute(input).await;
                assert!(!result.is_error);
                black_box(result)
            }
        });
    });
}

/// A call the model got wrong: a missing required field and a wrong type.
fn invalid_arguments(c: &mut Criterion) {
    let root = Scope::root();
    let registry = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    registry.register(&root, echo("echo")).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let signal = CancellationToken::new();
    c.bench_function("pipeline/invalid_arguments", |b| {
        b.to_async(&runtime).iter(|| {
            let input = ToolCallInput::new("c1", "echo", json!({"txt": 5}), signal.clone());
            let registry = registry.clone();
            async move {
                let result = registry.execute(input).await;
                assert!(result.is_error);
                black_box(result)
            }
        });
    });
}

fn validate_twenty_fields(c: &mut Criterion) {
    let mut properties = Map::new();
    let mut args = Map::new();
    let mut required = Vec::new();
    for i in 0..20 {
        let key = format!("field_{i}");
        let (schema, value) = match i % 4 {
            0 => (json!({"type":"string"}), json!("value")),
            1 => (json!({"type":"integer"}), json!(i)),
            2 => (json!({"type":"string","enum":["a","b","c"]}), json!("b")),
            _ => (
                json!({"type":"array","items":{"type":"number"}}),
                json!([1.5, 2.5, 3.5]),
            ),
        };
        properties.insert(key.clone(), schema);
        args.insert(key.clone(), value);
        required.push(Value::String(key));
    }
    let schema = json!({"type":"object","properties": properties, "required": required});
    let args = Value::Object(args);
    assert!(dsh_schema::validate(&schema, &args, "").is_empty());
    c.bench_function("validate/20_field_arguments", |b| {
        b.iter(|| black_box(dsh_schema::validate(&schema, &args, "")))
    });
}

fn register_and_dispose(c: &mut Criterion) {
    let root = Scope::root();
    let registry = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    let definitions: Vec<Arc<ToolDefinition>> = (0..1_000)
        .map(|i| Arc::new(echo(&format!("tool_{i}"))))
        .collect();
    c.bench_function("registry/register_and_dispose_1000", |b| {
        b.iter(|| {
            let plugin = root.child(ScopeKind::Plugin, "bulk").unwrap();
            for def in &definitions {
                registry.register_arc(&plugin, def.clone()).unwrap();
            }
            plugin.dispose();
        });
    });
    assert!(registry.schemas(None).unwrap().is_empty());
}

criterion_group!(
    benches,
    trivial_call,
    call_among_many_tools,
    invalid_arguments,
    validate_twenty_fields,
    register_and_dispose
);
criterion_main!(benches);
