//! `dsh config show`: the effective configuration, validated, as TOML with the layer each key
//! came from, or as JSON for machines; and the `dsh tools` catalog as text.

use std::fmt::Write;

use dsh_plugin::PluginSpec;
use serde_json::Map;
use serde_json::Value;
use serde_json::json;

use crate::config::Config;
use crate::config::ConfigErrors;
use crate::config::Layer;
use crate::core::ModelSettings;
use crate::core::PromptSettings;
use crate::core::ToolsSettings;

/// The effective tree: every default (core tables and each plugin's typed defaults) under
/// whatever the layers set.
pub fn effective(
    config: &Config,
    table: &[PluginSpec],
) -> Result<Map<String, Value>, ConfigErrors> {
    crate::validate::check(config, table)?;
    let mut tree = Map::new();
    let to_value = |v: Result<Value, serde_json::Error>| v.unwrap_or(Value::Null);
    tree.insert(
        "model".into(),
        to_value(serde_json::to_value(ModelSettings::default())),
    );
    tree.insert(
        "tools".into(),
        to_value(serde_json::to_value(ToolsSettings::default())),
    );
    tree.insert(
        "prompt".into(),
        to_value(serde_json::to_value(PromptSettings::default())),
    );
    let mut plugins = Map::new();
    for spec in table {
        let mut defaults = match spec.defaults() {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        for (field, _) in spec.also {
            defaults.remove(*field);
        }
        let mut row = Map::new();
        row.insert("enabled".into(), Value::Bool(spec.enabled_by_default));
        row.extend(defaults);
        plugins.insert(spec.name.to_owned(), Value::Object(row));
    }
    tree.insert("plugins".into(), Value::Object(plugins));
    for (key, value) in config.tree() {
        overlay(&mut tree, key, value.clone());
    }
    Ok(tree)
}

fn overlay(tree: &mut Map<String, Value>, key: &str, value: Value) {
    match (tree.get_mut(key), value) {
        (Some(Value::Object(existing)), Value::Object(incoming)) => {
            for (k, v) in incoming {
                overlay(existing, &k, v);
            }
        }
        (_, value) => {
            tree.insert(key.to_owned(), value);
        }
    }
}

/// What `dsh config show` prints: [`render_json`] pretty-printed (`json`), or [`render_toml`]
/// followed by the project folder and whether it is trusted.
pub fn command(config: &Config, table: &[PluginSpec], json: bool) -> Result<String, ConfigErrors> {
    if json {
        let value = render_json(config, table)?;
        // A `Value` always serialises; the compact form is the fallback of a fallback.
        let text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
        return Ok(format!("{text}\n"));
    }
    let mut out = render_toml(config, table)?;
    if let Some(project) = &config.project {
        let trust = if project.trusted {
            "trusted"
        } else {
            "not trusted"
        };
        let _ = writeln!(
            out,
            "# project folder: {} ({trust})",
            project.folder.display()
        );
    }
    Ok(out)
}

/// `dsh tools`: the offered tools as JSON (exactly the schemas sent to the model), or one line
/// each: the name padded to 20 columns and the description's first sentence.
pub fn tools(schemas: &[dsh_protocol::ToolSchema], json: bool) -> serde_json::Result<String> {
    if json {
        return Ok(format!("{}\n", serde_json::to_string_pretty(schemas)?));
    }
    let mut out = String::new();
    for schema in schemas {
        let summary = schema.description.split(". ").next().unwrap_or_default();
        let _ = writeln!(out, "{:<20} {summary}", schema.name);
    }
    Ok(out)
}

/// The effective configuration as TOML, each key followed by its layer (and file:line).
pub fn render_toml(config: &Config, table: &[PluginSpec]) -> Result<String, ConfigErrors> {
    let tree = effective(config, table)?;
    let mut out = String::new();
    let _ = writeln!(out, "# dsh home: {}", config.home.display());
    for (layer, path) in &config.files {
        let _ = writeln!(out, "# {layer} file: {}", path.display());
    }
    render_table(&mut out, config, "", &tree);
    Ok(out)
}

fn origin_note(config: &Config, path: &str) -> String {
    match config.origin_exact(path) {
        Some(origin) => origin.to_string(),
        None => Layer::Default.to_string(),
    }
}

fn toml_value(value: &Value) -> Option<String> {
    toml::Value::try_from(value).ok().map(|v| v.to_string())
}

fn is_table_array(value: &Value) -> bool {
    matches!(value, Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_object))
}

fn render_table(out: &mut String, config: &Config, path: &str, map: &Map<String, Value>) {
    let join = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    for (key, value) in map {
        if value.is_object() || is_table_array(value) || value.is_null() {
            continue;
        }
        if let Some(text) = toml_value(value) {
            let _ = writeln!(
                out,
                "{} = {text}  # {}",
                toml_key(key),
                origin_note(config, &join(key))
            );
        }
    }
    for (key, value) in map {
        let full = join(key);
        match value {
            Value::Object(child) => {
                let _ = writeln!(out, "\n[{}]", toml_path(&full));
                render_table(out, config, &full, child);
            }
            Value::Array(items) if is_table_array(value) => {
                for (index, item) in items.iter().enumerate() {
                    let item_path = format!("{full}.{index}");
                    let _ = writeln!(
                        out,
                        "\n[[{}]]  # {}",
                        toml_path(&full),
                        origin_note(config, &item_path)
                    );
                    if let Value::Object(child) = item {
                        render_table(out, config, &item_path, child);
                    }
                }
            }
            _ => {}
        }
    }
}

fn toml_key(key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        key.to_owned()
    } else {
        toml_value(&Value::String(key.to_owned())).unwrap_or_else(|| key.to_owned())
    }
}

fn toml_path(path: &str) -> String {
    path.split('.').map(toml_key).collect::<Vec<_>>().join(".")
}

/// The effective configuration and each set key's origin, as JSON.
pub fn render_json(config: &Config, table: &[PluginSpec]) -> Result<Value, ConfigErrors> {
    let tree = effective(config, table)?;
    let mut sources = Map::new();
    collect_sources(config, "", &Value::Object(tree.clone()), &mut sources);
    let files: Vec<Value> = config
        .files
        .iter()
        .map(|(layer, path)| json!({"layer": layer, "path": path}))
        .collect();
    Ok(json!({
        "home": config.home,
        "files": files,
        "config": tree,
        "sources": sources,
    }))
}

fn collect_sources(config: &Config, path: &str, value: &Value, out: &mut Map<String, Value>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let full = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                collect_sources(config, &full, child, out);
            }
        }
        _ => {
            let (layer, file, line) = match config.origin_exact(path) {
                Some(origin) => (origin.layer, origin.file.clone(), origin.line),
                None => (Layer::Default, None, None),
            };
            out.insert(
                path.to_owned(),
                json!({"layer": layer, "file": file, "line": line}),
            );
        }
    }
}
