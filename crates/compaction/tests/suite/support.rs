//! The rig: a real agent over a real log with compaction mounted; the model is scripted.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::sync::Arc;
use std::time::Duration;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::PromptConfig;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_compaction::BasicCompactionConfig;
use dsh_compaction::Compaction;
use dsh_compaction::ToolResultPruneConfig;
use dsh_compaction::install_triggers;
use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_llm::ModelInfo;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_session::Event;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use dsh_token_meter::TokenMeter;
use dsh_tools::RegistryConfig;
use dsh_tools::Tool;
use dsh_tools::ToolRegistry;
use serde_json::Value;
use serde_json::json;

pub struct Rig {
    pub adapter: Arc<ScriptedAdapter>,
    pub root: Scope,
    pub hooks: Arc<AgentHooks>,
    pub tools: Arc<ToolRegistry>,
    pub compaction: Arc<Compaction>,
    pub agent: AgentHandle,
    _triggers: Vec<Disposer>,
}

pub struct Options {
    pub config: Value,
    pub pruner: Option<ToolResultPruneConfig>,
    pub context_window: Option<u64>,
    pub log: Option<SessionLog>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            config: Value::Null,
            pruner: Some(ToolResultPruneConfig::default()),
            context_window: Some(1_000_000),
            log: None,
        }
    }
}

/// `emit`: returns `size` copies of `ch` (default "x").
fn emit_tool() -> dsh_tools::ToolDefinition {
    Tool::builder("emit")
        .description("Emits text of a given size.")
        .raw_parameters(json!({"type": "object", "properties": {}}))
        .raw_output(json!({"type": "string"}), |_, value| {
            Ok(vec![ContentBlock::text(
                value.as_str().unwrap_or_default().to_owned(),
            )])
        })
        .run(|args: Value, _| async move {
            let size = args["size"].as_u64().unwrap_or(1) as usize;
            let ch = args["ch"].as_str().unwrap_or("x").to_owned();
            Ok::<_, dsh_tools::ToolError>(ch.repeat(size))
        })
        .build()
        .unwrap()
}

impl Rig {
    pub fn new() -> Self {
        Self::with(Options::default())
    }

    pub fn with(options: Options) -> Self {
        let root = Scope::root();
        let tools = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
        tools.register(&root, emit_tool()).unwrap();
        let hooks = AgentHooks::install(&root).unwrap();
        let config = BasicCompactionConfig::parse(&options.config).unwrap();
        let compaction = Arc::new(Compaction::new(
            config,
            options.pruner,
            Arc::new(TokenMeter::new()),
            None,
        ));
        let triggers = install_triggers(&compaction, &root, &hooks);
        let adapter = ScriptedAdapter::new("mock");
        adapter.set_model_info(options.context_window.map(|w| ModelInfo {
            context_window: w,
            default_max_tokens: None,
            efforts: vec![],
            default_effort: None,
            input_modalities: vec!["text".into()],
        }));
        let log = options
            .log
            .unwrap_or_else(|| SessionLog::in_memory(SessionHeader::new("s", Some("/w".into()))));
        let agent = create(&root, &tools, &adapter, log, false);
        Self {
            adapter,
            root,
            hooks,
            tools,
            compaction,
            agent,
            _triggers: triggers,
        }
    }

    pub fn log(&self) -> &SessionLog {
        self.agent.log()
    }

    pub async fn prompt(&self, text: &str) {
        self.agent.followup(Message::user_text(text)).unwrap();
        idle(&self.agent).await;
    }

    pub fn kinds_since(&self, from: u64) -> Vec<String> {
        self.log()
            .events_since(from)
            .unwrap()
            .iter()
            .map(|e| e.kind.to_string())
            .filter(|k| k != "assistant/chunk")
            .collect()
    }

    pub fn of(&self, kind: &str) -> Vec<Arc<Event>> {
        of(self.log(), kind)
    }

    pub fn turn_end(&self) -> Value {
        self.of("turn/end").last().unwrap().data["reason"].clone()
    }
}

pub fn create(
    root: &Scope,
    tools: &Arc<ToolRegistry>,
    adapter: &Arc<ScriptedAdapter>,
    log: SessionLog,
    resume: bool,
) -> AgentHandle {
    let config = AgentConfig {
        id: log.id().to_owned(),
        cwd: None,
        provider: "mock".into(),
        model: "mock-model".into(),
        max_tokens: None,
        adapter: adapter.clone(),
        tools: tools.clone(),
        scope: root.clone(),
        log,
        prompt: PromptConfig {
            persona: "You are a test agent.".into(),
            ..PromptConfig::default()
        },
        max_parallel_tool_calls: 4,
    };
    if resume {
        Agent::resume(config).unwrap()
    } else {
        Agent::create(config).unwrap()
    }
}

pub fn of(log: &SessionLog, kind: &str) -> Vec<Arc<Event>> {
    log.events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == kind)
        .cloned()
        .collect()
}

pub async fn idle(agent: &AgentHandle) {
    tokio::time::timeout(Duration::from_secs(10), agent.when_idle())
        .await
        .expect("agent did not become idle");
}

pub fn emit_call(id: &str, size: usize) -> Vec<dsh_protocol::StreamChunk> {
    dsh_agent::scripted::tool_call_response(id, "emit", &json!({"size": size}).to_string(), None)
}

/// Text of every derived message, in order.
pub fn derived_texts(log: &SessionLog) -> Vec<String> {
    log.derive_messages()
        .iter()
        .map(|m| {
            m.content
                .iter()
                .map(|b| match b {
                    ContentBlock::Text { text } => text.clone(),
                    ContentBlock::ToolCall { name, .. } => format!("<call {name}>"),
                    ContentBlock::ToolResult { content, .. } => {
                        format!("<result {}>", dsh_protocol::text_of(content).len())
                    }
                    _ => String::new(),
                })
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect()
}
