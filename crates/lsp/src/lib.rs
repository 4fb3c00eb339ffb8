//! `dsh-lsp`: code intelligence through language servers (hooks-and-tools-spec §D).
//!
//! Owns: the provider seam ([`LspService`]: extension routing, all-or-nothing registration),
//! the stdio provider ([`StdioProvider`]: one server process per workspace, JSON-RPC framing,
//! serial queries, cancellation, one retry, bounded shutdown), result normalisation, and the
//! `lsp` tool with its rendering and caps. One plugin: [`LspPlugin`] (`lsp`).
//! A language server gets the scrubbed environment (no secrets, no `DSH_*`) and runs in the
//! canonical workspace; nothing it sends can edit files (`workspace/applyEdit` is refused).
//! Must not depend on: `dsh-agent`, front-ends.

mod error;
pub mod render;
pub mod service;
pub mod stdio;
pub mod tool;
pub mod translate;

use std::collections::BTreeMap;
use std::sync::Arc;

use dsh_kernel::Plugin;
use dsh_kernel::PluginError;
use dsh_kernel::Scope;
use dsh_tools::ToolRegistry;
use serde::Deserialize;
use serde::Serialize;

pub use error::LspConfigError;
pub use error::LspError;
pub use service::LspProvider;
pub use service::LspService;
pub use stdio::ServerConfig;
pub use stdio::StdioProvider;
pub use tool::LspToolConfig;
pub use tool::SECTION;
pub use tool::SECTION_TEXT;
pub use tool::WorkspaceResolver;

/// `[plugins.lsp]`: the tool's settings and the stdio servers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LspPluginConfig {
    #[serde(default = "defaults::max_locations")]
    pub max_locations: usize,
    #[serde(default = "defaults::max_result_chars")]
    pub max_result_chars: usize,
    #[serde(default = "defaults::timeout_ms")]
    pub timeout_ms: u64,
    /// Provider id → server.
    #[serde(default)]
    pub servers: BTreeMap<String, ServerConfig>,
}

mod defaults {
    pub fn max_locations() -> usize {
        100
    }
    pub fn max_result_chars() -> usize {
        16_000
    }
    pub fn timeout_ms() -> u64 {
        60_000
    }
}

impl Default for LspPluginConfig {
    fn default() -> Self {
        Self {
            max_locations: defaults::max_locations(),
            max_result_chars: defaults::max_result_chars(),
            timeout_ms: defaults::timeout_ms(),
            servers: BTreeMap::new(),
        }
    }
}

/// The LSP service, the configured stdio servers and the `lsp` tool. The workspace of a call
/// is its session's cwd (the host's session context when `workspace` is unset).
#[derive(Default)]
pub struct LspPlugin {
    pub workspace: Option<WorkspaceResolver>,
}

impl std::fmt::Debug for LspPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LspPlugin").finish_non_exhaustive()
    }
}

impl dsh_plugin::HostPlugin for LspPlugin {
    const NAME: &'static str = "lsp";
    const ENABLED_BY_DEFAULT: bool = false;
}

impl Plugin for LspPlugin {
    type Config = LspPluginConfig;

    fn name(&self) -> &str {
        "lsp"
    }

    fn apply(&self, ctx: &Scope, config: Self::Config) -> Result<(), PluginError> {
        let tool_config = LspToolConfig {
            max_locations: config.max_locations,
            max_result_chars: config.max_result_chars,
            timeout_ms: config.timeout_ms,
        };
        tool_config
            .check()
            .map_err(|e| PluginError::msg(e.to_string()))?;
        if config.servers.is_empty() {
            return Err(PluginError::msg(
                "lsp-stdio: servers must contain at least one server",
            ));
        }
        for (id, server) in &config.servers {
            server
                .check(id)
                .map_err(|e| PluginError::msg(e.to_string()))?;
        }
        let service = LspService::new();
        for (id, server) in config.servers {
            let extensions: Vec<(String, String)> = server
                .extension_to_language
                .iter()
                .map(|(e, l)| (e.clone(), l.clone()))
                .collect();
            let provider = Arc::new(StdioProvider::new(server));
            let unregister = service
                .register_provider(&id, &extensions, provider.clone())
                .map_err(|e| PluginError::msg(e.message))?;
            ctx.defer(move || {
                unregister();
                match tokio::runtime::Handle::try_current() {
                    Ok(runtime) => {
                        runtime.spawn(async move { provider.dispose().await });
                    }
                    Err(_) => provider.kill_all(),
                }
            });
        }
        ctx.provide::<LspService>(service.clone())?;
        let registry = ctx
            .service::<ToolRegistry>()
            .ok_or_else(|| PluginError::msg("no tool registry is installed"))?;
        let workspace: WorkspaceResolver = match &self.workspace {
            Some(workspace) => workspace.clone(),
            None => Arc::new(|run: &dsh_tools::ToolRun| {
                dsh_plugin::SessionContext::for_run(run, "lsp")
                    .ok()
                    .map(|session| session.cwd().to_path_buf())
            }),
        };
        if let Ok(host) = dsh_plugin::HostServices::of(ctx) {
            host.prompts.register_section(
                ctx,
                dsh_plugin::Section::new(SECTION.0, dsh_plugin::Slot::Tools, SECTION_TEXT),
            );
        }
        let definition = tool::definition(service, workspace, tool_config)
            .map_err(|e| PluginError::msg(e.to_string()))?;
        registry
            .register(ctx, definition)
            .map_err(|e| PluginError::msg(e.to_string()))?;
        Ok(())
    }
}
