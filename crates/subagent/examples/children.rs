//! Subagent benchmark (docs/benchmarks.md, "Subagents").
//!
//! 1. Ten parallel in-process children, each running three tool calls, against the local replay
//!    server through the real DeepSeek adapter: wall time of the whole delegation and peak RSS.
//! 2. The cost of starting one child: `subagents.start()` latency and the resident memory a
//!    settled child keeps until it is disposed, averaged over many children.
//!
//! `cargo run --release -p dsh-subagent --example children`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::PromptConfig;
use dsh_agent::PromptRegistry;
use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_llm::DeepSeekAdapter;
use dsh_llm::DeepSeekConfig;
use dsh_llm::ModelAdapter;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_session::CreateOptions;
use dsh_session::JsonlStore;
use dsh_session::SessionStore;
use dsh_subagent::AgentDirectory;
use dsh_subagent::BasicChildHost;
use dsh_subagent::ChildRuntime;
use dsh_subagent::InProcessProvider;
use dsh_subagent::StartRequest;
use dsh_subagent::Subagents;
use dsh_testkit::replay::ReplayServer;
use dsh_testkit::scenario::ModelEntry;
use dsh_testkit::scenario::Scenario;
use dsh_testkit::scenario::ScenarioSpec;
use dsh_tools::RegistryConfig;
use dsh_tools::Tool;
use dsh_tools::ToolRegistry;
use serde_json::Value;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const CHILDREN: usize = 10;
const CALLS_PER_CHILD: usize = 3;
const START_SAMPLES: usize = 200;

fn entry(session: usize, index: usize, body: Value) -> ModelEntry {
    let mut body = body;
    body["session"] = json!(session);
    body["route"] = json!("main");
    body["index"] = json!(index);
    body["kind"] = json!("response");
    serde_json::from_value(body).unwrap()
}

