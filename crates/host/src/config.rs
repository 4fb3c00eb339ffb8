//! Layered configuration: built-in defaults → `$DSH_HOME/config.toml` (user) →
//! `<project>/.dsh/config.toml` → environment → command-line overrides. Later layers win key by
//! key; every leaf remembers the layer it came from and, for files, its line, so an error names
//! `file:line: key` and `dsh config show` labels each key.
//!
//! ```toml
//! [model]
//! provider = "deepseek"             # deepseek | openai-compatible
//! name = "deepseek-v4-flash"
//! base_url = "https://api.deepseek.com"
//!
//! [plugins.bash]                    # one table per plugin: `enabled` + its typed settings
//! timeout_ms = 60000
//!
//! [plugins.sandbox]
//! mode = "workspace-write"          # read-only | workspace-write | danger-full-access
//!
//! [[mcp.servers]]
//! name = "everything"
//! command = "npx"
//! args = ["@modelcontextprotocol/server-everything"]
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::path::PathBuf;

use serde_json::Map;
use serde_json::Value;

/// Where an effective value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
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

/// Where one key was set: its layer and, for a file, the file and 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub layer: Layer,
    pub file: Option<PathBuf>,
    pub line: Option<usize>,
}

impl Origin {
    fn of(layer: Layer) -> Self {
        Self {
            layer,
            file: None,
            line: None,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{} ({}:{line})", self.layer, file.display()),
            (Some(file), None) => write!(f, "{} ({})", self.layer, file.display()),
            _ => write!(f, "{}", self.layer),
        }
    }
}

/// A configuration problem, located when a file is to blame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: Option<PathBuf>,
    pub line: Option<usize>,
    /// The dotted key the problem is about (`model.nmae`, `plugins.nosuch`).
    pub key: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{}:{line}: ", file.display())?,
            (Some(file), None) => write!(f, "{}: ", file.display())?,
            _ => {}
        }
        if self.key.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// Why a `-c key=value` override was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignmentError {
    #[error("expected key=value, got {0:?}")]
    NoEquals(String),
    #[error("invalid key {0:?}")]
    InvalidKey(String),
}

/// One or more configuration problems; nothing was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl From<ConfigError> for ConfigErrors {
    fn from(error: ConfigError) -> Self {
        Self(vec![error])
    }
}

/// Values the command line sets on top of every file and the environment.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `(dotted key, value)`, e.g. `("model.name", "deepseek-v4-pro")` (`-m`, `-c key=value`).
    pub values: Vec<(String, Value)>,
    /// `--trust-project`: the project layer applies whole for this run.
    pub trust_project: bool,
    /// Leave an untrusted folder's project layer out entirely (it kept dsh from starting).
    pub skip_untrusted_project: bool,
    /// Why it was left out, for the notice.
    pub skip_untrusted_reason: Option<String>,
}

/// A folder's `.dsh/config.toml` and what the trust rule did with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectLayer {
    pub file: PathBuf,
    pub folder: PathBuf,
    /// The user's recorded decision, if any.
    pub trust: Option<crate::trust::Trust>,
    pub trusted: bool,
    /// Keys of the project layer that were ignored because the folder is not trusted.
    pub ignored: Vec<String>,
    /// Why the whole file of an untrusted folder was ignored (not valid TOML, or its settings
    /// kept dsh from starting).
    pub unusable: Option<String>,
}

impl ProjectLayer {
    /// The notice to print when keys (or the whole file) were ignored.
    pub fn notice(&self) -> Option<String> {
        if let Some(reason) = &self.unusable {
            return Some(crate::trust::unusable_notice(
                &self.file,
                &self.folder,
                reason,
            ));
        }
        (!self.ignored.is_empty())
            .then(|| crate::trust::notice(&self.file, &self.folder, &self.ignored))
    }
}

impl Config {
    /// Every notice the trust rule produced: the user's own keys that name the untrusted
    /// folder's files, and the project layer's ignored keys.
    pub fn trust_notices(&self) -> Vec<String> {
        let mut notices = Vec::new();
        if !self.user_project_keys.is_empty() {
            notices.push(crate::trust::user_keys_notice(
                &self.home.join("config.toml"),
                &self.cwd,
                &self.user_project_keys,
            ));
        }
        notices.extend(self.project.as_ref().and_then(ProjectLayer::notice));
        notices
    }

    /// Whether an untrusted folder's project layer contributed anything (so leaving it out
    /// may let dsh start).
    pub fn has_untrusted_project_layer(&self) -> bool {
        self.project.as_ref().is_some_and(|p| !p.trusted)
            && self.files.iter().any(|(layer, _)| *layer == Layer::Project)
    }
}

