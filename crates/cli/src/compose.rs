//! The composition root: builds the plugin tree from configuration and creates agents.
//!
//! Process-wide plugins mount once on the root scope (tool registry, shell tools and the jobs
//! runtime, todo, the spill policy, the hook bridges). Per-session pieces (file tools bound to
//! the session's cwd and file policy, the todo and hook sinks, job notices) attach to each
//! agent's own scope, so disposing an agent removes exactly what was added for it.

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHandle;
use dsh_agent::PromptConfig;
use dsh_agent::prompt::Section;
use dsh_agent::prompt::SectionText;
use dsh_kernel::Scope;
use dsh_llm::DeepSeekAdapter;
use dsh_llm::DeepSeekConfig;
use dsh_llm::ModelAdapter;
use dsh_session::CreateOptions;
use dsh_session::SessionLog;
use dsh_session::SessionStore;
use dsh_spill::SpillPolicy;
use dsh_spill::SpillStore;
use dsh_tool_fs::FilePolicy;
use dsh_tool_fs::FsContext;
use dsh_tool_fs::SandboxMode;
use dsh_tool_todo::Todo;
use dsh_tool_todo::TodoConfig;
use dsh_tool_todo::TodoSink;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolRegistry;
use serde_json::json;

use crate::config::Config;
pub use crate::settings::Settings;

/// A named bundle of sandbox mode and approval policy (ACP session modes, `/approval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    pub name: &'static str,
    pub sandbox: SandboxMode,
    pub approval_never: bool,
    pub description: &'static str,
}

/// The presets every session offers, least permissive first.
pub const PRESETS: [Preset; 3] = [
    Preset {
        name: "read-only",
        sandbox: SandboxMode::ReadOnly,
        approval_never: false,
        description: "No file changes; a wider operation asks for approval.",
    },
    Preset {
        name: "workspace-write",
        sandbox: SandboxMode::WorkspaceWrite,
        approval_never: false,
        description: "Changes inside the workspace and temp folders; anything wider asks for approval.",
    },
    Preset {
        name: "danger-full-access",
        sandbox: SandboxMode::DangerFullAccess,
        approval_never: true,
        description: "No file confinement and no approval prompts.",
    },
];

/// Per-session facts and the session's live permission state, provided as a kernel service
/// on the agent's scope (the shell resolver, the prompt contexts and mode switches read it).
pub struct SessionState {
    pub id: String,
    pub cwd: PathBuf,
    pub jsonl: Option<PathBuf>,
    permissions: std::sync::Mutex<(SandboxMode, bool)>,
    fs_tools: std::sync::Mutex<Vec<dsh_kernel::Disposer>>,
}

impl SessionState {
    /// `(sandbox mode, approval never)` now.
    pub fn permissions(&self) -> (SandboxMode, bool) {
        *self
            .permissions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn file_policy(&self) -> FilePolicy {
        let (mode, never) = self.permissions();
        let mut policy = FilePolicy::new(mode, &self.cwd);
        policy.escalation_advertised = policy.escalation_advertised && !never;
        policy
    }

    /// The preset whose knobs match the current permissions, if any.
    pub fn preset(&self) -> Option<&'static Preset> {
        let (mode, never) = self.permissions();
        PRESETS
            .iter()
            .find(|p| p.sandbox == mode && p.approval_never == never)
    }
}

fn approval_text(never: bool) -> &'static str {
    if never {
        "Approval prompts are disabled in this session: actions that require approval are rejected automatically — do not request sandbox escalation (do not set `sandbox_permissions`)."
    } else {
        "Approval policy: ask. Operations that require approval may ask through the configured answerers; without an available answerer, the request fails closed."
    }
}

/// The assembled harness: one per process.
pub struct Harness {
    pub config: Config,
    pub settings: Settings,
    pub root: Scope,
    pub registry: Arc<ToolRegistry>,
    pub store: SessionStore,
    pub adapter: Arc<dyn ModelAdapter>,
    /// `None` when `[plugins.spill] enabled = false`: nothing is ever moved to a file.
    pub spill: Option<SpillStore>,
    /// The attachment store; `None` when `[plugins.attachments] enabled = false` (then no
    /// `read_image`, MCP images become notices, and ACP never advertises image prompts).
    pub attachments: Option<crate::images::Attachments>,
    shell: crate::shell::ShellPlugin,
    reach: crate::reach::ReachPlugins,
}

