//! `dsh-guard`: advisory and deadline guards on the tool pipeline (upstream
//! `repeat-tool-reminder` and `timeout-policy`).
//!
//! Owns: detecting consecutive identical tool calls per agent and the reminder texts
//! ([`repeat`]), and enforcing each tool's declared `timeoutMs` as a cooperative deadline with
//! the `TOOL_TIMEOUT` failure ([`timeout`]).
//! Does not own: the tools, the pipeline stages themselves.
//! Must not depend on: front-ends, concrete tool crates.

pub mod repeat;
pub mod timeout;

/// `[plugins.repeat-tool-reminder]` (upstream's keys in snake_case).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepeatSettings {
    #[serde(default = "default_thresholds")]
    pub thresholds: Vec<f64>,
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default = "default_preview")]
    pub arguments_preview_chars: f64,
}

fn default_thresholds() -> Vec<f64> {
    vec![3.0, 5.0, 8.0]
}

fn default_preview() -> f64 {
    500.0
}

impl Default for RepeatSettings {
    fn default() -> Self {
        Self {
            thresholds: default_thresholds(),
            include: Vec::new(),
            exclude: Vec::new(),
            arguments_preview_chars: default_preview(),
        }
    }
}

/// The repeat-tool reminder as a host plugin (off by default).
#[derive(Debug, Default)]
pub struct RepeatPlugin;

impl dsh_plugin::Plugin for RepeatPlugin {
    type Config = RepeatSettings;

    fn name(&self) -> &str {
        <Self as dsh_plugin::HostPlugin>::NAME
    }

    fn apply(
        &self,
        ctx: &dsh_kernel::Scope,
        config: RepeatSettings,
    ) -> Result<(), dsh_plugin::PluginError> {
        let repeat = repeat::Repeat::new(&repeat::RepeatConfig {
            thresholds: config.thresholds,
            include: config.include,
            exclude: config.exclude,
            arguments_preview_chars: config.arguments_preview_chars,
        })
        .map_err(|e| dsh_plugin::PluginError::msg(e.to_string()))?;
        let host = dsh_plugin::HostServices::of(ctx)?;
        repeat::install(&host.tools, &host.hooks, ctx, repeat);
        Ok(())
    }
}

impl dsh_plugin::HostPlugin for RepeatPlugin {
    const NAME: &'static str = "repeat-tool-reminder";
    // On: silent until the same call repeats, then advisory only.
    const ENABLED_BY_DEFAULT: bool = true;
}

/// No settings: zero-config like upstream's.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeoutSettings {}

/// The tool-call timeout policy as a host plugin.
#[derive(Debug, Default)]
pub struct TimeoutPlugin;

impl dsh_plugin::Plugin for TimeoutPlugin {
    type Config = TimeoutSettings;

    fn name(&self) -> &str {
        <Self as dsh_plugin::HostPlugin>::NAME
    }

    fn apply(
        &self,
        ctx: &dsh_kernel::Scope,
        _config: TimeoutSettings,
    ) -> Result<(), dsh_plugin::PluginError> {
        let host = dsh_plugin::HostServices::of(ctx)?;
        timeout::install(&host.tools, ctx);
        Ok(())
    }
}

impl dsh_plugin::HostPlugin for TimeoutPlugin {
    const NAME: &'static str = "timeout-policy";
}
