//! The test rig: a real registry, hooks, prompt registry and session log around one agent
//! whose model is a `ScriptedAdapter`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::time::Duration;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentEvent;
use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::PromptConfig;
use dsh_agent::PromptRegistry;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_session::Event;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use dsh_tools::RegistryConfig;
use dsh_tools::Tool;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolRun;
use serde_json::Value;
use serde_json::json;

pub struct Rig {
    pub adapter: Arc<ScriptedAdapter>,
    pub root: Scope,
    pub tools: Arc<ToolRegistry>,
    pub hooks: Arc<AgentHooks>,
    pub prompts: Arc<PromptRegistry>,
    pub agent: AgentHandle,
    pub events: Arc<Mutex<Vec<AgentEvent>>>,
}

/// Runs before the agent exists: registers listeners on the root scope; the cell is filled with
/// the agent right after creation.
pub type Setup = Box<dyn FnOnce(&Scope, &Arc<AgentHooks>, &Arc<OnceLock<AgentHandle>>)>;

pub struct Options {
    pub prompt: PromptConfig,
    pub max_parallel: usize,
    pub log: Option<SessionLog>,
    pub max_tokens: Option<u64>,
    pub setup: Option<Setup>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            prompt: PromptConfig::default(),
            max_parallel: 10,
            log: None,
            max_tokens: None,
            setup: None,
        }
    }
}

impl Rig {
    pub fn new() -> Self {
        Self::with(Options::default())
    }

    pub fn with(options: Options) -> Self {
        let root = Scope::root();
        let tools = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
        let hooks = AgentHooks::install(&root).unwrap();
        let prompts = Arc::new(PromptRegistry::default());
        root.provide(prompts.clone()).unwrap();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        hooks.events.register(&root, move |event: &AgentEvent| {
            sink.lock().unwrap().push(event.clone());
            Ok(())
        });
        let cell = Arc::new(OnceLock::new());
        if let Some(setup) = options.setup {
            setup(&root, &hooks, &cell);
        }
        let adapter = ScriptedAdapter::new("mock");
        let log = options.log.unwrap_or_else(|| {
            SessionLog::in_memory(SessionHeader::new("session-test", Some("/work".into())))
        });
        let agent = Agent::create(AgentConfig {
            id: log.id().to_owned(),
            cwd: None,
            provider: "mock".into(),
            model: "mock".into(),
            max_tokens: options.max_tokens,
            adapter: adapter.clone(),
            tools: tools.clone(),
            scope: root.clone(),
            log,
            prompt: options.prompt,
            max_parallel_tool_calls: options.max_parallel,
        })
        .unwrap();
        let _ = cell.set(agent.clone());
        Self {
            adapter,
            root,
            tools,
            hooks,
            prompts,
            agent,
            events,
        }
    }

    pub fn log(&self) -> &SessionLog {
        self.agent.log()
    }

    pub fn kinds(&self) -> Vec<String> {
        kinds(self.log())
    }

    /// Kinds without `assistant/chunk` (collapsed) — the loop skeleton.
    pub fn skeleton(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for kind in self.kinds() {
            if kind == "assistant/chunk" && out.last().is_some_and(|k| k == "assistant/chunk") {
                continue;
            }
            out.push(kind);
        }
        out
    }

    pub fn of(&self, kind: &str) -> Vec<Arc<Event>> {
        self.log()
            .events()
            .unwrap()
            .iter()
            .filter(|e| e.kind == kind)
            .cloned()
            .collect()
    }

    pub async fn prompt(&self, text: &str) {
        self.agent.followup(Message::user_text(text)).unwrap();
        idle(&self.agent).await;
    }

    pub fn turn_ends(&self) -> Vec<Value> {
        self.of("turn/end")
            .iter()
            .map(|e| e.data["reason"].clone())
            .collect()
    }

    pub fn statuses(&self) -> Vec<String> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Status { status, .. } => Some(format!("{status:?}")),
                _ => None,
            })
            .collect()
    }

    pub fn register(&self, definition: ToolDefinition) {
        self.tools.register(&self.root, definition).unwrap();
    }
}

pub fn kinds(log: &SessionLog) -> Vec<String> {
    log.events()
        .unwrap()
        .iter()
        .map(|e| e.kind.to_string())
        .collect()
}

pub async fn idle(agent: &AgentHandle) {
    tokio::time::timeout(Duration::from_secs(10), agent.when_idle())
        .await
        .expect("agent did not become idle");
}

/// Polls until `cond` holds (bounded).
pub async fn until(mut cond: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("condition never held");
}

pub fn text(message: &Value) -> String {
    let content: Vec<ContentBlock> = serde_json::from_value(message["content"].clone()).unwrap();
    dsh_protocol::text_of(&content)
}

/// A tool with raw object parameters whose body returns a string value rendered as text.
pub fn tool<F, Fut>(name: &str, parallel: bool, body: F) -> ToolDefinition
where
    F: Fn(Value, ToolRun) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<String, ToolError>> + Send + 'static,
{
    let builder = Tool::builder(name)
        .description(format!("The {name} tool."))
        .raw_parameters(json!({"type": "object", "properties": {}}))
        .raw_output(json!({"type": "string"}), |_, value| {
            Ok(vec![ContentBlock::text(
                value.as_str().unwrap_or_default().to_owned(),
            )])
        });
    let builder = if parallel {
        builder.concurrency_safe(|_| true)
    } else {
        builder
    };
    builder.run(body).build().unwrap()
}

/// `echo`: returns its `text` argument.
pub fn echo() -> ToolDefinition {
    tool("echo", false, |args, _| async move {
        Ok(args["text"].as_str().unwrap_or("echoed").to_owned())
    })
}
