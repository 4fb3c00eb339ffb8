//! Layered configuration: built-in defaults → `$DSH_HOME/config.toml` → `<project>/.dsh/config.toml`
//! → environment → command-line flags. Later layers win, table by table and key by key.
//!
//! The file format is TOML:
//!
//! ```toml
//! [model]
//! name = "deepseek-v4-flash"        # the model id sent to the provider
//! base_url = "https://api.deepseek.com"
//!
//! [[model.catalog]]                 # what a model id accepts (default: text only)
//! id = "deepseek-v4-flash-vision-exp"
//! input = ["text", "image"]
//!
//! [plugins.attachments]             # image attachments under $DSH_HOME/attachments
//! enabled = true
//!
//! [plugins.bash]                    # one table per built-in plugin: `enabled` + its settings
//! timeout_ms = 60000
//!
//! [plugins.sandbox]
//! mode = "workspace-write"          # read-only | workspace-write | danger-full-access
//!
//! [[mcp.servers]]                   # MCP servers (see the MCP plugin)
//! name = "everything"
//! command = "npx"
//! args = ["@modelcontextprotocol/server-everything"]
//! ```
//!
//! Each plugin validates its own table (unknown or mistyped keys are rejected with the plugin's
//! name and the key's path), so this module only merges layers and remembers where each value
//! came from.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::path::PathBuf;

use anyhow::Context;
use serde_json::Map;
use serde_json::Value;

/// Where an effective value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Layer {
    Default,
    User,
    Project,
    Env,
    Flag,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Default => "default",
            Self::User => "user",
            Self::Project => "project",
            Self::Env => "env",
            Self::Flag => "flag",
        })
    }
}

/// The merged configuration tree plus, per top-level table path, the last layer that touched it.
#[derive(Debug, Clone)]
pub struct Config {
    pub home: PathBuf,
    tree: Map<String, Value>,
    sources: BTreeMap<String, Layer>,
    pub files: Vec<(Layer, PathBuf)>,
    /// The project layer and how far it was trusted (see [`crate::trust`]).
    pub project: Option<ProjectLayer>,
}

/// A folder's `.dsh/config.toml` and what the trust rule did with it.
#[derive(Debug, Clone)]
pub struct ProjectLayer {
    pub file: PathBuf,
    pub folder: PathBuf,
    /// The user's recorded decision, if any.
    pub trust: Option<crate::trust::Trust>,
    pub trusted: bool,
    /// Keys of the project layer that were ignored because the folder is not trusted.
    pub ignored: Vec<String>,
}

impl ProjectLayer {
    /// The notice to print when keys were ignored.
    pub fn notice(&self) -> Option<String> {
        (!self.ignored.is_empty())
            .then(|| crate::trust::notice(&self.file, &self.folder, &self.ignored))
    }
}

/// Values the command line sets on top of every file and the environment.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub model: Option<String>,
    pub tools_mode: Option<String>,
}

