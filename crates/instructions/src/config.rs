//! The plugin's configuration (§2.1). Keys in upstream's camelCase or dsh's snake_case.

use std::path::Path;
use std::path::PathBuf;

use serde_json::Map;
use serde_json::Value;
use serde_json::json;

const PREFIX: &str = "agent-instructions";

/// A load error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Where the user-global file lives and how it is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DshHome {
    pub path: PathBuf,
    /// `true` when the home is the default `~/.dsh` (shown as `~/.dsh/AGENTS.md`).
    pub is_default: bool,
}

impl DshHome {
    /// The display path of the user-global file.
    pub fn global_display(&self) -> &'static str {
        if self.is_default {
            "~/.dsh/AGENTS.md"
        } else {
            "$DSH_HOME/AGENTS.md"
        }
    }
}

/// What the process environment contributes (injected for tests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    /// `$DSH_HOME` (counts only when non-blank).
    pub dsh_home: Option<String>,
    /// The user's home directory.
    pub home: Option<PathBuf>,
}

impl Environment {
    pub fn from_process() -> Self {
        Self {
            dsh_home: std::env::var("DSH_HOME").ok(),
            home: std::env::var_os("HOME").map(PathBuf::from),
        }
    }
}

/// The validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct InstructionsConfig {
    pub dsh_home: DshHome,
    pub project_root_markers: Vec<String>,
    /// `None`: `maxBytes <= 0` — the plugin is a no-op.
    pub max_bytes: Option<usize>,
    /// `maxBytes` as configured, for the baseline identity.
    max_bytes_value: Value,
    pub max_source_bytes: u64,
    pub candidates: Vec<String>,
    pub local_candidates: Vec<String>,
}

fn expand(raw: &str, home: Option<&Path>) -> PathBuf {
    let rest = raw
        .strip_prefix("~/")
        .or_else(|| raw.strip_prefix("~\\"))
        .or_else(|| (raw == "~").then_some(""));
    match (rest, home) {
        (Some(""), Some(home)) => home.to_path_buf(),
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(raw),
    }
}

fn names(key: &str, value: &Value) -> Result<Vec<String>, ConfigError> {
    let list = value
        .as_array()
        .ok_or_else(|| ConfigError(format!("{PREFIX}: {key} must be an array of strings")))?;
    let mut out = Vec::new();
    for entry in list {
        let name = entry
            .as_str()
            .ok_or_else(|| ConfigError(format!("{PREFIX}: {key} must be an array of strings")))?;
        out.push(name.to_owned());
    }
    Ok(out)
}

/// Candidate names that could escape a directory are dropped silently.
fn valid_candidates(list: Vec<String>) -> Vec<String> {
    list.into_iter()
        .filter(|n| !n.is_empty() && n != "." && n != ".." && !n.contains(['/', '\\']))
        .collect()
}

impl InstructionsConfig {
    /// Validates `value` against `env`.
    pub fn parse(value: &Value, env: &Environment) -> Result<Self, ConfigError> {
        let empty = Map::new();
        let map = match value {
            Value::Object(map) => map,
            Value::Null => &empty,
            _ => return Err(ConfigError(format!("{PREFIX}: config must be an object"))),
        };
        let mut dsh_home = None;
        let mut markers = vec![".git".to_owned()];
        let mut max_bytes = None;
        let mut max_source_bytes = 1_048_576u64;
        let mut candidates = vec!["AGENTS.md".to_owned(), "CLAUDE.md".to_owned()];
        let mut local = vec!["AGENTS.local.md".to_owned(), "CLAUDE.local.md".to_owned()];
        for (key, value) in map {
            match key.as_str() {
                "dshHome" | "dsh_home" => {
                    let raw = value.as_str().ok_or_else(|| {
                        ConfigError(format!("{PREFIX}: dshHome must be a string"))
                    })?;
                    dsh_home = Some(raw.to_owned());
                }
                "projectRootMarkers" | "project_root_markers" => {
                    markers = names("projectRootMarkers", value)?;
                }
                "maxBytes" | "max_bytes" => {
                    if !value.is_number() {
                        return Err(ConfigError(format!("{PREFIX}: maxBytes must be a number")));
                    }
                    max_bytes = Some(value.clone());
                }
                "maxSourceBytes" | "max_source_bytes" => {
                    max_source_bytes = value.as_u64().filter(|v| *v >= 1).ok_or_else(|| {
                        ConfigError(format!("{PREFIX}: maxSourceBytes must be an integer >= 1"))
                    })?;
                }
                "instructionFileCandidates" | "instruction_file_candidates" => {
                    candidates = names("instructionFileCandidates", value)?;
                }
                "localInstructionFileCandidates" | "local_instruction_file_candidates" => {
                    local = names("localInstructionFileCandidates", value)?;
                }
                other => return Err(ConfigError(format!("{PREFIX}: unknown key \"{other}\""))),
            }
        }
        let Some(max_bytes_value) = max_bytes else {
            return Err(ConfigError(format!("{PREFIX}: maxBytes is required")));
        };
        let limit = max_bytes_value
            .as_f64()
            .filter(|v| v.is_finite() && *v > 0.0)
            .map(|v| v.floor() as usize);
        let default_home = env.home.as_ref().map(|h| h.join(".dsh"));
        let path = match dsh_home {
            Some(raw) => expand(&raw, env.home.as_deref()),
            None => match env.dsh_home.as_deref().filter(|v| !v.trim().is_empty()) {
                Some(raw) => expand(raw, env.home.as_deref()),
                None => default_home
                    .clone()
                    .unwrap_or_else(|| PathBuf::from(".dsh")),
            },
        };
        let is_default = default_home.as_deref() == Some(path.as_path());
        Ok(Self {
            dsh_home: DshHome { path, is_default },
            project_root_markers: markers,
            max_bytes: limit,
            max_bytes_value,
            max_source_bytes,
            candidates: valid_candidates(candidates),
            local_candidates: valid_candidates(local),
        })
    }

