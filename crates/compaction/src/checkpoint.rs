//! The checkpoint message (§8.7): exact, model-visible.

use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;

/// The checkpoint's opening text, before `\n\n<compacted-summary>`.
pub const PREAMBLE: &str = "This is an automatically generated checkpoint condensing an earlier span of the conversation to free up context. Treat the captured context as established background and build on it without restating it. Continue the task directly from the messages that follow, without acknowledging this checkpoint.";
/// Opens the summary (appended to [`PREAMBLE`] after a blank line).
pub const SUMMARY_OPEN: &str = "<compacted-summary>";
/// Closes the summary, as its own text block.
pub const SUMMARY_CLOSE: &str = "</compacted-summary>";
/// The `plugin` of a checkpoint's source.
pub const CHECKPOINT_PLUGIN: &str = "compact";

/// `{kind:"plugin", plugin:"compact", compactionId, sourceCommandId?}`.
pub fn checkpoint_source(compaction_id: &str, source_command_id: Option<&str>) -> MessageSource {
    let mut source = MessageSource::plugin(CHECKPOINT_PLUGIN).with("compactionId", compaction_id);
    if let Some(command) = source_command_id {
        source = source.with("sourceCommandId", command);
    }
    source
}

/// The checkpoint user message framing `summary` (text blocks).
pub fn checkpoint_message(
    compaction_id: &str,
    source_command_id: Option<&str>,
    summary: &[ContentBlock],
) -> Message {
    let mut content = Vec::with_capacity(summary.len() + 2);
    content.push(ContentBlock::text(format!("{PREAMBLE}\n\n{SUMMARY_OPEN}")));
    content.extend(summary.iter().cloned());
    content.push(ContentBlock::text(SUMMARY_CLOSE));
    Message::user(content, checkpoint_source(compaction_id, source_command_id))
}

/// `isCompactCheckpointSource`.
pub fn is_checkpoint_source(source: &MessageSource) -> bool {
    source.kind() == "plugin"
        && source.get("plugin").and_then(serde_json::Value::as_str) == Some(CHECKPOINT_PLUGIN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_checkpoint_frames_the_summary_exactly() {
        // Checklist E51.
        let mut message = checkpoint_message("cid", None, &[ContentBlock::text("## Primary")]);
        message.id = "m".into();
        assert_eq!(
            serde_json::to_value(&message).unwrap(),
            serde_json::json!({
                "content": [
                    {"type": "text", "text": "This is an automatically generated checkpoint condensing an earlier span of the conversation to free up context. Treat the captured context as established background and build on it without restating it. Continue the task directly from the messages that follow, without acknowledging this checkpoint.\n\n<compacted-summary>"},
                    {"type": "text", "text": "## Primary"},
                    {"type": "text", "text": "</compacted-summary>"}
                ],
                "source": {"kind": "plugin", "plugin": "compact", "compactionId": "cid"},
                "role": "user",
                "id": "m"
            })
        );
        assert!(is_checkpoint_source(&message.source));
        let with_command = checkpoint_message("cid", Some("cmd-1"), &[]);
        assert_eq!(with_command.source.get("sourceCommandId").unwrap(), "cmd-1");
        assert!(!is_checkpoint_source(&MessageSource::plugin("other")));
        assert!(!is_checkpoint_source(&MessageSource::user()));
    }
}
