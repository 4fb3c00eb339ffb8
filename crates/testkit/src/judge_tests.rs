use super::*;
use serde_json::json;

fn norm() -> Normalizer {
    Normalizer::new(std::path::Path::new("/tmp/ws-judge"))
}

fn steps(ops: &[&str]) -> Vec<Step> {
    ops.iter()
        .map(|op| serde_json::from_value(json!({"op": op})).unwrap())
        .collect()
}

fn chunk(text: &str) -> Value {
    json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":text}}}})
}

fn expected_turn() -> Vec<Value> {
    vec![
        json!({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}),
        json!({"jsonrpc":"2.0","id":2,"result":{"sessionId":"{{sessionId}}"}}),
        json!({"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{}}),
        chunk("DONE"),
        json!({"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}),
    ]
}

fn judge(kinds: &[RequestKind], expected: &[Value], actual: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    judge_acp(kinds, expected, actual, &norm(), &mut out);
    out
}

#[test]
fn acp_passes_when_text_and_stop_reason_match_despite_chunking_and_ids() {
    let kinds = request_kinds(&steps(&["initialize", "newSession", "prompt"]));
    let actual = vec![
        json!({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"extra":true}}),
        json!({"jsonrpc":"2.0","id":2,"result":{"sessionId":"0b6f1a9e-1111-4111-8111-111111111111"}}),
        json!({"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm"}}}}),
        chunk("DO"),
        chunk("NE"),
        json!({"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}),
    ];
    assert_eq!(
        judge(&kinds, &expected_turn(), &actual),
        Vec::<String>::new()
    );
}

#[test]
fn acp_fails_on_wrong_text_wrong_stop_reason_or_missing_response() {
    let kinds = request_kinds(&steps(&["initialize", "newSession", "prompt"]));
    let mut actual = expected_turn();
    actual[3] = chunk("NOPE");
    actual[4] = json!({"jsonrpc":"2.0","id":3,"result":{"stopReason":"cancelled"}});
    let f = judge(&kinds, &expected_turn(), &actual);
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(f[0].contains("agent text \"NOPE\""));
    assert!(f[1].contains("stopReason \"cancelled\", expected \"end_turn\""));
    let f = judge(&kinds, &expected_turn(), &expected_turn()[..2]);
    assert_eq!(
        f,
        vec!["request 3 (Prompt { expect_error: false }): no response".to_owned()]
    );
}

#[test]
fn acp_errors_are_compared_by_code_and_message() {
    let kinds = request_kinds(&steps(&["initialize", "newSession", "promptExpectError"]));
    let err = |msg: &str| json!({"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":msg}});
    let mut expected = expected_turn();
    expected.truncate(2);
    expected.push(err("Internal error: turn failed: boom"));
    let mut actual = expected.clone();
    assert!(judge(&kinds, &expected, &actual).is_empty());
    actual[2] = err("Internal error: other");
    assert_eq!(judge(&kinds, &expected, &actual).len(), 1);
    actual[2] = json!({"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}});
    let f = judge(&kinds, &expected, &actual);
    assert!(f[0].contains("expected a JSON-RPC error"), "{f:?}");
}

#[test]
fn session_new_must_fail_when_expected_to() {
    let kinds = request_kinds(&steps(&["initialize", "newSessionExpectError"]));
    let expected = vec![
        json!({"jsonrpc":"2.0","id":1,"result":{}}),
        json!({"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"Invalid params"}}),
    ];
    assert!(judge(&kinds, &expected, &expected).is_empty());
    let ok = vec![
        expected[0].clone(),
        json!({"jsonrpc":"2.0","id":2,"result":{"sessionId":"x"}}),
    ];
    let f = judge(&kinds, &expected, &ok);
    assert_eq!(
        f,
        vec!["session/new: expected an error, got success".to_owned()]
    );
}

fn rec(call: &str, is_error: bool, text: &str) -> ToolResultRecord {
    serde_json::from_value(
        json!({"call_id": call, "name": "bash", "is_error": is_error, "text": text}),
    )
    .unwrap()
}

fn logged(call: &str, is_error: bool, text: &str) -> LoggedResult {
    LoggedResult {
        call_id: call.into(),
        is_error,
        text: text.into(),
    }
}

#[test]
fn tools_need_exactly_one_result_with_recorded_is_error_and_parity_counts_texts() {
    let recorded = vec![
        rec("a", false, "{{cwd}}/x ok"),
        rec("b", true, "denied"),
        rec("c", false, "c"),
        rec("d", false, "d"),
    ];
    let got = vec![
        logged("a", false, "/tmp/ws-judge/x ok"),
        logged("b", false, "denied"),
        logged("c", false, "c"),
        logged("c", false, "c"),
    ];
    let mut out = Vec::new();
    let parity = judge_tools(&recorded, &["d".to_owned()], &got, &norm(), &mut out);
    assert_eq!(
        parity,
        Parity {
            matched: 2,
            total: 3
        }
    );
    assert_eq!(
        out,
        vec![
            "tool call b (bash): is_error false (recorded true)".to_owned(),
            "tool call c (bash): 2 results (expected 1)".to_owned(),
        ]
    );
}

#[test]
fn replay_facts_fail_on_unconsumed_main_entries_and_unanswered_requests() {
    let mut out = Vec::new();
    judge_replay(
        &[
            Unconsumed {
                session: 0,
                route: "main".into(),
                index: 2,
            },
            Unconsumed {
                session: 0,
                route: "title".into(),
                index: 0,
            },
        ],
        &[Unanswered {
            method: "POST".into(),
            path: "/chat/completions".into(),
            session: Some(0),
            route: Some("main".into()),
            reason: "no remaining model entry".into(),
        }],
        &mut out,
    );
    assert_eq!(out.len(), 2);
    assert_eq!(out[0], "unconsumed model entries: s0#2");
    assert!(out[1].contains("no remaining model entry"));
}

fn turn_end(reason: Value) -> Value {
    json!({"type":"session_event","sessionId":"s","event":{"type":"turn/end","seq":9,"time":0,"data":{"turn":1,"reason":reason}}})
}

#[test]
fn headless_compares_output_turn_end_and_exit_rule() {
    let completed = vec![
        turn_end(json!({"kind":"completed"})),
        json!({"type":"result","sessionId":"s","output":"RETRY_OK"}),
    ];
    let run = |actual: &[Value], code: Option<i32>, stderr: &str| {
        let mut out = Vec::new();
        judge_headless(&completed, actual, code, stderr, &norm(), &mut out);
        out
    };
    assert!(run(&completed, Some(0), "").is_empty());
    assert_eq!(
        run(&completed, Some(1), ""),
        vec!["turn completed but exit code Some(1)".to_owned()]
    );
    let wrong = vec![
        completed[0].clone(),
        json!({"type":"result","sessionId":"s","output":"nope"}),
    ];
    assert_eq!(run(&wrong, Some(0), "").len(), 1);

    let error = vec![
        turn_end(json!({"kind":"error","error":{"message":"no key","code":"MISSING_CREDENTIAL"}})),
        json!({"type":"result","sessionId":"s","output":""}),
    ];
    let mut out = Vec::new();
    judge_headless(
        &error,
        &error,
        Some(1),
        "dsh: MISSING_CREDENTIAL: no key\n",
        &norm(),
        &mut out,
    );
    assert!(out.is_empty(), "{out:?}");
    judge_headless(&error, &error, Some(0), "", &norm(), &mut out);
    assert_eq!(
        out,
        vec!["turn did not complete but exit code 0".to_owned()]
    );
    out.clear();
    judge_headless(&error, &error, Some(1), "boom\n", &norm(), &mut out);
    assert!(out[0].contains("dsh: MISSING_CREDENTIAL: "));
    out.clear();
    judge_headless(&error, &completed, Some(0), "", &norm(), &mut out);
    assert!(
        out.iter()
            .any(|f| f.contains("last turn/end completed, expected error MISSING_CREDENTIAL")),
        "{out:?}"
    );
}
