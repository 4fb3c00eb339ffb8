//! What front-ends show for compaction events (never model-visible): a one-line notice per
//! finished attempt, so a failed automatic compaction is visible to the user and not only in
//! the log.

use dsh_session::Event;
use serde_json::Value;

use crate::vocabulary::COMPACTION_END;
use crate::vocabulary::COMPACTION_PRUNE;
use crate::vocabulary::COMPACTION_SUMMARY;

/// The notice for `event`, when it is a compaction event worth showing.
pub fn compaction_notice(event: &Event) -> Option<String> {
    let data = &event.data;
    match event.kind.as_str() {
        COMPACTION_SUMMARY => {
            let items = data.get("shadowedSeqs").and_then(Value::as_array)?.len();
            let tokens = data.get("shadowedTokenCount").and_then(Value::as_u64)?;
            Some(format!(
                "Compacted {items} history items (~{tokens} tokens)."
            ))
        }
        COMPACTION_END => {
            let error = data.get("error").and_then(Value::as_str)?;
            Some(format!(
                "Compaction failed: {error}. The conversation is unchanged."
            ))
        }
        COMPACTION_PRUNE => {
            let tokens = data.get("shadowedTokenCount").and_then(Value::as_u64)?;
            Some(format!(
                "Pruned the middle of a large tool result (~{tokens} tokens)."
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(kind: &str, data: Value) -> Event {
        Event::new(kind, 1, 0, data)
    }

    #[test]
    fn notices() {
        assert_eq!(
            compaction_notice(&event(
                "compaction/summary",
                json!({"shadowedSeqs": [1, 2], "shadowedTokenCount": 300})
            ))
            .as_deref(),
            Some("Compacted 2 history items (~300 tokens).")
        );
        assert_eq!(
            compaction_notice(&event(
                "compaction/end",
                json!({"compactionId": "c", "turn": 1, "error": "summarization produced no text summary content"})
            ))
            .as_deref(),
            Some("Compaction failed: summarization produced no text summary content. The conversation is unchanged.")
        );
        assert_eq!(
            compaction_notice(&event(
                "compaction/end",
                json!({"compactionId": "c", "turn": 1})
            )),
            None
        );
        assert_eq!(compaction_notice(&event("turn/end", json!({}))), None);
    }
}