impl Overrides {
    /// Sets `key` (dotted) to `value`.
    pub fn set(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        self.values.push((key.to_owned(), value.into()));
        self
    }

    /// Parses `key=value`; the value is read as a TOML value, else taken as a string.
    pub fn parse_assignment(text: &str) -> Result<(String, Value), AssignmentError> {
        let (key, value) = text
            .split_once('=')
            .ok_or_else(|| AssignmentError::NoEquals(text.to_owned()))?;
        let key = key.trim();
        if key.is_empty() || key.split('.').any(str::is_empty) {
            return Err(AssignmentError::InvalidKey(key.to_owned()));
        }
        let value = value.trim();
        let parsed = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut table| table.remove("v"))
            .and_then(|v| serde_json::to_value(v).ok())
            .unwrap_or_else(|| Value::String(value.to_owned()));
        Ok((key.to_owned(), parsed))
    }
}

/// The directory dsh keeps its state in: `$DSH_HOME`, else `~/.dsh`.
pub fn dsh_home() -> Result<PathBuf, ConfigError> {
    if let Some(home) = std::env::var_os("DSH_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".dsh")),
        None => Err(ConfigError {
            file: None,
            line: None,
            key: "DSH_HOME".into(),
            message: "cannot find a home directory; set DSH_HOME".into(),
        }),
    }
}

/// The user and project files of a session in `cwd` under `home`.
pub fn config_files(home: &Path, cwd: &Path) -> [(Layer, PathBuf); 2] {
    [
        (Layer::User, home.join("config.toml")),
        (Layer::Project, cwd.join(".dsh").join("config.toml")),
    ]
}

/// The merged configuration tree and the origin of every key (tables and leaves).
#[derive(Debug, Clone)]
pub struct Config {
    pub home: PathBuf,
    pub cwd: PathBuf,
    tree: Map<String, Value>,
    origins: BTreeMap<String, Origin>,
    /// Files that existed and were read, in layer order.
    pub files: Vec<(Layer, PathBuf)>,
    /// The project layer and how far it was trusted (see [`crate::trust`]).
    pub project: Option<ProjectLayer>,
    /// Keys of the user's own file that were ignored because they name files of an untrusted
    /// folder (see [`crate::trust::strip_project_paths`]).
    pub user_project_keys: Vec<String>,
}

impl Config {
    /// Every layer for a session in `cwd`, with `$DSH_HOME` from the environment.
    pub fn load(cwd: &Path, overrides: &Overrides) -> Result<Self, ConfigErrors> {
        Self::load_in(dsh_home()?, cwd, overrides)
    }

    /// Like [`Config::load`] with an explicit home.
    pub fn load_in(home: PathBuf, cwd: &Path, overrides: &Overrides) -> Result<Self, ConfigErrors> {
        let mut config = Self::empty(home.clone(), cwd.to_path_buf());
        let [(_, user_path), (_, project_path)] = config_files(&home, cwd);
        let user = read_file(&user_path)?;
        let user_table = user.clone().map(|(table, _)| table).unwrap_or_default();
        let trust = crate::trust::lookup(&user_table, cwd);
        let trusted = overrides.trust_project || trust == Some(crate::trust::Trust::Trusted);
        if let Some((mut table, lines)) = user {
            if !trusted {
                // The user's own settings that name files of the folder (a hook file relative
                // to where dsh starts, a server started from it) are the folder's settings.
                config.user_project_keys = crate::trust::strip_project_paths(&mut table);
            }
            config.files.push((Layer::User, user_path.clone()));
            config.merge(Layer::User, table, Some((&user_path, &lines)));
        }
        let project_skipped = overrides.skip_untrusted_project && !trusted;
        if project_path != user_path && !project_skipped {
            let read = match read_file(&project_path) {
                Ok(read) => read,
                // An untrusted folder's broken file must not keep dsh from running there.
                Err(error) if !trusted => {
                    config.project = Some(ProjectLayer {
                        file: project_path.clone(),
                        folder: cwd.to_path_buf(),
                        trust,
                        trusted,
                        ignored: Vec::new(),
                        unusable: Some(error.to_string()),
                    });
                    None
                }
                Err(error) => return Err(error.into()),
            };
            if let Some((table, lines)) = read {
                let (table, ignored) = if trusted {
                    (table, Vec::new())
                } else {
                    // Judged against what would apply without the project: defaults and the
                    // user.
                    let mut base = trust_base();
                    merge_deep(&mut base, config.tree.clone());
                    let filtered = crate::trust::filter_project_layer(&base, table);
                    (filtered.kept, filtered.ignored)
                };
                config.files.push((Layer::Project, project_path.clone()));
                config.merge(Layer::Project, table, Some((&project_path, &lines)));
                config.project = Some(ProjectLayer {
                    file: project_path,
                    folder: cwd.to_path_buf(),
                    trust,
                    trusted,
                    ignored,
                    unusable: None,
                });
            }
        } else if project_path != user_path && project_path.exists() {
            config.project = Some(ProjectLayer {
                file: project_path,
                folder: cwd.to_path_buf(),
                trust,
                trusted,
                ignored: Vec::new(),
                unusable: overrides.skip_untrusted_reason.clone(),
            });
        }
        config.merge(Layer::Env, env_layer(), None);
        let mut flags = Map::new();
        for (key, value) in &overrides.values {
            insert_dotted(&mut flags, key, value.clone());
        }
        config.merge(Layer::Flag, flags, None);
        Ok(config)
    }

