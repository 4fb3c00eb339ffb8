use super::*;
use serde_json::json;

fn entry(v: Value) -> ModelEntry {
    serde_json::from_value(v).unwrap()
}

const HEAD: &str = r#"{"id":"replay-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":"#;

fn f(delta: &str, finish: &str) -> String {
    format!("data: {HEAD}{delta},\"finish_reason\":{finish}}}]}}\n\n")
}

#[test]
fn response_uses_recorded_fragments_then_finish_and_done() {
    let e = entry(json!({
        "session": 0, "route": "main", "index": 0, "kind": "response",
        "reasoning": "ab", "content": "C",
        "tool_calls": [{"id": "call_1", "name": "bash", "arguments": "{}"}],
        "finish_reason": "tool_calls",
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        "stream": [
            {"reasoning": "a"}, {"reasoning": "b"}, {"content": "C"},
            {"tool_call": 0, "id": "call_1", "name": "bash", "arguments": ""},
            {"tool_call": 0, "arguments": "{}"}
        ]
    }));
    let frames = response_frames(&e, "replay-1", "m");
    let expected = vec![
        f(r#"{"role":"assistant","content":""}"#, "null"),
        f(r#"{"reasoning_content":"a"}"#, "null"),
        f(r#"{"reasoning_content":"b"}"#, "null"),
        f(r#"{"content":"C"}"#, "null"),
        f(
            r#"{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"bash","arguments":""}}]}"#,
            "null",
        ),
        f(
            r#"{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}"#,
            "null",
        ),
        format!(
            "data: {HEAD}{{}},\"finish_reason\":\"tool_calls\"}}],\"usage\":{{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}}}\n\n"
        ),
        "data: [DONE]\n\n".to_owned(),
    ];
    pretty_assertions::assert_eq!(frames, expected);
}

#[test]
fn streamed_arguments_serve_the_assembled_text_once() {
    let e = entry(json!({
        "kind": "response", "finish_reason": "tool_calls", "usage": null,
        "tool_calls": [{"id": "c", "name": "n", "arguments": "{\"a\":1}", "streamed_arguments": "{\"a\":1}}"}],
        "stream": [
            {"tool_call": 0, "id": "c", "name": "n", "arguments": "{\"a\":"},
            {"tool_call": 0, "arguments": "1}}"}
        ]
    }));
    let frames = response_frames(&e, "replay-1", "m");
    assert_eq!(frames.len(), 4);
    assert_eq!(
        frames[1],
        f(
            r#"{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"n","arguments":"{\"a\":1}"}}]}"#,
            "null"
        )
    );
    assert_eq!(frames[2], f("{}", "\"tool_calls\""));
}

#[test]
fn entry_without_stream_is_served_whole() {
    let e = entry(
        json!({"kind": "response", "content": "hi", "reasoning": "r", "finish_reason": "stop"}),
    );
    let frames = response_frames(&e, "replay-1", "m");
    assert_eq!(frames[1], f(r#"{"reasoning_content":"r"}"#, "null"));
    assert_eq!(frames[2], f(r#"{"content":"hi"}"#, "null"));
    assert_eq!(frames[3], f("{}", "\"stop\""));
}

#[test]
fn hang_prefix_has_no_finish() {
    let e = entry(
        json!({"kind": "hang", "content": "partial", "ready_file": ".r", "stream": [{"content": "partial"}]}),
    );
    let frames = prefix_frames(&e, "replay-1", "m");
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[1], f(r#"{"content":"partial"}"#, "null"));
}

#[test]
fn error_body_is_the_recorded_body() {
    let e = entry(
        json!({"kind": "error", "error": {"status": 429, "code": "RATE_LIMIT", "message": "m",
        "body": {"error": {"message": "m", "type": "rate_limit_error", "code": "rate_limit_exceeded"}}}}),
    );
    assert_eq!(
        error_body(&e),
        json!({"error": {"message": "m", "type": "rate_limit_error", "code": "rate_limit_exceeded"}})
    );
}
