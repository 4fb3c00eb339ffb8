//! A plugin's line in the host's table.

use std::sync::Arc;

use dsh_kernel::AnyPlugin;
use dsh_kernel::Plugin;
use dsh_kernel::PluginError;
use serde::Serialize;
use serde_json::Value;

/// A capability the host can mount from `[plugins.<NAME>]`. The kernel's [`Plugin`] does the
/// work (`apply(ctx, config)` registers everything through `ctx`); this trait adds what the
/// host's table needs to know. The config type must reject unknown keys
/// (`#[serde(deny_unknown_fields)]`), and its `Default` is the built-in layer that
/// `dsh config show` prints.
pub trait HostPlugin: Plugin<Config: Serialize + Default> + Default {
    /// The plugin's name: its `[plugins.<NAME>]` table and its scope's name.
    const NAME: &'static str;
    /// Whether it mounts when its table says nothing about `enabled`.
    const ENABLED_BY_DEFAULT: bool = true;
    /// Plugins whose services this one reads at apply time: re-applying one of them
    /// re-applies this one too (after it).
    const USES: &'static [&'static str] = &[];
    /// Keys outside `[plugins.<NAME>]` folded into this plugin's config, as
    /// `(field, dotted path)`: e.g. `("servers", "mcp.servers")`.
    const ALSO: &'static [(&'static str, &'static str)] = &[];
    /// The event kinds this plugin owns: every type it appends to a session log beyond the core
    /// vocabulary (`dsh_session::kind`). Declare them next to the presenter, in the plugin's
    /// own crate. The host refuses a table where a declared kind is malformed or a core one,
    /// refuses to resume a log holding a non-ignorable kind nobody declares (mounted or not),
    /// and in debug builds asserts that every appended kind is declared.
    const EVENT_KINDS: &'static [&'static str] = &[];
}

/// The event kinds the plugin framework itself appends for every session (the permission
/// state, `SessionContext::set_permissions`).
pub const PERMISSION_EVENT_KINDS: &[&str] =
    &["permission/preset", "sandbox/mode", "approval/policy"];

/// One line of the host's plugin table.
#[derive(Clone, Copy)]
pub struct PluginSpec {
    pub name: &'static str,
    pub enabled_by_default: bool,
    pub uses: &'static [&'static str],
    pub also: &'static [(&'static str, &'static str)],
    pub event_kinds: &'static [&'static str],
    make: fn() -> Arc<dyn AnyPlugin>,
    defaults: fn() -> Result<Value, serde_json::Error>,
}

impl std::fmt::Debug for PluginSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginSpec")
            .field("name", &self.name)
            .field("enabled_by_default", &self.enabled_by_default)
            .field("uses", &self.uses)
            .field("event_kinds", &self.event_kinds)
            .finish_non_exhaustive()
    }
}

impl PluginSpec {
    /// The table line of `P`.
    pub fn of<P: HostPlugin>() -> Self {
        Self {
            name: P::NAME,
            enabled_by_default: P::ENABLED_BY_DEFAULT,
            uses: P::USES,
            also: P::ALSO,
            event_kinds: P::EVENT_KINDS,
            make: || Arc::new(P::default()),
            defaults: || serde_json::to_value(P::Config::default()),
        }
    }

    /// A fresh plugin value to mount.
    pub fn plugin(&self) -> Arc<dyn AnyPlugin> {
        (self.make)()
    }

    /// The config's built-in defaults as JSON (an object for table-shaped configs).
    pub fn defaults(&self) -> Result<Value, PluginError> {
        (self.defaults)().map_err(|e| invalid_config(self.name, None, e.to_string()))
    }
}

/// A [`PluginError::InvalidConfig`] for `plugin` at the dotted `path` (relative to its table).
pub fn invalid_config(plugin: &str, path: Option<&str>, message: impl Into<String>) -> PluginError {
    PluginError::InvalidConfig {
        plugin: plugin.to_owned(),
        path: path.map(str::to_owned),
        message: message.into(),
    }
}
