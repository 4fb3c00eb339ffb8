//! The test rig: a real root scope, tool registry, agent hooks, prompt registry, JSONL session
//! store in a temp dir, the subagent service with the `spawn`/`fork` providers, and a model
//! that routes each request to a per-conversation script (keyed by a substring of the latest
//! person-typed message, so a child's requests never take its parent's responses).
#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::PromptConfig;
use dsh_agent::PromptRegistry;
use dsh_agent::prompt::Section;
use dsh_agent::scripted::Script;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_llm::ChunkStream;
use dsh_llm::ModelAdapter;
use dsh_llm::ModelRequest;
use dsh_protocol::ContentBlock;
use dsh_protocol::Role;
use dsh_protocol::StreamChunk;
use dsh_session::CreateOptions;
use dsh_session::Event;
use dsh_session::JsonlStore;
use dsh_session::SessionStore;
use dsh_subagent::AgentDirectory;
use dsh_subagent::BasicChildHost;
use dsh_subagent::ChildRuntime;
use dsh_subagent::DelegatedPolicy;
use dsh_subagent::InProcessProvider;
use dsh_subagent::SessionProjections;
use dsh_subagent::Subagents;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolRegistry;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use dsh_agent::scripted::max_tokens_response;
pub use dsh_agent::scripted::text_response;
pub use dsh_agent::scripted::tool_call_response;
pub use dsh_agent::scripted::tool_calls_response;

/// Routes a request to the script whose key occurs in the latest `{kind:"user"}` message.
#[derive(Default)]
pub struct Router {
    routes: Mutex<Vec<(String, Arc<ScriptedAdapter>)>>,
    pub unrouted: Mutex<Vec<String>>,
}

impl Router {
    pub fn route(&self, key: &str) -> Arc<ScriptedAdapter> {
        let mut routes = self.routes.lock().unwrap();
        if let Some((_, adapter)) = routes.iter().find(|(k, _)| k == key) {
            return adapter.clone();
        }
        let adapter = ScriptedAdapter::new("mock");
        routes.push((key.to_owned(), adapter.clone()));
        adapter
    }

    fn pick(&self, request: &ModelRequest) -> Option<Arc<ScriptedAdapter>> {
        let text = latest_user_text(request)?;
        self.routes
            .lock()
            .unwrap()
            .iter()
            .find(|(key, _)| text.contains(key.as_str()))
            .map(|(_, adapter)| adapter.clone())
    }
}

pub fn latest_user_text(request: &ModelRequest) -> Option<String> {
    request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User && m.source.kind() == "user")
        .map(|m| dsh_protocol::text_of(&m.content))
}

impl ModelAdapter for Router {
    fn provider(&self) -> &str {
        "mock"
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ChunkStream {
        match self.pick(&request) {
            Some(adapter) => adapter.stream(request, cancel),
            None => {
                self.unrouted
                    .lock()
                    .unwrap()
                    .push(latest_user_text(&request).unwrap_or_default());
                let fallback = ScriptedAdapter::new("mock");
                fallback.stream(request, cancel)
            }
        }
    }
}

pub fn policy_text(policy: &DelegatedPolicy) -> (String, String) {
    let sandbox = format!(
        "Sandbox: {}.",
        policy.sandbox.as_deref().unwrap_or("workspace-write")
    );
    let approval = if policy.approval_never {
        "Approval prompts are disabled in this session: actions that require approval are rejected automatically."
    } else {
        "Approval policy: ask."
    };
    (sandbox, approval.to_owned())
}

pub fn prompt_for(policy: &DelegatedPolicy) -> PromptConfig {
    let (sandbox, approval) = policy_text(policy);
    PromptConfig {
        persona: "You are the deployment persona.".into(),
        contexts: vec![
            Section::new("sandbox:policy", dsh_agent::prompt::Slot::Sandbox, sandbox),
            Section::new(
                "approval:policy",
                dsh_agent::prompt::Slot::Approval,
                approval,
            ),
        ],
        ..PromptConfig::default()
    }
}

pub struct Options {
    pub persist: bool,
    pub approval: bool,
    pub projections: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            persist: true,
            approval: true,
            projections: true,
        }
    }
}

pub struct Rig {
    pub dir: tempfile::TempDir,
    pub cwd: std::path::PathBuf,
    pub root: Scope,
    pub plugin: Scope,
    pub tools: Arc<ToolRegistry>,
    pub hooks: Arc<AgentHooks>,
    pub prompts: Arc<PromptRegistry>,
    pub store: Option<Arc<dyn SessionStore>>,
    pub model: Arc<Router>,
    pub directory: Arc<AgentDirectory>,
    pub subagents: Arc<Subagents>,
}

impl Rig {
    pub fn new() -> Self {
        Self::with(Options::default())
    }

