//! The repeat-tool reminder: counts consecutive identical tracked calls per agent (a
//! `tools/post-execute` listener, so denied calls count too) and, at each configured threshold,
//! adds a reminder as an additional context. A user message claimed at pre-step resets the
//! agent's chain. Never vetoes, never rewrites a result.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::AgentHooks;
use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_kernel::ScopeId;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_tools::PostDecision;
use dsh_tools::ToolRegistry;
use serde_json::Map;
use serde_json::Value;

pub const PLUGIN: &str = "repeat-tool-reminder";

/// The gentle reminder (first threshold), exactly.
pub const GENTLE: &str = "You are repeating the exact same tool call with identical arguments. Carefully analyze the previous result before calling again: if the task is not complete, try a different approach or different arguments instead of repeating the call.";

/// Configuration as written (`thresholds` numbers are validated at load).
#[derive(Debug, Clone, PartialEq)]
pub struct RepeatConfig {
    pub thresholds: Vec<f64>,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    pub arguments_preview_chars: f64,
}

impl Default for RepeatConfig {
    fn default() -> Self {
        Self {
            thresholds: vec![3.0, 5.0, 8.0],
            include: Vec::new(),
            exclude: Vec::new(),
            arguments_preview_chars: 500.0,
        }
    }
}

fn js_number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e21 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

/// Why `[plugins.repeat]` was refused (upstream's load-time messages; numbers as JavaScript
/// prints them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RepeatConfigError {
    #[error("{PLUGIN}: `thresholds` must not be empty")]
    NoThresholds,
    #[error("{PLUGIN}: invalid threshold {0} — every threshold must be an integer >= 2")]
    Threshold(String),
    #[error("{PLUGIN}: `thresholds` must not contain duplicates")]
    DuplicateThreshold,
    #[error("{PLUGIN}: invalid argumentsPreviewChars {0} — must be an integer >= 1")]
    PreviewChars(String),
}

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Repeat {
    thresholds: Vec<u64>,
    include: Vec<Wildcard>,
    exclude: Vec<Wildcard>,
    preview: usize,
}

impl Repeat {
    /// Validates `config` with upstream's load-time messages.
    pub fn new(config: &RepeatConfig) -> Result<Self, RepeatConfigError> {
        if config.thresholds.is_empty() {
            return Err(RepeatConfigError::NoThresholds);
        }
        let mut thresholds = Vec::new();
        for &value in &config.thresholds {
            if !(value.is_finite() && value.fract() == 0.0 && value >= 2.0) {
                return Err(RepeatConfigError::Threshold(js_number(value)));
            }
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let value = value as u64;
            if thresholds.contains(&value) {
                return Err(RepeatConfigError::DuplicateThreshold);
            }
            thresholds.push(value);
        }
        thresholds.sort_unstable();
        let preview = config.arguments_preview_chars;
        if !(preview.is_finite() && preview.fract() == 0.0 && preview >= 1.0) {
            return Err(RepeatConfigError::PreviewChars(js_number(preview)));
        }
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let preview = preview as usize;
        Ok(Self {
            thresholds,
            include: config.include.iter().map(|p| Wildcard::new(p)).collect(),
            exclude: config.exclude.iter().map(|p| Wildcard::new(p)).collect(),
            preview,
        })
    }

    fn tracks(&self, tool: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|w| w.matches(tool)))
            && !self.exclude.iter().any(|w| w.matches(tool))
    }

    /// The reminder for the `count`-th consecutive call, if `count` is a threshold.
    pub fn reminder(&self, tool: &str, canonical: &str, count: u64) -> Option<Message> {
        let first = *self.thresholds.first()?;
        if !self.thresholds.contains(&count) {
            return None;
        }
        let text = if count == first {
            GENTLE.to_owned()
        } else {
            format!(
                "Repeated tool call detected:\n- tool: {tool}\n- consecutive_calls: {count}\n- arguments: {}\nThe repeated calls are not making progress. Do not call this tool with these exact arguments again. Inspect the latest result and choose a different action, different arguments, or finish the task if enough evidence has been gathered.",
                preview(canonical, self.preview)
            )
        };
        Some(Message::user(
            vec![ContentBlock::text(text)],
            MessageSource::plugin(PLUGIN)
                .with("form", "notice")
                .with("summary", format!("{tool} \u{d7} {count}")),
        ))
    }
}