    /// A tree with nothing in it (tests, and the base of [`Config::load_in`]).
    pub fn empty(home: PathBuf, cwd: PathBuf) -> Self {
        Self {
            home,
            cwd,
            tree: Map::new(),
            origins: BTreeMap::new(),
            files: Vec::new(),
            project: None,
            user_project_keys: Vec::new(),
        }
    }

    /// Merges `table` as `layer` (tests build layered trees with it).
    pub fn merge(
        &mut self,
        layer: Layer,
        table: Map<String, Value>,
        file: Option<(&Path, &BTreeMap<String, usize>)>,
    ) {
        for (key, value) in table {
            merge_value(
                &mut self.tree,
                &mut self.origins,
                layer,
                file,
                key,
                value,
                "",
            );
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

    /// The origin of the key at `path`, or of its nearest ancestor that has one; `Default`
    /// when no layer set anything on the way.
    pub fn origin(&self, path: &str) -> Origin {
        let mut path = path;
        loop {
            if let Some(origin) = self.origins.get(path) {
                return origin.clone();
            }
            match path.rsplit_once('.') {
                Some((parent, _)) => path = parent,
                None => return Origin::of(Layer::Default),
            }
        }
    }

    /// The origin recorded for exactly `path`, if a layer set it.
    pub fn origin_exact(&self, path: &str) -> Option<&Origin> {
        self.origins.get(path)
    }

    /// The whole merged tree.
    pub fn tree(&self) -> &Map<String, Value> {
        &self.tree
    }

    /// A [`ConfigError`] about `key`, located at the key (or its nearest located ancestor).
    pub fn error_at(&self, key: &str, message: impl Into<String>) -> ConfigError {
        let origin = self.origin(key);
        ConfigError {
            file: origin.file,
            line: origin.line,
            key: key.to_owned(),
            message: message.into(),
        }
    }
}

fn merge_value(
    tree: &mut Map<String, Value>,
    origins: &mut BTreeMap<String, Origin>,
    layer: Layer,
    file: Option<(&Path, &BTreeMap<String, usize>)>,
    key: String,
    value: Value,
    prefix: &str,
) {
    let path = if prefix.is_empty() {
        key.clone()
    } else {
        format!("{prefix}.{key}")
    };
    origins.insert(
        path.clone(),
        Origin {
            layer,
            file: file.map(|(file, _)| file.to_path_buf()),
            line: file.and_then(|(_, lines)| lines.get(&path).copied()),
        },
    );
    match (tree.get_mut(&key), value) {
        (Some(Value::Object(existing)), Value::Object(incoming)) => {
            for (child, child_value) in incoming {
                merge_value(existing, origins, layer, file, child, child_value, &path);
            }
        }
        (_, value) => {
            // A replaced subtree's old origins no longer apply.
            let nested = format!("{path}.");
            origins.retain(|k, _| !k.starts_with(&nested));
            record_leaves(origins, layer, file, &path, &value);
            tree.insert(key, value);
        }
    }
}

/// Origins for every key below a value that replaced whatever was there (arrays of tables
/// keep their own keys addressable as `path.N.key`).
fn record_leaves(
    origins: &mut BTreeMap<String, Origin>,
    layer: Layer,
    file: Option<(&Path, &BTreeMap<String, usize>)>,
    path: &str,
    value: &Value,
) {
    let children: Vec<(String, &Value)> = match value {
        Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v)).collect(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v))
            .collect(),
        _ => return,
    };
    for (key, child) in children {
        let child_path = format!("{path}.{key}");
        origins.insert(
            child_path.clone(),
            Origin {
                layer,
                file: file.map(|(file, _)| file.to_path_buf()),
                line: file.and_then(|(_, lines)| lines.get(&child_path).copied()),
            },
        );
        record_leaves(origins, layer, file, &child_path, child);
    }
}

