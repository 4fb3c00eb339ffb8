//! [`Host`]: the composition built from a layered configuration — one root scope, the host's
//! services on it, and every enabled plugin of the table mounted through `dsh_kernel::mount`
//! in its own scope — plus hot reload. [`SessionHost`]: the one session API the front-ends
//! share (create, load, list, fork, children, presets).

use dsh_sync::lock;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentError;
use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::PromptConfig;
use dsh_attachments::LocalAttachmentStore;
use dsh_kernel::KernelError;
use dsh_kernel::Mounted;
use dsh_kernel::PluginError;
use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_llm::LlmError;
use dsh_plugin::DefaultPermissions;
use dsh_plugin::HostInfo;
use dsh_plugin::HostServices;
use dsh_plugin::Permissions;
use dsh_plugin::PermissionsOrigin;
use dsh_plugin::PluginSpec;
use dsh_plugin::Preset;
use dsh_plugin::PromptRegistry;
use dsh_plugin::Section;
use dsh_plugin::SessionContext;
use dsh_plugin::Sessions;
use dsh_plugin::Slot;
use dsh_plugin::Startup;
use dsh_protocol::ToolSchema;
use dsh_session::CreateOptions;
use dsh_session::JsonlStore;
use dsh_session::LoadedSession;
use dsh_session::SessionError;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use dsh_session::SessionStore;
use dsh_session::SessionSummary;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolRegistry;
use tokio::sync::broadcast;

use crate::config::Config;
use crate::config::ConfigErrors;
use crate::config::Overrides;
use crate::model::RoutedAdapter;
use crate::validate::Checked;
use crate::validate::CoreSettings;
use crate::validate::PluginState;

/// Why the host could not do something.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Config(#[from] ConfigErrors),
    #[error("plugin {plugin}: {source}")]
    Plugin {
        plugin: String,
        #[source]
        source: PluginError,
    },
    #[error("{plugin}: {message}")]
    Startup { plugin: String, message: String },
    #[error(transparent)]
    Model(#[from] LlmError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Agent(#[from] AgentError),
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error("{0}")]
    Invalid(String),
}

impl From<PluginError> for HostError {
    fn from(source: PluginError) -> Self {
        match &source {
            PluginError::InvalidConfig { plugin, .. } | PluginError::Apply { plugin, .. } => {
                Self::Plugin {
                    plugin: plugin.clone(),
                    source,
                }
            }
            _ => Self::Plugin {
                plugin: String::new(),
                source,
            },
        }
    }
}

/// What a host is built from besides its configuration (tests and embedders override these).
pub struct HostOptions {
    pub config: Config,
    /// The overrides `config` was loaded with (reloads reuse them).
    pub overrides: Overrides,
    /// Where sessions live; default: JSONL under `$DSH_HOME/sessions`.
    pub store: Option<Arc<dyn SessionStore>>,
    /// The model adapter; default: the `[model]` provider from the registry.
    pub adapter: Option<Arc<dyn dsh_llm::ModelAdapter>>,
    /// The plugin table; default: [`crate::builtin_plugins`].
    pub plugins: Option<Vec<PluginSpec>>,
}

impl HostOptions {
    pub fn new(config: Config) -> Self {
        Self {
            config,
            overrides: Overrides::default(),
            store: None,
            adapter: None,
            plugins: None,
        }
    }
}

/// One line of the table as mounted.
struct Row {
    spec: PluginSpec,
    state: PluginState,
    mounted: Option<Mounted>,
}

struct State {
    config: Config,
    core: CoreSettings,
    rows: Vec<Row>,
    persona: Option<Scope>,
}

/// What one reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadReport {
    /// Nothing that matters changed.
    Unchanged,
    /// These plugins (and core tables) were re-applied, mounted or unmounted.
    Applied {
        changed: Vec<String>,
        /// Changes that take effect only for new sessions or after a restart.
        notes: Vec<String>,
    },
    /// The new configuration was refused; the old one keeps running.
    Rejected { message: String },
    /// Some plugins failed to apply the new configuration and were restored to the old one.
    Partial {
        changed: Vec<String>,
        failed: Vec<(String, String)>,
    },
}

impl std::fmt::Display for ReloadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unchanged => f.write_str("configuration reloaded: nothing changed"),
            Self::Applied { changed, notes } if changed.is_empty() => {
                // Only notes: a project layer left out, a setting that waits for a restart.
                f.write_str("configuration reloaded")?;
                for note in notes {
                    write!(f, "; {note}")?;
                }
                Ok(())
            }
            Self::Applied { changed, notes } => {
                write!(f, "configuration reloaded: {}", changed.join(", "))?;
                for note in notes {
                    write!(f, "; {note}")?;
                }
                Ok(())
            }
            Self::Rejected { message } => write!(
                f,
                "configuration not reloaded, the previous one keeps running:\n{message}"
            ),
            Self::Partial { changed, failed } => {
                write!(f, "configuration partly reloaded ({})", changed.join(", "))?;
                for (plugin, error) in failed {
                    write!(f, "; {plugin} kept its previous configuration: {error}")?;
                }
                Ok(())
            }
        }
    }
}

