use dsh_protocol::ContentBlock;
use dsh_protocol::FinishReason;
use dsh_protocol::StreamChunk;
use dsh_protocol::TokenUsage;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn start(index: u32, block_type: &str) -> StreamChunk {
    StreamChunk::BlockStart {
        index,
        block_type: block_type.into(),
    }
}
fn text(index: u32, text: &str) -> StreamChunk {
    StreamChunk::TextDelta {
        index,
        text: text.into(),
    }
}
fn call(index: u32, id: &str, name: Option<&str>, args: &str) -> StreamChunk {
    StreamChunk::ToolCallDelta {
        index,
        id: id.into(),
        name: name.map(String::from),
        arguments_delta: args.into(),
    }
}
fn finish(reason: FinishReason) -> StreamChunk {
    StreamChunk::Finish {
        reason,
        replay_state: None,
    }
}
fn fold(chunks: &[StreamChunk]) -> BlockAssembler {
    let mut assembler = BlockAssembler::new();
    for chunk in chunks {
        assembler.push(chunk);
    }
    assembler
}

#[test]
fn deltas_assemble_in_first_seen_order() {
    let assembler = fold(&[
        start(0, "reasoning"),
        StreamChunk::ReasoningDelta {
            index: 0,
            text: "think".into(),
        },
        start(1, "tool-call"),
        call(1, "", None, ""),
        call(1, "c1", Some("bash"), "{\"a\""),
        call(1, "", Some("bash"), ":1}"),
        text(2, "hi"),
        finish(FinishReason::ToolCalls),
    ]);
    assert_eq!(
        assembler.blocks().unwrap(),
        vec![
            ContentBlock::Reasoning {
                text: "think".into()
            },
            ContentBlock::ToolCall {
                id: "c1".into(),
                name: "bash".into(),
                arguments: "{\"a\":1}".into()
            },
            ContentBlock::text("hi"),
        ]
    );
    assert_eq!(assembler.finish(), FinishReason::ToolCalls);
}

#[test]
fn first_close_wins_and_later_deltas_are_ignored() {
    let assembler = fold(&[
        start(0, "text"),
        text(0, "draft"),
        StreamChunk::BlockEnd {
            index: 0,
            block: ContentBlock::text("final"),
        },
        text(0, " more"),
        StreamChunk::BlockEnd {
            index: 0,
            block: ContentBlock::text("second close"),
        },
    ]);
    assert_eq!(
        assembler.blocks().unwrap(),
        vec![ContentBlock::text("final")]
    );
    assert_eq!(
        assembler.finish(),
        FinishReason::Stop,
        "missing finish defaults to stop"
    );
    assert!(!assembler.is_finished());
}

#[test]
fn open_tool_call_without_id_or_name_gets_defaults() {
    let assembler = fold(&[start(3, "tool-call"), call(3, "", None, "{}")]);
    assert_eq!(
        assembler.blocks().unwrap(),
        vec![ContentBlock::ToolCall {
            id: "call-3".into(),
            name: String::new(),
            arguments: "{}".into()
        }]
    );
}

#[test]
fn max_tokens_drops_every_tool_call() {
    let assembler = fold(&[
        text(0, "partial answer"),
        call(1, "c1", Some("bash"), "{\"command\":\"ls\"}"),
        StreamChunk::BlockEnd {
            index: 1,
            block: ContentBlock::ToolCall {
                id: "c1".into(),
                name: "bash".into(),
                arguments: "{\"command\":\"ls\"}".into(),
            },
        },
        call(2, "c2", Some("bash"), "{\"comm"),
        finish(FinishReason::MaxTokens),
    ]);
    assert_eq!(
        assembler.blocks().unwrap(),
        vec![ContentBlock::text("partial answer")]
    );
}

#[test]
fn unknown_open_block_type_is_an_error_but_closed_one_is_kept() {
    let open = fold(&[start(0, "audio")]);
    let error = open.blocks().unwrap_err();
    assert_eq!(error.code(), "UNKNOWN_BLOCK_TYPE");

    let mut audio = serde_json::Map::new();
    audio.insert("type".into(), json!("audio"));
    let closed = fold(&[
        start(0, "audio"),
        StreamChunk::BlockEnd {
            index: 0,
            block: ContentBlock::Other(audio.clone()),
        },
    ]);
    assert_eq!(closed.blocks().unwrap(), vec![ContentBlock::Other(audio)]);
}

#[test]
fn last_usage_wins() {
    let usage = |input| TokenUsage {
        input_tokens: input,
        output_tokens: 1,
        ..TokenUsage::default()
    };
    let assembler = fold(&[
        StreamChunk::Usage { usage: usage(1) },
        StreamChunk::Usage { usage: usage(2) },
    ]);
    assert_eq!(assembler.usage(), Some(&usage(2)));
    assert_eq!(fold(&[]).usage(), None);
}

#[test]
fn interrupted_blocks_keep_non_blank_text_and_reasoning() {
    let assembler = fold(&[
        StreamChunk::ReasoningDelta {
            index: 0,
            text: "  \n".into(),
        },
        text(1, "partial"),
        call(2, "c1", Some("bash"), "{"),
        StreamChunk::ReasoningDelta {
            index: 3,
            text: "more thought".into(),
        },
    ]);
    assert_eq!(
        assembler.interrupted_blocks(),
        vec![
            ContentBlock::text("partial"),
            ContentBlock::Reasoning {
                text: "more thought".into()
            }
        ]
    );
}

#[test]
fn replay_state_is_aligned_with_emitted_blocks() {
    let with_state = |state: serde_json::Value, reason: FinishReason| {
        fold(&[
            text(0, "a"),
            call(1, "c1", Some("bash"), "{}"),
            StreamChunk::Finish {
                reason,
                replay_state: Some(state),
            },
        ])
    };
    let matching = json!({"response": "r", "blocks": [{"n": 0}, {"n": 1}]});
    assert_eq!(
        with_state(matching.clone(), FinishReason::ToolCalls).replay_state(),
        Some(matching.clone())
    );
    assert_eq!(
        with_state(matching, FinishReason::MaxTokens).replay_state(),
        Some(json!({"response": "r", "blocks": [{"n": 0}]}))
    );
    let mismatched = json!({"response": "r", "blocks": [{"n": 0}]});
    assert_eq!(
        with_state(mismatched, FinishReason::Stop).replay_state(),
        None
    );
    let no_blocks = json!({"response": "r"});
    assert_eq!(
        with_state(no_blocks.clone(), FinishReason::Stop).replay_state(),
        Some(no_blocks)
    );
}
