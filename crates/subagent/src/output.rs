//! What a child's log says about its run: the final output (§1.7.1), the consumed work fold,
//! stop reasons (§1.7 step 5, §1.8.6) and the diagnostic cap (§1.10).

use std::sync::Arc;

use dsh_protocol::ContentBlock;
use dsh_protocol::StreamChunk;
use dsh_session::Event;
use dsh_session::data::AssistantChunk;
use dsh_session::data::AssistantMessage;
use dsh_session::data::InboxSpliced;
use dsh_session::data::SpliceOutcome;
use dsh_session::data::TurnEnd;
use dsh_session::data::TurnEndReason;
use dsh_session::kind;

/// Why a child run ended. Merge-extensible upstream: an unknown reason is a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    Completed,
    Aborted,
    Error,
    MaxTokens,
    Refusal,
    Other(String),
}

impl StopReason {
    pub fn as_str(&self) -> &str {
        match self {
            Self::Completed => "completed",
            Self::Aborted => "aborted",
            Self::Error => "error",
            Self::MaxTokens => "max-tokens",
            Self::Refusal => "refusal",
            Self::Other(reason) => reason,
        }
    }

    pub fn parse(text: &str) -> Self {
        match text {
            "completed" => Self::Completed,
            "aborted" => Self::Aborted,
            "error" => Self::Error,
            "max-tokens" => Self::MaxTokens,
            "refusal" => Self::Refusal,
            other => Self::Other(other.to_owned()),
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The content of the last `assistant/message` with non-empty content; else every
/// `assistant/chunk` text delta joined as one text block; else nothing. Independent of how the
/// run ended, so partial answers survive cancellation and max-tokens.
pub fn final_assistant_output(events: &[Arc<Event>]) -> Vec<ContentBlock> {
    let mut last: Option<Vec<ContentBlock>> = None;
    let mut deltas = String::new();
    for event in events {
        match event.kind.as_str() {
            kind::ASSISTANT_MESSAGE => {
                if let Some(Ok(message)) = event.decode::<AssistantMessage>()
                    && !message.message.content.is_empty()
                {
                    last = Some(message.message.content);
                }
            }
            kind::ASSISTANT_CHUNK => {
                if let Some(Ok(AssistantChunk {
                    chunk: StreamChunk::TextDelta { text, .. },
                    ..
                })) = event.decode::<AssistantChunk>()
                {
                    deltas.push_str(&text);
                }
            }
            _ => {}
        }
    }
    match last {
        Some(content) => content,
        None if !deltas.is_empty() => vec![ContentBlock::text(deltas)],
        None => Vec::new(),
    }
}

/// The text blocks of `output` joined with nothing between them.
pub fn output_text(output: &[ContentBlock]) -> String {
    dsh_protocol::text_of(output)
}

/// `foldConsumedWork`: the latest accounting `turn/end` and whether queued work was dropped
/// unrun after it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConsumedWork {
    pub end: Option<TurnEndReason>,
    pub dropped_unrun: bool,
}

/// A `turn/end` accounts when its turn had a `step/start`, or when it claimed inbox input and
/// ended `blocked`, `aborted`, `interrupted` or `error`.
pub fn fold_consumed_work(events: &[Arc<Event>]) -> ConsumedWork {
    let mut out = ConsumedWork::default();
    let (mut stepped, mut claimed) = (false, false);
    for event in events {
        match event.kind.as_str() {
            kind::TURN_START => {
                stepped = false;
                claimed = false;
            }
            kind::STEP_START => stepped = true,
            kind::INBOX_SPLICED => {
                if let Some(Ok(splice)) = event.decode::<InboxSpliced>() {
                    match (splice.removed_count, splice.outcome) {
                        (Some(n), None) if n > 0 => claimed = true,
                        (Some(n), Some(SpliceOutcome::Canceled))
                            if n > 0 && splice.inserted.is_empty() =>
                        {
                            out.dropped_unrun = true;
                        }
                        _ => {}
                    }
                }
            }
            kind::TURN_END => {
                if let Some(Ok(end)) = event.decode::<TurnEnd>() {
                    let early = matches!(
                        end.reason,
                        TurnEndReason::Blocked
                            | TurnEndReason::Aborted { .. }
                            | TurnEndReason::Interrupted
                            | TurnEndReason::Error { .. }
                    );
                    if stepped || (claimed && early) {
                        out.end = Some(end.reason);
                        out.dropped_unrun = false;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The one-shot mapping of the last accounting `turn/end` (§1.7 step 5).
pub fn one_shot_stop_reason(end: Option<&TurnEndReason>) -> StopReason {
    match end {
        Some(TurnEndReason::Completed) => StopReason::Completed,
        Some(TurnEndReason::MaxTokens) => StopReason::MaxTokens,
        Some(TurnEndReason::Aborted { .. }) => StopReason::Aborted,
        Some(TurnEndReason::Blocked) => StopReason::Refusal,
        Some(TurnEndReason::Error { .. } | TurnEndReason::Interrupted) | None => StopReason::Error,
    }
}

/// `epochStopReason` of a continuable Activation epoch (§1.8.6).
pub fn epoch_stop_reason(own: &[Arc<Event>]) -> StopReason {
    let work = fold_consumed_work(own);
    match work.end {
        Some(TurnEndReason::MaxTokens) => StopReason::MaxTokens,
        Some(TurnEndReason::Aborted { .. } | TurnEndReason::Interrupted) => StopReason::Aborted,
        Some(TurnEndReason::Error { .. }) => StopReason::Error,
        Some(TurnEndReason::Blocked) => StopReason::Refusal,
        Some(TurnEndReason::Completed) | None if work.dropped_unrun => StopReason::Aborted,
        Some(TurnEndReason::Completed) | None => StopReason::Completed,
    }
}

/// The diagnostic byte cap and its marker.
pub const DIAGNOSTIC_LIMIT: usize = 4096;
pub const DIAGNOSTIC_TRUNCATED: &str = "\n[diagnostic truncated]";

/// `limitSubagentDiagnostic`: at most 4096 UTF-8 bytes, cut on a character boundary.
pub fn limit_diagnostic(diagnostic: &str) -> String {
    if diagnostic.len() <= DIAGNOSTIC_LIMIT {
        return diagnostic.to_owned();
    }
    let mut cut = DIAGNOSTIC_LIMIT - DIAGNOSTIC_TRUNCATED.len();
    while !diagnostic.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{DIAGNOSTIC_TRUNCATED}", &diagnostic[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_protocol::Message;
    use dsh_protocol::MessageSource;
    use dsh_session::data::AbortReason;
    use dsh_session::data::EventData;
    use dsh_session::data::InboxTarget;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn ev<T: EventData>(seq: u64, data: &T) -> Arc<Event> {
        Arc::new(Event::new(
            T::KIND,
            seq,
            0,
            serde_json::to_value(data).unwrap(),
        ))
    }

    fn assistant(seq: u64, content: Vec<ContentBlock>) -> Arc<Event> {
        ev(
            seq,
            &AssistantMessage {
                turn: 1,
                step: 1,
                message: Message::assistant(content, MessageSource::model("p", "m")),
                interrupted: false,
                usage: None,
            },
        )
    }

    fn delta(seq: u64, text: &str) -> Arc<Event> {
        ev(
            seq,
            &AssistantChunk {
                turn: 1,
                step: 1,
                chunk: StreamChunk::TextDelta {
                    index: 0,
                    text: text.into(),
                },
            },
        )
    }

    #[test]
    fn output_is_the_last_non_empty_message_ignoring_usage_only_ones() {
        let events = vec![
            assistant(0, vec![ContentBlock::text("first")]),
            assistant(1, vec![ContentBlock::text("partial answer")]),
            assistant(2, vec![]),
        ];
        assert_eq!(
            final_assistant_output(&events),
            vec![ContentBlock::text("partial answer")]
        );
        let deltas = vec![delta(0, "par"), delta(1, "tial")];
        assert_eq!(
            final_assistant_output(&deltas),
            vec![ContentBlock::text("partial")]
        );
        assert!(final_assistant_output(&[]).is_empty());
    }

    fn turn_start(seq: u64, turn: u64) -> Arc<Event> {
        ev(seq, &dsh_session::data::TurnStart { turn })
    }
    fn turn_end(seq: u64, turn: u64, reason: TurnEndReason) -> Arc<Event> {
        ev(seq, &TurnEnd { turn, reason })
    }
    fn step(seq: u64) -> Arc<Event> {
        ev(seq, &dsh_session::data::StepStart { turn: 1, step: 1 })
    }
    fn splice(seq: u64, removed: Option<u64>, canceled: bool, inserted: bool) -> Arc<Event> {
        ev(
            seq,
            &InboxSpliced {
                target: InboxTarget::NextTurn,
                start: 0,
                removed_count: removed,
                inserted: if inserted {
                    vec![Message::user_text("x")]
                } else {
                    vec![]
                },
                outcome: canceled.then_some(SpliceOutcome::Canceled),
            },
        )
    }

    #[test]
    fn consumed_work_accounts_stepped_turns_and_claimed_early_ends() {
        let completed = vec![
            turn_start(0, 1),
            step(1),
            turn_end(2, 1, TurnEndReason::Completed),
        ];
        assert_eq!(epoch_stop_reason(&completed), StopReason::Completed);
        // A turn that claimed nothing and never stepped does not account.
        let idle_turn = vec![
            turn_start(0, 1),
            step(1),
            turn_end(2, 1, TurnEndReason::MaxTokens),
            turn_start(3, 2),
            turn_end(4, 2, TurnEndReason::Completed),
        ];
        assert_eq!(
            fold_consumed_work(&idle_turn).end,
            Some(TurnEndReason::MaxTokens)
        );
        let aborted_claim = vec![
            turn_start(0, 1),
            splice(1, Some(1), false, false),
            turn_end(
                2,
                1,
                TurnEndReason::Aborted {
                    reason: AbortReason::Parent,
                },
            ),
        ];
        assert_eq!(epoch_stop_reason(&aborted_claim), StopReason::Aborted);
        assert_eq!(
            one_shot_stop_reason(fold_consumed_work(&aborted_claim).end.as_ref()),
            StopReason::Aborted
        );
        let dropped = vec![
            turn_start(0, 1),
            step(1),
            turn_end(2, 1, TurnEndReason::Completed),
            splice(3, None, false, true),
            splice(4, Some(1), true, false),
        ];
        assert_eq!(epoch_stop_reason(&dropped), StopReason::Aborted);
        assert_eq!(epoch_stop_reason(&[]), StopReason::Completed);
        assert_eq!(one_shot_stop_reason(None), StopReason::Error);
        assert_eq!(
            one_shot_stop_reason(Some(&TurnEndReason::Blocked)),
            StopReason::Refusal
        );
        assert_eq!(
            one_shot_stop_reason(Some(&TurnEndReason::Interrupted)),
            StopReason::Error
        );
    }

    #[test]
    fn diagnostics_are_cut_on_a_character_boundary() {
        assert_eq!(limit_diagnostic("short"), "short");
        let long = "é".repeat(3000); // 6000 bytes
        let cut = limit_diagnostic(&long);
        assert!(cut.len() <= DIAGNOSTIC_LIMIT);
        assert!(cut.ends_with(DIAGNOSTIC_TRUNCATED));
        let kept = &cut[..cut.len() - DIAGNOSTIC_TRUNCATED.len()];
        assert!(kept.chars().all(|c| c == 'é'));
        assert_eq!(kept.len(), 4072); // 4073 is mid-character
        let exact = "a".repeat(DIAGNOSTIC_LIMIT);
        assert_eq!(limit_diagnostic(&exact), exact);
        let _ = json!(null);
    }
}