impl Harness {
    /// Builds the process-wide plugin tree. Cheap: no network, no session yet.
    pub fn build(config: Config) -> anyhow::Result<Self> {
        let settings = Settings::from_config(&config)?;
        let root = Scope::root();
        let hooks =
            dsh_agent::AgentHooks::install(&root).context("cannot install the agent hooks")?;
        let registry = ToolRegistry::install(
            &root,
            RegistryConfig {
                mode: settings.tools_mode,
            },
        )
        .context("cannot install the tool registry")?;
        let mut deepseek = DeepSeekConfig::from_env();
        if let Some(base) = config.get_str("model.base_url") {
            deepseek.base_url = base.to_owned();
        }
        crate::images::apply_catalog(&mut deepseek.models, &settings.catalog);
        let attachments = crate::images::Attachments::mount(&config)?;
        if let Some(attachments) = &attachments {
            deepseek.attachments = Some(attachments.store.clone());
        }
        let adapter: Arc<dyn ModelAdapter> =
            Arc::new(DeepSeekAdapter::new(deepseek).context("invalid model configuration")?);
        let llm_titles = crate::titles::llm_titles(&config, adapter.clone())?;
        crate::titles::install(&hooks, &root, llm_titles);
        let spill = match &settings.spill.root {
            Some(root) => SpillStore::new(root),
            None => SpillStore::in_temp_dir(),
        };
        let spill_enabled = config.plugin_enabled("spill", true)?;
        if spill_enabled && settings.spill.max_inline_bytes > 0 {
            dsh_spill::install_policy(
                &registry,
                &root,
                SpillPolicy {
                    max_inline_bytes: settings.spill.max_inline_bytes,
                    store: spill.clone(),
                },
            );
        }
        if config.plugin_enabled("web", true)? {
            dsh_tool_web::register(&registry, &root)?;
        }
        if config.plugin_enabled("todo", true)? {
            dsh_tool_todo::register(
                &registry,
                &root,
                TodoConfig {
                    allow_parallel_in_progress: settings.todo.allow_parallel_in_progress,
                },
            )?;
        }
        if config.plugin_enabled("skill", true)? {
            crate::skills::install(&hooks, &registry, &root, &config.home)?;
        }
        for (name, dialect, hooks) in [
            (
                "hooks-claude-code",
                dsh_hooks::Dialect::ClaudeCode,
                &settings.hooks_claude_code,
            ),
            (
                "hooks-codex",
                dsh_hooks::Dialect::Codex,
                &settings.hooks_codex,
            ),
        ] {
            let Some(path) = &hooks.config_path else {
                continue;
            };
            if !config.plugin_enabled(name, true)? {
                continue;
            }
            // Upstream resolves the file from the launch cwd, once: one file for every session.
            let path = std::env::current_dir()?.join(path);
            if let Some(hooks) = dsh_hooks::HooksConfig::load(dialect, &path)? {
                dsh_hooks::install(&registry, &root, hooks);
            }
        }
        // Code Mode is always available so a session can switch presentation (`/mode`); it only
        // changes what the model sees when the mode is `code` or `both`.
        if config.plugin_enabled("code", true)? {
            let runtime = dsh_code::QuickJsRuntime::new(dsh_code::QuickJsConfig::default())
                .map_err(|e| anyhow::anyhow!("invalid Code Mode runtime settings: {e}"))?;
            root.provide::<dyn dsh_code::CodeRuntime>(runtime)?;
            dsh_code::CodeMode::install(&root, &registry, dsh_code::CodeModeConfig::default())
                .map_err(|e| anyhow::anyhow!("cannot install Code Mode: {e}"))?;
        }
        let shell = crate::shell::ShellPlugin::mount(
            &config,
            &settings,
            &registry,
            &root,
            spill_enabled.then_some(&spill),
        )?;
        let reach = crate::reach::ReachPlugins::mount(&config, &root, &shell)?;
        let store = SessionStore::new(config.home.clone());
        Ok(Self {
            config,
            settings,
            root,
            registry,
            store,
            adapter,
            spill: spill_enabled.then_some(spill),
            attachments,
            shell,
            reach,
        })
    }

    /// A fresh persisted session in `cwd` with a new agent on it (idle until prompted).
    pub fn new_agent(&self, cwd: &Path, id: Option<String>) -> anyhow::Result<AgentHandle> {
        let cwd = absolute(cwd)?;
        let log = self
            .store
            .create(CreateOptions {
                id,
                cwd: Some(cwd.clone()),
                ..CreateOptions::default()
            })
            .context("cannot create the session log")?;
        self.attach(log, &cwd, false)
    }