/// `*` wildcards, anchored, case-sensitive.
#[derive(Debug, Clone)]
struct Wildcard(Vec<String>);

impl Wildcard {
    fn new(pattern: &str) -> Self {
        Self(pattern.split('*').map(str::to_owned).collect())
    }

    fn matches(&self, text: &str) -> bool {
        let parts = &self.0;
        let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
            return false;
        };
        if parts.len() == 1 {
            return text == first;
        }
        if !text.starts_with(first.as_str()) || text.len() < first.len() + last.len() {
            return false;
        }
        let mut rest = &text[first.len()..text.len() - last.len()];
        if !text.ends_with(last.as_str()) {
            return false;
        }
        for middle in &parts[1..parts.len() - 1] {
            match rest.find(middle.as_str()) {
                Some(at) => rest = &rest[at + middle.len()..],
                None => return false,
            }
        }
        true
    }
}

fn utf16_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

fn sort_keys(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| utf16_cmp(a, b));
            let mut sorted = Map::new();
            for key in keys {
                sorted.insert(key.clone(), sort_keys(&map[key]));
            }
            Value::Object(sorted)
        }
        Value::Array(items) => Value::Array(items.iter().map(sort_keys).collect()),
        other => other.clone(),
    }
}

/// `JSON.stringify(deepKeySort(arguments))`.
pub fn canonical(arguments: &Value) -> String {
    sort_keys(arguments).to_string()
}

/// The preview: the canonical text, or its first `cap` UTF-16 units and the omitted count.
pub fn preview(canonical: &str, cap: usize) -> String {
    let total = canonical.encode_utf16().count();
    if total <= cap {
        return canonical.to_owned();
    }
    let mut units = 0;
    let mut kept = String::new();
    for ch in canonical.chars() {
        if units + ch.len_utf16() > cap {
            break;
        }
        units += ch.len_utf16();
        kept.push(ch);
    }
    format!("{kept}… (+{} more chars)", total - units)
}

#[derive(Default)]
struct Chains(Mutex<HashMap<ScopeId, (String, u64)>>);

impl Chains {
    fn bump(&self, agent: ScopeId, key: String) -> u64 {
        let mut chains = dsh_sync::lock(&self.0);
        let entry = chains.entry(agent).or_insert_with(|| (String::new(), 0));
        if entry.0 == key {
            entry.1 += 1;
        } else {
            *entry = (key, 1);
        }
        entry.1
    }

    fn reset(&self, agent: ScopeId) {
        dsh_sync::lock(&self.0).remove(&agent);
    }
}

