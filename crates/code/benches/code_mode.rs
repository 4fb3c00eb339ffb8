//! Code Mode costs: engine start-up per `run_code`, and per-sub-call overhead of a program
//! making 1,000 calls of a trivial tool (sequential and under `Promise.all`).
// Bench fixtures unwrap their setup; a failure there is a bench failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use criterion::Criterion;
use criterion::criterion_group;
use criterion::criterion_main;
use dsh_code::CodeMode;
use dsh_code::CodeModeConfig;
use dsh_code::CodeRunRequest;
use dsh_code::CodeRuntime;
use dsh_code::QuickJsConfig;
use dsh_code::QuickJsRuntime;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_tools::CancellationToken;
use dsh_tools::PresentationMode;
use dsh_tools::RegistryConfig;
use dsh_tools::Tool;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use serde_json::Value;
use serde_json::json;

fn registry() -> (Scope, Arc<ToolRegistry>) {
    let root = Scope::root();
    let registry = ToolRegistry::install(
        &root,
        RegistryConfig {
            mode: PresentationMode::Code,
        },
    )
    .unwrap();
    CodeMode::install(&root, &registry, CodeModeConfig::default()).unwrap();
    let runtime: Arc<dyn CodeRuntime> = QuickJsRuntime::new(QuickJsConfig::default()).unwrap();
    root.provide::<dyn CodeRuntime>(runtime).unwrap();
    let noop = Tool::builder("noop")
        .raw_output(json!({"type": "number"}), |_, v| {
            Ok(vec![ContentBlock::text(v.to_string())])
        })
        .concurrency_safe(|_| true)
        .run(|_: Value, _| async { Ok::<_, ToolError>(1) })
        .build()
        .unwrap();
    registry.register(&root, noop).unwrap();
    (root, registry)
}

async fn run_code(registry: &ToolRegistry, code: &str) {
    let result = registry
        .execute(ToolCallInput::new(
            "bench",
            "run_code",
            json!({"code": code, "description": "bench"}),
            CancellationToken::new(),
        ))
        .await;
    assert!(!result.is_error, "{}", result.text());
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("code_mode");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(8));

    let runtime = QuickJsRuntime::new(QuickJsConfig::default()).unwrap();
    group.bench_function("engine_startup_bare_run", |b| {
        b.to_async(&rt).iter(|| async {
            let result = runtime
                .run(CodeRunRequest {
                    program: "return 1".into(),
                    bindings: Vec::new(),
                    signal: None,
                })
                .await
                .unwrap();
            assert!(result.error.is_none());
        });
    });

    let (_root, registry) = registry();
    group.bench_function("run_code_empty_program", |b| {
        b.to_async(&rt).iter(|| run_code(&registry, "return 1"));
    });
    group.bench_function("run_code_1000_sequential_calls", |b| {
        b.to_async(&rt).iter(|| {
            run_code(
                &registry,
                "let n = 0; for (let i = 0; i < 1000; i++) n += await tools.noop({}); return n",
            )
        });
    });
    group.bench_function("run_code_1000_parallel_calls", |b| {
        b.to_async(&rt).iter(|| {
            run_code(
                &registry,
                "const r = await Promise.all(Array.from({length: 1000}, () => tools.noop({}))); return r.length",
            )
        });
    });
    group.finish();
}

criterion_group!(code_mode, benches);
criterion_main!(code_mode);