    /// An agent over an in-memory log: what a session in `cwd` would offer the model, without
    /// persisting anything (for `dsh tools`).
    pub fn preview_agent(&self, cwd: &Path) -> anyhow::Result<AgentHandle> {
        let cwd = absolute(cwd)?;
        let header =
            dsh_session::SessionHeader::new("preview", Some(cwd.to_string_lossy().into_owned()));
        self.attach(SessionLog::in_memory(header), &cwd, false)
    }

    /// Reopens a stored session (crash repair applied) with a new agent on it.
    pub fn resume_agent(&self, id: &str) -> anyhow::Result<AgentHandle> {
        let log = self
            .store
            .resume(id)
            .with_context(|| format!("cannot resume session {id}"))?;
        let cwd = match log.header().cwd.as_deref() {
            Some(cwd) => PathBuf::from(cwd),
            None => std::env::current_dir()?,
        };
        self.attach(log, &cwd, true)
    }

    fn attach(&self, log: SessionLog, cwd: &Path, resume: bool) -> anyhow::Result<AgentHandle> {
        let agent_scope = Arc::new(std::sync::OnceLock::<Scope>::new());
        let state = Arc::new(SessionState {
            id: log.id().to_owned(),
            cwd: cwd.to_path_buf(),
            jsonl: log.path(),
            permissions: std::sync::Mutex::new((
                self.settings.sandbox,
                self.settings.approval_never,
            )),
            fs_tools: std::sync::Mutex::new(Vec::new()),
        });
        let config = AgentConfig {
            id: log.id().to_owned(),
            cwd: Some(cwd.to_string_lossy().into_owned()),
            provider: self.settings.provider.clone(),
            model: self.settings.model.clone(),
            max_tokens: None,
            adapter: self.adapter.clone(),
            tools: self.registry.clone(),
            scope: self.root.clone(),
            log: log.clone(),
            prompt: self.prompt(&state, &agent_scope),
            max_parallel_tool_calls: self.settings.max_parallel,
        };
        let handle = if resume {
            Agent::resume(config)?
        } else {
            Agent::create(config)?
        };
        let scope = handle.scope().clone();
        let _ = agent_scope.set(scope.clone());
        crate::reach::attach_session(&self.root, &handle, &log)?;
        scope.provide(state.clone())?;
        scope.provide::<dyn dsh_code::CodeDispatchLog>(Arc::new(LogCodeDispatch(log.clone())))?;
        scope.provide::<dyn TodoSink>(Arc::new(LogTodoSink(log.clone())))?;
        scope.provide::<dyn dsh_hooks::HookSink>(Arc::new(LogHookSink {
            log: log.clone(),
            cwd: cwd.to_path_buf(),
        }))?;
        self.register_fs_tools(&scope, &state)?;
        self.shell.attach(&handle)?;
        Ok(handle)
    }

    fn register_fs_tools(&self, scope: &Scope, state: &SessionState) -> anyhow::Result<()> {
        let mut registered = state
            .fs_tools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for disposer in registered.drain(..) {
            disposer.dispose();
        }
        if !self.config.plugin_enabled("fs", true)? {
            return Ok(());
        }
        let mut fs = FsContext::new(&state.cwd, state.file_policy());
        if let Some(spill) = &self.spill {
            fs.spill = dsh_tool_fs::SpillConfig::new(spill.clone(), state.id.clone());
        }
        if let Some(sampling) = self.settings.fs.glob_sampling {
            fs.limits.sample_over_cap_glob_results = sampling;
        }
        if let Some(max) = self.settings.fs.glob_max_results {
            fs.limits.glob_max_results = max;
        }
        if let Some(max) = self.settings.fs.grep_max_matches {
            fs.limits.grep_max_matches = max;
        }
        if let Some(attachments) = &self.attachments {
            let (provider, model) = (&self.settings.provider, &self.settings.model);
            let route = crate::images::fs_route(model, self.accepts_images(provider, model));
            fs.images = Some(attachments.fs_support(route));
        }
        registered.extend(dsh_tool_fs::register::register_fs_tools(
            &self.registry,
            scope,
            fs,
        )?);
        Ok(())
    }

