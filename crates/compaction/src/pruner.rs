//! The tool-result pruner (§8.9): the first, cheap phase of a qualified pressure or overflow
//! trigger. A large `tool/result` keeps its head and tail around a marker; the cut is recorded
//! as `compaction/prune` (its shadow price) followed by a content-only replacement of the
//! result, so the call/result pairing and every other field stay as they were.

use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_session::SessionError;
use dsh_session::SessionLog;
use dsh_session::SurfaceIntent;
use dsh_session::kind;
use dsh_token_meter::estimate_message;
use serde_json::Value;

use crate::config::ToolResultPruneConfig;
use crate::vocabulary::CompactionPrune;
use crate::vocabulary::ShadowedRange;

/// Inserted where the middle was cut (39 code points).
pub const PRUNE_MARKER: &str = "\n\n[... tool result middle pruned ...]\n\n";

fn text_points(blocks: &[ContentBlock]) -> u64 {
    blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.chars().count() as u64,
            _ => 0,
        })
        .sum()
}

/// The pruned inner content of one tool-result block, or `None` when it is within the threshold.
/// Code points `[head, total - tail)` of the concatenated text are removed; the marker goes once
/// into the first text block that intersects the removed span; emptied text blocks are dropped.
pub fn prune_content(
    content: &[ContentBlock],
    config: &ToolResultPruneConfig,
) -> Option<Vec<ContentBlock>> {
    let total = text_points(content);
    if total <= config.threshold_chars {
        return None;
    }
    let cut_from = config.head_chars;
    let cut_to = total.saturating_sub(config.tail_chars).max(cut_from);
    let mut out = Vec::with_capacity(content.len());
    let mut offset = 0u64;
    let mut marked = false;
    for block in content {
        let ContentBlock::Text { text } = block else {
            out.push(block.clone());
            continue;
        };
        let len = text.chars().count() as u64;
        let (start, end) = (offset, offset + len);
        offset = end;
        let intersects = start < cut_to && end > cut_from;
        if !intersects {
            if !text.is_empty() {
                out.push(block.clone());
            }
            continue;
        }
        let head: String = text
            .chars()
            .take(cut_from.saturating_sub(start) as usize)
            .collect();
        let tail: String = text
            .chars()
            .skip(cut_to.saturating_sub(start).min(len) as usize)
            .collect();
        let mut kept = head;
        if !marked {
            kept.push_str(PRUNE_MARKER);
            marked = true;
        }
        kept.push_str(&tail);
        if !kept.is_empty() {
            out.push(ContentBlock::text(kept));
        }
    }
    Some(out)
}

/// Prunes every oversized `tool/result` on the current surface (one snapshot). Returns how
/// many results were replaced. Appends nothing when none qualifies.
pub fn prune_session(
    log: &SessionLog,
    config: &ToolResultPruneConfig,
) -> Result<usize, SessionError> {
    let mut pruned = 0;
    for seq in log.surface_seqs() {
        let Some(event) = log.get(seq)? else {
            continue;
        };
        if event.kind != kind::TOOL_RESULT {
            continue;
        }
        // An owned reading: a tree cached on a 20 KB result would stay as long as the event.
        let Ok(value) = event.data.decode::<Value>() else {
            continue;
        };
        let Some((data, original)) = pruned_data(&value, config) else {
            continue;
        };
        log.append_data(
            &CompactionPrune {
                shadowed_range: ShadowedRange {
                    start: seq,
                    end: seq,
                },
                shadowed_seqs: vec![seq],
                shadowed_token_count: estimate_message(&original),
            },
            None,
        )?;
        log.append(
            kind::TOOL_RESULT,
            data,
            Some(SurfaceIntent::replace(seq, seq, vec![seq])),
        )?;
        pruned += 1;
    }
    Ok(pruned)
}

