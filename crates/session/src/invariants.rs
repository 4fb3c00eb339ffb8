//! The optional log checker of §1.11. The loop always satisfies these rules; tests and debug
//! builds use the checker to prove it.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::event::Event;
use crate::event::SurfaceOp;
use crate::event::kind;

/// Every §1.11 violation in `events`, as `"seq N (type): what"`; empty for a well-formed log.
/// Plugin events, `user/message`, `agent/inbox/spliced` and `session/end-seed` may appear
/// anywhere.
pub fn check_invariants(events: &[Arc<Event>]) -> Vec<String> {
    let mut out = Vec::new();
    let mut last_turn = 0u64;
    let mut open_turn: Option<u64> = None;
    let mut open_step: Option<u64> = None;
    let mut last_step = 0u64;
    // Per open step: started calls not yet answered, by call id.
    let mut calls: HashMap<String, usize> = HashMap::new();
    for (index, event) in events.iter().enumerate() {
        let mut fail =
            |what: String| out.push(format!("seq {} ({}): {what}", event.seq, event.kind));
        if event.seq != index as u64 {
            fail(format!("seq must equal its index {index}"));
        }
        let (turn, step) = (event.turn(), event.step());
        let names_open_step = |fail: &mut dyn FnMut(String)| {
            if open_turn.is_none() || turn != open_turn || open_step.is_none() || step != open_step
            {
                fail(format!(
                    "must name the open turn/step (open: {open_turn:?}/{open_step:?})"
                ));
            }
        };
        match event.kind.as_str() {
            kind::TURN_START => {
                if open_turn.is_some() {
                    fail("a turn is already open".into());
                }
                if turn != Some(last_turn + 1) {
                    fail(format!("turn must be {}", last_turn + 1));
                }
                last_turn = turn.unwrap_or(last_turn + 1);
                open_turn = Some(last_turn);
                last_step = 0;
            }
            kind::TURN_END => {
                if open_turn.is_none() || turn != open_turn {
                    fail(format!("must close the open turn {open_turn:?}"));
                }
                if open_step.is_some() {
                    fail("a step is still open".into());
                }
                open_turn = None;
                open_step = None;
            }
            kind::STEP_START => {
                if open_turn.is_none() || turn != open_turn {
                    fail("must be inside the open turn".into());
                }
                if open_step.is_some() {
                    fail("a step is already open".into());
                }
                if step != Some(last_step + 1) {
                    fail(format!("step must be {}", last_step + 1));
                }
                last_step = step.unwrap_or(last_step + 1);
                open_step = Some(last_step);
                calls.clear();
            }
            kind::STEP_END => {
                if open_step.is_none() || turn != open_turn || step != open_step {
                    fail("must close the open step".into());
                }
                open_step = None;
            }
            kind::ASSISTANT_CHUNK | kind::ASSISTANT_MESSAGE => names_open_step(&mut fail),
            kind::TOOL_CALL => {
                names_open_step(&mut fail);
                let id = event
                    .data
                    .get("callId")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                *calls.entry(id.to_owned()).or_default() += 1;
            }
            kind::TOOL_RESULT if event.surface_op() == Some(SurfaceOp::Append) => {
                names_open_step(&mut fail);
                let not_started = event.data.pointer("/error/code").and_then(Value::as_str)
                    == Some("TOOL_NOT_STARTED");
                let id = event
                    .data
                    .pointer("/message/source/callId")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                match calls.get_mut(id) {
                    Some(n) if *n > 0 => *n -= 1,
                    _ if not_started => {}
                    _ => fail(format!("no tool/call {id:?} in this step")),
                }
            }
            kind::REQUEST_HEADER | kind::REQUEST_CONTEXT | "todo/write" if open_turn.is_none() => {
                fail("must be inside an open turn".into());
            }
            _ => {}
        }
    }
    out
}
