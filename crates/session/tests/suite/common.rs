//! Builders shared by the suite.

use std::sync::Arc;

use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_protocol::StreamChunk;
use dsh_session::JsonlStore;
use dsh_session::SessionLog;
use dsh_session::SurfaceIntent;
use dsh_session::data::AssistantChunk;
use dsh_session::data::AssistantMessage;
use dsh_session::data::StepEnd;
use dsh_session::data::StepStart;
use dsh_session::data::ToolCall;
use dsh_session::data::ToolResult;
use dsh_session::data::TurnEnd;
use dsh_session::data::TurnEndReason;
use dsh_session::data::TurnStart;
use dsh_session::data::UserMessage;

pub fn store() -> (tempfile::TempDir, JsonlStore) {
    let home = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(home.path());
    (home, store)
}

pub fn fixed_clock(log: &SessionLog, ms: u64) {
    log.set_clock(Arc::new(move || ms));
}

pub fn user(log: &SessionLog, text: &str) -> u64 {
    log.append_data(
        &UserMessage(Message::user_text(text)),
        Some(SurfaceIntent::append()),
    )
    .unwrap()
    .seq
}

pub fn open_turn(log: &SessionLog, turn: u64, step: u64) {
    log.append_data(&TurnStart { turn }, None).unwrap();
    log.append_data(&StepStart { turn, step }, None).unwrap();
}

/// Streams one text delta and commits the assistant message citing it.
pub fn assistant(log: &SessionLog, turn: u64, step: u64, content: Vec<ContentBlock>) -> u64 {
    let chunk = AssistantChunk {
        turn,
        step,
        chunk: StreamChunk::TextDelta {
            index: 0,
            text: "…".into(),
        },
    };
    let c = log.append_data(&chunk, None).unwrap().seq;
    let message = Message::assistant(
        content,
        MessageSource::model("deepseek-official", "deepseek-v4-flash"),
    );
    let data = AssistantMessage {
        turn,
        step,
        message,
        interrupted: false,
        usage: None,
    };
    log.append_data(&data, Some(SurfaceIntent::append_from(vec![c])))
        .unwrap()
        .seq
}

pub fn call_block(id: &str) -> ContentBlock {
    ContentBlock::ToolCall {
        id: id.into(),
        name: "bash".into(),
        arguments: r#"{"command":"echo hi"}"#.into(),
    }
}

pub fn tool_call(log: &SessionLog, turn: u64, step: u64, id: &str) -> u64 {
    let data = ToolCall {
        turn,
        step,
        call_id: id.into(),
        name: "bash".into(),
        arguments: r#"{"command":"echo hi"}"#.into(),
    };
    log.append_data(&data, None).unwrap().seq
}

pub fn tool_result(log: &SessionLog, turn: u64, step: u64, id: &str, call_seq: u64) -> u64 {
    let message = Message::tool_result(id, vec![ContentBlock::text("hi\n")], false);
    let data = ToolResult {
        turn,
        step,
        message,
        error: None,
        meta: None,
    };
    log.append_data(&data, Some(SurfaceIntent::append_from(vec![call_seq])))
        .unwrap()
        .seq
}

pub fn close_turn(log: &SessionLog, turn: u64, step: u64) {
    log.append_data(&StepEnd { turn, step }, None).unwrap();
    log.append_data(
        &TurnEnd {
            turn,
            reason: TurnEndReason::Completed,
        },
        None,
    )
    .unwrap();
}

/// One complete turn: prompt, a tool round trip, a final answer.
pub fn full_turn(log: &SessionLog, turn: u64) {
    open_turn(log, turn, 1);
    user(log, "run echo hi");
    assistant(log, turn, 1, vec![call_block("c1")]);
    let call = tool_call(log, turn, 1, "c1");
    tool_result(log, turn, 1, "c1", call);
    log.append_data(&StepEnd { turn, step: 1 }, None).unwrap();
    log.append_data(&StepStart { turn, step: 2 }, None).unwrap();
    assistant(
        log,
        turn,
        2,
        vec![ContentBlock::text("Done. It printed hi")],
    );
    close_turn(log, turn, 2);
}

/// The lines of the log's file once everything appended is written.
pub fn file_lines(log: &SessionLog) -> Vec<String> {
    log.flush().unwrap();
    std::fs::read_to_string(log.path().unwrap())
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}