/// Registers the reminder (post-execute) and its reset (pre-step), owned by `owner`.
pub fn install(
    registry: &ToolRegistry,
    hooks: &AgentHooks,
    owner: &Scope,
    repeat: Repeat,
) -> Vec<Disposer> {
    let chains = Arc::new(Chains::default());
    let repeat = Arc::new(repeat);
    let mut disposers = Vec::new();
    {
        let chains = chains.clone();
        disposers.push(registry.post_execute().register(owner, move |input, next| {
            let (chains, repeat) = (chains.clone(), repeat.clone());
            Box::pin(async move {
                let exec = input.exec.clone();
                let agent = exec.subject().and_then(Scope::nearest_agent);
                let reminder = match agent {
                    Some(agent) if repeat.tracks(exec.name()) => {
                        let args = exec.arguments().map_or(Value::Null, |a| (**a).clone());
                        let canonical = canonical(&args);
                        let key = Value::Array(vec![exec.name().into(), canonical.clone().into()])
                            .to_string();
                        let count = chains.bump(agent.id(), key);
                        repeat.reminder(exec.name(), &canonical, count)
                    }
                    _ => None,
                };
                let mut downstream = next.run(input).await?;
                if let Some(reminder) = reminder {
                    match &mut downstream {
                        PostDecision::Accept {
                            additional_contexts,
                            ..
                        }
                        | PostDecision::Block {
                            additional_contexts,
                            ..
                        } => additional_contexts.insert(0, reminder),
                    }
                }
                Ok(downstream)
            })
        }));
    }
    disposers.push(hooks.pre_step.register(owner, move |input, next| {
        let chains = chains.clone();
        Box::pin(async move {
            if input.messages.iter().any(|m| m.source.kind() == "user")
                && let Some(agent) = input.agent.scope().nearest_agent()
            {
                chains.reset(agent.id());
            }
            next.run(input).await
        })
    }));
    disposers
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn config(thresholds: &[f64]) -> RepeatConfig {
        RepeatConfig {
            thresholds: thresholds.to_vec(),
            ..RepeatConfig::default()
        }
    }

    #[test]
    fn item_08_bad_thresholds_fail_with_the_exact_messages() {
        assert_eq!(
            Repeat::new(&config(&[1.0])).unwrap_err().to_string(),
            "repeat-tool-reminder: invalid threshold 1 — every threshold must be an integer >= 2"
        );
        assert_eq!(
            Repeat::new(&config(&[])).unwrap_err().to_string(),
            "repeat-tool-reminder: `thresholds` must not be empty"
        );
        assert_eq!(
            Repeat::new(&config(&[3.0, 3.0])).unwrap_err().to_string(),
            "repeat-tool-reminder: `thresholds` must not contain duplicates"
        );
        assert_eq!(
            Repeat::new(&config(&[2.5])).unwrap_err().to_string(),
            "repeat-tool-reminder: invalid threshold 2.5 — every threshold must be an integer >= 2"
        );
        let bad_preview = RepeatConfig {
            arguments_preview_chars: 0.0,
            ..RepeatConfig::default()
        };
        assert_eq!(
            Repeat::new(&bad_preview).unwrap_err().to_string(),
            "repeat-tool-reminder: invalid argumentsPreviewChars 0 — must be an integer >= 1"
        );
    }

    #[test]
    fn item_03_canonical_arguments_sort_keys_deeply() {
        assert_eq!(
            canonical(&json!({"b": 2, "a": 1})),
            canonical(&json!({"a": 1, "b": 2}))
        );
        assert_eq!(
            canonical(&json!({"z": [{"y": 1, "x": 2}], "B": 0, "a": 0})),
            r#"{"B":0,"a":0,"z":[{"x":2,"y":1}]}"#
        );
    }

    #[test]
    fn item_09_previews_cut_at_the_cap_with_the_omitted_count() {
        let long = "x".repeat(600);
        assert_eq!(
            preview(&long, 500),
            format!("{}… (+100 more chars)", "x".repeat(500))
        );
        assert_eq!(preview("short", 500), "short");
    }

    #[test]
    fn item_10_12_reminder_forms_sources_and_sorted_thresholds() {
        let repeat = Repeat::new(&config(&[5.0, 3.0])).unwrap();
        let gentle = repeat.reminder("grep", "{}", 3).unwrap();
        assert_eq!(dsh_protocol::text_of(&gentle.content), GENTLE);
        assert_eq!(
            serde_json::to_value(&gentle.source).unwrap(),
            json!({"kind": "plugin", "plugin": "repeat-tool-reminder", "form": "notice", "summary": "grep × 3"})
        );
        let detailed = repeat.reminder("grep", "{\"q\":1}", 5).unwrap();
        assert_eq!(
            dsh_protocol::text_of(&detailed.content),
            "Repeated tool call detected:\n- tool: grep\n- consecutive_calls: 5\n- arguments: {\"q\":1}\nThe repeated calls are not making progress. Do not call this tool with these exact arguments again. Inspect the latest result and choose a different action, different arguments, or finish the task if enough evidence has been gathered."
        );
        assert!(repeat.reminder("grep", "{}", 4).is_none());
        assert!(repeat.reminder("grep", "{}", 6).is_none());
    }

    #[test]
    fn wildcards_are_anchored() {
        let w = Wildcard::new("mcp__*__read");
        assert!(w.matches("mcp__fs__read"));
        assert!(!w.matches("mcp__fs__read2"));
        assert!(Wildcard::new("todo_write").matches("todo_write"));
        assert!(!Wildcard::new("todo").matches("todo_write"));
        assert!(Wildcard::new("*").matches("anything"));
        assert!(Wildcard::new("a*").matches("a"));
        assert!(!Wildcard::new("ab*ba").matches("aba"));
    }
}
