//! Checks a layered configuration against the plugin table: unknown top-level tables, unknown
//! plugins and unknown or mistyped keys in any table are errors naming `file:line: key`.

use std::marker::PhantomData;

use dsh_kernel::AnyPlugin;
use dsh_kernel::Plugin;
use dsh_kernel::PluginError;
use dsh_kernel::Scope;
use dsh_plugin::PluginSpec;
use serde::de::DeserializeOwned;
use serde_json::Map;
use serde_json::Value;

use crate::config::Config;
use crate::config::ConfigError;
use crate::config::ConfigErrors;
use crate::core::ModelSettings;
use crate::core::PromptSettings;
use crate::core::TOP_LEVEL;
use crate::core::ToolsSettings;

/// The host's own tables, typed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CoreSettings {
    pub model: ModelSettings,
    pub tools: ToolsSettings,
    pub prompt: PromptSettings,
}

/// One plugin's effective state: whether it mounts and the JSON it is applied with.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginState {
    pub enabled: bool,
    pub config: Value,
}

/// A configuration checked against a table: the core tables and every plugin's state.
#[derive(Debug, Clone)]
pub struct Checked {
    pub core: CoreSettings,
    pub plugins: Vec<PluginState>,
}

/// A kernel plugin that only parses, to check a core table with the kernel's located errors.
struct Table<T>(&'static str, PhantomData<fn() -> T>);

impl<T: DeserializeOwned + Send + Sync + 'static> Plugin for Table<T> {
    type Config = T;
    fn name(&self) -> &str {
        self.0
    }
    fn apply(&self, _ctx: &Scope, _config: T) -> Result<(), PluginError> {
        Ok(())
    }
}

fn parse_table<T: DeserializeOwned + Default + Send + Sync + 'static>(
    config: &Config,
    name: &'static str,
    errors: &mut Vec<ConfigError>,
) -> T {
    let value = config
        .get(name)
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    let checker = Table::<T>(name, PhantomData);
    if let Err(error) = AnyPlugin::check_config(&checker, &value) {
        errors.push(located(config, name, &[], error));
        return T::default();
    }
    serde_json::from_value(value).unwrap_or_default()
}

/// Maps a plugin's config error onto the key it is about (`table` is `plugins.<name>` or a
/// core table; `also` maps folded-in fields back to their own paths).
fn located(config: &Config, table: &str, also: &[(&str, &str)], error: PluginError) -> ConfigError {
    match error {
        PluginError::InvalidConfig { path, message, .. } => {
            let key = match path.as_deref() {
                None => table.to_owned(),
                Some(path) => {
                    let (head, rest) = path.split_once('.').unwrap_or((path, ""));
                    match also.iter().find(|(field, _)| *field == head) {
                        Some((_, real)) if rest.is_empty() => (*real).to_owned(),
                        Some((_, real)) => format!("{real}.{rest}"),
                        None => format!("{table}.{path}"),
                    }
                }
            };
            config.error_at(&key, message)
        }
        other => config.error_at(table, other.to_string()),
    }
}

/// The state of `spec` under `config` (errors go to `errors`, the state is then a default).
pub fn plugin_state(
    config: &Config,
    spec: &PluginSpec,
    errors: &mut Vec<ConfigError>,
) -> PluginState {
    let table_key = format!("plugins.{}", spec.name);
    let mut table = match config.get(&table_key) {
        None => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(other) => {
            errors.push(config.error_at(&table_key, format!("must be a table, not {other}")));
            Map::new()
        }
    };
    let enabled = match table.remove("enabled") {
        None => spec.enabled_by_default,
        Some(Value::Bool(enabled)) => enabled,
        Some(other) => {
            errors.push(config.error_at(
                &format!("{table_key}.enabled"),
                format!("must be true or false, not {other}"),
            ));
            spec.enabled_by_default
        }
    };
    for (field, path) in spec.also {
        if let Some(value) = config.get(path) {
            table.insert((*field).to_owned(), value.clone());
        }
    }
    let state = PluginState {
        enabled,
        config: Value::Object(table),
    };
    // Every table is parsed, enabled or not: a typo in a disabled plugin still fails.
    if let Err(error) = spec.plugin().check_config(&state.config) {
        errors.push(located(config, &table_key, spec.also, error));
    }
    state
}

/// Checks `config` against `table`; every problem is reported at once.
pub fn check(config: &Config, table: &[PluginSpec]) -> Result<Checked, ConfigErrors> {
    let mut errors = Vec::new();
    for key in config.tree().keys() {
        if !TOP_LEVEL.contains(&key.as_str()) {
            errors.push(config.error_at(
                key,
                format!("unknown table (expected one of {})", TOP_LEVEL.join(", ")),
            ));
        }
    }
    match config.get("plugins") {
        None => {}
        Some(Value::Object(plugins)) => {
            for name in plugins.keys() {
                if !table.iter().any(|spec| spec.name == name) {
                    let known: Vec<&str> = table.iter().map(|spec| spec.name).collect();
                    errors.push(config.error_at(
                        &format!("plugins.{name}"),
                        format!("unknown plugin (known: {})", known.join(", ")),
                    ));
                }
            }
        }
        Some(_) => errors.push(config.error_at("plugins", "must be a table of plugin tables")),
    }
    match config.get("mcp") {
        None => {}
        Some(Value::Object(mcp)) => {
            for key in mcp.keys().filter(|k| k.as_str() != "servers") {
                errors.push(config.error_at(
                    &format!("mcp.{key}"),
                    "unknown key (the mcp table holds only [[mcp.servers]])",
                ));
            }
        }
        Some(_) => errors.push(config.error_at("mcp", "must be a table")),
    }
    let core = CoreSettings {
        model: parse_table(config, "model", &mut errors),
        tools: parse_table(config, "tools", &mut errors),
        prompt: parse_table(config, "prompt", &mut errors),
    };
    if !core.model.catalog.is_empty() {
        for (index, entry) in core.model.catalog.iter().enumerate() {
            if entry.id.trim().is_empty() {
                errors.push(config.error_at(
                    &format!("model.catalog.{index}.id"),
                    "must be a non-empty model id",
                ));
            }
        }
    }
    if dsh_llm::provider(&core.model.provider).is_none() {
        let known: Vec<&str> = dsh_llm::PROVIDERS.iter().map(|p| p.id).collect();
        errors.push(config.error_at(
            "model.provider",
            format!(
                "unknown provider {:?} (known: {})",
                core.model.provider,
                known.join(", ")
            ),
        ));
    }
    let plugins = table
        .iter()
        .map(|spec| plugin_state(config, spec, &mut errors))
        .collect();
    if errors.is_empty() {
        Ok(Checked { core, plugins })
    } else {
        Err(ConfigErrors(errors))
    }
}

/// A plugin that refused its configuration when it applied (a value its own checks reject),
/// as an error located like every other: at the field it named, else at its table
/// (`file:line: plugins.<name>[.<field>]: <its message>`).
pub(crate) fn refused(config: &Config, spec: &PluginSpec, error: PluginError) -> ConfigError {
    let mut inner = error;
    while let PluginError::Apply { source, .. } = inner {
        inner = *source;
    }
    located(config, &format!("plugins.{}", spec.name), spec.also, inner)
}