/// The directory dsh keeps its state in: `$DSH_HOME`, else `~/.dsh`.
pub fn dsh_home() -> anyhow::Result<PathBuf> {
    if let Some(home) = std::env::var_os("DSH_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    let home = dirs::home_dir().context("cannot find a home directory; set DSH_HOME")?;
    Ok(home.join(".dsh"))
}

fn defaults() -> Map<String, Value> {
    let value = serde_json::json!({
        "model": {
            "provider": "deepseek-official",
            "name": "deepseek-v4-flash",
        },
        "tools": { "mode": "native", "max_parallel": 10 },
    });
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

impl Config {
    /// Loads every layer for a session in `cwd`.
    pub fn load(cwd: &Path, overrides: &Overrides) -> anyhow::Result<Self> {
        Self::load_in(dsh_home()?, cwd, overrides)
    }

    /// Like [`Self::load`] with an explicit dsh home (tests; no process environment lookup
    /// for the home itself).
    pub fn load_in(home: PathBuf, cwd: &Path, overrides: &Overrides) -> anyhow::Result<Self> {
        let mut config = Self {
            home: home.clone(),
            tree: Map::new(),
            sources: BTreeMap::new(),
            files: Vec::new(),
            project: None,
        };
        config.merge(Layer::Default, defaults());
        let user_path = home.join("config.toml");
        let user = read_toml(&user_path)?;
        if let Some(table) = user.clone() {
            config.files.push((Layer::User, user_path.clone()));
            config.merge(Layer::User, table);
        }
        let project_path = cwd.join(".dsh/config.toml");
        if project_path != user_path
            && let Some(table) = read_toml(&project_path)?
        {
            let trust = crate::trust::lookup(&user.unwrap_or_default(), cwd);
            let trusted =
                crate::trust::trusted_for_this_run() || trust == Some(crate::trust::Trust::Trusted);
            let (table, ignored) = if trusted {
                (table, Vec::new())
            } else {
                let filtered = crate::trust::filter_project_layer(&config.tree, table);
                (filtered.kept, filtered.ignored)
            };
            config.files.push((Layer::Project, project_path.clone()));
            config.merge(Layer::Project, table);
            config.project = Some(ProjectLayer {
                file: project_path,
                folder: cwd.to_path_buf(),
                trust,
                trusted,
                ignored,
            });
        }
        config.merge(Layer::Env, env_layer());
        let mut flags = Map::new();
        if let Some(model) = &overrides.model {
            flags.insert("model".into(), serde_json::json!({ "name": model }));
        }
        if let Some(mode) = &overrides.tools_mode {
            flags.insert("tools".into(), serde_json::json!({ "mode": mode }));
        }
        config.merge(Layer::Flag, flags);
        Ok(config)
    }

    fn merge(&mut self, layer: Layer, table: Map<String, Value>) {
        for (key, value) in table {
            merge_value(&mut self.tree, &mut self.sources, layer, key, value, "");
        }
    }

    /// A value by dotted path, e.g. `model.name`.
    pub fn get(&self, path: &str) -> Option<&Value> {
        let mut parts = path.split('.');
        let mut current = self.tree.get(parts.next()?)?;
        for part in parts {
            current = current.as_object()?.get(part)?;
        }
        Some(current)
    }

    pub fn get_str(&self, path: &str) -> Option<&str> {
        self.get(path).and_then(Value::as_str)
    }

    /// The layer that last set the table or value at `path`.
    pub fn source(&self, path: &str) -> Layer {
        self.sources.get(path).copied().unwrap_or(Layer::Default)
    }

    /// The `[plugins.<name>]` table without its `enabled` key (empty object when absent).
    pub fn plugin_settings(&self, name: &str) -> Value {
        let mut table = self
            .get(&format!("plugins.{name}"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        table.remove("enabled");
        Value::Object(table)
    }

    /// Whether `[plugins.<name>] enabled` is true (or absent and the plugin is on by default).
    pub fn plugin_enabled(&self, name: &str, default: bool) -> anyhow::Result<bool> {
        match self.get(&format!("plugins.{name}.enabled")) {
            None => Ok(default),
            Some(Value::Bool(enabled)) => Ok(*enabled),
            Some(other) => {
                anyhow::bail!("plugins.{name}.enabled must be true or false, not {other}")
            }
        }
    }

    /// The whole merged tree (for `dsh config show`).
    pub fn tree(&self) -> &Map<String, Value> {
        &self.tree
    }
}

fn merge_value(
    tree: &mut Map<String, Value>,
    sources: &mut BTreeMap<String, Layer>,
    layer: Layer,
    key: String,
    value: Value,
    prefix: &str,
) {
    let path = if prefix.is_empty() {
        key.clone()
    } else {
        format!("{prefix}.{key}")
    };
    sources.insert(path.clone(), layer);
    match (tree.get_mut(&key), value) {
        (Some(Value::Object(existing)), Value::Object(incoming)) => {
            for (child, child_value) in incoming {
                merge_value(existing, sources, layer, child, child_value, &path);
            }
        }
        (_, value) => {
            tree.insert(key, value);
        }
    }
}

fn read_toml(path: &Path) -> anyhow::Result<Option<Map<String, Value>>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", path.display())),
    };
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("{} is not valid TOML", path.display()))?;
    let value = serde_json::to_value(table)
        .with_context(|| format!("{} holds a value JSON cannot carry", path.display()))?;
    match value {
        Value::Object(map) => Ok(Some(map)),
        _ => Ok(None),
    }
}

fn env_layer() -> Map<String, Value> {
    let mut layer = Map::new();
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(url) = var("DEEPSEEK_BASE_URL") {
        layer.insert("model".into(), serde_json::json!({ "base_url": url }));
    }
    if let Some(mode) = var("DSH_PERMISSION_MODE") {
        layer.insert(
            "plugins".into(),
            serde_json::json!({ "sandbox": { "mode": mode } }),
        );
    }
    if let Some(mode) = var("DSH_TOOLS_MODE") {
        layer.insert("tools".into(), serde_json::json!({ "mode": mode }));
    }
    layer
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn later_layers_win_key_by_key_and_remember_their_source() {
        let mut config = Config {
            home: PathBuf::new(),
            tree: Map::new(),
            sources: BTreeMap::new(),
            files: Vec::new(),
            project: None,
        };
        config.merge(Layer::Default, defaults());
        let user = serde_json::json!({"model": {"name": "deepseek-v4-pro"}, "plugins": {"bash": {"timeout_ms": 1000}}});
        config.merge(Layer::User, user.as_object().cloned().unwrap());
        let project = serde_json::json!({"plugins": {"bash": {"enabled": false}}});
        config.merge(Layer::Project, project.as_object().cloned().unwrap());
        assert_eq!(config.get_str("model.name"), Some("deepseek-v4-pro"));
        assert_eq!(config.get_str("model.provider"), Some("deepseek-official"));
        assert_eq!(config.source("model.name"), Layer::User);
        assert_eq!(config.source("model.provider"), Layer::Default);
        assert_eq!(
            config.plugin_settings("bash"),
            serde_json::json!({"timeout_ms": 1000})
        );
        assert!(!config.plugin_enabled("bash", true).unwrap());
        assert_eq!(config.source("plugins.bash"), Layer::Project);
        assert!(config.plugin_enabled("fs", true).unwrap());
    }

    #[test]
    fn a_malformed_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "model = [").unwrap();
        let error = read_toml(&path).unwrap_err();
        assert!(
            format!("{error:#}").contains("is not valid TOML"),
            "{error:#}"
        );
        assert!(
            read_toml(&dir.path().join("missing.toml"))
                .unwrap()
                .is_none()
        );
    }
}
