//! `[plugins.compaction]` and `[plugins.tool-result-pruner]`: compaction mounted on the host —
//! the automatic triggers on the loop's hooks, the [`Compaction`] service, and `/compact` in
//! the command registry. The pruner plugin only publishes its settings; compaction runs it as
//! its first phase (`USES` re-applies compaction when the pruner changes).

use std::sync::Arc;

use dsh_commands::CommandRegistry;
use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_plugin::Scope;
use dsh_plugin::invalid_config;
use dsh_token_meter::TokenMeter;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Map;
use serde_json::Value;

use crate::command::register_compact;
use crate::config::BasicCompactionConfig;
use crate::config::ToolResultPruneConfig;
use crate::service::Compaction;
use crate::triggers::install_triggers;

fn threshold_ratio() -> f64 {
    0.8
}
fn max_tokens() -> u64 {
    8192
}
fn one() -> u64 {
    1
}
fn yes() -> bool {
    true
}

/// `[plugins.compaction]` (`BasicCompactionConfig`, snake_case keys).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactionSettings {
    #[serde(default = "threshold_ratio")]
    pub threshold_ratio: f64,
    /// Default 0.16 when neither retention key is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retain_ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retain_tokens: Option<u64>,
    #[serde(default)]
    pub summarization_provider: String,
    #[serde(default)]
    pub summarization_model: String,
    #[serde(default = "max_tokens")]
    pub max_tokens: u64,
    #[serde(default = "one")]
    pub compaction_retries: u64,
    #[serde(default = "one")]
    pub max_overflow_retries: u64,
    /// `[{provider, model, <any key above>}]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_policies: Vec<Map<String, Value>>,
    /// `false`: `/compact` only.
    #[serde(default = "yes")]
    pub auto: bool,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        Self {
            threshold_ratio: threshold_ratio(),
            retain_ratio: None,
            retain_tokens: None,
            summarization_provider: String::new(),
            summarization_model: String::new(),
            max_tokens: max_tokens(),
            compaction_retries: one(),
            max_overflow_retries: one(),
            model_policies: Vec::new(),
            auto: true,
        }
    }
}

/// The compaction plugin.
#[derive(Debug, Default)]
pub struct CompactionPlugin;

impl Plugin for CompactionPlugin {
    type Config = CompactionSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, settings: CompactionSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let value = serde_json::to_value(&settings)
            .map_err(|e| invalid_config(Self::NAME, None, e.to_string()))?;
        let config = BasicCompactionConfig::parse(&value)
            .map_err(|e| invalid_config(Self::NAME, None, e.0))?;
        let meter = ctx
            .service::<TokenMeter>()
            .unwrap_or_else(|| Arc::new(TokenMeter::new()));
        let pruner = ctx.service::<ToolResultPruneConfig>().map(|c| *c);
        let compaction = Arc::new(Compaction::new(config, pruner, meter, None));
        // The listeners are owned by `ctx`: disposing the plugin removes them.
        let _ = install_triggers(&compaction, ctx, &host.hooks);
        ctx.provide(compaction.clone())?;
        if let Some(registry) = CommandRegistry::of(ctx) {
            register_compact(&registry, ctx, compaction).map_err(PluginError::other)?;
        }
        Ok(())
    }
}

impl HostPlugin for CompactionPlugin {
    const NAME: &'static str = "compaction";
    const USES: &'static [&'static str] = &["token-meter", "tool-result-pruner"];
    const EVENT_KINDS: &'static [&'static str] = &[
        crate::vocabulary::COMPACTION_START,
        crate::vocabulary::COMPACTION_SUMMARY,
        crate::vocabulary::COMPACTION_END,
    ];
}

fn threshold_chars() -> u64 {
    8192
}
fn head_chars() -> u64 {
    4096
}
fn tail_chars() -> u64 {
    1024
}

/// `[plugins.tool-result-pruner]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrunerSettings {
    #[serde(default = "threshold_chars")]
    pub threshold_chars: u64,
    #[serde(default = "head_chars")]
    pub head_chars: u64,
    #[serde(default = "tail_chars")]
    pub tail_chars: u64,
}

impl Default for PrunerSettings {
    fn default() -> Self {
        Self {
            threshold_chars: threshold_chars(),
            head_chars: head_chars(),
            tail_chars: tail_chars(),
        }
    }
}

/// Publishes the pruner's validated settings for compaction.
#[derive(Debug, Default)]
pub struct ToolResultPrunerPlugin;

impl Plugin for ToolResultPrunerPlugin {
    type Config = PrunerSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, settings: PrunerSettings) -> Result<(), PluginError> {
        let value = serde_json::to_value(settings)
            .map_err(|e| invalid_config(Self::NAME, None, e.to_string()))?;
        let config = ToolResultPruneConfig::parse(&value)
            .map_err(|e| invalid_config(Self::NAME, None, e.0))?;
        ctx.provide(Arc::new(config))?;
        Ok(())
    }
}

impl HostPlugin for ToolResultPrunerPlugin {
    const NAME: &'static str = "tool-result-pruner";
    const EVENT_KINDS: &'static [&'static str] = &[crate::vocabulary::COMPACTION_PRUNE];
}