    /// `baselineIdentity`: what a compatible baseline must share.
    pub fn identity(&self, cwd: &Path, project_root: &Path) -> String {
        json!({
            "projectRoot": relative(cwd, project_root),
            "projectRootMarkers": self.project_root_markers,
            "maxBytes": self.max_bytes_value,
            "maxSourceBytes": self.max_source_bytes,
            "instructionFileCandidates": self.candidates,
            "localInstructionFileCandidates": self.local_candidates,
        })
        .to_string()
    }
}

/// `path.relative(from, to)` for an ancestor-or-self `to` (`""`, `..`, `../..`).
pub fn relative(from: &Path, to: &Path) -> String {
    match from.strip_prefix(to) {
        Ok(rest) => {
            let depth = rest.components().count();
            vec![".."; depth].join("/")
        }
        Err(_) => to.to_string_lossy().into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn env() -> Environment {
        Environment {
            dsh_home: None,
            home: Some(PathBuf::from("/home/u")),
        }
    }

    #[test]
    fn defaults_and_the_scenario_identity() {
        let config = InstructionsConfig::parse(&json!({"maxBytes": 65536}), &env()).unwrap();
        assert_eq!(config.dsh_home.path, PathBuf::from("/home/u/.dsh"));
        assert!(config.dsh_home.is_default);
        assert_eq!(config.dsh_home.global_display(), "~/.dsh/AGENTS.md");
        assert_eq!(config.max_bytes, Some(65536));
        let config = InstructionsConfig::parse(
            &json!({"maxBytes": 65536, "dshHome": "/w/.dsh", "projectRootMarkers": [".dsh-project"]}),
            &env(),
        )
        .unwrap();
        assert_eq!(config.dsh_home.global_display(), "$DSH_HOME/AGENTS.md");
        assert_eq!(
            config.identity(Path::new("/w"), Path::new("/w")),
            "{\"projectRoot\":\"\",\"projectRootMarkers\":[\".dsh-project\"],\"maxBytes\":65536,\"maxSourceBytes\":1048576,\"instructionFileCandidates\":[\"AGENTS.md\",\"CLAUDE.md\"],\"localInstructionFileCandidates\":[\"AGENTS.local.md\",\"CLAUDE.local.md\"]}"
        );
        assert_eq!(relative(Path::new("/w/a/b"), Path::new("/w")), "../..");
    }

    #[test]
    fn home_sources_and_expansion() {
        let from_env = Environment {
            dsh_home: Some("~/custom".into()),
            home: Some(PathBuf::from("/home/u")),
        };
        let config = InstructionsConfig::parse(&json!({"max_bytes": 10}), &from_env).unwrap();
        assert_eq!(config.dsh_home.path, PathBuf::from("/home/u/custom"));
        assert!(!config.dsh_home.is_default);
        let blank = Environment {
            dsh_home: Some("  ".into()),
            home: Some(PathBuf::from("/home/u")),
        };
        let config = InstructionsConfig::parse(&json!({"maxBytes": 10}), &blank).unwrap();
        assert!(config.dsh_home.is_default);
        let config =
            InstructionsConfig::parse(&json!({"maxBytes": 10, "dshHome": "~"}), &env()).unwrap();
        assert_eq!(config.dsh_home.path, PathBuf::from("/home/u"));
    }

    #[test]
    fn validation() {
        let err = |v: Value| InstructionsConfig::parse(&v, &env()).unwrap_err().0;
        assert_eq!(err(json!({})), "agent-instructions: maxBytes is required");
        assert_eq!(
            err(json!({"maxBytes": 1, "x": 1})),
            "agent-instructions: unknown key \"x\""
        );
        assert_eq!(
            err(json!({"maxBytes": 1, "maxSourceBytes": 0})),
            "agent-instructions: maxSourceBytes must be an integer >= 1"
        );
        // Non-positive maxBytes disables the plugin instead of failing.
        let off = InstructionsConfig::parse(&json!({"maxBytes": 0}), &env()).unwrap();
        assert_eq!(off.max_bytes, None);
        let off = InstructionsConfig::parse(&json!({"maxBytes": -5}), &env()).unwrap();
        assert_eq!(off.max_bytes, None);
        // Unsafe candidate names are dropped silently; [] disables overlays.
        let config = InstructionsConfig::parse(
            &json!({"maxBytes": 1, "instructionFileCandidates": ["", ".", "..", "a/b", "a\\b", "RULES.md"],
                    "localInstructionFileCandidates": []}),
            &env(),
        )
        .unwrap();
        assert_eq!(config.candidates, vec!["RULES.md".to_owned()]);
        assert!(config.local_candidates.is_empty());
    }
}
