//! The §1.11 checker accepts loop-shaped logs and names each violation.

use dsh_session::CreateOptions;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use dsh_session::check_invariants;
use dsh_session::data::StepEnd;
use dsh_session::data::StepStart;
use dsh_session::data::TurnEnd;
use dsh_session::data::TurnEndReason;
use dsh_session::data::TurnStart;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::common::*;

#[test]
fn loop_shaped_logs_pass() {
    let (_home, store) = store();
    let log = store.create(CreateOptions::default()).unwrap();
    full_turn(&log, 1);
    full_turn(&log, 2);
    assert_eq!(
        check_invariants(&log.events().unwrap()),
        Vec::<String>::new()
    );
}

#[test]
fn violations_are_named() {
    let log = SessionLog::in_memory(SessionHeader::new("v", None));
    log.append("todo/write", json!({"todos": []}), None)
        .unwrap();
    log.append_data(&TurnStart { turn: 2 }, None).unwrap();
    log.append_data(&StepStart { turn: 2, step: 2 }, None)
        .unwrap();
    let call = tool_call(&log, 2, 2, "c1");
    tool_result(&log, 2, 2, "c1", call);
    tool_result(&log, 2, 2, "c9", call);
    log.append_data(
        &TurnEnd {
            turn: 2,
            reason: TurnEndReason::Completed,
        },
        None,
    )
    .unwrap();
    log.append_data(&StepEnd { turn: 2, step: 2 }, None)
        .unwrap();
    assert_eq!(
        check_invariants(&log.events().unwrap()),
        vec![
            "seq 0 (todo/write): must be inside an open turn",
            "seq 1 (turn/start): turn must be 1",
            "seq 2 (step/start): step must be 1",
            "seq 5 (tool/result): no tool/call \"c9\" in this step",
            "seq 6 (turn/end): a step is still open",
            "seq 7 (step/end): must close the open step",
        ]
    );
}
