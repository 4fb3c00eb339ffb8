//! `BasicCompactionConfig` (§8.12) and the tool-result pruner's config (§8.9).
//!
//! Keys are accepted in upstream's camelCase and in dsh's snake_case (`threshold_ratio`);
//! messages name them as upstream does, so its texts stay exact.

use serde::Deserialize;
use serde::Deserializer;
use serde_json::Map;
use serde_json::Value;

use crate::pruner::PRUNE_MARKER;

/// A configuration load error (its text is the whole message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

const PREFIX: &str = "BasicCompactionConfig";

/// How much of the newest surface a pressure compaction keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Retention {
    Ratio(f64),
    Tokens(u64),
}

/// The policy in force for one provider/model.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub threshold_ratio: f64,
    pub retention: Retention,
    pub summarization_provider: String,
    pub summarization_model: String,
    pub max_tokens: u64,
    pub compaction_retries: u64,
    pub max_overflow_retries: u64,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            threshold_ratio: 0.8,
            retention: Retention::Ratio(0.16),
            summarization_provider: String::new(),
            summarization_model: String::new(),
            max_tokens: 8192,
            compaction_retries: 1,
            max_overflow_retries: 1,
        }
    }
}

impl Policy {
    /// The configured summarization route, when both halves are set.
    pub fn summarization_route(&self) -> Option<(&str, &str)> {
        (!self.summarization_provider.is_empty() && !self.summarization_model.is_empty()).then_some(
            (
                self.summarization_provider.as_str(),
                self.summarization_model.as_str(),
            ),
        )
    }

    /// `(threshold, retain)` tokens for a context window.
    pub fn scaled(&self, context_window: u64) -> (u64, u64) {
        let threshold = (context_window as f64 * self.threshold_ratio).floor() as u64;
        let retain = match self.retention {
            Retention::Ratio(ratio) => (context_window as f64 * ratio).floor() as u64,
            Retention::Tokens(tokens) => tokens,
        };
        (threshold, retain)
    }
}

/// A per-route override; only the keys it names replace the defaults.
#[derive(Debug, Clone, PartialEq)]
struct ModelPolicy {
    provider: String,
    model: String,
    patch: PolicyPatch,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct PolicyPatch {
    threshold_ratio: Option<f64>,
    retain_ratio: Option<f64>,
    retain_tokens: Option<u64>,
    summarization_provider: Option<String>,
    summarization_model: Option<String>,
    max_tokens: Option<u64>,
    compaction_retries: Option<u64>,
    max_overflow_retries: Option<u64>,
}

/// The validated compaction configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct BasicCompactionConfig {
    defaults: Policy,
    model_policies: Vec<ModelPolicy>,
    /// `false`: manual compaction only (no automatic listeners).
    pub auto: bool,
}

impl Default for BasicCompactionConfig {
    fn default() -> Self {
        Self {
            defaults: Policy::default(),
            model_policies: Vec::new(),
            auto: true,
        }
    }
}

const POLICY_KEYS: [(&str, &str); 8] = [
    ("thresholdRatio", "threshold_ratio"),
    ("retainRatio", "retain_ratio"),
    ("retainTokens", "retain_tokens"),
    ("summarizationProvider", "summarization_provider"),
    ("summarizationModel", "summarization_model"),
    ("maxTokens", "max_tokens"),
    ("compactionRetries", "compaction_retries"),
    ("maxOverflowRetries", "max_overflow_retries"),
];

fn canonical(key: &str, extra: &[(&'static str, &'static str)]) -> Option<&'static str> {
    POLICY_KEYS
        .iter()
        .chain(extra)
        .find(|(camel, snake)| key == *camel || key == *snake)
        .map(|(camel, _)| *camel)
}

fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn ratio(path: &str, key: &str, value: &Value) -> Result<f64, ConfigError> {
    match value.as_f64() {
        Some(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(ConfigError(format!(
            "{path}.{key} ({}) must be a number in (0, 1]",
            shown(value)
        ))),
    }
}

fn integer(path: &str, key: &str, value: &Value, positive: bool) -> Result<u64, ConfigError> {
    let valid = value
        .as_u64()
        .filter(|v| *v < (1u64 << 53) && (!positive || *v > 0));
    valid.ok_or_else(|| {
        ConfigError(format!(
            "{path}.{key} ({}) must be a {} integer",
            shown(value),
            if positive { "positive" } else { "non-negative" }
        ))
    })
}

fn string(path: &str, key: &str, value: &Value) -> Result<String, ConfigError> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| ConfigError(format!("{path}.{key} ({}) must be a string", shown(value))))
}

