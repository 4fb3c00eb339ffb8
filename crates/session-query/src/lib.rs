//! `dsh-session-query`: recall of earlier sessions (context-spec §11).
//!
//! Owns: the query service ([`SessionQuery`]: the corpus of live and stored sessions, surface
//! classes and replacement links, exact event reads), the SQLite FTS5 index (bundled SQLite;
//! literal-phrase search, ranking, snippets), and the five model tools with their exact result
//! layouts and workspace authorization. One plugin: [`SessionQueryPlugin`] (`session-query`).
//! Reads never open a session for appending and never run crash repair.
//! Must not depend on: `dsh-agent`, front-ends.

pub mod export;
pub mod model;
pub mod service;
pub mod tools;

use std::sync::Arc;

use dsh_kernel::Plugin;
use dsh_kernel::PluginError;
use dsh_kernel::Scope;
use dsh_session::JsonlStore;
use dsh_tools::ToolRegistry;
use serde::Deserialize;
use serde::Serialize;

pub use service::IndexConfig;
pub use service::OpenAt;
pub use service::QueryError;
pub use service::SessionQuery;
pub use tools::SECTION;
pub use tools::SECTION_TEXT;
pub use tools::SessionQueryTools;
pub use tools::ToolsConfig;

/// `[plugins.session-query]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionQueryPluginConfig {
    /// Offer the five model tools (the service alone serves exports and UIs).
    pub tools: bool,
    pub max_search_results: usize,
    pub search_timeout_ms: u64,
    pub index: IndexConfig,
}

impl Default for SessionQueryPluginConfig {
    fn default() -> Self {
        let tools = ToolsConfig::default();
        Self {
            tools: true,
            max_search_results: tools.max_search_results,
            search_timeout_ms: tools.search_timeout_ms,
            index: IndexConfig::default(),
        }
    }
}

/// Provides the [`SessionQuery`] service and, when configured, the model tools. Under the
/// host, the stored sessions are those under its home and every live session joins the corpus.
#[derive(Debug, Default)]
pub struct SessionQueryPlugin {
    /// The persisted sessions (`None`: the host's store, or live sessions only).
    pub store: Option<JsonlStore>,
}

impl dsh_plugin::HostPlugin for SessionQueryPlugin {
    const NAME: &'static str = "session-query";
    const ENABLED_BY_DEFAULT: bool = false;
}

impl Plugin for SessionQueryPlugin {
    type Config = SessionQueryPluginConfig;

    fn name(&self) -> &str {
        "session-query"
    }

    fn apply(&self, ctx: &Scope, config: Self::Config) -> Result<(), PluginError> {
        if config.max_search_results == 0 {
            return Err(PluginError::msg(
                "tool-session-query: maxSearchResults must be a positive safe integer",
            ));
        }
        if config.search_timeout_ms == 0 || config.search_timeout_ms > 2_147_483_647 {
            return Err(PluginError::msg(
                "tool-session-query: searchTimeoutMs must be a positive integer no greater than 2147483647",
            ));
        }
        if config.index.path.trim().is_empty() {
            return Err(PluginError::msg(
                "session-query-sqlite: path must be a non-empty string",
            ));
        }
        let host = dsh_plugin::HostServices::of(ctx).ok();
        let store = self
            .store
            .clone()
            .or_else(|| host.as_ref().map(|h| JsonlStore::new(h.info.home.clone())));
        let service = SessionQuery::new(store, config.index.clone())
            .map_err(|e| PluginError::msg(e.message))?;
        ctx.provide::<SessionQuery>(service.clone())?;
        if let Some(host) = &host {
            let live = service.clone();
            host.sessions.attach(ctx, "session-query", move |session| {
                live.register_live(session.context.log());
                Ok(())
            })?;
            if config.tools {
                host.prompts.register_section(
                    ctx,
                    dsh_plugin::Section::new(SECTION.0, dsh_plugin::Slot::Tools, SECTION_TEXT),
                );
            }
        }
        if config.tools {
            let registry = ctx
                .service::<ToolRegistry>()
                .ok_or_else(|| PluginError::msg("no tool registry is installed"))?;
            let tools = SessionQueryTools {
                service: Arc::clone(&service),
                config: ToolsConfig {
                    max_search_results: config.max_search_results,
                    search_timeout_ms: config.search_timeout_ms,
                },
            };
            for definition in tools
                .definitions()
                .map_err(|e| PluginError::msg(e.to_string()))?
            {
                registry
                    .register(ctx, definition)
                    .map_err(|e| PluginError::msg(e.to_string()))?;
            }
        }
        Ok(())
    }
}
