//! Crash recovery (§5.3): the synthetic closers for a log that ends inside an open turn.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::sync::Arc;

use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use serde_json::Value;

use crate::data::StepEnd;
use crate::data::ToolErrorId;
use crate::data::ToolResult;
use crate::data::TurnEnd;
use crate::data::TurnEndReason;
use crate::event::Event;
use crate::event::SurfaceOp;
use crate::event::kind;

/// Result text of a call that was recorded as started but has no durable result.
pub const TOOL_OUTCOME_UNKNOWN_TEXT: &str = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";

/// Result text of a call the model asked for that never started.
pub const TOOL_NOT_STARTED_TEXT: &str = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.";

/// The events crash repair appends to `events` (empty for a log that is not inside a turn):
/// one error `tool/result` per unanswered assistant tool call of the open step (in call order),
/// `step/end` if a step is open, then `turn/end {kind:"interrupted"}`. Seqs continue the log;
/// `time` is the last event's time, so repair is deterministic.
pub fn crash_repair(events: &[Arc<Event>]) -> Vec<Event> {
    let open_turn = events
        .iter()
        .rev()
        .find(|e| e.kind == kind::TURN_START || e.kind == kind::TURN_END);
    let Some(turn_start) = open_turn.filter(|e| e.kind == kind::TURN_START) else {
        return Vec::new();
    };
    let turn = turn_start.turn().unwrap_or(0);
    let time = events.last().map_or(0, |e| e.time);
    let base = events.len() as u64;
    let mut out: Vec<Event> = Vec::new();
    let push = |out: &mut Vec<Event>,
                kind: &str,
                data: Value,
                sources: Option<Vec<u64>>,
                surface: Option<SurfaceOp>| {
        out.push(
            Event::new(kind, base + out.len() as u64, time, data).with_surface(surface, sources),
        );
    };

    let turn_events = &events[turn_start.seq as usize..];
    if let Some(step) = open_step(turn_events) {
        for (call_id, recorded) in unanswered_calls(turn_events, turn, step) {
            let seq = base + out.len() as u64;
            let (text, error, sources) = match recorded {
                Some(call_seq) => (
                    TOOL_OUTCOME_UNKNOWN_TEXT,
                    ToolErrorId {
                        name: "ToolOutcomeUnknownError".into(),
                        code: "TOOL_OUTCOME_UNKNOWN".into(),
                    },
                    Some(vec![call_seq]),
                ),
                None => (
                    TOOL_NOT_STARTED_TEXT,
                    ToolErrorId {
                        name: "ToolNotStartedError".into(),
                        code: "TOOL_NOT_STARTED".into(),
                    },
                    None,
                ),
            };
            let mut message = Message::tool_result(&call_id, vec![ContentBlock::text(text)], true);
            message.id = format!("interrupted-tool-result-{call_id}-{seq}");
            let data = ToolResult {
                turn,
                step,
                message,
                error: Some(error),
                meta: None,
            };
            push(
                &mut out,
                kind::TOOL_RESULT,
                to_value(&data),
                sources,
                Some(SurfaceOp::Append),
            );
        }
        push(
            &mut out,
            kind::STEP_END,
            to_value(&StepEnd { turn, step }),
            None,
            None,
        );
    }
    push(
        &mut out,
        kind::TURN_END,
        to_value(&TurnEnd {
            turn,
            reason: TurnEndReason::Interrupted,
        }),
        None,
        None,
    );
    out
}

fn to_value<T: serde::Serialize>(data: &T) -> Value {
    serde_json::to_value(data).unwrap_or(Value::Null)
}

/// The number of the step that is still open inside the turn's events.
fn open_step(turn_events: &[Arc<Event>]) -> Option<u64> {
    let last = turn_events
        .iter()
        .rev()
        .find(|e| e.kind == kind::STEP_START || e.kind == kind::STEP_END)?;
    (last.kind == kind::STEP_START).then(|| last.step().unwrap_or(0))
}

/// Assistant tool calls of `(turn, step)` without a `tool/result`, in call order, each with the
/// seq of its `tool/call` record when there is one. Ids may repeat (a wire call without an id
/// has id `""`), so calls, records and results are matched by occurrence.
fn unanswered_calls(
    turn_events: &[Arc<Event>],
    turn: u64,
    step: u64,
) -> Vec<(String, Option<u64>)> {
    let in_step = |e: &&Arc<Event>| e.turn() == Some(turn) && e.step() == Some(step);
    let mut calls = Vec::new();
    let mut records: HashMap<String, VecDeque<u64>> = HashMap::new();
    let mut results: HashMap<String, usize> = HashMap::new();
    for event in turn_events.iter().filter(in_step) {
        match event.kind.as_str() {
            kind::ASSISTANT_MESSAGE => {
                let content = event
                    .data
                    .pointer("/message/content")
                    .and_then(Value::as_array);
                for block in content.into_iter().flatten() {
                    if block.get("type").and_then(Value::as_str) == Some("tool-call") {
                        let id = block.get("id").and_then(Value::as_str).unwrap_or_default();
                        calls.push(id.to_owned());
                    }
                }
            }
            kind::TOOL_CALL => {
                let id = event
                    .data
                    .get("callId")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                records
                    .entry(id.to_owned())
                    .or_default()
                    .push_back(event.seq);
            }
            kind::TOOL_RESULT => {
                let message = event.data.get("message");
                let id = message
                    .and_then(|m| m.pointer("/source/callId"))
                    .or_else(|| message.and_then(|m| m.pointer("/content/0/toolCallId")))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                *results.entry(id.to_owned()).or_default() += 1;
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for id in calls {
        let record = records.get_mut(&id).and_then(VecDeque::pop_front);
        match results.get_mut(&id) {
            Some(n) if *n > 0 => *n -= 1,
            _ => out.push((id, record)),
        }
    }
    out
}