pub(crate) struct Inner {
    pub(crate) root: Scope,
    pub(crate) services: Arc<HostServices>,
    pub(crate) store: Arc<dyn SessionStore>,
    model: Arc<RoutedAdapter>,
    custom_adapter: bool,
    table: Vec<PluginSpec>,
    state: Mutex<State>,
    reload: tokio::sync::Mutex<()>,
    reports: broadcast::Sender<ReloadReport>,
    pub(crate) overrides: Overrides,
    /// The output cap per model request of sessions attached from now on (0: none).
    max_tokens: std::sync::atomic::AtomicU64,
}

/// The composition: build it once per process, then hand [`Host::sessions`] to a front-end.
#[derive(Clone)]
pub struct Host {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("home", &self.inner.services.info.home)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// Checks the configuration and mounts every enabled plugin. Cheap: no network, no
    /// session; work a plugin starts in the background is awaited by [`Host::start`].
    /// Must be called inside a tokio runtime.
    pub fn build(options: HostOptions) -> Result<Self, HostError> {
        let table = options.plugins.unwrap_or_else(crate::builtin_plugins);
        let checked = crate::validate::check(&options.config, &table)?;
        let Checked { core, plugins } = checked;
        let root = Scope::root();
        let hooks = AgentHooks::install(&root)?;
        let tools = ToolRegistry::install(
            &root,
            RegistryConfig {
                mode: core.tools.mode,
            },
        )?;
        let prompts = Arc::new(PromptRegistry::default());
        root.provide(prompts.clone())?;
        // The slash-command registry front-ends list and plugins register into.
        dsh_commands::CommandRegistry::install(&root)?;
        // Before any plugin: the spill policy (prepended later, so outermost) spills redacted text.
        crate::redact::install(&tools, &root);
        let custom_adapter = options.adapter.is_some();
        let inner_adapter = match options.adapter {
            Some(adapter) => adapter,
            None => crate::model::build(
                &core.model,
                crate::model::base_url_source(&options.config),
                &root,
            )?,
        };
        let model = Arc::new(RoutedAdapter::new(inner_adapter));
        let services = Arc::new(HostServices {
            tools,
            hooks,
            prompts,
            sessions: Arc::new(Sessions::default()),
            adapter: model.clone(),
            presenters: Arc::new(dsh_plugin::transcript::EventPresenters::new()),
            startup: Arc::new(Startup::default()),
            info: HostInfo {
                home: options.config.home.clone(),
                launch_cwd: options.config.cwd.clone(),
                provider: model.provider_name().to_owned(),
                model: core.model.name.clone(),
            },
        });
        root.provide(services.clone())?;
        // Front-ends reach the presenters from any session's scope, like the other registries.
        root.provide(services.presenters.clone())?;
        let store = options
            .store
            .unwrap_or_else(|| Arc::new(JsonlStore::new(options.config.home.clone())));
        // Plugins that keep sessions of their own (subagent children) create them here too;
        // plugins that read other sessions (`@session` references) read them here.
        root.provide::<dyn SessionStore>(store.clone())?;
        let (reports, _) = broadcast::channel(16);
        let host = Self {
            inner: Arc::new(Inner {
                root: root.clone(),
                services,
                store,
                model,
                custom_adapter,
                table: table.clone(),
                state: Mutex::new(State {
                    config: options.config,
                    core: core.clone(),
                    rows: Vec::new(),
                    persona: None,
                }),
                reload: tokio::sync::Mutex::new(()),
                max_tokens: std::sync::atomic::AtomicU64::new(0),
                reports,
                overrides: options.overrides,
            }),
        };
        host.set_persona(&core.prompt.persona)?;
        let mut rows = Vec::with_capacity(table.len());
        for (spec, state) in table.into_iter().zip(plugins) {
            let mounted = if state.enabled {
                match dsh_kernel::mount(&root, spec.plugin(), state.config.clone()) {
                    Ok(mounted) => Some(mounted),
                    Err(source) => {
                        root.dispose();
                        let error = crate::validate::refused(
                            &lock(&host.inner.state).config,
                            &spec,
                            source,
                        );
                        return Err(HostError::Config(ConfigErrors(vec![error])));
                    }
                }
            } else {
                None
            };
            rows.push(Row {
                spec,
                state,
                mounted,
            });
        }
        lock(&host.inner.state).rows = rows;
        Ok(host)
    }

    /// Waits for the work plugins started while mounting (MCP servers connecting); a failure
    /// names the plugin.
    pub async fn start(&self) -> Result<(), HostError> {
        self.inner
            .services
            .startup
            .wait()
            .await
            .map_err(|(plugin, message)| HostError::Startup { plugin, message })
    }