fn parse_patch(
    path: &str,
    map: &Map<String, Value>,
    extra: &[(&'static str, &'static str)],
) -> Result<PolicyPatch, ConfigError> {
    let mut patch = PolicyPatch::default();
    for (key, value) in map {
        let Some(key) = canonical(key, extra) else {
            return Err(ConfigError(format!("{PREFIX}: unknown key \"{key}\"")));
        };
        match key {
            "thresholdRatio" => patch.threshold_ratio = Some(ratio(path, key, value)?),
            "retainRatio" => patch.retain_ratio = Some(ratio(path, key, value)?),
            "retainTokens" => patch.retain_tokens = Some(integer(path, key, value, false)?),
            "summarizationProvider" => {
                patch.summarization_provider = Some(string(path, key, value)?);
            }
            "summarizationModel" => patch.summarization_model = Some(string(path, key, value)?),
            "maxTokens" => patch.max_tokens = Some(integer(path, key, value, true)?),
            "compactionRetries" => {
                patch.compaction_retries = Some(integer(path, key, value, false)?);
            }
            "maxOverflowRetries" => {
                patch.max_overflow_retries = Some(integer(path, key, value, false)?);
            }
            _ => {}
        }
    }
    if patch.retain_ratio.is_some() && patch.retain_tokens.is_some() {
        return Err(ConfigError(format!(
            "{PREFIX}: retainRatio and retainTokens are mutually exclusive"
        )));
    }
    Ok(patch)
}

impl PolicyPatch {
    fn apply(&self, base: &Policy) -> Result<Policy, ConfigError> {
        let mut policy = base.clone();
        if let Some(v) = self.threshold_ratio {
            policy.threshold_ratio = v;
        }
        if let Some(v) = self.retain_ratio {
            policy.retention = Retention::Ratio(v);
        }
        if let Some(v) = self.retain_tokens {
            policy.retention = Retention::Tokens(v);
        }
        if let Some(v) = &self.summarization_provider {
            policy.summarization_provider = v.clone();
        }
        if let Some(v) = &self.summarization_model {
            policy.summarization_model = v.clone();
        }
        if let Some(v) = self.max_tokens {
            policy.max_tokens = v;
        }
        if let Some(v) = self.compaction_retries {
            policy.compaction_retries = v;
        }
        if let Some(v) = self.max_overflow_retries {
            policy.max_overflow_retries = v;
        }
        if policy.summarization_provider.is_empty() != policy.summarization_model.is_empty() {
            return Err(ConfigError(format!(
                "{PREFIX}: summarizationProvider and summarizationModel must be set together as an empty or non-empty pair"
            )));
        }
        if let Retention::Ratio(retain) = policy.retention
            && retain >= policy.threshold_ratio
        {
            return Err(ConfigError(format!(
                "{PREFIX}: retainRatio ({retain}) must be less than the resolved thresholdRatio ({})",
                policy.threshold_ratio
            )));
        }
        Ok(policy)
    }
}

impl BasicCompactionConfig {
    /// Validates a config value (`null` = defaults).
    pub fn parse(value: &Value) -> Result<Self, ConfigError> {
        let empty = Map::new();
        let map = match value {
            Value::Null => &empty,
            Value::Object(map) => map,
            other => {
                return Err(ConfigError(format!(
                    "{PREFIX} must be an object, got {}",
                    shown(other)
                )));
            }
        };
        let mut top = Map::new();
        let mut auto = true;
        let mut policies_value = None;
        for (key, value) in map {
            match key.as_str() {
                "auto" => {
                    auto = value.as_bool().ok_or_else(|| {
                        ConfigError(format!(
                            "{PREFIX}.auto ({}) must be a boolean",
                            shown(value)
                        ))
                    })?;
                }
                "modelPolicies" | "model_policies" => policies_value = Some(value),
                _ => {
                    top.insert(key.clone(), value.clone());
                }
            }
        }
        let defaults = parse_patch(PREFIX, &top, &[])?.apply(&Policy::default())?;
        let mut model_policies: Vec<ModelPolicy> = Vec::new();
        if let Some(value) = policies_value {
            let list = value.as_array().ok_or_else(|| {
                ConfigError(format!(
                    "{PREFIX}.modelPolicies ({}) must be an array",
                    shown(value)
                ))
            })?;
            for (index, entry) in list.iter().enumerate() {
                let path = format!("{PREFIX}.modelPolicies[{index}]");
                let route = entry.as_object().and_then(|map| {
                    let provider = map.get("provider")?.as_str()?.to_owned();
                    let model = map.get("model")?.as_str()?.to_owned();
                    Some((map, provider, model))
                });
                let Some((map, provider, model)) = route else {
                    return Err(ConfigError(format!(
                        "{path} must be an object with string provider and model"
                    )));
                };
                let mut rest = map.clone();
                rest.remove("provider");
                rest.remove("model");
                let patch = parse_patch(&path, &rest, &[])?;
                patch.apply(&defaults)?;
                if model_policies
                    .iter()
                    .any(|p| p.provider == provider && p.model == model)
                {
                    return Err(ConfigError(format!(
                        "{PREFIX}: duplicate model policy for {provider}/{model}"
                    )));
                }
                model_policies.push(ModelPolicy {
                    provider,
                    model,
                    patch,
                });
            }
        }
        Ok(Self {
            defaults,
            model_policies,
            auto,
        })
    }