    pub fn with(options: Options) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("work");
        std::fs::create_dir_all(&cwd).unwrap();
        let root = Scope::root();
        let tools = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
        let hooks = AgentHooks::install(&root).unwrap();
        let prompts = Arc::new(PromptRegistry::default());
        root.provide(prompts.clone()).unwrap();
        let store = options
            .persist
            .then(|| Arc::new(JsonlStore::new(dir.path().join("home"))) as Arc<dyn SessionStore>);
        let model = Arc::new(Router::default());
        let adapter: Arc<dyn ModelAdapter> = model.clone();
        let host = Arc::new(BasicChildHost {
            store: store.clone(),
            adapters: Arc::new(move |_| Some(adapter.clone())),
            default_provider: "mock".into(),
            default_model: "mock".into(),
            tools: tools.clone(),
            prompt: Arc::new(|input| prompt_for(input.policy)),
            max_parallel_tool_calls: 10,
        });
        let plugin = root.child(ScopeKind::Plugin, "subagent").unwrap();
        let directory = AgentDirectory::new();
        let runtime = ChildRuntime::new(
            plugin.clone(),
            host,
            directory.clone(),
            tools.clone(),
            Some(prompts.clone()),
            options.approval,
        );
        if options.projections {
            plugin
                .provide(Arc::new(SessionProjections::default()))
                .unwrap();
        }
        let subagents = Subagents::install(&plugin, runtime.clone()).unwrap();
        subagents
            .register_provider(&plugin, InProcessProvider::spawn("spawn", runtime.clone()))
            .unwrap();
        subagents
            .register_provider(&plugin, InProcessProvider::fork("fork", runtime))
            .unwrap();
        Self {
            dir,
            cwd,
            root,
            plugin,
            tools,
            hooks,
            prompts,
            store,
            model,
            directory,
            subagents,
        }
    }

    /// A top-level agent, persisted when the rig persists, registered as a root.
    pub fn parent(&self) -> AgentHandle {
        self.parent_with(None, None)
    }

    pub fn parent_with(&self, id: Option<&str>, max_tokens: Option<u64>) -> AgentHandle {
        let log = match &self.store {
            Some(store) => store
                .create(CreateOptions {
                    id: id.map(str::to_owned),
                    cwd: Some(self.cwd.clone()),
                    ..CreateOptions::default()
                })
                .unwrap(),
            None => dsh_session::SessionLog::in_memory(dsh_session::SessionHeader::new(
                id.unwrap_or("parent"),
                Some(self.cwd.to_string_lossy().into_owned()),
            )),
        };
        self.agent_on(log, false, max_tokens)
    }

    pub fn agent_on(
        &self,
        log: dsh_session::SessionLog,
        resume: bool,
        max_tokens: Option<u64>,
    ) -> AgentHandle {
        let policy = DelegatedPolicy::default();
        let config = AgentConfig {
            id: log.id().to_owned(),
            cwd: None,
            provider: "mock".into(),
            model: "mock-model".into(),
            max_tokens,
            adapter: self.model.clone(),
            tools: self.tools.clone(),
            scope: self.root.clone(),
            log,
            prompt: prompt_for(&policy),
            max_parallel_tool_calls: 10,
        };
        let agent = if resume {
            Agent::resume(config).unwrap()
        } else {
            Agent::create(config).unwrap()
        };
        self.directory.register(&agent, None);
        agent
    }

    pub fn script(&self, key: &str, scripts: Vec<Vec<StreamChunk>>) -> Arc<ScriptedAdapter> {
        let adapter = self.model.route(key);
        for chunks in scripts {
            adapter.push(Script::Chunks(chunks));
        }
        adapter
    }

    pub fn script_raw(&self, key: &str, scripts: Vec<Script>) -> Arc<ScriptedAdapter> {
        let adapter = self.model.route(key);
        for script in scripts {
            adapter.push(script);
        }
        adapter
    }

    /// Every child session stored, oldest first.
    pub fn child_logs(&self) -> Vec<dsh_session::LoadedSession> {
        let store = self.store.as_ref().unwrap();
        let mut out: Vec<_> = store
            .headers()
            .unwrap()
            .into_iter()
            .filter(|h| h.origin.as_deref() == Some("subagent"))
            .map(|h| store.load(&h.id).unwrap())
            .collect();
        out.sort_by_key(|l| (l.header.created_at, l.header.id.clone()));
        out
    }
}

pub fn kinds(events: &[Arc<Event>]) -> Vec<String> {
    events.iter().map(|e| e.kind.to_string()).collect()
}

pub fn text(blocks: &[ContentBlock]) -> String {
    dsh_protocol::text_of(blocks)
}

/// The text of every `tool/result` in `events`, in order, with its error flag.
pub fn tool_results(events: &[Arc<Event>]) -> Vec<(String, bool)> {
    events
        .iter()
        .filter_map(|e| e.decode::<dsh_session::data::ToolResult>())
        .map(|r| {
            let r = r.unwrap();
            match &r.message.content[0] {
                ContentBlock::ToolResult {
                    content, is_error, ..
                } => (text(content), is_error.unwrap_or(false)),
                _ => (String::new(), false),
            }
        })
        .collect()
}

