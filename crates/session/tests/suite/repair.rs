//! Crash recovery on resume (§5.3).

use dsh_session::CreateOptions;
use dsh_session::TOOL_NOT_STARTED_TEXT;
use dsh_session::TOOL_OUTCOME_UNKNOWN_TEXT;
use dsh_session::data::ToolResult;
use dsh_session::data::TurnEnd;
use dsh_session::data::TurnEndReason;
use dsh_session::kind;
use pretty_assertions::assert_eq;

use super::common::*;

#[test]
fn an_open_turn_is_closed_with_synthetic_results() {
    let (_home, store) = store();
    let log = store
        .create(CreateOptions {
            id: Some("crash".into()),
            ..Default::default()
        })
        .unwrap();
    full_turn(&log, 1);
    open_turn(&log, 2, 1);
    user(&log, "three calls");
    assistant(
        &log,
        2,
        1,
        vec![call_block("c0"), call_block("c1"), call_block("c2")],
    );
    let c0 = tool_call(&log, 2, 1, "c0");
    tool_result(&log, 2, 1, "c0", c0);
    let c1 = tool_call(&log, 2, 1, "c1");
    fixed_clock(&log, 4242);
    tool_call(&log, 2, 1, "not-in-the-message");
    let before = log.len();
    // The process dies here: c1 started without a result, c2 never started.
    drop(log);

    let loaded = store.load("crash").unwrap();
    assert_eq!(
        loaded.events.len() as u64,
        before,
        "load does not apply the repair"
    );
    let kinds: Vec<&str> = loaded.repair.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["tool/result", "tool/result", "step/end", "turn/end"]
    );

    let log = store.resume("crash").unwrap();
    let events = log.events_since(before).unwrap();
    assert_eq!(events.len(), 5);
    let unknown = &events[0];
    assert_eq!(
        unknown.to_json_line(),
        format!(
            r#"{{"type":"tool/result","seq":{s},"time":4242,"data":{{"turn":2,"step":1,"message":{{"source":{{"kind":"tool","callId":"c1"}},"content":[{{"type":"tool-result","toolCallId":"c1","content":[{{"type":"text","text":"{TOOL_OUTCOME_UNKNOWN_TEXT}"}}],"isError":true}}],"role":"user","id":"interrupted-tool-result-c1-{s}"}},"error":{{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}}}},"sourceEventSeqs":[{c1}],"surfaceOp":"append"}}"#,
            s = before
        )
    );
    let not_started = events[1].decode::<ToolResult>().unwrap().unwrap();
    assert_eq!(
        not_started.message.id,
        format!("interrupted-tool-result-c2-{}", before + 1)
    );
    assert_eq!(
        dsh_protocol::text_of(match &not_started.message.content[0] {
            dsh_protocol::ContentBlock::ToolResult { content, .. } => content,
            other => panic!("{other:?}"),
        }),
        TOOL_NOT_STARTED_TEXT
    );
    assert_eq!(not_started.error.unwrap().code, "TOOL_NOT_STARTED");
    assert_eq!(events[1].source_event_seqs(), None);
    assert_eq!(
        events[2].to_json_line(),
        format!(
            r#"{{"type":"step/end","seq":{},"time":4242,"data":{{"turn":2,"step":1}}}}"#,
            before + 2
        )
    );
    assert_eq!(
        events[3].decode::<TurnEnd>().unwrap().unwrap(),
        TurnEnd {
            turn: 2,
            reason: TurnEndReason::Interrupted
        }
    );
    assert_eq!(
        events[3].to_json_line(),
        format!(
            r#"{{"type":"turn/end","seq":{},"time":4242,"data":{{"turn":2,"reason":{{"kind":"interrupted"}}}}}}"#,
            before + 3
        )
    );
    assert_eq!(events[4].kind, kind::END_SEED);

    // Every call of the interrupted step is answered in the derived history.
    let history = log.derive_messages();
    let tail: Vec<String> = history[history.len() - 3..]
        .iter()
        .map(|m| m.source.get("callId").unwrap().to_string())
        .collect();
    assert_eq!(tail, [r#""c0""#, r#""c1""#, r#""c2""#]);
    assert_eq!(log.turn_state().last_turn, 2, "the next turn is 3");
    assert_eq!(log.turn_state().open_turn, None);

    assert_eq!(
        dsh_session::check_invariants(&log.events().unwrap()),
        Vec::<String>::new()
    );

    // The repair is durable: a second resume adds nothing.
    let len = log.len();
    drop(log);
    assert_eq!(store.resume("crash").unwrap().len(), len);
}

#[test]
fn an_open_turn_without_a_step_only_gets_its_turn_end() {
    let (_home, store) = store();
    let log = store
        .create(CreateOptions {
            id: Some("t".into()),
            ..Default::default()
        })
        .unwrap();
    log.append_data(&dsh_session::data::TurnStart { turn: 1 }, None)
        .unwrap();
    drop(log);
    let log = store.resume("t").unwrap();
    let kinds: Vec<String> = log
        .events()
        .unwrap()
        .iter()
        .map(|e| e.kind.to_string())
        .collect();
    assert_eq!(kinds, ["turn/start", "turn/end", "session/end-seed"]);
}

#[test]
fn a_crash_mid_stream_closes_the_step_without_results() {
    let (_home, store) = store();
    let log = store
        .create(CreateOptions {
            id: Some("m".into()),
            ..Default::default()
        })
        .unwrap();
    open_turn(&log, 1, 1);
    user(&log, "hi");
    drop(log);
    let log = store.resume("m").unwrap();
    let kinds: Vec<String> = log
        .events_since(3)
        .unwrap()
        .iter()
        .map(|e| e.kind.to_string())
        .collect();
    assert_eq!(kinds, ["step/end", "turn/end", "session/end-seed"]);
}