    /// Switches a session to `preset`: the file tools are re-bound to the new policy, bash reads
    /// it on its next call, the change is logged, and the next request's runtime context says so.
    pub fn set_preset(&self, agent: &AgentHandle, preset: &Preset) -> anyhow::Result<()> {
        let state = agent
            .scope()
            .service::<SessionState>()
            .context("the session has no permission state")?;
        let (old_mode, old_never) = state.permissions();
        if let Some(terminals) = agent.scope().service::<dsh_terminal::TerminalService>() {
            terminals
                .check_mode_switch(agent.id(), old_mode.as_str(), preset.sandbox.as_str())
                .map_err(|e| anyhow::anyhow!(e.message))?;
        }
        *state
            .permissions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            (preset.sandbox, preset.approval_never);
        let log = agent.log();
        log.append("permission/preset", json!({ "preset": preset.name }), None)?;
        if old_mode != preset.sandbox {
            log.append(
                "sandbox/mode",
                json!({ "mode": preset.sandbox.as_str() }),
                None,
            )?;
        }
        if old_never != preset.approval_never {
            let policy = if preset.approval_never {
                "never"
            } else {
                "ask"
            };
            log.append("approval/policy", json!({ "policy": policy }), None)?;
        }
        self.register_fs_tools(agent.scope(), &state)
    }

    fn prompt(
        &self,
        state: &Arc<SessionState>,
        agent_scope: &Arc<std::sync::OnceLock<Scope>>,
    ) -> PromptConfig {
        let mut sections = Vec::new();
        if self.config.plugin_enabled("fs", true).unwrap_or(true) {
            use dsh_tool_fs::schema as fs;
            for section in [
                fs::READ_SECTION,
                fs::WRITE_SECTION,
                fs::EDIT_SECTION,
                fs::GREP_SECTION,
            ] {
                sections.push(Section::new(
                    section.id,
                    f64::from(section.order),
                    section.text,
                ));
            }
            let sampling = self.settings.fs.glob_sampling.unwrap_or(true);
            sections.push(Section::new(
                "tool:glob",
                f64::from(fs::GLOB_SECTION_ORDER),
                fs::glob_section_text(sampling),
            ));
        }
        sections.extend(self.shell.prompt_sections());
        sections.extend(self.reach.prompt_sections());
        {
            // MCP servers' `instructions`, read at each assembly (servers connect late).
            let scope = agent_scope.clone();
            let root = self.root.clone();
            sections.push(Section {
                name: "mcp:instructions".to_owned(),
                order: 130.0,
                text: SectionText::Dynamic(Arc::new(move || {
                    let lookup = scope.get().cloned().unwrap_or_else(|| root.clone());
                    let mut texts = Vec::new();
                    for servers in [
                        root.service::<dsh_mcp::McpServers>(),
                        lookup.service::<dsh_mcp::McpServers>(),
                    ]
                    .into_iter()
                    .flatten()
                    {
                        for server in &servers.servers {
                            if let Some(text) = server.instructions() {
                                let block = format!(
                                    "Instructions from MCP server \"{}\":\n{}",
                                    server.name(),
                                    text.trim()
                                );
                                if !texts.contains(&block) {
                                    texts.push(block);
                                }
                            }
                        }
                    }
                    texts.join("\n\n")
                })),
            });
        }
        if self.config.plugin_enabled("web", true).unwrap_or(true) {
            let (id, order) = dsh_tool_web::SECTION;
            sections.push(Section::new(
                id,
                f64::from(order),
                dsh_tool_web::SECTION_TEXT,
            ));
        }
        if self.config.plugin_enabled("code", true).unwrap_or(true) {
            // The code-only rule and the generated SDK depend on the agent's presentation mode
            // and visible tools, so they are computed at every assembly.
            let (registry, scope) = (self.registry.clone(), agent_scope.clone());
            sections.push(Section {
                name: dsh_code::CODE_ONLY_SECTION.0.to_owned(),
                order: f64::from(dsh_code::CODE_ONLY_SECTION.1),
                text: SectionText::Dynamic(Arc::new(move || {
                    scope
                        .get()
                        .and_then(|scope| dsh_code::code_only_section(&registry, scope).ok())
                        .unwrap_or_default()
                })),
            });
            let (registry, scope) = (self.registry.clone(), agent_scope.clone());
            sections.push(Section {
                name: dsh_code::SDK_SECTION.0.to_owned(),
                order: f64::from(dsh_code::SDK_SECTION.1),
                text: SectionText::Dynamic(Arc::new(move || {
                    scope
                        .get()
                        .and_then(|scope| dsh_code::sdk_section(&registry, scope).ok())
                        .unwrap_or_default()
                })),
            });
        }
        let registry = self.registry.clone();
        let tool_schemas: dsh_agent::prompt::ToolSchemaProvider = Arc::new(move |scope: &Scope| {
            dsh_code::wire_schemas(&registry, Some(scope)).map_err(|e| e.to_string())
        });
        let policy_state = state.clone();
        let approval_state = state.clone();
        PromptConfig {
            persona: self.settings.persona.clone(),
            sections,
            contexts: vec![
                Section {
                    name: "sandbox:policy".to_owned(),
                    order: 1.0,
                    text: SectionText::Dynamic(Arc::new(move || {
                        policy_state.file_policy().policy_text()
                    })),
                },
                Section {
                    name: "approval:policy".to_owned(),
                    order: 2.0,
                    text: SectionText::Dynamic(Arc::new(move || {
                        approval_text(approval_state.permissions().1).to_owned()
                    })),
                },
            ],
            tool_schemas: Some(tool_schemas),
            ..PromptConfig::default()
        }
    }

