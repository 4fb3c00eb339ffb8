use dsh_protocol::LlmFailure;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_session::data::EventData;
use dsh_session::data::RetryMode;
use dsh_session::data::TitleSource;
use dsh_tool_todo::Todo;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn event<T: EventData>(seq: u64, data: &T, surface_op: Option<SurfaceOp>) -> Event {
    Event {
        kind: T::KIND.into(),
        seq,
        time: 1_796_015_251_123,
        data: serde_json::to_value(data).unwrap(),
        ignorable: false,
        source_event_seqs: None,
        surface_op,
    }
}

fn presenter() -> Presenter {
    Presenter::new(
        RenderContext {
            cwd: "/ws".into(),
            terminal_output: false,
        },
        None,
        None,
    )
}

fn wire(updates: Vec<SessionUpdate>) -> Vec<Value> {
    updates
        .iter()
        .map(|u| serde_json::to_value(u).unwrap())
        .collect()
}

#[test]
fn chunks_become_message_and_thought_chunks() {
    let mut p = presenter();
    let text = AssistantChunk {
        turn: 1,
        step: 1,
        chunk: StreamChunk::TextDelta {
            index: 0,
            text: "Hi".into(),
        },
    };
    let thought = AssistantChunk {
        turn: 1,
        step: 1,
        chunk: StreamChunk::ReasoningDelta {
            index: 0,
            text: "hmm".into(),
        },
    };
    let start = AssistantChunk {
        turn: 1,
        step: 1,
        chunk: StreamChunk::BlockStart {
            index: 0,
            block_type: "text".into(),
        },
    };
    assert_eq!(
        wire(p.map(&event(1, &text, None), false)),
        vec![
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hi"}})
        ]
    );
    assert_eq!(
        wire(p.map(&event(2, &thought, None), false)),
        vec![
            json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}})
        ]
    );
    assert!(p.map(&event(3, &start, None), false).is_empty());
}

#[test]
fn a_retry_is_a_thought_not_message_text() {
    let retry = LlmRetry {
        retry_id: "r".into(),
        turn: 1,
        step: 1,
        provider: "p".into(),
        mode: RetryMode::Normal,
        policy_key: "[]".into(),
        retry: 1,
        max_retries: Some(2),
        delay_ms: 1,
        failure: LlmFailure::new("EMPTY_RESPONSE", "empty completion"),
    };
    assert_eq!(
        wire(presenter().map(&event(4, &retry, None), false)),
        vec![
            json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text",
            "text": "\n\n[Previous model attempt discarded; retrying 1/2 in 1ms: empty completion]\n\n"}})
        ]
    );
}

#[test]
fn todos_become_a_plan_and_titles_session_info() {
    let todos = TodoWrite {
        todos: vec![
            Todo {
                content: "read".into(),
                status: TodoStatus::Completed,
            },
            Todo {
                content: "write".into(),
                status: TodoStatus::InProgress,
            },
        ],
    };
    assert_eq!(
        wire(presenter().map(&event(5, &todos, None), false)),
        vec![json!({"sessionUpdate": "plan", "entries": [
            {"content": "read", "priority": "medium", "status": "completed"},
            {"content": "write", "priority": "medium", "status": "in_progress"}
        ]})]
    );
    let title = SessionTitle {
        title: "Fix the build".into(),
        message_seqs: vec![1],
        source: TitleSource::Fallback,
    };
    assert_eq!(
        wire(presenter().map(&event(6, &title, None), false)),
        vec![
            json!({"sessionUpdate": "session_info_update", "title": "Fix the build", "updatedAt": "2026-11-30T05:07:31.123Z"})
        ]
    );
}

#[test]
fn user_messages_are_replayed_but_never_echoed_live() {
    let typed = UserMessage(Message::user_text("hello"));
    let snapshot = UserMessage(Message::user(
        vec![ContentBlock::text("ctx")],
        MessageSource::plugin("x"),
    ));
    let mut p = presenter();
    assert!(
        p.map(&event(1, &typed, Some(SurfaceOp::Append)), false)
            .is_empty()
    );
    assert_eq!(
        wire(p.map(&event(1, &typed, Some(SurfaceOp::Append)), true)),
        vec![
            json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hello"}})
        ]
    );
    assert!(
        p.map(&event(2, &snapshot, Some(SurfaceOp::Append)), true)
            .is_empty()
    );
}

#[test]
fn unknown_tools_get_generic_cards_and_replacements_no_update() {
    // `kind: other` is the schema default and omitted on the wire.
    let mut p = presenter();
    let call = ToolCall {
        turn: 1,
        step: 1,
        call_id: "c1".into(),
        name: "mystery".into(),
        arguments: "{\"a\":1}".into(),
    };
    assert_eq!(
        wire(p.map(&event(7, &call, None), false)),
        vec![
            json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "mystery",
            "status": "in_progress", "rawInput": {"a": 1}})
        ]
    );
    let message = Message::tool_result("c1", vec![ContentBlock::text("Error: boom")], true);
    let result = ToolResult {
        turn: 1,
        step: 1,
        message,
        error: None,
        meta: None,
    };
    let replaced = SurfaceOp::Replace { start: 0, end: 1 };
    assert!(p.map(&event(8, &result, Some(replaced)), false).is_empty());
    assert_eq!(
        wire(p.map(&event(8, &result, Some(SurfaceOp::Append)), false)),
        vec![
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "failed",
            "content": [{"type": "content", "content": {"type": "text", "text": "Error: boom"}}]})
        ]
    );
}

#[test]
fn arguments_that_do_not_parse_stay_raw() {
    assert_eq!(parse_arguments(""), json!({}));
    assert_eq!(parse_arguments("{oops"), json!("{oops"));
    assert_eq!(parse_arguments("{\"x\":[1]}"), json!({"x": [1]}));
}
