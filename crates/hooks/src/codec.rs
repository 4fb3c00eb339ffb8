//! Decoding one hook's output (upstream `parseHookOutput`): total, never fails.

use serde_json::Map;
use serde_json::Value;

use crate::Event;

/// A recognised decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Approve,
    Allow,
    Block,
    Deny,
    Ask,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Allow => "allow",
            Self::Block => "block",
            Self::Deny => "deny",
            Self::Ask => "ask",
        }
    }

    /// Merge rank: deny/block 3, ask 2, approve/allow 1.
    pub fn rank(self) -> u8 {
        match self {
            Self::Block | Self::Deny => 3,
            Self::Ask => 2,
            Self::Approve | Self::Allow => 1,
        }
    }
}

/// What one hook said.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookOutput {
    /// `None` for a signal death, a timeout kill or an executor failure.
    pub exit_code: Option<i32>,
    pub stderr: String,
    pub stdout: String,
    pub continue_: Option<bool>,
    pub stop_reason: Option<String>,
    pub decision: Option<Decision>,
    pub reason: Option<String>,
    pub hook_event_name: Option<String>,
    pub additional_context: Option<String>,
    pub system_message: Option<String>,
    pub updated_input: Option<Map<String, Value>>,
}

impl HookOutput {
    /// The `decision` of `hook/result`: the decision, else `stop` for `continue:false`, else
    /// `pass`.
    pub fn result_decision(&self) -> &'static str {
        match self.decision {
            Some(decision) => decision.as_str(),
            None if self.continue_ == Some(false) => "stop",
            None => "pass",
        }
    }

    /// Whether stdout is the plain text Codex takes as context: a clean exit 0, non-empty,
    /// not JSON-looking.
    pub fn plain_stdout(&self) -> Option<&str> {
        (self.exit_code == Some(0) && !self.stdout.is_empty() && !self.stdout.starts_with('{'))
            .then_some(self.stdout.as_str())
    }
}

