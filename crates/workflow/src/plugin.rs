//! `[plugins.workflows]`: the worker engine on the subagent service, the `workflow` tool and
//! the `ralph` tool.

use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_plugin::Scope;
use dsh_subagent::Subagents;
use serde::Deserialize;
use serde::Serialize;

use crate::engine::EngineConfig;
use crate::engine::WorkflowEngine;
use crate::ralph::RalphConfig;
use crate::tool::WorkflowToolConfig;

/// `[plugins.workflows.ralph]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RalphSettings {
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default = "spawn")]
    pub subagent_provider: String,
    #[serde(default = "rounds")]
    pub max_rounds: u64,
    #[serde(default = "chars")]
    pub max_handoff_chars: u64,
    #[serde(default = "chars")]
    pub max_result_chars: u64,
}

fn yes() -> bool {
    true
}
fn spawn() -> String {
    "spawn".to_owned()
}
fn rounds() -> u64 {
    256
}
fn chars() -> u64 {
    16_384
}

impl Default for RalphSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            subagent_provider: spawn(),
            max_rounds: rounds(),
            max_handoff_chars: chars(),
            max_result_chars: chars(),
        }
    }
}

/// `[plugins.workflows]`: the engine's caps and the `workflow` tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkflowSettings {
    #[serde(default = "spawn")]
    pub provider: String,
    /// 0 = `min(16, max(1, cores − 2))`.
    #[serde(default)]
    pub max_concurrent_agents: usize,
    #[serde(default = "total")]
    pub max_total_agents: u64,
    #[serde(default = "items")]
    pub max_items_per_call: usize,
    #[serde(default = "five_seconds")]
    pub sync_timeout_ms: u64,
    #[serde(default = "five_seconds")]
    pub dispose_grace_ms: u64,
    #[serde(default = "tool_name")]
    pub tool_name: String,
    #[serde(default = "result_chars")]
    pub max_result_chars: usize,
    #[serde(default)]
    pub ralph: RalphSettings,
}

fn total() -> u64 {
    1000
}
fn items() -> usize {
    4096
}
fn five_seconds() -> u64 {
    5000
}
fn tool_name() -> String {
    "workflow".to_owned()
}
fn result_chars() -> usize {
    50_000
}

impl Default for WorkflowSettings {
    fn default() -> Self {
        Self {
            provider: spawn(),
            max_concurrent_agents: 0,
            max_total_agents: total(),
            max_items_per_call: items(),
            sync_timeout_ms: five_seconds(),
            dispose_grace_ms: five_seconds(),
            tool_name: tool_name(),
            max_result_chars: result_chars(),
            ralph: RalphSettings::default(),
        }
    }
}

/// The plugin.
#[derive(Debug, Default)]
pub struct WorkflowPlugin;

impl HostPlugin for WorkflowPlugin {
    const NAME: &'static str = "workflows";
    const USES: &'static [&'static str] = &["subagents"];
    const EVENT_KINDS: &'static [&'static str] = &[
        "tool-workflow/run-start",
        "tool-workflow/agent-start",
        "tool-workflow/agent-end",
        "tool-workflow/run-end",
    ];
}

impl Plugin for WorkflowPlugin {
    type Config = WorkflowSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, config: WorkflowSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let subagents = ctx.service::<Subagents>().ok_or_else(|| {
            PluginError::msg("workflows need the subagents plugin (enable [plugins.subagents])")
        })?;
        let invalid = |path: &str, message: String| {
            dsh_plugin::invalid_config(Self::NAME, Some(path), message)
        };
        let engine = WorkflowEngine::new(
            EngineConfig {
                provider: config.provider,
                max_concurrent_agents: config.max_concurrent_agents,
                max_total_agents: config.max_total_agents,
                max_items_per_call: config.max_items_per_call,
                sync_timeout_ms: config.sync_timeout_ms,
                dispose_grace_ms: config.dispose_grace_ms,
            },
            subagents,
        )
        .map_err(|e| invalid("max_total_agents", e.message))?;
        ctx.provide::<WorkflowEngine>(engine.clone())?;
        crate::tool::install(
            &engine,
            &host.tools,
            Some(&host.prompts),
            ctx,
            WorkflowToolConfig {
                tool_name: config.tool_name,
                max_result_chars: config.max_result_chars,
            },
        )
        .map_err(|e| invalid("max_result_chars", e.message))?;
        if config.ralph.enabled {
            let ralph = config.ralph;
            crate::ralph::install(
                &engine,
                &host.tools,
                Some(&host.prompts),
                ctx,
                RalphConfig {
                    subagent_provider: ralph.subagent_provider,
                    max_rounds: ralph.max_rounds,
                    max_handoff_chars: ralph.max_handoff_chars,
                    max_result_chars: ralph.max_result_chars,
                },
            )
            .map_err(|e| invalid("ralph", e.message))?;
        }
        Ok(())
    }
}