fn insert_dotted(map: &mut Map<String, Value>, key: &str, value: Value) {
    match key.split_once('.') {
        None => {
            map.insert(key.to_owned(), value);
        }
        Some((head, rest)) => {
            let entry = map
                .entry(head.to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            if let Value::Object(child) = entry {
                insert_dotted(child, rest, value);
            }
        }
    }
}

/// A parsed file: its table as JSON and the 1-based line of every dotted key path.
pub type Parsed = (Map<String, Value>, BTreeMap<String, usize>);

/// Reads one TOML file: its table as JSON and the line of every key path. `None` when the
/// file does not exist.
pub fn read_file(path: &Path) -> Result<Option<Parsed>, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(ConfigError {
                file: Some(path.to_path_buf()),
                line: None,
                key: String::new(),
                message: format!("cannot read: {error}"),
            });
        }
    };
    parse_text(&text, path).map(Some)
}

/// Parses TOML `text` (named `path` in errors).
pub fn parse_text(text: &str, path: &Path) -> Result<Parsed, ConfigError> {
    let syntax = |error: &dyn fmt::Display, offset: Option<usize>| {
        let line = offset.map(|o| line_of(text, o));
        ConfigError {
            file: Some(path.to_path_buf()),
            line,
            key: line.map(|line| key_at(text, line)).unwrap_or_default(),
            message: format!("not valid TOML: {}", first_line(&error.to_string())),
        }
    };
    let table: toml::Table =
        toml::from_str(text).map_err(|e| syntax(&e.message(), e.span().map(|s| s.start)))?;
    let value = serde_json::to_value(table).map_err(|e| syntax(&e, None))?;
    let Value::Object(map) = value else {
        return Ok((Map::new(), BTreeMap::new()));
    };
    let mut lines = BTreeMap::new();
    if let Ok(document) = toml::de::DeTable::parse(text) {
        collect_lines(text, document.get_ref(), "", &mut lines);
    }
    Ok((map, lines))
}

/// The dotted key a broken line is about, read from the text alone (the TOML did not parse):
/// the last table header above `line` and the key left of `=` on it. Empty when neither is
/// there (e.g. a broken header line outside any table).
fn key_at(text: &str, line: usize) -> String {
    let unquote = |part: &str| {
        part.trim()
            .trim_matches(|c| c == '"' || c == '\'')
            .to_owned()
    };
    let dotted = |path: &str| path.split('.').map(unquote).collect::<Vec<_>>().join(".");
    let mut table = String::new();
    for (index, raw) in text.lines().enumerate() {
        let trimmed = raw.trim();
        let is_header = trimmed.starts_with('[');
        if index + 1 == line {
            if !is_header && let Some((key, _)) = trimmed.split_once('=') {
                let key = dotted(key);
                return if table.is_empty() {
                    key
                } else {
                    format!("{table}.{key}")
                };
            }
            return table;
        }
        if is_header {
            let inner = trimmed.trim_start_matches('[');
            let inner = inner.split(']').next().unwrap_or_default();
            table = dotted(inner);
        }
    }
    table
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text).trim()
}

fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

fn collect_lines(
    text: &str,
    table: &toml::de::DeTable<'_>,
    prefix: &str,
    lines: &mut BTreeMap<String, usize>,
) {
    for (key, value) in table {
        let path = if prefix.is_empty() {
            key.get_ref().to_string()
        } else {
            format!("{prefix}.{}", key.get_ref())
        };
        lines
            .entry(path.clone())
            .or_insert_with(|| line_of(text, key.span().start));
        collect_value_lines(text, value.get_ref(), &path, lines);
    }
}

fn collect_value_lines(
    text: &str,
    value: &toml::de::DeValue<'_>,
    path: &str,
    lines: &mut BTreeMap<String, usize>,
) {
    match value {
        toml::de::DeValue::Table(table) => collect_lines(text, table, path, lines),
        toml::de::DeValue::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                let item_path = format!("{path}.{index}");
                lines
                    .entry(item_path.clone())
                    .or_insert_with(|| line_of(text, item.span().start));
                collect_value_lines(text, item.get_ref(), &item_path, lines);
            }
        }
        _ => {}
    }
}