    /// Connects the configured MCP servers; their tools register on the root scope (every
    /// session sees them) and go away when the harness shuts down.
    pub async fn start_mcp(&self) -> anyhow::Result<()> {
        if self.settings.mcp_servers.is_empty() || !self.config.plugin_enabled("mcp", true)? {
            return Ok(());
        }
        let mut options = self.mcp_options();
        options.roots = vec![std::env::current_dir()?];
        let servers = dsh_mcp::mount_servers(
            &self.root,
            &self.registry,
            &self.settings.mcp_servers,
            &options,
        )
        .await
        .context("cannot start the configured MCP servers")?;
        // Front-ends find the servers here (resources for `@server:uri`, prompts); the
        // system prompt reads their instructions.
        self.root.provide(Arc::new(servers))?;
        Ok(())
    }

    /// Connects MCP servers given for one session (ACP `session/new`): their tools live in the
    /// agent's scope, visible to that session only, and are removed with it.
    pub async fn start_session_mcp(
        &self,
        agent: &AgentHandle,
        entries: &[serde_json::Value],
    ) -> anyhow::Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut options = self.mcp_options();
        if let Some(state) = agent.scope().service::<SessionState>() {
            options.roots = vec![state.cwd.clone()];
        }
        let servers = dsh_mcp::mount_acp_servers(agent.scope(), &self.registry, entries, &options)
            .await
            .context("cannot start the session's MCP servers")?;
        agent.scope().provide(Arc::new(servers))?;
        Ok(())
    }

    /// Status lines of the agent's background jobs (for `/jobs` in the UI).
    pub fn job_lines(&self, agent: &AgentHandle) -> Vec<String> {
        self.shell.job_lines(agent)
    }

    /// Disposes every agent and plugin, newest first.
    pub fn shutdown(&self) {
        self.root.dispose();
    }
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    let path = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    };
    Ok(path.canonicalize().unwrap_or(path))
}

/// Appends `todo/write {todos}` to the session the tool ran in.
struct LogTodoSink(SessionLog);

impl TodoSink for LogTodoSink {
    fn record(&self, todos: &[Todo]) -> Result<(), String> {
        self.0
            .append("todo/write", json!({ "todos": todos }), None)
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// Appends `hook/invoked` / `hook/result` with the open turn, and gives hooks the session cwd.
struct LogHookSink {
    log: SessionLog,
    cwd: PathBuf,
}

impl dsh_hooks::HookSink for LogHookSink {
    fn record(&self, event: &dsh_hooks::HookEvent) {
        let turns = self.log.turn_state();
        let turn = turns.open_turn.unwrap_or(turns.last_turn);
        if let Err(error) = self.log.append(event.event_type(), event.data(turn), None) {
            tracing::warn!(%error, "cannot log a hook event");
        }
    }
    fn cwd(&self) -> Option<PathBuf> {
        Some(self.cwd.clone())
    }
}

/// Appends Code Mode's sub-call events (`tool/code-dispatch-start`, `tool/code-dispatch`).
struct LogCodeDispatch(SessionLog);

impl dsh_code::CodeDispatchLog for LogCodeDispatch {
    fn append(&self, event: dsh_code::CodeDispatchEvent) -> dsh_kernel::BoxFuture<'static, ()> {
        if let Err(error) = self.0.append(event.event_type(), event.data(), None) {
            tracing::warn!(%error, "cannot log a Code Mode sub-call event");
        }
        Box::pin(async {})
    }
}
