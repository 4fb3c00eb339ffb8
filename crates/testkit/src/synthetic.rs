//! Synthetic scenarios for benchmarks and soak tests: a model that runs one shell command per
//! step for as many steps as asked, then answers `DONE`. The scaling benchmark
//! (`scripts/bench-scaling.py`) serves it through `dsh-mock-llm --tool-loop N`; the soak test
//! builds it in-process.
//!
//! Each step's response streams a short reasoning text in word-sized deltas and one `bash` call
//! whose arguments arrive in three fragments, like a real provider's stream. A session-title
//! entry answers the side request `dsh` makes for a new session, so it never takes a step's
//! response.

use serde_json::Value;
use serde_json::json;

use crate::scenario::ModelEntry;
use crate::scenario::Scenario;
use crate::scenario::ScenarioSpec;

/// The prompt of a tool-loop session (also its binding text).
pub const TOOL_LOOP_PROMPT: &str = "Run the numbered commands one after another, then say DONE.";

/// First line of the session-title request's system prompt (the title route's match).
const TITLE_SYSTEM_PREFIX: &str =
    "Create a concise title for an AI coding-assistant session from the supplied human messages.";

/// What a tool-loop scenario runs.
#[derive(Debug, Clone)]
pub struct ToolLoop {
    /// Number of tool-calling steps before the final answer.
    pub steps: usize,
    /// The shell command of each step; `{i}` becomes the 0-based step number.
    pub command: String,
}

impl ToolLoop {
    /// `steps` calls of `echo step-{i}`.
    pub fn echo(steps: usize) -> Self {
        Self {
            steps,
            command: "echo step-{i}".to_owned(),
        }
    }

    /// The scenario: one session, `steps + 1` main-route responses and a title response.
    pub fn scenario(&self) -> Scenario {
        let spec: ScenarioSpec = serde_json::from_value(json!({
            "suite": "headless",
            "name": format!("tool-loop-{}", self.steps),
            "sessions": [{"session": 0, "first_user_text": TOOL_LOOP_PROMPT}],
        }))
        .unwrap_or_else(|e| panic!("synthetic scenario spec: {e}"));
        let mut model = Vec::with_capacity(self.steps + 2);
        for i in 0..self.steps {
            model.push(entry(self.step_entry(i)));
        }
        model.push(entry(final_entry(self.steps)));
        model.push(entry(title_entry()));
        Scenario::from_parts(spec, model)
    }

    fn step_entry(&self, i: usize) -> Value {
        let reasoning = format!("Step {i}: the next command prints its number, so run it now.");
        let command = self.command.replace("{i}", &i.to_string());
        let arguments =
            json!({"command": command, "description": format!("Run step {i}")}).to_string();
        let id = format!("call_{i:05}");
        let mut stream: Vec<Value> = words(&reasoning)
            .into_iter()
            .map(|w| json!({"reasoning": w}))
            .collect();
        let thirds = split3(&arguments);
        stream.push(json!({"tool_call": 0, "id": id, "name": "bash", "arguments": thirds[0]}));
        stream.push(json!({"tool_call": 0, "arguments": thirds[1]}));
        stream.push(json!({"tool_call": 0, "arguments": thirds[2]}));
        json!({
            "session": 0, "route": "main", "index": i, "kind": "response",
            "reasoning": reasoning, "content": null,
            "tool_calls": [{"id": id, "name": "bash", "arguments": arguments}],
            "finish_reason": "tool_calls",
            "usage": usage(i),
            "stream": stream,
        })
    }
}

fn final_entry(index: usize) -> Value {
    json!({
        "session": 0, "route": "main", "index": index, "kind": "response",
        "reasoning": "All steps ran.", "content": "DONE",
        "tool_calls": [], "finish_reason": "stop",
        "usage": usage(index),
        "stream": [{"reasoning": "All steps"}, {"reasoning": " ran."}, {"content": "DO"}, {"content": "NE"}],
    })
}

fn title_entry() -> Value {
    json!({
        "session": 0, "route": "title", "index": 0, "kind": "response",
        "reasoning": null, "content": "Numbered command loop",
        "tool_calls": [], "finish_reason": "stop",
        "usage": {"prompt_tokens": 40, "completion_tokens": 4, "total_tokens": 44},
        "match": {"system_prefix": TITLE_SYSTEM_PREFIX},
        "stream": [{"content": "Numbered"}, {"content": " command loop"}],
    })
}

/// Plausible usage for step `i`: the prompt grows, most of it a cache hit.
fn usage(i: usize) -> Value {
    let prompt = 3000 + 60 * i as u64;
    json!({
        "prompt_tokens": prompt, "completion_tokens": 40, "total_tokens": prompt + 40,
        "prompt_cache_hit_tokens": prompt - 60, "prompt_cache_miss_tokens": 60,
    })
}

/// `text` cut before each space, so the pieces concatenate back to it.
fn words(text: &str) -> Vec<&str> {
    let mut cuts: Vec<usize> = text.match_indices(' ').map(|(i, _)| i).collect();
    cuts.insert(0, 0);
    cuts.push(text.len());
    cuts.windows(2)
        .map(|w| &text[w[0]..w[1]])
        .filter(|w| !w.is_empty())
        .collect()
}

/// Three consecutive pieces of `text` (cut at character boundaries).
fn split3(text: &str) -> [&str; 3] {
    let cut = |mut at: usize| {
        while !text.is_char_boundary(at) {
            at += 1;
        }
        at
    };
    let a = cut(text.len() / 3);
    let b = cut((2 * text.len() / 3).max(a));
    [&text[..a], &text[a..b], &text[b..]]
}

fn entry(value: Value) -> ModelEntry {
    // The values above are built to the entry shape; a mismatch is a bug in this file.
    serde_json::from_value(value).unwrap_or_else(|e| panic!("synthetic entry: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::StreamDelta;

    #[test]
    fn a_tool_loop_streams_what_it_records() {
        let scenario = ToolLoop::echo(3).scenario();
        assert_eq!(scenario.model.len(), 5);
        for entry in &scenario.model[..3] {
            let stream = entry.stream.as_ref().unwrap();
            let reasoning: String = stream
                .iter()
                .filter_map(|d| match d {
                    StreamDelta::Reasoning { reasoning } => Some(reasoning.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(Some(reasoning), entry.reasoning);
            let arguments: String = stream
                .iter()
                .filter_map(|d| match d {
                    StreamDelta::ToolCall { arguments, .. } => Some(arguments.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(arguments, entry.tool_calls[0].arguments);
        }
        assert!(
            scenario.model[1].tool_calls[0]
                .arguments
                .contains("echo step-1")
        );
        assert_eq!(scenario.model[4].route, "title");
    }
}
