//! Fixtures: a registry with Code Mode and the QuickJS runtime on a kernel root, a test agent,
//! a recording dispatch log and a handful of tools.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dsh_code::CodeMode;
use dsh_code::CodeModeConfig;
use dsh_code::CodeRuntime;
use dsh_code::QuickJsConfig;
use dsh_code::QuickJsRuntime;
use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_tools::AgentGone;
use dsh_tools::AgentHandle;
use dsh_tools::CancellationToken;
use dsh_tools::PresentationMode;
use dsh_tools::RegistryConfig;
use dsh_tools::Tool;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolResult;
use serde_json::Value;
use serde_json::json;

pub struct TestAgent {
    id: String,
    scope: Scope,
}

impl AgentHandle for TestAgent {
    fn id(&self) -> &str {
        &self.id
    }
    fn scope(&self) -> &Scope {
        &self.scope
    }
    fn inject(&self, _message: Message) -> Result<(), AgentGone> {
        Ok(())
    }
}

pub fn agent(parent: &Scope, name: &str) -> (Scope, Arc<dyn AgentHandle>) {
    let scope = parent.child(ScopeKind::Agent, name).unwrap();
    let handle: Arc<dyn AgentHandle> = Arc::new(TestAgent {
        id: name.to_owned(),
        scope: scope.clone(),
    });
    (scope, handle)
}

/// The session the runs record their sub-call events in.
pub struct EventLog(pub Arc<dsh_plugin::SessionContext>);

impl Default for EventLog {
    fn default() -> Self {
        let log = dsh_session::SessionLog::in_memory(dsh_session::SessionHeader::new("s", None));
        Self(Arc::new(dsh_plugin::SessionContext::new(
            log,
            "/".into(),
            None,
            dsh_plugin::Permissions::for_mode(dsh_plugin::SandboxMode::WorkspaceWrite),
        )))
    }
}

impl EventLog {
    pub fn data(&self) -> Vec<(String, Value)> {
        self.0
            .log()
            .events()
            .unwrap()
            .iter()
            .map(|e| (e.kind.to_string(), e.data.value().clone()))
            .collect()
    }
    pub fn ids(&self) -> Vec<(String, String)> {
        self.data()
            .into_iter()
            .map(|(kind, data)| (kind, data["subCallId"].as_str().unwrap().to_owned()))
            .collect()
    }

    /// Makes the session visible to every agent under `root`.
    pub fn provide(&self, root: &Scope) {
        root.provide(self.0.clone()).unwrap();
    }
}

pub struct Env {
    pub root: Scope,
    pub registry: Arc<ToolRegistry>,
    pub code_mode: Arc<CodeMode>,
    pub log: Arc<EventLog>,
    pub scope: Scope,
    pub agent: Arc<dyn AgentHandle>,
}

pub fn env_with(mode: PresentationMode, config: CodeModeConfig, runtime: QuickJsConfig) -> Env {
    let root = Scope::root();
    let registry = ToolRegistry::install(&root, RegistryConfig { mode }).unwrap();
    let (code_mode, _) = CodeMode::install(&root, &registry, config).unwrap();
    let runtime: Arc<dyn CodeRuntime> = QuickJsRuntime::new(runtime).unwrap();
    root.provide::<dyn CodeRuntime>(runtime).unwrap();
    let log = Arc::new(EventLog::default());
    log.provide(&root);
    let (scope, agent) = agent(&root, "main");
    Env {
        root,
        registry,
        code_mode,
        log,
        scope,
        agent,
    }
}

pub fn env(mode: PresentationMode) -> Env {
    env_with(mode, CodeModeConfig::default(), QuickJsConfig::default())
}

impl Env {
    pub fn register(&self, tool: ToolDefinition) {
        self.registry.register(&self.root, tool).unwrap();
    }

    pub fn run_code_input(&self, code: &str) -> ToolCallInput {
        ToolCallInput::new(
            "call-1",
            "run_code",
            json!({"code": code, "description": "test program"}),
            CancellationToken::new(),
        )
        .agent(self.agent.clone())
    }

    pub async fn run(&self, code: &str) -> Arc<ToolResult> {
        self.registry.execute(self.run_code_input(code)).await
    }
}

pub fn text(result: &ToolResult) -> String {
    result.text()
}

/// `echo`: concurrency-safe, string output `echo:<text>`.
pub fn echo() -> ToolDefinition {
    Tool::builder("echo")
        .description("Echo the text back")
        .validated_parameters(
            json!({"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}),
        )
        .raw_output(json!({"type":"string"}), |_, v| {
            Ok(vec![ContentBlock::text(v.as_str().unwrap_or_default())])
        })
        .concurrency_safe(|_| true)
        .run(|args: Value, _run| async move {
            Ok::<_, ToolError>(Value::String(format!(
                "echo:{}",
                args["text"].as_str().unwrap_or("")
            )))
        })
        .build()
        .unwrap()
}

/// `fail`: always fails with `deliberate failure`.
pub fn fail() -> ToolDefinition {
    Tool::builder("fail")
        .raw_output(json!({"type":"string"}), |_, _| Ok(vec![]))
        .run(|_: Value, _run| async { Err::<Value, _>(ToolError::new("deliberate failure")) })
        .build()
        .unwrap()
}

/// Tracks how many bodies run at once and the order they start in.
#[derive(Default)]
pub struct Tracker {
    pub current: AtomicUsize,
    pub peak: AtomicUsize,
    pub order: Mutex<Vec<String>>,
}

/// A tool that sleeps `ms` inside its body, recording overlap; `safe` selects the class.
pub fn sleeper(name: &str, safe: bool, ms: u64, tracker: Arc<Tracker>) -> ToolDefinition {
    let label = name.to_owned();
    Tool::builder(name)
        .raw_output(json!({"type":"string"}), |_, v| {
            Ok(vec![ContentBlock::text(v.as_str().unwrap_or_default())])
        })
        .concurrency_safe(move |_| safe)
        .run(move |args: Value, run: dsh_tools::ToolRun| {
            let tracker = tracker.clone();
            let label = label.clone();
            async move {
                let now = tracker.current.fetch_add(1, Ordering::SeqCst) + 1;
                tracker.peak.fetch_max(now, Ordering::SeqCst);
                let tag = format!("{label}:{}", args.get("i").cloned().unwrap_or(Value::Null));
                tracker.order.lock().unwrap().push(format!("start {tag}"));
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(ms)) => {}
                    () = run.signal().cancelled() => {}
                }
                tracker.order.lock().unwrap().push(format!("end {tag}"));
                tracker.current.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, ToolError>(Value::String(tag))
            }
        })
        .build()
        .unwrap()
}