    /// Builds the host the binary runs from a loaded configuration (`overrides`: what it was
    /// loaded with, reused by reloads) and waits for its start-up work; a start-up failure
    /// shuts it down again. Must be called inside a tokio runtime.
    pub async fn launch(config: Config, overrides: Overrides) -> Result<Self, HostError> {
        let mut options = HostOptions::new(config);
        options.overrides = overrides;
        let host = Self::build(options)?;
        if let Err(error) = host.start().await {
            host.shutdown();
            return Err(error);
        }
        Ok(host)
    }

    /// The session API for front-ends.
    pub fn sessions(&self) -> SessionHost {
        SessionHost {
            inner: self.inner.clone(),
        }
    }

    /// A fresh plugin-kind scope under the root for what an embedder registers outside the
    /// table (a test's own tools and hooks, a front-end's global command): visible to every
    /// session, disposed with the host or with the returned scope.
    pub fn extension_scope(&self, name: &str) -> Result<Scope, HostError> {
        Ok(self.inner.root.child(ScopeKind::Plugin, name)?)
    }

    /// The names of the plugins mounted now, in table order.
    pub fn mounted(&self) -> Vec<&'static str> {
        lock(&self.inner.state)
            .rows
            .iter()
            .filter(|row| row.mounted.is_some())
            .map(|row| row.spec.name)
            .collect()
    }

    /// The configuration in force.
    pub fn config(&self) -> Config {
        lock(&self.inner.state).config.clone()
    }

    /// The plugin table.
    pub fn table(&self) -> &[PluginSpec] {
        &self.inner.table
    }

    /// Reload outcomes as they happen (the TUI shows them, ACP logs them).
    pub fn reports(&self) -> broadcast::Receiver<ReloadReport> {
        self.inner.reports.subscribe()
    }

    /// Disposes every session and plugin, newest first.
    pub fn shutdown(&self) {
        self.inner.root.dispose();
    }

    fn set_persona(&self, persona: &str) -> Result<(), HostError> {
        let scope = self.inner.root.child(ScopeKind::Plugin, "prompt")?;
        self.inner.services.prompts.register_section(
            &scope,
            Section::new("deployment:persona", Slot::Persona, persona),
        );
        let old = lock(&self.inner.state).persona.replace(scope);
        if let Some(old) = old {
            old.dispose();
        }
        Ok(())
    }

    /// Re-reads the configuration files with the start-up overrides and applies the result.
    pub async fn reload_from_disk(&self) -> ReloadReport {
        let (home, cwd) = {
            let state = lock(&self.inner.state);
            (state.config.home.clone(), state.config.cwd.clone())
        };
        let report = match Config::load_in(home, &cwd, &self.inner.overrides) {
            Ok(config) => self.reload(config).await,
            Err(errors) => ReloadReport::Rejected {
                message: errors.to_string(),
            },
        };
        if let ReloadReport::Rejected { .. } = &report {
            let _ = self.inner.reports.send(report.clone());
        }
        report
    }

    /// Applies `config`: re-applies exactly the plugins whose effective table changed (and
    /// those that use them), mounts newly enabled ones and unmounts disabled ones. A
    /// configuration with any error is refused whole and the old one keeps running; a plugin
    /// whose new instance fails to apply is restored to its previous configuration.
    pub async fn reload(&self, config: Config) -> ReloadReport {
        let _serial = self.inner.reload.lock().await;
        let checked = match crate::validate::check(&config, &self.inner.table) {
            Ok(checked) => checked,
            Err(errors) => {
                let report = ReloadReport::Rejected {
                    message: errors.to_string(),
                };
                let _ = self.inner.reports.send(report.clone());
                return report;
            }
        };
        let report = self.apply(config, checked);
        let _ = self.inner.reports.send(report.clone());
        report
    }

    fn apply(&self, config: Config, checked: Checked) -> ReloadReport {
        let mut changed = Vec::new();
        let mut notes = Vec::new();
        // An untrusted folder's file that became unusable (broken TOML, a key that fails) is
        // left out whole: say so and why, rather than "nothing changed".
        if let Some(project) = config.project.as_ref().filter(|p| !p.trusted)
            && let Some(reason) = &project.unusable
        {
            let notice = crate::trust::unusable_notice(&project.file, &project.folder, reason);
            notes.push(
                notice
                    .strip_prefix("dsh: notice: ")
                    .unwrap_or(&notice)
                    .to_owned(),
            );
        }
        let mut failed = Vec::new();
        let old_core = lock(&self.inner.state).core.clone();
        if checked.core.model != old_core.model {
            if checked.core.model.provider != old_core.model.provider {
                notes.push("model.provider applies after a restart".to_owned());
            } else if self.inner.custom_adapter {
                notes.push("this host's model adapter is fixed".to_owned());
            } else {
                match crate::model::build(
                    &checked.core.model,
                    crate::model::base_url_source(&config),
                    &self.inner.root,
                ) {
                    Ok(adapter) => {
                        self.inner.model.replace(adapter);
                        changed.push("model".to_owned());
                    }
                    Err(error) => failed.push(("model".to_owned(), error.to_string())),
                }
            }
            if checked.core.model.name != old_core.model.name {
                notes.push("model.name applies to new sessions".to_owned());
            }
        }
        if checked.core.tools.max_parallel != old_core.tools.max_parallel {
            for (agent, _) in self.inner.services.sessions.live() {
                let _ = agent.set_max_parallel_tool_calls(checked.core.tools.max_parallel.get());
            }
            changed.push("tools.max_parallel".to_owned());
        }
        let max_calls = checked.core.tools.max_calls_per_response;
        if max_calls != old_core.tools.max_calls_per_response {
            for (agent, _) in self.inner.services.sessions.live() {
                let _ = agent.set_max_calls_per_response(max_calls.get());
            }
            changed.push("tools.max_calls_per_response".to_owned());
        }
        if checked.core.tools.mode != old_core.tools.mode {
            notes.push("tools.mode applies after a restart".to_owned());
        }
        if checked.core.prompt != old_core.prompt {
            match self.set_persona(&checked.core.prompt.persona) {
                Ok(()) => changed.push("prompt".to_owned()),
                Err(error) => failed.push(("prompt".to_owned(), error.to_string())),
            }
        }
        let mut state = lock(&self.inner.state);
        // Which rows change, then which rows use a changed one (table order: users come later).
        let mut dirty: Vec<bool> = state
            .rows
            .iter()
            .zip(&checked.plugins)
            .map(|(row, next)| row.state != *next)
            .collect();
        for i in 0..dirty.len() {
            if !dirty[i] {
                let uses = state.rows[i].spec.uses;
                dirty[i] = state.rows[..i]
                    .iter()
                    .zip(&dirty)
                    .any(|(row, d)| *d && uses.contains(&row.spec.name));
            }
        }
        let root = self.inner.root.clone();
        for ((row, next), dirty) in state.rows.iter_mut().zip(checked.plugins).zip(dirty) {
            if !dirty {
                continue;
            }
            let name = row.spec.name.to_owned();
            let outcome = match (&row.mounted, next.enabled) {
                (Some(mounted), false) => {
                    mounted.unmount();
                    row.mounted = None;
                    Ok(())
                }
                (None, false) => Ok(()),
                (None, true) => dsh_kernel::mount(&root, row.spec.plugin(), next.config.clone())
                    .map(|mounted| row.mounted = Some(mounted)),
                (Some(mounted), true) => match mounted.reapply(next.config.clone()) {
                    Ok(()) => Ok(()),
                    Err(error) => {
                        // The new instance failed and was disposed: bring the old one back.
                        if row.state.enabled
                            && let Err(restore) = mounted.reapply(row.state.config.clone())
                        {
                            tracing::error!(plugin = %name, %restore, "cannot restore a plugin's previous configuration");
                        }
                        Err(error)
                    }
                },
            };
            match outcome {
                Ok(()) => {
                    row.state = next;
                    changed.push(name);
                }
                Err(error) => {
                    let error = crate::validate::refused(&config, &row.spec, error);
                    failed.push((name, error.to_string()));
                }
            }
        }
        state.core = checked.core;
        state.config = config;
        drop(state);
        self.follow_configured_permissions();
        match (changed.is_empty(), failed.is_empty()) {
            (_, false) => ReloadReport::Partial { changed, failed },
            (true, true) if notes.is_empty() => ReloadReport::Unchanged,
            _ => ReloadReport::Applied { changed, notes },
        }
    }
}

