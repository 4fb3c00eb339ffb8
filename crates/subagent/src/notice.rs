//! The model-visible texts a parent receives from continuable children: the settlement notice
//! (§1.8.6) and the relayed report (§1.8.5).

use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;

use crate::output::StopReason;

/// The notice's summary line for an epoch that ended with `stop`.
pub fn settlement_summary(id: &str, stop: &StopReason) -> String {
    match stop {
        StopReason::Completed => format!(
            "Background subagent {id} finished and will do no further work unless you send it more."
        ),
        StopReason::Aborted => format!("Background subagent {id} was stopped before it finished."),
        StopReason::MaxTokens => {
            format!("Background subagent {id} ran out of room before it finished.")
        }
        StopReason::Refusal => format!("Background subagent {id} declined the task."),
        StopReason::Error => format!("Background subagent {id} failed before it finished."),
        StopReason::Other(reason) => {
            format!("Background subagent {id} ended abnormally ({reason}) before it finished.")
        }
    }
}

pub const CLOSING_MESSAGE: &str = "Its closing message:";
pub const NO_CLOSING_MESSAGE: &str = "It left no closing message.";
/// `boundContextSummary`'s cap.
pub const SUMMARY_CAP: usize = 120;

/// At most 120 characters: the first 119 and `…` when longer.
pub fn bound_summary(summary: &str) -> String {
    if summary.chars().count() <= SUMMARY_CAP {
        return summary.to_owned();
    }
    let mut out: String = summary.chars().take(SUMMARY_CAP - 1).collect();
    out.push('…');
    out
}

/// The user-role notice message (raw output blocks, reasoning included, as upstream copies them).
pub fn settlement_notice(id: &str, stop: &StopReason, output: &[ContentBlock]) -> Message {
    let summary = settlement_summary(id, stop);
    let mut content = vec![ContentBlock::text(summary.clone())];
    if output.is_empty() {
        content.push(ContentBlock::text(NO_CLOSING_MESSAGE));
    } else {
        content.push(ContentBlock::text(CLOSING_MESSAGE));
        content.extend(output.iter().cloned());
    }
    let source = MessageSource::from_map(serde_json::Map::from_iter([
        ("kind".to_owned(), "subagent-settled".into()),
        ("form".to_owned(), "notice".into()),
        ("summary".to_owned(), bound_summary(&summary).into()),
        ("senderSessionId".to_owned(), id.into()),
    ]))
    .unwrap_or_else(MessageSource::user);
    Message::user(content, source)
}

/// The relayed report: `Background subagent <id> reported:` then the child's content.
pub fn report_message(child_id: &str, content: Vec<ContentBlock>) -> Message {
    let mut blocks = vec![ContentBlock::text(format!(
        "Background subagent {child_id} reported:"
    ))];
    blocks.extend(content);
    let source = MessageSource::from_map(serde_json::Map::from_iter([
        ("kind".to_owned(), "subagent-report".into()),
        ("form".to_owned(), "relay".into()),
        ("senderSessionId".to_owned(), child_id.into()),
    ]))
    .unwrap_or_else(MessageSource::user);
    Message::user(blocks, source)
}

/// The source `send_message` deliveries carry in the child's log.
pub fn coordinator_source(parent_id: &str) -> MessageSource {
    MessageSource::from_map(serde_json::Map::from_iter([
        ("kind".to_owned(), "coordinator".into()),
        ("form".to_owned(), "relay".into()),
        ("senderSessionId".to_owned(), parent_id.into()),
    ]))
    .unwrap_or_else(MessageSource::user)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn summaries_are_exact() {
        let id = "c1";
        let cases = [
            (
                StopReason::Completed,
                "Background subagent c1 finished and will do no further work unless you send it more.",
            ),
            (
                StopReason::Aborted,
                "Background subagent c1 was stopped before it finished.",
            ),
            (
                StopReason::MaxTokens,
                "Background subagent c1 ran out of room before it finished.",
            ),
            (
                StopReason::Refusal,
                "Background subagent c1 declined the task.",
            ),
            (
                StopReason::Error,
                "Background subagent c1 failed before it finished.",
            ),
            (
                StopReason::Other("weird".into()),
                "Background subagent c1 ended abnormally (weird) before it finished.",
            ),
        ];
        for (stop, text) in cases {
            assert_eq!(settlement_summary(id, &stop), text);
        }
    }

    #[test]
    fn notices_carry_the_closing_message_and_a_bounded_summary() {
        let id = "33333333-3333-4333-8333-333333333333";
        let notice = settlement_notice(id, &StopReason::Completed, &[ContentBlock::text("done")]);
        assert_eq!(
            notice.content,
            vec![
                ContentBlock::text(settlement_summary(id, &StopReason::Completed)),
                ContentBlock::text("Its closing message:"),
                ContentBlock::text("done"),
            ]
        );
        // A UUID summary fits (118 characters); a longer one is cut to 119 + `…`.
        let summary = notice.source.get("summary").unwrap().as_str().unwrap();
        assert_eq!(summary, settlement_summary(id, &StopReason::Completed));
        let long = settlement_notice(&format!("{id}-extra"), &StopReason::Completed, &[]);
        let summary = long.source.get("summary").unwrap().as_str().unwrap();
        assert_eq!(summary.chars().count(), 120);
        assert!(summary.ends_with('…'));
        assert_eq!(notice.source.kind(), "subagent-settled");
        assert_eq!(notice.source.get("senderSessionId").unwrap(), id);
        let silent = settlement_notice("c", &StopReason::Error, &[]);
        assert_eq!(
            silent.content[1],
            ContentBlock::text("It left no closing message.")
        );
        assert_eq!(bound_summary("short"), "short");
    }

    #[test]
    fn reports_are_prefixed_and_sourced() {
        let report = report_message("c9", vec![ContentBlock::text("found it")]);
        assert_eq!(
            report.content[0],
            ContentBlock::text("Background subagent c9 reported:")
        );
        assert_eq!(
            serde_json::to_value(&report.source).unwrap(),
            serde_json::json!({"kind": "subagent-report", "form": "relay", "senderSessionId": "c9"})
        );
    }
}
