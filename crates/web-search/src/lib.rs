//! `dsh-web-search`: the `web_search` tool and its providers (hooks-and-tools-spec §F).
//!
//! Owns: the search seam ([`WebSearch`]: provider registry, per-call selection, result cap),
//! the DeepSeek (Anthropic-compatible native search), Exa and Perplexity providers over HTTPS
//! (redirects are errors; keys from config or the environment, never logged), the tool with
//! multi-query merging and its exact output text. One plugin: [`WebSearchPlugin`]
//! (`web-search`); with no usable provider the tool is not offered at all.
//! Must not depend on: `dsh-agent`, `dsh-session`, front-ends.

pub mod providers;
pub mod service;
pub mod tool;

use dsh_kernel::Plugin;
use dsh_kernel::PluginError;
use dsh_kernel::Scope;
use dsh_tools::ToolRegistry;
use serde::Deserialize;
use serde::Serialize;

pub use providers::DeepSeekConfig;
pub use providers::ExaConfig;
pub use providers::PerplexityConfig;
pub use service::WebSearch;
pub use tool::SECTION;
pub use tool::SearchConfigError;
pub use tool::SearchToolConfig;
pub use tool::SessionEvents;
pub use tool::section_text;

/// The fetch tool the prompt may point to (`dsh-tool-web`'s, not a dependency of this crate).
const FETCH_TOOL: &str = "web_fetch";

/// `[plugins.web-search]`: selection, the tool's limits, and one table per provider (a
/// provider is registered only when its table is present).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebSearchPluginConfig {
    /// The provider id to use (else `DSH_WEB_SEARCH_PROVIDER`, else the only usable one).
    pub search_provider: Option<String>,
    /// Whether the prompt points to `web_fetch` for reading a result in full; it does only
    /// while the `web` plugin offers that tool.
    pub fetch: bool,
    pub search_max_results: usize,
    pub search_max_queries: usize,
    pub search_timeout_ms: u64,
    pub deepseek: Option<DeepSeekConfig>,
    pub exa: Option<ExaConfig>,
    pub perplexity: Option<PerplexityConfig>,
}

impl Default for WebSearchPluginConfig {
    fn default() -> Self {
        let tool = SearchToolConfig::default();
        Self {
            search_provider: None,
            fetch: tool.fetch,
            search_max_results: tool.search_max_results,
            search_max_queries: tool.search_max_queries,
            search_timeout_ms: tool.search_timeout_ms,
            deepseek: None,
            exa: None,
            perplexity: None,
        }
    }
}

impl WebSearchPluginConfig {
    pub fn tool(&self) -> SearchToolConfig {
        SearchToolConfig {
            search: true,
            fetch: self.fetch,
            search_max_results: self.search_max_results,
            search_max_queries: self.search_max_queries,
            search_timeout_ms: self.search_timeout_ms,
        }
    }
}

/// Provides [`WebSearch`] and, when a provider is usable, `web_search`.
#[derive(Debug, Default)]
pub struct WebSearchPlugin;

impl Plugin for WebSearchPlugin {
    type Config = WebSearchPluginConfig;

    fn name(&self) -> &str {
        "web-search"
    }

    fn apply(&self, ctx: &Scope, config: Self::Config) -> Result<(), PluginError> {
        let tool_config = config.tool();
        tool_config
            .check()
            .map_err(|e| PluginError::msg(e.to_string()))?;
        let configured = config
            .search_provider
            .clone()
            .or_else(|| std::env::var("DSH_WEB_SEARCH_PROVIDER").ok());
        let web = WebSearch::new(configured);
        for provider in providers::providers(config.deepseek, config.exa, config.perplexity) {
            web.register(provider)
                .map_err(|e| PluginError::msg(e.message))?;
        }
        ctx.provide::<WebSearch>(web.clone())?;
        if !web.any_available() {
            tracing::debug!("no usable web search provider: web_search is not offered");
            return Ok(());
        }
        let registry = ctx
            .service::<ToolRegistry>()
            .ok_or_else(|| PluginError::msg("no tool registry is installed"))?;
        // The prompt points to `web_fetch` only when a model can call it: `fetch = true` with
        // the `web` plugin off would promise a tool that does not exist. (`web` is applied
        // before this plugin, so its tool is registered by now.)
        let fetch_offered = tool_config.fetch && registry.get(FETCH_TOOL, Some(ctx)).is_some();
        if let Ok(host) = dsh_plugin::HostServices::of(ctx) {
            host.prompts.register_section(
                ctx,
                dsh_plugin::Section::new(
                    SECTION.0,
                    dsh_plugin::Slot::Tools,
                    section_text(tool_config.search_max_queries, fetch_offered),
                ),
            );
        }
        let definition =
            tool::definition(web, tool_config).map_err(|e| PluginError::msg(e.to_string()))?;
        registry
            .register(ctx, definition)
            .map_err(|e| PluginError::msg(e.to_string()))?;
        Ok(())
    }
}

impl dsh_plugin::HostPlugin for WebSearchPlugin {
    const NAME: &'static str = "web-search";
    const EVENT_KINDS: &'static [&'static str] = &["web/deepseek-search-llm-request"];
}
