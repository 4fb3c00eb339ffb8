//! The on-disk scenario format (conformance README "scenario.json", "model.jsonl",
//! "tool-results.jsonl"). Fields the runner does not interpret stay as raw JSON so that new
//! converter fields never break loading.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{Result, TestkitError};

/// One loaded scenario directory.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub dir: PathBuf,
    pub spec: ScenarioSpec,
    pub model: Vec<ModelEntry>,
    pub tool_results: Vec<ToolResultRecord>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ScenarioSpec {
    pub suite: String,
    pub name: String,
    #[serde(default)]
    pub prompt_steps: Vec<Step>,
    #[serde(default)]
    pub permission_answers: Vec<PermissionAnswer>,
    #[serde(default)]
    pub features: Vec<String>,
    #[serde(default)]
    pub workspace: WorkspaceSpec,
    #[serde(default)]
    pub env: Map<String, Value>,
    #[serde(default)]
    pub sessions: Vec<SessionSpec>,
    #[serde(default)]
    pub expected: Map<String, Value>,
    #[serde(default)]
    pub spill_root: Option<String>,
    #[serde(default)]
    pub invocation: Option<Invocation>,
    #[serde(default)]
    pub tool_results_missing: Vec<String>,
    /// Provenance, including the composition files the recorded run used.
    #[serde(default)]
    pub upstream: Map<String, Value>,
    /// Test-only behaviour the recorded composition added (`fixture_plugins`).
    #[serde(default)]
    pub fixture_plugins: Vec<String>,
    /// `native`, `code` or `both`.
    #[serde(default)]
    pub mode: Option<String>,
}

/// One client-script step: the `op` plus its op-specific fields, kept raw.
#[derive(Debug, Clone, Deserialize)]
pub struct Step {
    pub op: String,
    #[serde(flatten)]
    pub args: Map<String, Value>,
}

impl Step {
    pub fn str_arg(&self, key: &str) -> Option<&str> {
        self.args.get(key).and_then(Value::as_str)
    }

    pub fn u64_arg(&self, key: &str) -> Option<u64> {
        self.args.get(key).and_then(Value::as_u64)
    }

    /// `waitForFile.path`, when the step names a marker file.
    pub fn wait_for_file(&self) -> Option<&str> {
        self.args
            .get("waitForFile")
            .and_then(|w| w.get("path"))
            .and_then(Value::as_str)
            .or_else(|| self.str_arg("path"))
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct PermissionAnswer {
    pub kind: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct WorkspaceSpec {
    #[serde(default)]
    pub files: Map<String, Value>,
    #[serde(default)]
    pub mtimes: Map<String, Value>,
    #[serde(default)]
    pub location: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SessionSpec {
    pub session: usize,
    #[serde(default)]
    pub first_user_text: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Invocation {
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub output: Option<String>,
    #[serde(default)]
    pub expected_exit_code: Option<i64>,
}

/// One recorded model response (a line of `model.jsonl`).
#[derive(Debug, Clone, Deserialize)]
pub struct ModelEntry {
    #[serde(default)]
    pub session: usize,
    #[serde(default = "main_route")]
    pub route: String,
    #[serde(default)]
    pub index: usize,
    pub kind: EntryKind,
    #[serde(default)]
    pub reasoning: Option<String>,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<RecordedToolCall>,
    #[serde(default)]
    pub finish_reason: Option<String>,
    #[serde(default)]
    pub usage: Option<Value>,
    #[serde(default)]
    pub error: Option<EntryError>,
    #[serde(default)]
    pub ready_file: Option<String>,
    #[serde(default, rename = "match")]
    pub match_: Option<RouteMatch>,
    #[serde(default)]
    pub stream: Option<Vec<StreamDelta>>,
    #[serde(default)]
    pub repeat: bool,
    #[serde(default)]
    pub after_stream: bool,
}

fn main_route() -> String {
    "main".to_owned()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    Response,
    Error,
    Hang,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RecordedToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
    #[serde(default)]
    pub streamed_arguments: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct EntryError {
    pub status: u16,
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub body: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RouteMatch {
    #[serde(default)]
    pub system_prefix: Option<String>,
}

/// One recorded stream delta. Exactly one of the variants' fields is set per element.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum StreamDelta {
    ToolCall {
        tool_call: usize,
        #[serde(default)]
        id: Option<String>,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        arguments: String,
    },
    Reasoning {
        reasoning: String,
    },
    Content {
        content: String,
    },
}

/// One recorded tool outcome (a line of `tool-results.jsonl`).
#[derive(Debug, Clone, Deserialize)]
pub struct ToolResultRecord {
    #[serde(default)]
    pub session: usize,
    pub call_id: String,
    pub name: String,
    pub is_error: bool,
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub nested_in: Option<String>,
}

impl Scenario {
    /// Loads `scenario.json`, `model.jsonl` and `tool-results.jsonl` from `dir`.
    pub fn load(dir: &Path) -> Result<Self> {
        let spec_path = dir.join("scenario.json");
        let text =
            std::fs::read_to_string(&spec_path).map_err(|e| TestkitError::io(&spec_path, e))?;
        let spec: ScenarioSpec =
            serde_json::from_str(&text).map_err(|source| TestkitError::Json {
                path: spec_path.clone(),
                source,
            })?;
        let model = read_jsonl(&dir.join("model.jsonl"))?;
        let tool_results = read_jsonl(&dir.join("tool-results.jsonl"))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            spec,
            model,
            tool_results,
        })
    }

    /// Builds a scenario from parts (tests and the in-process server use this).
    pub fn from_parts(spec: ScenarioSpec, model: Vec<ModelEntry>) -> Self {
        Self {
            dir: PathBuf::new(),
            spec,
            model,
            tool_results: Vec::new(),
        }
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Main-route tool calls the model emitted, in model order.
    pub fn recorded_calls(&self) -> impl Iterator<Item = &RecordedToolCall> {
        self.model
            .iter()
            .filter(|e| e.route == "main")
            .flat_map(|e| e.tool_calls.iter())
    }
}

/// Reads a JSON Lines file; a missing file is an empty list (the converter writes empty files,
/// but hand-made scenarios may omit them).
pub fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(TestkitError::io(path, e)),
    };
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v = serde_json::from_str(line).map_err(|source| TestkitError::JsonLine {
            path: path.to_path_buf(),
            line: i + 1,
            source,
        })?;
        out.push(v);
    }
    Ok(out)
}