impl Host {
    /// Sessions whose permissions came from the configuration follow its defaults (a client's
    /// preset choice stays); each change re-attaches the session's pieces, the same path as a
    /// preset switch.
    fn follow_configured_permissions(&self) {
        let defaults = self.sessions().default_permissions();
        let sessions = &self.inner.services.sessions;
        for (_, session) in sessions.live() {
            if session.permissions_origin() == PermissionsOrigin::Config
                && session.permissions() != defaults
                && let Err(error) =
                    sessions.set_permissions(&session, defaults, PermissionsOrigin::Config)
            {
                tracing::warn!(session = session.id(), %error, "cannot apply the configured permissions");
            }
        }
    }

    /// Re-applies plugin `name` with its current configuration (and the plugins that use it):
    /// a fresh instance replaces the running one.
    pub fn reapply(&self, name: &str) -> Result<(), HostError> {
        let state = lock(&self.inner.state);
        let Some(index) = state.rows.iter().position(|row| row.spec.name == name) else {
            return Err(HostError::Invalid(format!("no plugin named {name}")));
        };
        let mut dirty = vec![false; state.rows.len()];
        dirty[index] = true;
        for i in index + 1..dirty.len() {
            let uses = state.rows[i].spec.uses;
            dirty[i] = state.rows[..i]
                .iter()
                .zip(&dirty)
                .any(|(row, d)| *d && uses.contains(&row.spec.name));
        }
        for (row, dirty) in state.rows.iter().zip(dirty) {
            if let (true, Some(mounted)) = (dirty, &row.mounted) {
                mounted.reapply(row.state.config.clone())?;
            }
        }
        drop(state);
        self.follow_configured_permissions();
        Ok(())
    }
}

