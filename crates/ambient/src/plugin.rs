//! `[plugins.time-context]` and `[plugins.tmux-context]` on the host. Both are off by default
//! (upstream ships them unmounted); enabling one mounts its prepended pre-step listener for
//! every agent of the composition.

use std::sync::Arc;

use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_plugin::Scope;
use dsh_plugin::invalid_config;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Map;
use serde_json::Value;
use serde_json::json;

use crate::time::TimeContext;
use crate::time::TimeContextConfig;
use crate::tmux::LocalShell;
use crate::tmux::TmuxContext;
use crate::tmux::parse_tmux_config;

/// `[plugins.time-context]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeContextSettings {
    /// An IANA zone (`UTC` or `Area/Location`); default: the process zone at load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// `0` (default): a reading every step; otherwise at most one per interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_interval_ms: Option<Value>,
}

/// The time-context plugin.
#[derive(Debug, Default)]
pub struct TimeContextPlugin;

impl Plugin for TimeContextPlugin {
    type Config = TimeContextSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, settings: TimeContextSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let mut map = Map::new();
        if let Some(zone) = settings.time_zone {
            map.insert("timeZone".into(), Value::String(zone));
        }
        if let Some(interval) = settings.refresh_interval_ms {
            map.insert("refreshIntervalMs".into(), interval);
        }
        let config = TimeContextConfig::parse(&Value::Object(map))
            .map_err(|e| invalid_config(Self::NAME, None, e.0))?;
        let time = TimeContext::new(config, None);
        // Owned by `ctx`: disposing the plugin removes the listener.
        let _ = time.install(ctx, &host.hooks);
        ctx.provide(time)?;
        Ok(())
    }
}

impl HostPlugin for TimeContextPlugin {
    const NAME: &'static str = crate::time::TIME_PLUGIN;
    const ENABLED_BY_DEFAULT: bool = false;
}

/// `[plugins.tmux-context]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TmuxContextSettings {
    /// `0` (default): checked at every turn's first step; otherwise at most once per interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_interval_ms: Option<Value>,
}

/// The tmux-context plugin. The location query runs `sh` with the filtered child
/// environment (no provider key), never a model-written command.
#[derive(Debug, Default)]
pub struct TmuxContextPlugin;

impl Plugin for TmuxContextPlugin {
    type Config = TmuxContextSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, settings: TmuxContextSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let value = match settings.refresh_interval_ms {
            Some(interval) => json!({ "refreshIntervalMs": interval }),
            None => json!({}),
        };
        let interval =
            parse_tmux_config(&value).map_err(|e| invalid_config(Self::NAME, None, e.0))?;
        let tmux = TmuxContext::new(Arc::new(LocalShell::default()), interval, None);
        let _ = tmux.install(ctx, &host.hooks);
        ctx.provide(tmux)?;
        Ok(())
    }
}

impl HostPlugin for TmuxContextPlugin {
    const NAME: &'static str = crate::tmux::TMUX_PLUGIN;
    const ENABLED_BY_DEFAULT: bool = false;
}