fn string(map: &Map<String, Value>, key: &str) -> Option<String> {
    map.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// Decodes `exit_code` / stdout / stderr for a hook fired on `expected`.
pub fn parse_hook_output(
    exit_code: Option<i32>,
    stdout: &str,
    stderr: &str,
    expected: Event,
) -> HookOutput {
    let mut out = HookOutput {
        exit_code,
        stderr: stderr.trim().to_owned(),
        stdout: stdout.trim().to_owned(),
        ..HookOutput::default()
    };
    match exit_code {
        Some(2) => {
            out.decision = Some(Decision::Block);
            if !out.stderr.is_empty() {
                out.reason = Some(out.stderr.clone());
            }
        }
        Some(0) if out.stdout.starts_with('{') => {
            let Ok(Value::Object(json)) = serde_json::from_str::<Value>(&out.stdout) else {
                return out;
            };
            out.continue_ = json.get("continue").and_then(Value::as_bool);
            out.stop_reason = string(&json, "stopReason");
            out.system_message = string(&json, "systemMessage");
            out.decision = match json.get("decision").and_then(Value::as_str) {
                Some("approve") => Some(Decision::Approve),
                Some("block") => Some(Decision::Block),
                _ => None,
            };
            out.reason = string(&json, "reason");
            if let Some(Value::Object(specific)) = json.get("hookSpecificOutput") {
                out.hook_event_name = string(specific, "hookEventName");
                if out.hook_event_name.as_deref() == Some(expected.as_str()) {
                    match specific.get("permissionDecision").and_then(Value::as_str) {
                        Some("allow") => out.decision = Some(Decision::Allow),
                        Some("deny") => out.decision = Some(Decision::Deny),
                        Some("ask") => out.decision = Some(Decision::Ask),
                        _ => {}
                    }
                    if let Some(reason) = string(specific, "permissionDecisionReason") {
                        out.reason = Some(reason);
                    }
                    out.additional_context = string(specific, "additionalContext");
                    if let Some(Value::Object(input)) = specific.get("updatedInput") {
                        out.updated_input = Some(input.clone());
                    }
                }
            }
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn ok(stdout: &str) -> HookOutput {
        parse_hook_output(Some(0), stdout, "", Event::PreToolUse)
    }

    #[test]
    fn exit_2_blocks_with_trimmed_stderr_and_ignores_stdout() {
        let out = parse_hook_output(
            Some(2),
            "{\"decision\":\"approve\"}",
            "  x \n",
            Event::PreToolUse,
        );
        assert_eq!(
            (out.decision, out.reason.as_deref()),
            (Some(Decision::Block), Some("x"))
        );
        let empty = parse_hook_output(Some(2), "", "  ", Event::PreToolUse);
        assert_eq!(
            (empty.decision, empty.reason),
            (Some(Decision::Block), None)
        );
    }

    #[test]
    fn other_exits_and_no_exit_carry_no_decision() {
        for code in [Some(1), Some(127), None] {
            let out = parse_hook_output(code, "{\"decision\":\"block\"}", "boom", Event::Stop);
            assert_eq!(out.decision, None);
            assert_eq!(out.result_decision(), "pass");
            assert_eq!(out.stderr, "boom");
        }
    }

    #[test]
    fn item_20_21_only_approve_and_block_are_top_level_decisions() {
        let block = ok(r#"{"decision":"block","reason":"r"}"#);
        assert_eq!(
            (block.decision, block.reason.as_deref()),
            (Some(Decision::Block), Some("r"))
        );
        for other in ["deny", "allow", "ask", "defer"] {
            assert_eq!(ok(&format!("{{\"decision\":\"{other}\"}}")).decision, None);
        }
        assert_eq!(
            ok(r#"{"decision":"approve"}"#).decision,
            Some(Decision::Approve)
        );
    }

    #[test]
    fn item_22_23_the_specific_block_needs_the_firing_event_name() {
        let nameless = ok(r#"{"hookSpecificOutput":{"permissionDecision":"deny"}}"#);
        assert_eq!(nameless.decision, None);
        let other = ok(
            r#"{"hookSpecificOutput":{"hookEventName":"PostToolUse","permissionDecision":"deny","additionalContext":"c"}}"#,
        );
        assert_eq!((other.decision, other.additional_context), (None, None));
        assert_eq!(other.hook_event_name.as_deref(), Some("PostToolUse"));
        let named = ok(
            r#"{"reason":"top","hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"p"}}"#,
        );
        assert_eq!(
            (named.decision, named.reason.as_deref()),
            (Some(Decision::Deny), Some("p"))
        );
        // A present permissionDecisionReason overrides even when empty.
        let empty = ok(
            r#"{"reason":"top","hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecisionReason":""}}"#,
        );
        assert_eq!(empty.reason.as_deref(), Some(""));
    }

    #[test]
    fn malformed_or_non_object_json_is_plain_stdout() {
        for text in ["{broken", "[1]", "plain words", "{\"decision\": \"block\""] {
            let out = ok(text);
            assert_eq!(out.decision, None, "{text}");
            assert_eq!(out.result_decision(), "pass");
        }
        assert_eq!(ok("  hello  ").plain_stdout(), Some("hello"));
        assert_eq!(ok("{x").plain_stdout(), None);
        assert_eq!(
            parse_hook_output(Some(1), "hello", "", Event::Stop).plain_stdout(),
            None
        );
    }

    #[test]
    fn item_43_continue_false_records_stop_without_a_decision() {
        let out = ok(r#"{"continue":false,"stopReason":"enough","systemMessage":"m"}"#);
        assert_eq!(out.result_decision(), "stop");
        assert_eq!(out.stop_reason.as_deref(), Some("enough"));
        assert_eq!(out.system_message.as_deref(), Some("m"));
        let both = ok(r#"{"continue":false,"decision":"block"}"#);
        assert_eq!(both.result_decision(), "block");
        assert_eq!(ok(r#"{"continue":"no"}"#).continue_, None);
    }

    #[test]
    fn updated_input_and_context_are_read_from_a_matching_block() {
        let out = ok(
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","additionalContext":"ctx","updatedInput":{"a":1}}}"#,
        );
        assert_eq!(out.decision, Some(Decision::Ask));
        assert_eq!(out.additional_context.as_deref(), Some("ctx"));
        assert_eq!(out.updated_input.unwrap()["a"], 1);
    }
}