/// The replacement data (original with only inner contents changed) and the original message.
fn pruned_data(data: &Value, config: &ToolResultPruneConfig) -> Option<(Value, Message)> {
    let message_value = data.get("message")?;
    let original: Message = serde_json::from_value(message_value.clone()).ok()?;
    let mut copy = data.clone();
    let blocks = copy
        .get_mut("message")?
        .get_mut("content")?
        .as_array_mut()?;
    let mut changed = false;
    for (index, block) in original.content.iter().enumerate() {
        let ContentBlock::ToolResult { content, .. } = block else {
            continue;
        };
        let Some(new_content) = prune_content(content, config) else {
            continue;
        };
        let slot = blocks.get_mut(index)?.get_mut("content")?;
        *slot = serde_json::to_value(&new_content).ok()?;
        changed = true;
    }
    changed.then_some((copy, original))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_protocol::Message;
    use dsh_session::SessionHeader;
    use dsh_session::data::ToolResult;
    use pretty_assertions::assert_eq;

    fn points(blocks: &[ContentBlock]) -> u64 {
        text_points(blocks)
    }

    #[test]
    fn the_marker_is_39_code_points() {
        assert_eq!(PRUNE_MARKER.chars().count(), 39);
    }

    #[test]
    fn a_pruned_result_keeps_exactly_head_marker_and_tail() {
        // Checklist E47.
        let config = ToolResultPruneConfig::default();
        let text: String = (0..10_000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let pruned = prune_content(&[ContentBlock::text(text.clone())], &config).unwrap();
        assert_eq!(pruned.len(), 1);
        let ContentBlock::Text { text: kept } = &pruned[0] else {
            panic!("text expected")
        };
        let head: String = text.chars().take(4096).collect();
        let tail: String = text.chars().skip(10_000 - 1024).collect();
        assert_eq!(*kept, format!("{head}{PRUNE_MARKER}{tail}"));
        assert_eq!(points(&pruned), 4096 + 39 + 1024);
        // A second pass is a no-op.
        assert_eq!(prune_content(&pruned, &config), None);
        // At the threshold nothing is pruned.
        assert_eq!(
            prune_content(&[ContentBlock::text("x".repeat(8192))], &config),
            None
        );
    }

    #[test]
    fn code_points_not_bytes_are_counted() {
        let config = ToolResultPruneConfig {
            threshold_chars: 100,
            head_chars: 10,
            tail_chars: 10,
        };
        // 100 two-byte characters: exactly at the threshold.
        assert_eq!(
            prune_content(&[ContentBlock::text("é".repeat(100))], &config),
            None
        );
        let pruned = prune_content(&[ContentBlock::text("é".repeat(101))], &config).unwrap();
        assert_eq!(points(&pruned), 10 + 39 + 10);
    }

    #[test]
    fn blocks_keep_their_parts_and_non_text_blocks_their_positions() {
        let config = ToolResultPruneConfig {
            threshold_chars: 60,
            head_chars: 5,
            tail_chars: 5,
        };
        let image = ContentBlock::Image {
            attachment: serde_json::json!({"id": "i"}),
        };
        let content = vec![
            ContentBlock::text("aaaaaaaa"), // 0..8: head part "aaaaa"
            image.clone(),
            ContentBlock::text("b".repeat(50)), // 8..58: removed entirely
            ContentBlock::text("cccccccc"),     // 58..66: tail part "ccccc"
        ];
        let pruned = prune_content(&content, &config).unwrap();
        assert_eq!(
            pruned,
            vec![
                ContentBlock::text(format!("aaaaa{PRUNE_MARKER}")),
                image,
                ContentBlock::text("ccccc"),
            ]
        );
        // The marker lands in the first block intersecting the cut even when the head ends at
        // a block boundary.
        let content = vec![
            ContentBlock::text("hhhhh"),
            ContentBlock::text("m".repeat(60)),
        ];
        let pruned = prune_content(&content, &config).unwrap();
        assert_eq!(
            pruned,
            vec![
                ContentBlock::text("hhhhh"),
                ContentBlock::text(format!("{PRUNE_MARKER}mmmmm")),
            ]
        );
    }

    #[test]
    fn prune_session_logs_the_shadow_price_then_a_content_only_replacement() {
        // Checklist E46.
        let log = SessionLog::in_memory(SessionHeader::new("s", None));
        let big = Message::tool_result("c1", vec![ContentBlock::text("z".repeat(9000))], false);
        let small = Message::tool_result("c2", vec![ContentBlock::text("ok")], false);
        let mut seqs = Vec::new();
        for message in [big.clone(), small] {
            let call = log
                .append("tool/call", serde_json::json!({"turn": 1, "step": 1}), None)
                .unwrap();
            let event = log
                .append_data(
                    &ToolResult {
                        turn: 1,
                        step: 1,
                        message,
                        error: None,
                        meta: Some(serde_json::json!({"keep": true})),
                    },
                    Some(SurfaceIntent::append_from(vec![call.seq])),
                )
                .unwrap();
            seqs.push(event.seq);
        }
        let before = log.len();
        let count = prune_session(&log, &ToolResultPruneConfig::default()).unwrap();
        assert_eq!(count, 1);
        let events = log.events_since(before).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].kind, "compaction/prune");
        assert_eq!(
            events[0].data,
            serde_json::json!({
                "shadowedRange": {"start": seqs[0], "end": seqs[0]},
                "shadowedSeqs": [seqs[0]],
                "shadowedTokenCount": estimate_message(&big),
            })
        );
        assert_eq!(events[1].kind, "tool/result");
        assert_eq!(events[1].source_event_seqs(), Some(&[seqs[0]][..]));
        let original = log.get(seqs[0]).unwrap().unwrap();
        let mut expected = original.data.value().clone();
        expected["message"]["content"][0]["content"] = serde_json::json!([
            {"type": "text", "text": format!("{}{PRUNE_MARKER}{}", "z".repeat(4096), "z".repeat(1024))}
        ]);
        assert_eq!(events[1].data, expected);
        // The surface now holds the replacement in place of the original; a second pass is a no-op.
        assert_eq!(log.surface_seqs(), vec![events[1].seq, seqs[1]]);
        assert_eq!(
            prune_session(&log, &ToolResultPruneConfig::default()).unwrap(),
            0
        );
    }
}
