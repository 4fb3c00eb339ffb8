//! The tables the host itself reads: `[model]`, `[tools]` and `[prompt]`. Every other table is
//! a plugin's (`[plugins.<name>]`) or folded into one (`[[mcp.servers]]`).

use serde::Deserialize;
use serde::Serialize;

use dsh_tools::PresentationMode;

/// The top-level tables a configuration may have (`projects` is the user's trust list).
pub const TOP_LEVEL: [&str; 6] = ["model", "tools", "prompt", "plugins", "mcp", "projects"];

/// How hard a reasoning model thinks (`[model] reasoning_effort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    /// No reasoning (DeepSeek: thinking disabled).
    Off,
    Low,
    Medium,
    High,
    Max,
}

impl ReasoningEffort {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Max => "max",
        }
    }
}

/// One `[[model.catalog]]` entry: what a model id accepts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogEntry {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `text` and/or `image`.
    #[serde(default = "text_only")]
    pub input: Vec<Modality>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

/// An input modality of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Modality {
    Text,
    Image,
}

fn text_only() -> Vec<Modality> {
    vec![Modality::Text]
}

/// `[model]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSettings {
    /// Which adapter of the provider registry serves requests.
    #[serde(default = "default_provider")]
    pub provider: String,
    /// The model id sent to the provider.
    #[serde(default = "default_model")]
    pub name: String,
    /// The provider's base URL (default: the provider's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The environment variable holding the API key (default: the provider's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Input modalities and limits per model id, over the adapter's built-in list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub catalog: Vec<CatalogEntry>,
    /// How long one model attempt may stream, in seconds (default 1800); past it the attempt
    /// ends with `MODEL_ATTEMPT_TIMEOUT`. Keepalive comments re-arm the idle watchdog but
    /// never this deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_timeout_secs: Option<std::num::NonZeroU64>,
}

fn default_provider() -> String {
    dsh_llm::PROVIDER.to_owned()
}

fn default_model() -> String {
    dsh_llm::DEFAULT_MODEL.to_owned()
}

impl Default for ModelSettings {
    fn default() -> Self {
        Self {
            provider: default_provider(),
            name: default_model(),
            base_url: None,
            api_key_env: None,
            reasoning_effort: None,
            catalog: Vec::new(),
            attempt_timeout_secs: None,
        }
    }
}

/// `[tools]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsSettings {
    /// `native`, `code` or `both`.
    #[serde(default = "default_mode", with = "mode")]
    pub mode: PresentationMode,
    /// How many concurrency-safe tool calls of one step may run at once.
    #[serde(default = "default_max_parallel")]
    pub max_parallel: std::num::NonZeroUsize,
    /// How many tool calls of one model response run; the rest get a `TOO_MANY_TOOL_CALLS`
    /// error result.
    #[serde(default = "default_max_calls_per_response")]
    pub max_calls_per_response: std::num::NonZeroUsize,
}

fn default_mode() -> PresentationMode {
    PresentationMode::Native
}

fn default_max_parallel() -> std::num::NonZeroUsize {
    std::num::NonZeroUsize::new(dsh_agent::DEFAULT_MAX_PARALLEL_TOOL_CALLS)
        .unwrap_or(std::num::NonZeroUsize::MIN)
}

fn default_max_calls_per_response() -> std::num::NonZeroUsize {
    std::num::NonZeroUsize::new(dsh_agent::DEFAULT_MAX_CALLS_PER_RESPONSE)
        .unwrap_or(std::num::NonZeroUsize::MIN)
}

impl Default for ToolsSettings {
    fn default() -> Self {
        Self {
            mode: default_mode(),
            max_parallel: default_max_parallel(),
            max_calls_per_response: default_max_calls_per_response(),
        }
    }
}

mod mode {
    use dsh_tools::PresentationMode;
    use serde::Deserialize;

    pub fn serialize<S: serde::Serializer>(
        mode: &PresentationMode,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(mode.as_str())
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<PresentationMode, D::Error> {
        let text = String::deserialize(deserializer)?;
        match text.as_str() {
            "native" => Ok(PresentationMode::Native),
            "code" => Ok(PresentationMode::Code),
            "both" => Ok(PresentationMode::Both),
            other => Err(serde::de::Error::invalid_value(
                serde::de::Unexpected::Str(other),
                &"native, code or both",
            )),
        }
    }
}

/// The persona of a session when `[prompt] persona` is not set.
pub const DEFAULT_PERSONA: &str = "You are a coding agent powered by the {{model}} model. Your working directory is {{cwd}}. Work in small verified steps: read before you edit, run what you change, and keep answers brief and factual.";

/// `[prompt]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptSettings {
    /// The `deployment:persona` template (`{{model}}`, `{{cwd}}`, `{{provider}}`).
    #[serde(default = "default_persona")]
    pub persona: String,
}

fn default_persona() -> String {
    DEFAULT_PERSONA.to_owned()
}

impl Default for PromptSettings {
    fn default() -> Self {
        Self {
            persona: default_persona(),
        }
    }
}