/// The defaults an untrusted project layer is compared with (values it may repeat).
fn trust_base() -> Map<String, Value> {
    let mut base = Map::new();
    insert_dotted(&mut base, "model.provider", Value::from(dsh_llm::PROVIDER));
    insert_dotted(&mut base, "model.name", Value::from(dsh_llm::DEFAULT_MODEL));
    insert_dotted(&mut base, "tools.mode", Value::from("native"));
    insert_dotted(&mut base, "tools.max_parallel", Value::from(10));
    // A project may repeat a plugin's default state (`enabled = true` for a plugin that is on
    // anyway), never switch on one that is off.
    for spec in crate::table::builtin_plugins() {
        insert_dotted(
            &mut base,
            &format!("plugins.{}.enabled", spec.name),
            Value::Bool(spec.enabled_by_default),
        );
    }
    base
}

/// `incoming` merged into `base` table by table (a later value wins at the leaves).
fn merge_deep(base: &mut Map<String, Value>, incoming: Map<String, Value>) {
    for (key, value) in incoming {
        match (base.get_mut(&key), value) {
            (Some(Value::Object(existing)), Value::Object(inner)) => merge_deep(existing, inner),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

fn env_layer() -> Map<String, Value> {
    let mut layer = Map::new();
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(url) = var("DEEPSEEK_BASE_URL") {
        insert_dotted(&mut layer, "model.base_url", Value::String(url));
    }
    if let Some(mode) = var("DSH_PERMISSION_MODE") {
        insert_dotted(&mut layer, "plugins.sandbox.mode", Value::String(mode));
    }
    if let Some(mode) = var("DSH_TOOLS_MODE") {
        insert_dotted(&mut layer, "tools.mode", Value::String(mode));
    }
    layer
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn later_layers_win_key_by_key_and_remember_their_origin() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let cwd = dir.path().join("project");
        std::fs::create_dir_all(home.join("x")).unwrap();
        std::fs::create_dir_all(cwd.join(".dsh")).unwrap();
        std::fs::write(
            home.join("config.toml"),
            "[model]\nname = \"deepseek-v4-pro\"\n\n[plugins.bash]\ntimeout_ms = 1000\n",
        )
        .unwrap();
        std::fs::write(
            cwd.join(".dsh/config.toml"),
            "# project\n[plugins.bash]\nenabled = false\n",
        )
        .unwrap();
        let mut overrides = Overrides::default();
        overrides.set("tools.max_parallel", 3);
        let config = Config::load_in(home.clone(), &cwd, &overrides).unwrap();
        assert_eq!(config.get_str("model.name"), Some("deepseek-v4-pro"));
        let origin = config.origin("model.name");
        assert_eq!(origin.layer, Layer::User);
        assert_eq!(origin.line, Some(2));
        assert_eq!(config.origin("plugins.bash.timeout_ms").line, Some(5));
        let enabled = config.origin("plugins.bash.enabled");
        assert_eq!(enabled.layer, Layer::Project);
        assert_eq!(enabled.line, Some(3));
        assert_eq!(config.origin("tools.max_parallel").layer, Layer::Flag);
        assert_eq!(
            config.origin_exact("model.provider"),
            None,
            "never set by a layer"
        );
        assert_eq!(
            config.origin("model.provider").layer,
            Layer::User,
            "its table was"
        );
    }

    #[test]
    fn a_malformed_file_names_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "[model]\nname = \n").unwrap();
        let error = read_file(&path).unwrap_err();
        assert_eq!(error.file.as_deref(), Some(path.as_path()));
        assert_eq!(error.line, Some(2));
        assert!(error.to_string().contains("not valid TOML"), "{error}");
        // The key is named too, not an empty one (":2: : not valid TOML").
        assert_eq!(error.key, "model.name");
        assert!(
            error.to_string().contains(":2: model.name: not valid TOML"),
            "{error}"
        );
        std::fs::write(&path, "[plugins.\"web-search\"]\nfetch = tru\n").unwrap();
        let error = read_file(&path).unwrap_err();
        assert_eq!(error.key, "plugins.web-search.fetch", "{error}");
        assert!(
            read_file(&dir.path().join("missing.toml"))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn assignments_parse_toml_values_or_fall_back_to_strings() {
        assert_eq!(
            Overrides::parse_assignment("plugins.bash.timeout_ms=500").unwrap(),
            ("plugins.bash.timeout_ms".to_owned(), Value::from(500))
        );
        assert_eq!(
            Overrides::parse_assignment("model.name=deepseek-v4-pro").unwrap(),
            ("model.name".to_owned(), Value::from("deepseek-v4-pro"))
        );
        assert_eq!(
            Overrides::parse_assignment("novalue")
                .unwrap_err()
                .to_string(),
            "expected key=value, got \"novalue\""
        );
        assert_eq!(
            Overrides::parse_assignment("a..b=1"),
            Err(AssignmentError::InvalidKey("a..b".into()))
        );
    }
}