impl RoutedAdapter {
    fn provider_name(&self) -> &str {
        dsh_llm::ModelAdapter::provider(self)
    }
}

/// How a new session starts.
#[derive(Debug, Clone, Default)]
pub struct NewSession {
    /// A client-chosen id (ACP); default: a fresh `session-<uuid>`.
    pub id: Option<String>,
    /// The working directory; relative paths are resolved against the process cwd.
    pub cwd: PathBuf,
}

/// A delegated child's ending (`subagent/end`), as [`SessionHost::on_child_finished`] reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildFinished {
    /// The subagent provider that ran it.
    pub provider: String,
    pub child_id: String,
    /// The delegating session.
    pub parent_id: String,
    /// Ran in this process (`false`: an out-of-process ACP, codex or claude child).
    pub local: bool,
    /// `completed`, `aborted`, `error`, `max-tokens`, `refusal` or another word.
    pub stop_reason: String,
    /// The child's last non-empty answer; `None` when it produced no output.
    pub last_assistant_message: Option<Vec<dsh_protocol::ContentBlock>>,
}

/// How a child session (a subagent or a fork of the parent) starts.
#[derive(Debug, Clone, Default)]
pub struct ChildSession {
    pub id: Option<String>,
    /// Fork: the child starts from the parent's log (up to its last event); spawn: empty.
    pub fork: bool,
    /// The child's cwd; default: the parent's.
    pub cwd: Option<PathBuf>,
    /// The child's permissions; default: the parent's.
    pub permissions: Option<Permissions>,
}

/// The one session API of `dsh exec`, `dsh acp` and the TUI. Cheap to clone.
#[derive(Clone)]
pub struct SessionHost {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for SessionHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHost").finish_non_exhaustive()
    }
}

fn absolute(path: &Path) -> Result<PathBuf, HostError> {
    let path = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| HostError::Invalid(format!("cannot read the current directory: {e}")))?
            .join(path)
    };
    Ok(path.canonicalize().unwrap_or(path))
}

impl SessionHost {
    /// A fresh persisted session with an idle agent on it.
    pub fn create(&self, request: NewSession) -> Result<AgentHandle, HostError> {
        let cwd = absolute(&request.cwd)?;
        let log = self.inner.store.create(CreateOptions {
            id: request.id,
            cwd: Some(cwd.clone()),
            ..CreateOptions::default()
        })?;
        self.attach(log, cwd, &self.inner.root, false, None)
    }

    /// An agent over an in-memory log: what a session in `cwd` would offer the model, with
    /// nothing persisted (`dsh tools`).
    pub fn preview(&self, cwd: &Path) -> Result<AgentHandle, HostError> {
        static PREVIEWS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let cwd = absolute(cwd)?;
        let n = PREVIEWS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let header = SessionHeader::new(
            format!("preview-{n}"),
            Some(cwd.to_string_lossy().into_owned()),
        );
        self.attach(
            SessionLog::in_memory(header),
            cwd,
            &self.inner.root,
            false,
            None,
        )
    }

    /// Reopens a stored session (crash repair applied) with an idle agent on it.
    pub fn load(&self, id: &str) -> Result<AgentHandle, HostError> {
        let log = self.inner.store.resume(id)?;
        let cwd = match log.header().cwd.as_deref() {
            Some(cwd) => PathBuf::from(cwd),
            None => absolute(Path::new("."))?,
        };
        self.attach(log, cwd, &self.inner.root, true, None)
    }

    /// A new top-level session forked from the stored session `id` (after its last event).
    pub fn fork(&self, id: &str) -> Result<AgentHandle, HostError> {
        let log = self.inner.store.fork(id, None, None)?;
        let cwd = match log.header().cwd.as_deref() {
            Some(cwd) => PathBuf::from(cwd),
            None => absolute(Path::new("."))?,
        };
        self.attach(log, cwd, &self.inner.root, true, None)
    }

    /// A child of `parent` in its own agent scope under the parent's: it shares the parent's
    /// registry and runtime, and disposing the parent disposes it. Every per-session plugin
    /// attaches to it as to any session (`SessionContext::parent` tells them apart).
    pub fn create_child(
        &self,
        parent: &AgentHandle,
        request: ChildSession,
    ) -> Result<AgentHandle, HostError> {
        let parent_context = SessionContext::of(parent.scope())
            .ok_or_else(|| HostError::Invalid("the parent has no session context".into()))?;
        let log = if request.fork {
            self.inner.store.fork_log(parent.log(), None, request.id)?
        } else {
            self.inner.store.create(CreateOptions {
                id: request.id,
                cwd: Some(
                    request
                        .cwd
                        .clone()
                        .unwrap_or_else(|| parent_context.cwd().to_path_buf()),
                ),
                parent_session: Some(parent.id().to_owned()),
                delegation_depth: parent_context.delegation_depth() + 1,
                ..CreateOptions::default()
            })?
        };
        let cwd = request
            .cwd
            .unwrap_or_else(|| parent_context.cwd().to_path_buf());
        let permissions = request
            .permissions
            .unwrap_or_else(|| parent_context.permissions());
        self.attach(log, cwd, parent.scope(), request.fork, Some(permissions))
    }