fn tool_calls(calls: &[(String, String, String)]) -> Value {
    let stream: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (id, name, args))| json!({"tool_call": i, "id": id, "name": name, "arguments": args}))
        .collect();
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"id": id, "name": name, "arguments": args}))
        .collect();
    json!({"tool_calls": calls, "finish_reason": "tool_calls", "stream": stream,
           "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})
}

fn text(content: &str) -> Value {
    json!({"content": content, "finish_reason": "stop", "stream": [{"content": content}],
           "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}})
}

/// The parent fans out ten children in one message; every child (interchangeable scripts)
/// makes three single-call steps and answers.
fn scenario() -> Scenario {
    let mut sessions = vec![json!({"session": 0, "first_user_text": "delegate ten tasks"})];
    let mut model = Vec::new();
    let calls: Vec<(String, String, String)> = (0..CHILDREN)
        .map(|i| {
            (
                format!("call_child_{i}"),
                "subagent".to_owned(),
                json!({"description": format!("Task {i}"), "prompt": format!("child task {i}")})
                    .to_string(),
            )
        })
        .collect();
    model.push(entry(0, 0, tool_calls(&calls)));
    model.push(entry(0, 1, text("all done")));
    for child in 1..=CHILDREN {
        sessions.push(
            json!({"session": child, "first_user_text": format!("child task {}", child - 1)}),
        );
        for step in 0..CALLS_PER_CHILD {
            let call = (
                format!("call_note_{child}_{step}"),
                "note".to_owned(),
                json!({"text": format!("step {step}")}).to_string(),
            );
            model.push(entry(child, step, tool_calls(&[call])));
        }
        model.push(entry(child, CALLS_PER_CHILD, text("child done")));
    }
    let spec: ScenarioSpec = serde_json::from_value(json!({
        "suite": "headless", "name": "bench-children", "sessions": sessions
    }))
    .unwrap();
    Scenario::from_parts(spec, model)
}

struct Rig {
    _home: tempfile::TempDir,
    root: Scope,
    tools: Arc<ToolRegistry>,
    store: Arc<dyn SessionStore>,
    directory: Arc<AgentDirectory>,
    subagents: Arc<Subagents>,
    cwd: std::path::PathBuf,
}

fn rig(adapter: Arc<dyn ModelAdapter>, persist: bool) -> Rig {
    let home = tempfile::tempdir().unwrap();
    let cwd = home.path().join("work");
    std::fs::create_dir_all(&cwd).unwrap();
    let root = Scope::root();
    let tools = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    AgentHooks::install(&root).unwrap();
    let prompts = Arc::new(PromptRegistry::default());
    root.provide(prompts.clone()).unwrap();
    let note = Tool::builder("note")
        .description("Record a note.")
        .author_parameters(&json!({"text": {"type": "string", "required": true}}))
        .raw_output(json!({"type": "string"}), |_, v| {
            Ok(vec![ContentBlock::text(v.as_str().unwrap_or_default())])
        })
        .concurrency_safe(|_: &Value| true)
        .run(|args: Value, _| async move {
            Ok::<_, dsh_tools::ToolError>(format!("noted {}", args["text"]))
        })
        .build()
        .unwrap();
    tools.register(&root, note).unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(JsonlStore::new(home.path().join("dsh")));
    let plugin = root.child(ScopeKind::Plugin, "subagent").unwrap();
    let host = Arc::new(BasicChildHost {
        store: persist.then(|| store.clone()),
        adapters: Arc::new(move |_| Some(adapter.clone())),
        default_provider: dsh_llm::PROVIDER.into(),
        default_model: "deepseek-v4-flash".into(),
        tools: tools.clone(),
        prompt: Arc::new(|_| PromptConfig::default()),
        max_parallel_tool_calls: 10,
    });
    let directory = AgentDirectory::new();
    let runtime = ChildRuntime::new(
        plugin.clone(),
        host,
        directory.clone(),
        tools.clone(),
        Some(prompts),
        true,
    );
    let subagents = Subagents::install(&plugin, runtime.clone()).unwrap();
    subagents
        .register_provider(&plugin, InProcessProvider::spawn("spawn", runtime))
        .unwrap();
    let tool_scope = plugin.child(ScopeKind::Plugin, "tool-subagent").unwrap();
    dsh_subagent::tools::subagent::install(
        &subagents,
        &tool_scope,
        serde_json::from_value(json!({"provider": "spawn"})).unwrap(),
    )
    .unwrap();
    Rig {
        _home: home,
        root,
        tools,
        store,
        directory,
        subagents,
        cwd,
    }
}

fn parent(rig: &Rig, adapter: Arc<dyn ModelAdapter>) -> AgentHandle {
    let log = rig
        .store
        .create(CreateOptions {
            cwd: Some(rig.cwd.clone()),
            ..CreateOptions::default()
        })
        .unwrap();
    let agent = Agent::create(AgentConfig {
        id: log.id().to_owned(),
        cwd: None,
        provider: dsh_llm::PROVIDER.into(),
        model: "deepseek-v4-flash".into(),
        max_tokens: None,
        adapter,
        tools: rig.tools.clone(),
        scope: rig.root.clone(),
        log,
        prompt: PromptConfig::default(),
        max_parallel_tool_calls: 10,
    })
    .unwrap();
    rig.directory.register(&agent, None);
    agent
}

/// `(current RSS, peak RSS)` in KiB.
fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

async fn fan_out() {
    let scenario = scenario();
    let server = ReplayServer::start(&scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap();
    let mut config = DeepSeekConfig::from_env();
    config.base_url = server.url();
    config.api_key = Some("replay-key".into());
    let adapter: Arc<dyn ModelAdapter> = Arc::new(DeepSeekAdapter::new(config).unwrap());
    let rig = rig(adapter.clone(), true);
    let parent = parent(&rig, adapter);
    let (before, _) = rss();
    let started = Instant::now();
    parent
        .followup(Message::user_text("delegate ten tasks"))
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), parent.when_idle())
        .await
        .unwrap();
    let wall = started.elapsed();
    let (_, peak) = rss();
    let unconsumed = server.unconsumed();
    if !unconsumed.is_empty() {
        let ends: Vec<Value> = parent
            .log()
            .events()
            .unwrap()
            .iter()
            .filter(|e| e.kind == "turn/end")
            .map(|e| e.data.value().clone())
            .collect();
        panic!(
            "{} model entries unconsumed; unanswered {:?}; parent turn ends {ends:?}",
            unconsumed.len(),
            server.unanswered()
        );
    }
    let results = parent
        .log()
        .events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == "tool/result")
        .count();
    assert_eq!(results, CHILDREN);
    println!(
        "fan-out: {CHILDREN} children x {CALLS_PER_CHILD} tool calls, {} model requests: wall {:.1} ms, RSS before {} KiB, peak {} KiB",
        server.served(),
        wall.as_secs_f64() * 1000.0,
        before,
        peak
    );
}

async fn start_cost(persist: bool) {
    // A model that answers at once, so children settle and only their resident cost remains.
    let adapter = dsh_agent::scripted::ScriptedAdapter::new(dsh_llm::PROVIDER);
    for _ in 0..START_SAMPLES + 20 {
        adapter.push(dsh_agent::scripted::Script::Chunks(
            dsh_agent::scripted::text_response("ok"),
        ));
    }
    let adapter: Arc<dyn ModelAdapter> = adapter;
    let rig = rig(adapter.clone(), persist);
    let parent = parent(&rig, adapter);
    // Warm up allocator pools and lazy statics with a few children.
    let mut runs = Vec::new();
    for _ in 0..20 {
        let run = rig
            .subagents
            .start(
                "spawn",
                StartRequest::new(
                    parent.clone(),
                    vec![ContentBlock::text("x")],
                    CancellationToken::new(),
                ),
            )
            .await
            .unwrap();
        let _ = run.result().await;
        run.dispose().await.unwrap();
    }
    let (before, _) = rss();
    let mut starts = Vec::with_capacity(START_SAMPLES);
    for _ in 0..START_SAMPLES {
        let t = Instant::now();
        let run = rig
            .subagents
            .start(
                "spawn",
                StartRequest::new(
                    parent.clone(),
                    vec![ContentBlock::text("x")],
                    CancellationToken::new(),
                ),
            )
            .await
            .unwrap();
        starts.push(t.elapsed());
        runs.push(run);
    }
    for run in &runs {
        let _ = run.result().await;
    }
    let (after, _) = rss();
    for run in &runs {
        run.dispose().await.unwrap();
    }
    starts.sort();
    let median = starts[starts.len() / 2];
    let p90 = starts[starts.len() * 9 / 10];
    let mean: Duration = starts.iter().sum::<Duration>() / starts.len() as u32;
    println!(
        "start one child ({}, {START_SAMPLES} samples): median {:.3} ms, p90 {:.3} ms, mean {:.3} ms; resident per settled child {:.1} KiB",
        if persist { "persisted" } else { "in memory" },
        median.as_secs_f64() * 1000.0,
        p90.as_secs_f64() * 1000.0,
        mean.as_secs_f64() * 1000.0,
        after.saturating_sub(before) as f64 / START_SAMPLES as f64
    );
}

/// The session store's durable create (header + first event, two fsyncs) on its own, which
/// bounds a persisted child's start from below.
fn store_baseline() {
    let home = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(home.path());
    let cwd = home.path().to_path_buf();
    let mut samples = Vec::with_capacity(START_SAMPLES);
    let mut logs = Vec::with_capacity(START_SAMPLES);
    for _ in 0..START_SAMPLES {
        let t = Instant::now();
        let log = store
            .create(CreateOptions {
                cwd: Some(cwd.clone()),
                ..CreateOptions::default()
            })
            .unwrap();
        log.append(
            "approval/policy",
            json!({"policy": "never", "source": "delegation"}),
            None,
        )
        .unwrap();
        samples.push(t.elapsed());
        logs.push(log);
    }
    samples.sort();
    println!(
        "session store create + first append ({START_SAMPLES} samples): median {:.3} ms, p90 {:.3} ms",
        samples[samples.len() / 2].as_secs_f64() * 1000.0,
        samples[samples.len() * 9 / 10].as_secs_f64() * 1000.0
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(fan_out());
    runtime.block_on(start_cost(true));
    runtime.block_on(start_cost(false));
    store_baseline();
}
