#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::PromptConfig;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_hooks::BridgeSettings;
use dsh_hooks::Dialect;
use dsh_hooks::HandlerCounter;
use dsh_hooks::HookBridge;
use dsh_hooks::LocalExecutor;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_session::CreateOptions;
use dsh_session::Event;
use dsh_session::JsonlStore;
use dsh_tools::RegistryConfig;
use dsh_tools::Tool;
use dsh_tools::ToolRegistry;
use serde_json::Value;
use serde_json::json;

pub struct Rig {
    pub dir: tempfile::TempDir,
    pub work: PathBuf,
    pub root: Scope,
    pub tools: Arc<ToolRegistry>,
    pub hooks: Arc<AgentHooks>,
    pub adapter: Arc<ScriptedAdapter>,
    pub bridge: Option<Arc<HookBridge>>,
    pub warnings: Vec<String>,
    pub agent: AgentHandle,
    pub body_runs: Arc<AtomicUsize>,
}

pub type EditSettings = Box<dyn FnOnce(&mut BridgeSettings)>;
pub type BeforeAgent = Box<dyn FnOnce(&Scope, &Arc<ToolRegistry>)>;

pub struct Setup {
    pub dialect: Dialect,
    pub hooks: Value,
    pub settings: Option<EditSettings>,
    /// Runs after the bridge is installed, before the agent exists.
    pub before_agent: Option<BeforeAgent>,
}

impl Setup {
    pub fn new(dialect: Dialect, hooks: Value) -> Self {
        Self {
            dialect,
            hooks,
            settings: None,
            before_agent: None,
        }
    }
}

impl Rig {
    pub fn cc(hooks: Value) -> Self {
        Self::with(Setup::new(Dialect::ClaudeCode, hooks))
    }

    pub fn codex(hooks: Value) -> Self {
        Self::with(Setup::new(Dialect::Codex, hooks))
    }

    pub fn with(setup: Setup) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let work = work.canonicalize().unwrap();
        let file = dir.path().join("hooks.json");
        std::fs::write(&file, setup.hooks.to_string()).unwrap();
        let root = Scope::root();
        let tools = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
        let hooks = AgentHooks::install(&root).unwrap();
        let body_runs = Arc::new(AtomicUsize::new(0));
        let runs = body_runs.clone();
        tools
            .register(
                &root,
                Tool::builder("bash")
                    .description("Run a command.")
                    .raw_parameters(
                        json!({"type": "object", "properties": {"command": {"type": "string"}}}),
                    )
                    .raw_output(json!({"type": "string"}), |_, value| {
                        Ok(vec![ContentBlock::text(
                            value.as_str().unwrap_or_default().to_owned(),
                        )])
                    })
                    .run(move |args: Value, _| {
                        runs.fetch_add(1, Ordering::SeqCst);
                        async move { Ok(format!("ran {}", args["command"].as_str().unwrap_or(""))) }
                    })
                    .build()
                    .unwrap(),
            )
            .unwrap();
        let mut settings = BridgeSettings::new(file.to_string_lossy());
        if let Some(edit) = setup.settings {
            edit(&mut settings);
        }
        let executor = Arc::new(LocalExecutor::new(Arc::new(|| {
            vec![("PATH".to_owned(), std::env::var("PATH").unwrap_or_default())]
        })));
        let loaded = HookBridge::load(
            setup.dialect,
            settings,
            executor,
            Some(Arc::new(HandlerCounter::default())),
        )
        .unwrap();
        if let Some(bridge) = &loaded.bridge {
            bridge.install(&root, &tools, &hooks);
        }
        if let Some(before) = setup.before_agent {
            before(&root, &tools);
        }
        let store = JsonlStore::new(dir.path().join("home"));
        let log = store
            .create(CreateOptions {
                cwd: Some(work.clone()),
                ..CreateOptions::default()
            })
            .unwrap();
        let adapter = ScriptedAdapter::new("mock");
        let agent = Agent::create(AgentConfig {
            id: log.id().to_owned(),
            cwd: None,
            provider: "mock".into(),
            model: "mock".into(),
            max_tokens: None,
            adapter: adapter.clone(),
            tools: tools.clone(),
            scope: root.clone(),
            log,
            prompt: PromptConfig::default(),
            max_parallel_tool_calls: 4,
        })
        .unwrap();
        Self {
            dir,
            work,
            root,
            tools,
            hooks,
            adapter,
            bridge: loaded.bridge,
            warnings: loaded.warnings,
            agent,
            body_runs,
        }
    }

    pub async fn prompt(&self, text: &str) {
        self.agent.followup(Message::user_text(text)).unwrap();
        tokio::time::timeout(Duration::from_secs(20), self.agent.when_idle())
            .await
            .expect("agent did not become idle");
    }

    pub fn events(&self) -> Vec<Arc<Event>> {
        self.agent.log().events().unwrap().to_vec()
    }

    pub fn of(&self, kind: &str) -> Vec<Value> {
        self.events()
            .iter()
            .filter(|e| e.kind == kind)
            .map(|e| e.data.value().clone())
            .collect()
    }

    /// Event kinds without `assistant/chunk` and `request/*`.
    pub fn skeleton(&self) -> Vec<String> {
        self.events()
            .iter()
            .map(|e| e.kind.to_string())
            .filter(|k| k != "assistant/chunk" && !k.starts_with("request/"))
            .collect()
    }

    /// The text of the first tool result.
    pub fn result_text(&self, index: usize) -> (String, bool) {
        let results = self.of("tool/result");
        let block = &results[index]["message"]["content"][0];
        let content: Vec<ContentBlock> = serde_json::from_value(block["content"].clone()).unwrap();
        (dsh_protocol::text_of(&content), block["isError"] == true)
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.work.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    pub fn json(&self, name: &str) -> Value {
        serde_json::from_str(&self.read(name)).unwrap()
    }

    pub fn transcript(&self) -> String {
        self.agent
            .log()
            .path()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    pub fn user_texts(&self) -> Vec<(String, Value)> {
        self.of("user/message")
            .iter()
            .map(|m| {
                let content: Vec<ContentBlock> =
                    serde_json::from_value(m["content"].clone()).unwrap();
                (dsh_protocol::text_of(&content), m["source"].clone())
            })
            .collect()
    }
}

pub fn group(matcher: Option<&str>, commands: &[&str]) -> Value {
    let hooks: Vec<Value> = commands
        .iter()
        .map(|c| json!({"type": "command", "command": c}))
        .collect();
    match matcher {
        Some(m) => json!({"matcher": m, "hooks": hooks}),
        None => json!({"hooks": hooks}),
    }
}