    pub(crate) fn default_permissions(&self) -> Permissions {
        self.inner.root.service::<DefaultPermissions>().map_or_else(
            || Permissions::for_mode(dsh_plugin::SandboxMode::WorkspaceWrite),
            |p| p.0,
        )
    }

    fn attach(
        &self,
        log: SessionLog,
        cwd: PathBuf,
        parent: &Scope,
        resumed: bool,
        permissions: Option<Permissions>,
    ) -> Result<AgentHandle, HostError> {
        let (provider, model, max_parallel, max_calls, attempt_timeout) = {
            let state = lock(&self.inner.state);
            (
                self.inner.services.info.provider.clone(),
                state.core.model.name.clone(),
                state.core.tools.max_parallel.get(),
                state.core.tools.max_calls_per_response.get(),
                state.core.model.attempt_timeout_secs,
            )
        };
        // A resumed or forked session keeps the preset a client chose for it; its origin stays
        // the client's, so a configuration reload does not move it either.
        let chosen = match permissions {
            None if resumed => crate::permission_choice::restored(&log),
            _ => None,
        };
        let mut context = SessionContext::new(
            log.clone(),
            cwd.clone(),
            Some(self.inner.services.info.home.clone()),
            chosen
                .or(permissions)
                .unwrap_or_else(|| self.default_permissions()),
        );
        if chosen.is_some() {
            context = context.with_origin(PermissionsOrigin::Client);
        }
        let context = Arc::new(context);
        let config = AgentConfig {
            id: log.id().to_owned(),
            cwd: Some(cwd.to_string_lossy().into_owned()),
            provider,
            model,
            max_tokens: Some(
                self.inner
                    .max_tokens
                    .load(std::sync::atomic::Ordering::Relaxed),
            )
            .filter(|max| *max > 0),
            adapter: self.inner.model.clone(),
            tools: self.inner.services.tools.clone(),
            scope: parent.clone(),
            log,
            prompt: PromptConfig::default(),
            max_parallel_tool_calls: max_parallel,
        };
        let sessions = self.inner.services.sessions.clone();
        Agent::start(
            config,
            resumed,
            |agent: &AgentHandle| -> Result<(), HostError> {
                agent.set_max_calls_per_response(max_calls)?;
                if let Some(secs) = attempt_timeout {
                    agent.set_model_attempt_timeout(std::time::Duration::from_secs(secs.get()));
                }
                agent.scope().provide(context.clone())?;
                sessions.open(agent, context.clone())?;
                if resumed {
                    crate::model_choice::restore(agent)?;
                }
                Ok(())
            },
        )
    }

    /// Switches `agent`'s model from its next request (ACP's `model` config option), logged as
    /// `model/selected` so resuming or forking the session keeps it.
    pub fn set_model(&self, agent: &AgentHandle, model: &str) -> Result<(), HostError> {
        crate::model_choice::select(agent, model)
    }

    /// The model `agent`'s next request uses: the one selected last, else the configured one.
    pub fn current_model(&self, agent: &AgentHandle) -> String {
        crate::model_choice::current(agent)
    }

    /// Stored sessions, newest first.
    pub fn list(&self) -> Result<Vec<SessionSummary>, HostError> {
        Ok(self.inner.store.list()?)
    }

    /// A stored session's events, unchanged (crash repair computed, not applied).
    pub fn read(&self, id: &str) -> Result<LoadedSession, HostError> {
        Ok(self.inner.store.load(id)?)
    }

    /// Deletes a stored session that is not open.
    pub fn remove(&self, id: &str) -> Result<(), HostError> {
        Ok(self.inner.store.remove(id)?)
    }

    /// The store sessions live in.
    pub fn store(&self) -> Arc<dyn SessionStore> {
        self.inner.store.clone()
    }

    /// Whether plugin `name` is mounted now.
    pub fn is_mounted(&self, name: &str) -> bool {
        lock(&self.inner.state)
            .rows
            .iter()
            .any(|row| row.spec.name == name && row.mounted.is_some())
    }

    /// The open session `id`, if any.
    pub fn live(&self, id: &str) -> Option<AgentHandle> {
        self.inner.services.sessions.get(id).map(|(agent, _)| agent)
    }