    /// The defaults merged with the exact `{provider, model}` override, if any.
    pub fn policy(&self, provider: &str, model: &str) -> Policy {
        self.model_policies
            .iter()
            .find(|p| p.provider == provider && p.model == model)
            .and_then(|p| p.patch.apply(&self.defaults).ok())
            .unwrap_or_else(|| self.defaults.clone())
    }
}

impl<'de> Deserialize<'de> for BasicCompactionConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::parse(&value).map_err(serde::de::Error::custom)
    }
}

/// `ToolResultPruneConfig` (§8.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolResultPruneConfig {
    pub threshold_chars: u64,
    pub head_chars: u64,
    pub tail_chars: u64,
}

impl Default for ToolResultPruneConfig {
    fn default() -> Self {
        Self {
            threshold_chars: 8192,
            head_chars: 4096,
            tail_chars: 1024,
        }
    }
}

impl ToolResultPruneConfig {
    pub fn parse(value: &Value) -> Result<Self, ConfigError> {
        const PRUNE: &str = "ToolResultPruneConfig";
        let empty = Map::new();
        let map = match value {
            Value::Null => &empty,
            Value::Object(map) => map,
            other => {
                return Err(ConfigError(format!(
                    "{PRUNE} must be an object, got {}",
                    shown(other)
                )));
            }
        };
        let mut config = Self::default();
        for (key, value) in map {
            let (name, slot, positive) = match key.as_str() {
                "thresholdChars" | "threshold_chars" => {
                    ("thresholdChars", &mut config.threshold_chars, true)
                }
                "headChars" | "head_chars" => ("headChars", &mut config.head_chars, false),
                "tailChars" | "tail_chars" => ("tailChars", &mut config.tail_chars, false),
                _ => {
                    return Err(ConfigError(format!(
                        "{PRUNE}: unknown key \"{key}\" (allowed: thresholdChars, headChars, tailChars)"
                    )));
                }
            };
            *slot = integer(PRUNE, name, value, positive)?;
        }
        let marker = PRUNE_MARKER.chars().count() as u64;
        let kept = config.head_chars + marker + config.tail_chars;
        if kept > config.threshold_chars {
            return Err(ConfigError(format!(
                "{PRUNE}: headChars + marker + tailChars ({kept}) must be at most thresholdChars ({})",
                config.threshold_chars
            )));
        }
        Ok(config)
    }
}