/// `user/message` events of `events` whose source kind is `kind`.
pub fn user_messages(events: &[Arc<Event>], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e.kind == "user/message")
        .filter(|e| e.data.pointer("/source/kind").and_then(Value::as_str) == Some(kind))
        .map(|e| e.data.value().clone())
        .collect()
}

/// Polls `check` until it holds (5 s cap).
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..500 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

pub fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// `(event, id, run detail)` of each recorded `subagent/*` event.
pub type Recorded = Arc<Mutex<Vec<(String, String, Option<String>)>>>;

impl Rig {
    /// Mounts a `tool-subagent` instance from its JSON config on its own plugin scope.
    pub fn tool(&self, config: Value) -> Result<Scope, dsh_subagent::SubagentError> {
        let scope = self
            .plugin
            .child(ScopeKind::Plugin, "tool-subagent")
            .unwrap();
        let config: dsh_subagent::tools::SubagentToolConfig =
            serde_json::from_value(config).unwrap();
        dsh_subagent::tools::subagent::install(&self.subagents, &scope, config)?;
        Ok(scope)
    }

    /// `send_message`, `interrupt_agent`, `list_agents` and `report`.
    pub fn control_tools(&self, report: dsh_subagent::tools::ReportConfig) -> Scope {
        let scope = self.plugin.child(ScopeKind::Plugin, "control").unwrap();
        dsh_subagent::tools::install_control(&self.subagents, &scope).unwrap();
        dsh_subagent::tools::install_list_agents(&self.subagents, &scope).unwrap();
        dsh_subagent::tools::install_report(&self.subagents, &scope, report);
        scope
    }

    /// Every `subagent/*` event name with the child id, in order.
    pub fn record_events(&self) -> Recorded {
        let seen: Recorded = Arc::default();
        let sink = seen.clone();
        self.subagents
            .events()
            .register(&self.plugin, move |event| {
                use dsh_subagent::SubagentEvent::*;
                let entry = match event {
                    ProviderAdded { name } | ProviderRemoved { name } => {
                        (event.name().to_owned(), name.clone(), None)
                    }
                    Start(info) => (
                        event.name().to_owned(),
                        info.id.clone(),
                        Some(info.run_id.clone()),
                    ),
                    End {
                        info, stop_reason, ..
                    } => (
                        event.name().to_owned(),
                        info.id.clone(),
                        Some(format!("{}:{}", info.run_id, stop_reason)),
                    ),
                };
                sink.lock().unwrap().push(entry);
                Ok(())
            });
        seen
    }
}

/// Sends `text` to `agent` and waits until it is idle again.
pub async fn prompt(agent: &AgentHandle, text: &str) {
    agent
        .followup(dsh_protocol::Message::user_text(text))
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), agent.when_idle())
        .await
        .expect("agent did not go idle");
}

pub fn call(id: &str, name: &str, args: Value) -> Vec<StreamChunk> {
    tool_call_response(id, name, &args.to_string(), None)
}

/// Named latches a test opens; the global `gate` tool waits on one (`{"name": …}`).
#[derive(Default)]
pub struct Gates {
    open: Mutex<std::collections::HashSet<String>>,
    changed: tokio::sync::Notify,
}

impl Gates {
    pub fn open(&self, name: &str) {
        self.open.lock().unwrap().insert(name.to_owned());
        self.changed.notify_waiters();
    }

    pub async fn wait(&self, name: &str) {
        loop {
            let changed = self.changed.notified();
            if self.open.lock().unwrap().contains(name) {
                return;
            }
            changed.await;
        }
    }
}

impl Rig {
    /// Registers the global `gate` tool (concurrency-safe, so it never blocks siblings).
    pub fn gates(&self) -> Arc<Gates> {
        let gates = Arc::new(Gates::default());
        let waiting = gates.clone();
        let definition = dsh_tools::Tool::builder("gate")
            .description("Waits until the named gate opens.")
            .author_parameters(&serde_json::json!({"name": {"type": "string", "required": true}}))
            .raw_output(serde_json::json!({"type": "string"}), |_, v| {
                Ok(vec![ContentBlock::text(v.as_str().unwrap_or_default())])
            })
            .run(move |args: Value, run: dsh_tools::ToolRun| {
                let gates = waiting.clone();
                async move {
                    let name = args["name"].as_str().unwrap_or_default().to_owned();
                    tokio::select! {
                        () = gates.wait(&name) => {}
                        () = run.signal().cancelled() => return Err(dsh_tools::ToolError::aborted()),
                    }
                    Ok::<_, dsh_tools::ToolError>(Value::String(format!("gate {name} open")))
                }
            })
            .build()
            .unwrap();
        self.tools.register(&self.root, definition).unwrap();
        gates
    }
}
