//! `dsh-terminal`: persistent terminals on a real PTY (hooks-and-tools-spec §E).
//!
//! Owns: the [`TerminalService`] (ids `pty-<n>`, owner isolation, names, one active send per
//! session), the `terminal-bash` backend on `portable-pty` (prompt marker, readiness
//! detection, scrollback, foreground signals, closing the whole owned process tree), the six
//! `terminal_*` tools with their exact texts, and persistent `bash`. Two plugins:
//! [`TerminalPlugin`] (`terminal`) and [`PersistentBashPlugin`] (`bash-persistent`).
//! A terminal runs under the same sandbox wrapper and scrubbed environment as `bash`: both
//! come from the shell crate's per-call [`ContextResolver`].
//! Must not depend on: `dsh-agent`, `dsh-session`, front-ends.

pub mod backend;
pub mod config;
mod error;
pub mod persistent;
mod procfs;
pub mod pty;
pub mod sanitize;
pub mod service;
pub mod tools;

use std::sync::Arc;

use dsh_kernel::Plugin;
use dsh_kernel::PluginError;
use dsh_kernel::Scope;
use dsh_tool_shell::JobsRuntime;
pub use dsh_tool_shell::register::ContextResolver;
use dsh_tools::ToolRegistry;
use serde::Deserialize;
use serde::Serialize;

pub use backend::BashBackend;
pub use config::BashBackendConfig;
pub use config::PersistentBashConfig;
pub use config::TerminalToolsConfig;
pub use error::ConfigError;
pub use error::TerminalError;
pub use persistent::PersistentBash;
pub use service::TerminalService;
pub use tools::SECTION;
pub use tools::SECTION_TEXT;
pub use tools::TerminalTools;

/// `[plugins.terminal]`: the tools' settings plus the bash backend's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TerminalPluginConfig {
    pub enable_run_in_background: bool,
    pub max_result_bytes: usize,
    pub backend: BashBackendConfig,
}

impl Default for TerminalPluginConfig {
    fn default() -> Self {
        let tools = TerminalToolsConfig::default();
        Self {
            enable_run_in_background: tools.enable_run_in_background,
            max_result_bytes: tools.max_result_bytes,
            backend: BashBackendConfig::default(),
        }
    }
}

impl TerminalPluginConfig {
    fn tools(&self) -> TerminalToolsConfig {
        TerminalToolsConfig {
            enable_run_in_background: self.enable_run_in_background,
            max_result_bytes: self.max_result_bytes,
        }
    }
}

fn registry(ctx: &Scope) -> Result<Arc<ToolRegistry>, PluginError> {
    ctx.service::<ToolRegistry>()
        .ok_or_else(|| PluginError::msg("no tool registry is installed"))
}

/// The composition's terminal service: the one already visible from `ctx`, or a new one
/// provided on `ctx` with the bash backend registered (closed when `ctx` is disposed).
pub fn service_for(
    ctx: &Scope,
    backend: &BashBackendConfig,
) -> Result<Arc<TerminalService>, PluginError> {
    if let Some(service) = ctx.service::<TerminalService>() {
        return Ok(service);
    }
    backend.check().map_err(|e| PluginError::msg(e.0))?;
    let service = TerminalService::new();
    let unregister = service.register_backend(
        &backend.backend_type,
        Arc::new(BashBackend::new(backend.clone())),
    );
    ctx.provide::<TerminalService>(service.clone())?;
    let disposed = service.clone();
    ctx.defer(move || {
        unregister();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { disposed.dispose().await });
        }
    });
    Ok(service)
}

/// The `terminal_*` tools. `resolve` and `jobs` are taken from the host when unset.
#[derive(Default)]
pub struct TerminalPlugin {
    /// The shell crate's per-call context (cwd, sandbox policy, scrubbed environment).
    pub resolve: Option<ContextResolver>,
    /// The jobs runtime for background sends, when composed.
    pub jobs: Option<Arc<JobsRuntime>>,
}

impl std::fmt::Debug for TerminalPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TerminalPlugin").finish_non_exhaustive()
    }
}

/// The per-call shell context of a host session: its cwd and id, dsh's home, its log, and its
/// live permissions over the host's standing sandbox settings (exactly what `bash` uses).
pub fn host_resolver(ctx: &Scope, tool: &'static str) -> Result<ContextResolver, PluginError> {
    let host = dsh_plugin::HostServices::of(ctx)?;
    let permissions = ctx.service::<dsh_plugin::DefaultPermissions>().map_or_else(
        || dsh_plugin::Permissions::for_mode(dsh_plugin::SandboxMode::WorkspaceWrite),
        |p| p.0,
    );
    let mut standing = dsh_tool_shell::SandboxConfig::new(permissions.sandbox);
    standing.approval = permissions.approval;
    if let Some(network) = ctx.service::<dsh_plugin::SandboxNetwork>() {
        standing.network = network.0;
    }
    if let Some(limits) = ctx.service::<dsh_plugin::SandboxLimits>() {
        standing.limits = limits.0;
    }
    let home = host.info.home.clone();
    Ok(Arc::new(move |run: &dsh_tools::ToolRun| {
        let session = dsh_plugin::SessionContext::for_run(run, tool)?;
        let mut context =
            dsh_tool_shell::ShellContext::new(session.cwd().to_path_buf(), session.id().to_owned());
        context.dsh_home = Some(home.clone());
        context.session_jsonl = session.log_path();
        let live = session.permissions();
        context.sandbox = Some(
            standing
                .policy_in(live.sandbox, session.cwd())
                .with_approval(live.approval),
        );
        Ok(context)
    }))
}