impl<'de> Deserialize<'de> for ToolResultPruneConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::parse(&value).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn error(value: Value) -> String {
        BasicCompactionConfig::parse(&value).unwrap_err().0
    }

    #[test]
    fn defaults_scale_to_the_deepseek_window() {
        // Checklist E45: threshold 800 000, retained tail >= 160 000.
        let config = BasicCompactionConfig::parse(&Value::Null).unwrap();
        assert!(config.auto);
        let policy = config.policy("deepseek-official", "deepseek-v4-flash");
        assert_eq!(policy.scaled(1_000_000), (800_000, 160_000));
        assert_eq!(policy.max_tokens, 8192);
        assert_eq!(policy.compaction_retries, 1);
        assert_eq!(policy.max_overflow_retries, 1);
        assert_eq!(policy.summarization_route(), None);
    }

    #[test]
    fn the_recovery_scenario_policy_parses() {
        let config = BasicCompactionConfig::parse(
            &json!({"thresholdRatio": 0.99, "retainTokens": 20, "maxTokens": 32}),
        )
        .unwrap();
        let policy = config.policy("p", "m");
        assert_eq!(policy.scaled(128_000), (126_720, 20));
        assert_eq!(policy.max_tokens, 32);
        let snake = BasicCompactionConfig::parse(
            &json!({"threshold_ratio": 0.99, "retain_tokens": 20, "max_tokens": 32}),
        )
        .unwrap();
        assert_eq!(snake, config);
    }

    #[test]
    fn load_errors_use_the_specified_texts() {
        assert_eq!(
            error(json!({"bogus": 1})),
            "BasicCompactionConfig: unknown key \"bogus\""
        );
        assert_eq!(
            error(json!({"retainRatio": 0.1, "retainTokens": 5})),
            "BasicCompactionConfig: retainRatio and retainTokens are mutually exclusive"
        );
        assert_eq!(
            error(json!({"thresholdRatio": 0.5, "retainRatio": 0.6})),
            "BasicCompactionConfig: retainRatio (0.6) must be less than the resolved thresholdRatio (0.5)"
        );
        assert_eq!(
            error(json!({"thresholdRatio": 0.1})),
            "BasicCompactionConfig: retainRatio (0.16) must be less than the resolved thresholdRatio (0.1)"
        );
        assert_eq!(
            error(json!({"summarizationProvider": "p"})),
            "BasicCompactionConfig: summarizationProvider and summarizationModel must be set together as an empty or non-empty pair"
        );
        assert_eq!(
            error(json!({"thresholdRatio": 1.5})),
            "BasicCompactionConfig.thresholdRatio (1.5) must be a number in (0, 1]"
        );
        assert_eq!(
            error(json!({"thresholdRatio": 0})),
            "BasicCompactionConfig.thresholdRatio (0) must be a number in (0, 1]"
        );
        assert_eq!(
            error(json!({"maxTokens": 0})),
            "BasicCompactionConfig.maxTokens (0) must be a positive integer"
        );
        assert_eq!(
            error(json!({"maxTokens": 2.5})),
            "BasicCompactionConfig.maxTokens (2.5) must be a positive integer"
        );
        assert_eq!(
            error(json!({"compactionRetries": -1})),
            "BasicCompactionConfig.compactionRetries (-1) must be a non-negative integer"
        );
        assert_eq!(
            error(json!({"auto": "yes"})),
            "BasicCompactionConfig.auto (yes) must be a boolean"
        );
        assert_eq!(
            error(json!({"modelPolicies": [
                {"provider": "p", "model": "m", "maxTokens": 5},
                {"provider": "p", "model": "m"}
            ]})),
            "BasicCompactionConfig: duplicate model policy for p/m"
        );
        assert_eq!(
            error(json!({"modelPolicies": [{"provider": "p"}]})),
            "BasicCompactionConfig.modelPolicies[0] must be an object with string provider and model"
        );
        assert_eq!(
            error(json!({"modelPolicies": [{"provider": "p", "model": "m", "zap": 1}]})),
            "BasicCompactionConfig: unknown key \"zap\""
        );
    }

    #[test]
    fn a_model_policy_overrides_exactly_its_route_and_its_retention() {
        let config = BasicCompactionConfig::parse(&json!({
            "retainRatio": 0.1,
            "modelPolicies": [{"provider": "p", "model": "small", "thresholdRatio": 0.5, "retainTokens": 100}]
        }))
        .unwrap();
        let small = config.policy("p", "small");
        assert_eq!(small.threshold_ratio, 0.5);
        assert_eq!(small.retention, Retention::Tokens(100));
        let other = config.policy("p", "big");
        assert_eq!(other.threshold_ratio, 0.8);
        assert_eq!(other.retention, Retention::Ratio(0.1));
        // A policy's retainRatio is checked against its own resolved threshold.
        assert_eq!(
            error(
                json!({"modelPolicies": [{"provider": "p", "model": "m", "thresholdRatio": 0.1}]})
            ),
            "BasicCompactionConfig: retainRatio (0.16) must be less than the resolved thresholdRatio (0.1)"
        );
        let manual = BasicCompactionConfig::parse(&json!({"auto": false})).unwrap();
        assert!(!manual.auto);
    }

    #[test]
    fn pruner_config_validates_keys_and_the_kept_size() {
        assert_eq!(
            ToolResultPruneConfig::parse(&Value::Null).unwrap(),
            ToolResultPruneConfig::default()
        );
        assert_eq!(
            ToolResultPruneConfig::parse(&json!({"head": 1}))
                .unwrap_err()
                .0,
            "ToolResultPruneConfig: unknown key \"head\" (allowed: thresholdChars, headChars, tailChars)"
        );
        assert_eq!(
            ToolResultPruneConfig::parse(
                &json!({"thresholdChars": 100, "headChars": 50, "tailChars": 20})
            )
            .unwrap_err()
            .0,
            "ToolResultPruneConfig: headChars + marker + tailChars (109) must be at most thresholdChars (100)"
        );
        assert_eq!(
            ToolResultPruneConfig::parse(&json!({"thresholdChars": 0}))
                .unwrap_err()
                .0,
            "ToolResultPruneConfig.thresholdChars (0) must be a positive integer"
        );
        let small = ToolResultPruneConfig::parse(
            &json!({"threshold_chars": 100, "head_chars": 30, "tail_chars": 20}),
        )
        .unwrap();
        assert_eq!(small.head_chars, 30);
    }
}
