//! Plugins: a Rust type with a name, a config type and `apply(ctx, config)`. Mounting one from
//! a JSON config creates its Plugin scope; reapplying (hot reload) is dispose + apply.

use std::sync::{Arc, Mutex};

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::PluginError;
use dsh_sync::lock;

use crate::scope::{Scope, ScopeKind};

/// A plugin. `apply` registers everything through `ctx` (services, listeners, `defer`), so
/// disposing `ctx` undoes the whole instance.
pub trait Plugin: Send + Sync + 'static {
    /// Its configuration, deserialized from the JSON the plugin is mounted with.
    type Config: DeserializeOwned;
    /// Stable name; also the name of the plugin's scope.
    fn name(&self) -> &str;
    /// Installs one instance into `ctx`. On `Err`, the caller disposes `ctx`.
    fn apply(&self, ctx: &Scope, config: Self::Config) -> Result<(), PluginError>;
}

/// Object-safe face of [`Plugin`], so a composition root can hold plugins of different types.
/// Implemented for every `Plugin`.
pub trait AnyPlugin: Send + Sync + 'static {
    /// The plugin's name (named apart from [`Plugin::name`] so both traits can be in scope).
    fn plugin_name(&self) -> &str;
    /// Deserializes `config` (errors name the plugin and the field path).
    fn check_config(&self, config: &Value) -> Result<(), PluginError>;
    /// Deserializes `config` and applies.
    fn apply_json(&self, ctx: &Scope, config: Value) -> Result<(), PluginError>;
}

impl<P: Plugin> AnyPlugin for P {
    fn plugin_name(&self) -> &str {
        Plugin::name(self)
    }

    fn check_config(&self, config: &Value) -> Result<(), PluginError> {
        parse_config::<P::Config>(Plugin::name(self), config).map(drop)
    }

    fn apply_json(&self, ctx: &Scope, config: Value) -> Result<(), PluginError> {
        let config = parse_config::<P::Config>(Plugin::name(self), &config)?;
        self.apply(ctx, config)
    }
}

/// A mounted plugin instance: the plugin, its parent and its current scope.
pub struct Mounted {
    plugin: Arc<dyn AnyPlugin>,
    parent: Scope,
    current: Mutex<Scope>,
    /// Serializes reapply/unmount: two concurrent reloads must not both apply. Held while the
    /// plugin's own code runs, so a plugin must not reload itself from `apply` or a disposer.
    reload: Mutex<()>,
}

/// Mounts `plugin` under `parent` with `config`: creates a Plugin scope named after it and
/// applies. If the config does not deserialize nothing is created; if `apply` fails, whatever it
/// registered is disposed and the error is returned.
pub fn mount(
    parent: &Scope,
    plugin: Arc<dyn AnyPlugin>,
    config: Value,
) -> Result<Mounted, PluginError> {
    plugin.check_config(&config)?;
    let scope = instantiate(parent, plugin.as_ref(), config)?;
    Ok(Mounted {
        plugin,
        parent: parent.clone(),
        current: Mutex::new(scope),
        reload: Mutex::new(()),
    })
}

/// Creates the scope and applies; the config was already checked by the caller.
fn instantiate(
    parent: &Scope,
    plugin: &dyn AnyPlugin,
    config: Value,
) -> Result<Scope, PluginError> {
    let scope = parent.child(ScopeKind::Plugin, plugin.plugin_name())?;
    match plugin.apply_json(&scope, config) {
        Ok(()) => Ok(scope),
        Err(source) => {
            scope.dispose();
            Err(PluginError::Apply {
                plugin: plugin.plugin_name().to_owned(),
                source: Box::new(source),
            })
        }
    }
}

impl std::fmt::Debug for Mounted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mounted")
            .field("plugin", &self.name())
            .field("scope", &self.scope())
            .finish()
    }
}

impl Mounted {
    /// The plugin's name.
    pub fn name(&self) -> &str {
        self.plugin.plugin_name()
    }