impl Plugin for TerminalPlugin {
    type Config = TerminalPluginConfig;

    fn name(&self) -> &str {
        "terminal"
    }

    fn apply(&self, ctx: &Scope, config: Self::Config) -> Result<(), PluginError> {
        let tools_config = config.tools();
        tools_config.check().map_err(|e| PluginError::msg(e.0))?;
        let service = service_for(ctx, &config.backend)?;
        let resolve = match &self.resolve {
            Some(resolve) => resolve.clone(),
            None => host_resolver(ctx, "terminal_open")?,
        };
        let tools = TerminalTools {
            service,
            resolve,
            jobs: self.jobs.clone().or_else(|| ctx.service::<JobsRuntime>()),
            config: tools_config,
        };
        let registry = registry(ctx)?;
        for definition in tools
            .definitions()
            .map_err(|e| PluginError::msg(e.to_string()))?
        {
            registry
                .register(ctx, definition)
                .map_err(|e| PluginError::msg(e.to_string()))?;
        }
        if let Ok(host) = dsh_plugin::HostServices::of(ctx) {
            host.prompts.register_section(
                ctx,
                dsh_plugin::Section::new(SECTION.0, dsh_plugin::Slot::Tools, SECTION_TEXT),
            );
        }
        Ok(())
    }
}

impl dsh_plugin::HostPlugin for TerminalPlugin {
    const NAME: &'static str = "terminal";
    const ENABLED_BY_DEFAULT: bool = false;
    const USES: &'static [&'static str] = &["jobs", "sandbox", "approval"];
}

/// `[plugins.bash-persistent]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PersistentBashPluginConfig {
    pub timeout_ms: Option<u64>,
    pub max_output_chars: Option<usize>,
    pub description: Option<String>,
    /// The backend, when no terminal service is composed yet.
    pub backend: BashBackendConfig,
}

/// Persistent `bash` in place of the one-shot `bash`: under the host it is registered in each
/// session's own layer, where it shadows the global one-shot `bash`.
#[derive(Default)]
pub struct PersistentBashPlugin {
    pub resolve: Option<ContextResolver>,
}

impl std::fmt::Debug for PersistentBashPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentBashPlugin")
            .finish_non_exhaustive()
    }
}

impl dsh_plugin::HostPlugin for PersistentBashPlugin {
    const NAME: &'static str = "bash-persistent";
    const ENABLED_BY_DEFAULT: bool = false;
    const USES: &'static [&'static str] = &["sandbox", "approval"];
}

impl Plugin for PersistentBashPlugin {
    type Config = PersistentBashPluginConfig;

    fn name(&self) -> &str {
        "bash-persistent"
    }

    fn apply(&self, ctx: &Scope, config: Self::Config) -> Result<(), PluginError> {
        let defaults = PersistentBashConfig::default();
        let tool_config = PersistentBashConfig {
            backend_type: config.backend.backend_type.clone(),
            timeout_ms: config.timeout_ms.unwrap_or(defaults.timeout_ms),
            max_output_chars: config.max_output_chars.unwrap_or(defaults.max_output_chars),
            description: config.description.unwrap_or(defaults.description),
        };
        tool_config.check().map_err(|e| PluginError::msg(e.0))?;
        let service = service_for(ctx, &config.backend)?;
        let (resolve, host) = match &self.resolve {
            Some(resolve) => (resolve.clone(), None),
            None => (
                host_resolver(ctx, "bash")?,
                Some(dsh_plugin::HostServices::of(ctx)?),
            ),
        };
        let tool = PersistentBash::new(service, resolve, tool_config);
        let definition = Arc::new(
            tool.definition()
                .map_err(|e| PluginError::msg(e.to_string()))?,
        );
        let registry = registry(ctx)?;
        match host {
            // Each session's own layer: it shadows the host's global one-shot `bash`.
            Some(host) => {
                host.sessions
                    .attach(ctx, "bash-persistent", move |session| {
                        registry
                            .register_arc(session.scope, definition.clone())
                            .map(drop)
                            .map_err(|e| PluginError::msg(e.to_string()))
                    })?;
            }
            None => {
                registry
                    .register_arc(ctx, definition)
                    .map_err(|e| PluginError::msg(e.to_string()))?;
            }
        }
        Ok(())
    }
}
