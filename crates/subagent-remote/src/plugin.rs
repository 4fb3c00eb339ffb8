//! `[plugins.subagent-remote]`: out-of-process providers and their delegation tools. Nothing
//! is registered until a provider is configured; product providers need their own CLIs.

use std::sync::Arc;

use dsh_plugin::HostPlugin;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_plugin::Scope;
use dsh_subagent::SubagentProvider;
use dsh_subagent::Subagents;
use dsh_subagent::tools::SubagentToolConfig;
use serde::Deserialize;
use serde::Serialize;

use crate::acp::AcpConfig;
use crate::acp::AcpProvider;
use crate::claude::ClaudeConfig;
use crate::claude::ClaudeProvider;
use crate::codex::CodexConfig;
use crate::codex::CodexProvider;

/// An ACP agent and the tool name that delegates to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcpRow {
    /// The delegation tool's name (default `subagent_<provider_name>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    #[serde(flatten)]
    pub provider: AcpConfig,
}

/// `[plugins.subagent-remote]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteSettings {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acp: Vec<AcpRow>,
    /// Codex (`subagent_codex`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codex: Option<CodexConfig>,
    /// Claude Code (`subagent_claude_code`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claude_code: Option<ClaudeConfig>,
}

/// The plugin.
#[derive(Debug, Default)]
pub struct RemoteSubagentsPlugin;

impl HostPlugin for RemoteSubagentsPlugin {
    const NAME: &'static str = "subagent-remote";
    const USES: &'static [&'static str] = &["subagents"];
}

fn mount(
    subagents: &Arc<Subagents>,
    ctx: &Scope,
    provider: Arc<dyn SubagentProvider>,
    tool_name: String,
) -> Result<(), PluginError> {
    let name = provider.name().to_owned();
    subagents
        .register_provider(ctx, provider)
        .map_err(|e| PluginError::msg(e.message))?;
    let mut tool = SubagentToolConfig::new(name);
    tool.tool_name = tool_name;
    tool.max_depth = Some(serde_json::Value::from("provider-managed"));
    dsh_subagent::tools::subagent::install(subagents, ctx, tool)
        .map_err(|e| PluginError::msg(e.message))
}

impl Plugin for RemoteSubagentsPlugin {
    type Config = RemoteSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, config: RemoteSettings) -> Result<(), PluginError> {
        if config.acp.is_empty() && config.codex.is_none() && config.claude_code.is_none() {
            return Ok(());
        }
        let subagents = ctx.service::<Subagents>().ok_or_else(|| {
            PluginError::msg(
                "subagent-remote needs the subagents plugin (enable [plugins.subagents])",
            )
        })?;
        let invalid = |path: String, e: dsh_subagent::SubagentError| {
            dsh_plugin::invalid_config(Self::NAME, Some(&path), e.message)
        };
        for (index, row) in config.acp.into_iter().enumerate() {
            let tool_name = row
                .tool_name
                .clone()
                .unwrap_or_else(|| format!("subagent_{}", row.provider.provider_name));
            let provider =
                AcpProvider::new(row.provider).map_err(|e| invalid(format!("acp.{index}"), e))?;
            mount(&subagents, ctx, provider, tool_name)?;
        }
        if let Some(codex) = config.codex {
            let provider = CodexProvider::new(codex).map_err(|e| invalid("codex".into(), e))?;
            mount(&subagents, ctx, provider, "subagent_codex".to_owned())?;
        }
        if let Some(claude) = config.claude_code {
            let provider =
                ClaudeProvider::new(claude).map_err(|e| invalid("claude_code".into(), e))?;
            mount(&subagents, ctx, provider, "subagent_claude_code".to_owned())?;
        }
        Ok(())
    }
}