    /// The presets every session offers.
    pub fn presets(&self) -> &'static [Preset] {
        &dsh_plugin::PRESETS
    }

    /// The preset matching `agent`'s permissions now, if any.
    pub fn current_preset(&self, agent: &AgentHandle) -> Option<&'static Preset> {
        SessionContext::of(agent.scope()).and_then(|context| context.permissions().preset())
    }

    /// Switches `agent`'s session to the preset `name`: logged, and every per-session plugin
    /// piece is re-applied (`Mounted::reapply`, the same path as a configuration reload).
    pub fn set_preset(&self, agent: &AgentHandle, name: &str) -> Result<(), HostError> {
        let preset = dsh_plugin::PRESETS
            .iter()
            .find(|preset| preset.name == name)
            .ok_or_else(|| HostError::Invalid(format!("unknown mode: {name}")))?;
        let context = SessionContext::of(agent.scope())
            .ok_or_else(|| HostError::Invalid("the session has no permission state".into()))?;
        // A terminal keeps the confinement it was opened with: the sandbox mode may not move
        // under an agent's open (or opening) terminals.
        if let Some(terminals) = agent.scope().service::<dsh_terminal::TerminalService>() {
            terminals
                .check_mode_switch(
                    agent.id(),
                    context.permissions().sandbox.as_str(),
                    preset.permissions.sandbox.as_str(),
                )
                .map_err(|error| HostError::Invalid(error.message))?;
        }
        self.inner
            .services
            .sessions
            .set_permissions(&context, preset.permissions, PermissionsOrigin::Client)
            .map_err(|error| HostError::Invalid(error.to_string()))?;
        Ok(())
    }

    /// The tool registry (card presenters, `/mode`).
    pub fn registry(&self) -> Arc<ToolRegistry> {
        self.inner.services.tools.clone()
    }

    /// Exactly the tool list the model is offered in `agent`'s next request.
    pub fn offered_tools(&self, agent: &AgentHandle) -> Result<Vec<ToolSchema>, HostError> {
        let scope = agent.scope();
        let mut schemas = match self.inner.services.prompts.tool_schemas(scope) {
            Some(provider) => provider(scope).map_err(HostError::Invalid)?,
            None => self
                .inner
                .services
                .tools
                .schemas(Some(scope))
                .map_err(|e| HostError::Invalid(e.to_string()))?,
        };
        schemas.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(schemas)
    }

    /// `dsh tools`: the catalog a new session in `cwd` would be offered, from a preview that
    /// persists nothing.
    pub async fn catalog(&self, cwd: &Path) -> Result<Vec<ToolSchema>, HostError> {
        let agent = self.preview(cwd)?;
        let schemas = self.offered_tools(&agent);
        agent.dispose().await;
        schemas
    }

    /// How `agent`'s transcript is presented: its tools' cards (seen from its scope) and the
    /// plugins' event presenters. Every front-end folds the log through this.
    pub fn presentation(&self, agent: &AgentHandle) -> dsh_plugin::transcript::Presentation {
        dsh_plugin::transcript::Presentation::new(
            self.inner.services.tools.clone(),
            agent.scope().clone(),
            Some(self.inner.services.presenters.clone()),
        )
    }

    /// The host's services (plugins' registries, the model adapter, host facts).
    pub fn services(&self) -> Arc<HostServices> {
        self.inner.services.clone()
    }

    /// Caps each model request's output at `max` tokens for every session attached from now
    /// on, children included (the SDK's `initialize` `maxTokens`); `None` lifts the cap.
    pub fn set_max_tokens(&self, max: Option<u64>) {
        self.inner
            .max_tokens
            .store(max.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
    }

    /// The root scope's hooks of the agent loop (status changes and session starts of every
    /// agent of this host), for a front-end that follows all of them.
    pub fn agent_hooks(&self) -> Arc<AgentHooks> {
        self.inner.services.hooks.clone()
    }

    /// Calls `listener` with each in-process or remote delegated child's ending while `owner`
    /// lives; `None` when the subagent plugin is not mounted.
    pub fn on_child_finished(
        &self,
        owner: &Scope,
        listener: impl Fn(&ChildFinished) + Send + Sync + 'static,
    ) -> Option<dsh_kernel::Disposer> {
        let subagents = self.service::<dsh_subagent::Subagents>()?;
        Some(subagents.events().register(owner, move |event| {
            if let dsh_subagent::SubagentEvent::End {
                info,
                stop_reason,
                last_assistant_message,
            } = event
            {
                listener(&ChildFinished {
                    provider: info.provider.clone(),
                    child_id: info.id.clone(),
                    parent_id: info.parent_id.clone(),
                    local: info.local,
                    stop_reason: stop_reason.as_str().to_owned(),
                    last_assistant_message: last_assistant_message.clone(),
                });
            }
            Ok(())
        }))
    }

    /// A service provided on the host's root (a command registry, the attachment store).
    pub fn service<T: ?Sized + Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.inner.root.service::<T>()
    }

    /// The configured provider and model of new sessions.
    pub fn route(&self) -> (String, String) {
        (
            self.inner.services.info.provider.clone(),
            lock(&self.inner.state).core.model.name.clone(),
        )
    }

    /// Whether `model` on `provider` takes images; `None` when the route is unknown.
    pub fn accepts_images(&self, provider: &str, model: &str) -> Option<bool> {
        self.inner.services.accepts_images(provider, model)
    }

    /// The attachment store, when the attachments plugin is mounted.
    pub fn attachments(&self) -> Option<Arc<LocalAttachmentStore>> {
        self.inner.root.service::<LocalAttachmentStore>()
    }

    /// The image at `path` as a content block for `model`, saved in the attachment store
    /// (`@path` in the TUI); `None` when the route does not take images or no store is
    /// mounted (the path alone is sent).
    pub fn image_block(
        &self,
        agent: &AgentHandle,
        model: &str,
        path: &Path,
    ) -> Result<Option<dsh_protocol::ContentBlock>, HostError> {
        if self.accepts_images(agent.provider(), model) != Some(true) {
            return Ok(None);
        }
        let Some(store) = self.attachments() else {
            return Ok(None);
        };
        let bytes = std::fs::read(path).map_err(|e| HostError::Invalid(e.to_string()))?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let invalid = |e: dsh_attachments::AttachmentError| HostError::Invalid(e.to_string());
        let record = store.describe(&bytes, None, name).map_err(invalid)?;
        store.save(&record, &bytes).map_err(invalid)?;
        let attachment = serde_json::to_value(record)
            .map_err(|e| HostError::Invalid(format!("cannot describe the image: {e}")))?;
        Ok(Some(dsh_protocol::ContentBlock::Image { attachment }))
    }

    /// Connects MCP servers given for one session (ACP `session/new`): their tools live in
    /// the agent's scope and go away with it.
    pub async fn start_session_mcp(
        &self,
        agent: &AgentHandle,
        entries: &[serde_json::Value],
    ) -> Result<(), HostError> {
        if entries.is_empty() {
            return Ok(());
        }
        let options = dsh_mcp::plugin_options(&self.inner.root, &self.inner.services);
        let servers = dsh_mcp::mount_acp_servers(
            agent.scope(),
            &self.inner.services.tools,
            entries,
            &options,
        )
        .await
        .map_err(|e| HostError::Invalid(format!("cannot start the session's MCP servers: {e}")))?;
        // Their prompts become this session's own slash commands (the server scopes sit
        // under the agent's).
        if let Some(commands) = dsh_commands::CommandRegistry::of(&self.inner.root) {
            for server in &servers.servers {
                let task = dsh_mcp::register_prompt_commands(&commands, server);
                server.scope().defer(move || task.abort());
            }
        }
        Ok(())
    }

    /// Status lines of `agent`'s background jobs (`/jobs`).
    pub fn job_lines(&self, agent: &AgentHandle) -> Vec<String> {
        dsh_tool_shell::job_lines(&self.inner.root, agent.id())
    }

    /// Reload outcomes as they happen.
    pub fn reports(&self) -> broadcast::Receiver<ReloadReport> {
        self.inner.reports.subscribe()
    }

    /// The environment variable the configured provider reads its key from: `[model]
    /// api_key_env`, else the provider's own.
    pub fn api_key_env(&self) -> String {
        let state = lock(&self.inner.state);
        if let Some(name) = &state.core.model.api_key_env {
            return name.clone();
        }
        if state.core.model.provider == dsh_llm::openai::PROVIDER {
            dsh_llm::openai::DEFAULT_API_KEY_ENV.to_owned()
        } else {
            "DEEPSEEK_API_KEY".to_owned()
        }
    }

    /// Whether [`SessionHost::api_key_env`] holds a key now.
    pub fn has_api_key(&self) -> bool {
        dsh_secrets::var(&self.api_key_env()).is_some_and(|key| !key.trim().is_empty())
    }

    /// What `/model` (TUI) and the `model` config option (ACP) offer: the
    /// [listed models](Self::listed_models) and the configured model, each once.
    pub fn models(&self) -> Vec<String> {
        let mut models = self.listed_models();
        let name = lock(&self.inner.state).core.model.name.clone();
        if !models.contains(&name) {
            models.push(name);
        }
        models
    }

    /// The model catalog: the built-in adapter's models (none for an embedder's own adapter)
    /// and the `[[model.catalog]]` entries, each once. `dsh exec -m` is checked against it.
    pub fn listed_models(&self) -> Vec<String> {
        let mut models: Vec<String> = if self.inner.custom_adapter {
            Vec::new()
        } else {
            dsh_llm::DeepSeekConfig::default()
                .models
                .iter()
                .map(|m| m.id.clone())
                .collect()
        };
        let state = lock(&self.inner.state);
        models.extend(
            state
                .core
                .model
                .catalog
                .iter()
                .map(|entry| entry.id.clone()),
        );
        drop(state);
        let mut seen = std::collections::HashSet::new();
        models.retain(|m| seen.insert(m.clone()));
        models
    }
}
