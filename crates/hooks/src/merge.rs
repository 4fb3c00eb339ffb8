//! Folding the outputs of one point (upstream `mergeHookOutputs`).

use crate::codec::HookOutput;

/// The merged decision of a point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MergedDecision {
    #[default]
    None,
    Allow,
    Ask,
    Deny,
}

/// Every hook's say, folded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Merged {
    pub decision: MergedDecision,
    /// The winning rank's non-empty reasons joined with a blank line.
    pub reason: Option<String>,
    pub stop: bool,
    pub stop_reason: Option<String>,
    pub additional_context: Vec<String>,
    pub system_messages: Vec<String>,
}

/// Folds `outputs` in run order.
pub fn merge_outputs(outputs: &[HookOutput]) -> Merged {
    let mut merged = Merged::default();
    let mut top = 0u8;
    let mut reasons: [Vec<&str>; 2] = [Vec::new(), Vec::new()];
    for output in outputs {
        if let Some(decision) = output.decision {
            let rank = decision.rank();
            top = top.max(rank);
            if rank >= 2
                && let Some(reason) = output.reason.as_deref().filter(|r| !r.is_empty())
            {
                reasons[usize::from(rank - 2)].push(reason);
            }
        }
        if output.continue_ == Some(false) && !merged.stop {
            merged.stop = true;
            merged.stop_reason = output.stop_reason.clone();
        }
        if let Some(context) = output
            .additional_context
            .as_deref()
            .filter(|c| !c.is_empty())
        {
            merged.additional_context.push(context.to_owned());
        }
        if let Some(message) = output.system_message.as_deref().filter(|m| !m.is_empty()) {
            merged.system_messages.push(message.to_owned());
        }
    }
    merged.decision = match top {
        3 => MergedDecision::Deny,
        2 => MergedDecision::Ask,
        1 => MergedDecision::Allow,
        _ => MergedDecision::None,
    };
    if top >= 2 {
        let winning = &reasons[usize::from(top - 2)];
        if !winning.is_empty() {
            merged.reason = Some(winning.join("\n\n"));
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::Event;
    use crate::codec::parse_hook_output;

    fn out(stdout: &str) -> HookOutput {
        parse_hook_output(Some(0), stdout, "", Event::PreToolUse)
    }

    fn specific(decision: &str, reason: &str) -> HookOutput {
        out(&format!(
            r#"{{"hookSpecificOutput":{{"hookEventName":"PreToolUse","permissionDecision":"{decision}","permissionDecisionReason":"{reason}"}}}}"#
        ))
    }

    #[test]
    fn item_24_denials_join_their_reasons_in_run_order() {
        let merged = merge_outputs(&[
            parse_hook_output(Some(2), "", "a", Event::PreToolUse),
            specific("ask", "ignored"),
            specific("deny", "b"),
        ]);
        assert_eq!(merged.decision, MergedDecision::Deny);
        assert_eq!(merged.reason.as_deref(), Some("a\n\nb"));
    }

    #[test]
    fn item_28_allow_never_beats_ask() {
        let merged = merge_outputs(&[specific("allow", "x"), specific("ask", "why"), out("{}")]);
        assert_eq!(merged.decision, MergedDecision::Ask);
        assert_eq!(merged.reason.as_deref(), Some("why"));
        let allow = merge_outputs(&[specific("allow", "x"), out(r#"{"decision":"approve"}"#)]);
        assert_eq!(
            (allow.decision, allow.reason),
            (MergedDecision::Allow, None)
        );
    }

    #[test]
    fn stop_context_and_messages_fold() {
        let merged = merge_outputs(&[
            out(r#"{"continue":false,"stopReason":"first"}"#),
            out(r#"{"continue":false,"stopReason":"second","systemMessage":"m"}"#),
            out(
                r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","additionalContext":"c1"}}"#,
            ),
            out(r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","additionalContext":""}}"#),
            out(
                r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","additionalContext":"c2"}}"#,
            ),
        ]);
        assert!(merged.stop);
        assert_eq!(merged.stop_reason.as_deref(), Some("first"));
        assert_eq!(merged.additional_context, vec!["c1", "c2"]);
        assert_eq!(merged.system_messages, vec!["m"]);
        assert_eq!(merged.decision, MergedDecision::None);
        assert_eq!(merge_outputs(&[]), Merged::default());
    }

    #[test]
    fn a_block_without_reason_leaves_the_reason_absent() {
        let merged = merge_outputs(&[parse_hook_output(Some(2), "", "", Event::Stop)]);
        assert_eq!(
            (merged.decision, merged.reason),
            (MergedDecision::Deny, None)
        );
    }
}