    /// The current instance's scope (a new one after each [`Mounted::reapply`]).
    pub fn scope(&self) -> Scope {
        lock(&self.current).clone()
    }

    /// Hot reload: disposes the current instance and applies `config` in a fresh scope, leaving
    /// no trace of the old instance. A config that does not deserialize is rejected before
    /// anything is disposed (the old instance keeps running). If `apply` fails, the plugin is
    /// left unmounted (its scope disposed) and the error is returned.
    pub fn reapply(&self, config: Value) -> Result<(), PluginError> {
        self.plugin.check_config(&config)?;
        let _reload = lock(&self.reload);
        let old = self.scope();
        old.dispose();
        let result = instantiate(&self.parent, self.plugin.as_ref(), config);
        // On failure keep a disposed placeholder so `scope()` stays meaningful.
        let scope = match &result {
            Ok(scope) => scope.clone(),
            Err(_) => old,
        };
        *lock(&self.current) = scope;
        result.map(drop)
    }

    /// Disposes the current instance. A later [`Mounted::reapply`] mounts it again.
    pub fn unmount(&self) {
        let _reload = lock(&self.reload);
        self.scope().dispose();
    }
}

fn parse_config<C: DeserializeOwned>(plugin: &str, config: &Value) -> Result<C, PluginError> {
    // Deserialized from pretty-printed text rather than from the Value: serde_json then reports
    // a line, and in pretty output every field sits on its own line, which locates the field.
    let text = serde_json::to_string_pretty(config).map_err(|e| PluginError::InvalidConfig {
        plugin: plugin.to_owned(),
        path: None,
        message: e.to_string(),
    })?;
    serde_json::from_str(&text).map_err(|e| {
        let full = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let message = full.strip_suffix(&suffix).unwrap_or(&full).to_owned();
        PluginError::InvalidConfig {
            plugin: plugin.to_owned(),
            path: field_path(&text, e.line()),
            message,
        }
    })
}

/// The dotted key path of (1-based) `line` in pretty-printed JSON, walking up by indentation.
/// Array levels are skipped (they have no key). `None` at the top level.
fn field_path(text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let idx = line.checked_sub(1).filter(|i| *i < lines.len())?;
    let indent = |l: &str| l.len() - l.trim_start().len();
    let key = |l: &str| -> Option<String> {
        let rest = l.trim_start().strip_prefix('"')?;
        let mut out = String::new();
        let mut chars = rest.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => return chars.as_str().starts_with(": ").then_some(out),
                '\\' => out.push(chars.next()?),
                _ => out.push(c),
            }
        }
        None
    };
    let mut path = Vec::new();
    let here = lines[idx];
    let mut level = indent(here);
    let mut upper = idx;
    let closing = here.trim_start().starts_with(['}', ']']);
    if closing {
        // Errors like "missing field" point at the closing brace: the object is the one opened
        // at the same indentation above.
        if let Some(open) = (0..idx).rev().find(|&i| indent(lines[i]) == level) {
            path.extend(key(lines[open]));
            upper = open;
        }
    } else {
        path.extend(key(here));
    }
    for (i, &l) in lines[..upper].iter().enumerate().rev() {
        if indent(l) < level {
            level = indent(l);
            match key(l) {
                Some(key) => path.push(key),
                // An object in an array (the only keyless `{` but the root): its index is the
                // number of objects opened at its indentation above it, back to the array's
                // opening line.
                None if i > 0 && l.trim() == "{" => {
                    let index = lines[..i]
                        .iter()
                        .rev()
                        .take_while(|above| indent(above) >= level)
                        .filter(|above| {
                            indent(above) == level && above.trim_start().starts_with('{')
                        })
                        .count();
                    path.push(index.to_string());
                }
                None => {}
            }
        }
    }
    path.reverse();
    (!path.is_empty()).then(|| path.join("."))
}

#[cfg(test)]
#[path = "plugin_tests.rs"]
mod tests;
