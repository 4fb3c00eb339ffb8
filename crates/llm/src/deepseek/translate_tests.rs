use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn chunk(delta: Value, finish: Option<&str>) -> String {
    json!({"id":"x","object":"chat.completion.chunk","created":0,"model":"m",
           "choices":[{"index":0,"delta":delta,"finish_reason":finish}]})
    .to_string()
}

fn run(payloads: &[String]) -> Vec<StreamChunk> {
    let mut translator = Translator::new();
    let mut all = Vec::new();
    for payload in payloads {
        match translator.on_data(payload).unwrap() {
            Outcome::Chunks(chunks) => all.extend(chunks),
            Outcome::Done(chunks) => {
                all.extend(chunks);
                return all;
            }
        }
    }
    panic!("no [DONE]");
}

fn finish_of(chunks: &[StreamChunk]) -> FinishReason {
    match chunks.last() {
        Some(StreamChunk::Finish { reason, .. }) => reason.clone(),
        other => panic!("last chunk is not a finish: {other:?}"),
    }
}

#[test]
fn captured_tool_call_answer_translates_to_the_recorded_chunks() {
    let mut last = chunk(json!({}), Some("tool_calls"));
    let mut value: Value = serde_json::from_str(&last).unwrap();
    value["usage"] = json!({"prompt_tokens":8034,"completion_tokens":20,"total_tokens":8054,
                            "prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":8034});
    last = value.to_string();
    let chunks = run(&[
        chunk(
            json!({"role":"assistant","content":"","reasoning_content":""}),
            None,
        ),
        chunk(
            json!({"role":"assistant","content":null,"reasoning_content":"I should call a tool."}),
            None,
        ),
        chunk(
            json!({"tool_calls":[{"index":0,"id":"call_fake_001","type":"function","function":{"name":"bash","arguments":""}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls":[{"index":0,"function":{"arguments":"{\"command\":\"echo hi\",\"d"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls":[{"index":0,"function":{"arguments":"escription\":\"Print hi\"}"}}]}),
            None,
        ),
        last,
        "[DONE]".into(),
    ]);
    let lines: Vec<String> = chunks
        .iter()
        .map(|c| serde_json::to_string(c).unwrap())
        .collect();
    assert_eq!(
        lines,
        vec![
            r#"{"type":"block-start","index":0,"blockType":"reasoning"}"#,
            r#"{"type":"reasoning-delta","index":0,"text":"I should call a tool."}"#,
            r#"{"type":"block-start","index":1,"blockType":"tool-call"}"#,
            r#"{"type":"tool-call-delta","index":1,"id":"call_fake_001","name":"bash","argumentsDelta":""}"#,
            r#"{"type":"tool-call-delta","index":1,"id":"call_fake_001","name":"bash","argumentsDelta":"{\"command\":\"echo hi\",\"d"}"#,
            r#"{"type":"tool-call-delta","index":1,"id":"call_fake_001","name":"bash","argumentsDelta":"escription\":\"Print hi\"}"}"#,
            r#"{"type":"block-end","index":0,"block":{"type":"reasoning","text":"I should call a tool."}}"#,
            r#"{"type":"block-end","index":1,"block":{"type":"tool-call","id":"call_fake_001","name":"bash","arguments":"{\"command\":\"echo hi\",\"description\":\"Print hi\"}"}}"#,
            r#"{"type":"usage","usage":{"inputTokens":8034,"outputTokens":20,"cacheReadTokens":0}}"#,
            r#"{"type":"finish","reason":{"kind":"tool-calls"}}"#,
        ]
    );
}

#[test]
fn one_block_per_kind_and_per_wire_index_in_first_appearance_order() {
    let chunks = run(&[
        chunk(json!({"content":"A"}), None),
        chunk(
            json!({"reasoning_content":"r","content":"B","tool_calls":[{"index":1,"id":"c1","function":{"name":"x","arguments":"{"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls":[{"index":0,"function":{"arguments":"1"}},{"index":1,"function":{"arguments":"}"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls":[{"index":0,"id":"c0","function":{"name":"y"}}]}),
            Some("tool_calls"),
        ),
        "[DONE]".into(),
    ]);
    let ends: Vec<&StreamChunk> = chunks
        .iter()
        .filter(|c| matches!(c, StreamChunk::BlockEnd { .. }))
        .collect();
    assert_eq!(
        ends,
        vec![
            &StreamChunk::BlockEnd {
                index: 0,
                block: ContentBlock::text("AB")
            },
            &StreamChunk::BlockEnd {
                index: 1,
                block: ContentBlock::Reasoning { text: "r".into() }
            },
            &StreamChunk::BlockEnd {
                index: 2,
                block: ContentBlock::ToolCall {
                    id: "c1".into(),
                    name: "x".into(),
                    arguments: "{}".into()
                }
            },
            &StreamChunk::BlockEnd {
                index: 3,
                block: ContentBlock::ToolCall {
                    id: "c0".into(),
                    name: "y".into(),
                    arguments: "1".into()
                }
            },
        ]
    );
    // The wire-index-0 call first appeared without an id: its early delta carries id "".
    assert!(chunks.contains(&StreamChunk::ToolCallDelta {
        index: 3,
        id: String::new(),
        name: None,
        arguments_delta: "1".into()
    }));
}

#[test]
fn usage_maps_cache_hits_and_reasoning_and_latest_wins() {
    assert_eq!(
        map_usage(
            &json!({"prompt_tokens":283,"completion_tokens":69,"prompt_tokens_details":{"cached_tokens":256},"completion_tokens_details":{"reasoning_tokens":24}})
        ),
        Some(TokenUsage {
            input_tokens: 27,
            output_tokens: 69,
            cache_read_tokens: Some(256),
            cache_write_tokens: None,
            reasoning_tokens: Some(24)
        })
    );
    assert_eq!(
        map_usage(
            &json!({"prompt_tokens":3091,"completion_tokens":23,"total_tokens":3114,"prompt_cache_hit_tokens":1000,"prompt_cache_miss_tokens":2091,"completion_tokens_details":{"reasoning_tokens":20}})
        ),
        Some(TokenUsage {
            input_tokens: 2091,
            output_tokens: 23,
            cache_read_tokens: Some(1000),
            cache_write_tokens: None,
            reasoning_tokens: Some(20)
        })
    );
    let plain =
        map_usage(&json!({"prompt_tokens":4,"completion_tokens":2,"total_tokens":6})).unwrap();
    assert_eq!(
        serde_json::to_string(&plain).unwrap(),
        r#"{"inputTokens":4,"outputTokens":2}"#
    );
    assert_eq!(map_usage(&Value::Null), None);

    let usage_only = |prompt: u64| {
        json!({"choices":[],"usage":{"prompt_tokens":prompt,"completion_tokens":1}}).to_string()
    };
    let chunks = run(&[
        chunk(json!({"content":"x"}), Some("stop")),
        usage_only(5),
        usage_only(9),
        json!({"usage":null}).to_string(),
        "[DONE]".into(),
    ]);
    assert!(chunks.contains(&StreamChunk::Usage {
        usage: TokenUsage {
            input_tokens: 9,
            output_tokens: 1,
            ..TokenUsage::default()
        }
    }));
    assert_eq!(
        chunks
            .iter()
            .filter(|c| matches!(c, StreamChunk::Usage { .. }))
            .count(),
        1
    );
}

#[test]
fn finish_reasons_map_per_spec() {
    let with = |reason: Option<&str>| {
        finish_of(&run(&[
            chunk(json!({"content":"x"}), reason),
            "[DONE]".into(),
        ]))
    };
    assert_eq!(with(Some("stop")), FinishReason::Stop);
    assert_eq!(with(None), FinishReason::Stop);
    assert_eq!(with(Some("length")), FinishReason::MaxTokens);
    assert_eq!(with(Some("tool_calls")), FinishReason::ToolCalls);
    assert_eq!(
        with(Some("content_filter")),
        FinishReason::Error {
            failure: LlmFailure::new("CONTENT_FILTER", "model stopped: content_filter")
        }
    );
    assert_eq!(
        with(Some("insufficient_system_resource")),
        FinishReason::Error {
            failure: LlmFailure::new(
                "INSUFFICIENT_SYSTEM_RESOURCE",
                "model stopped: insufficient_system_resource"
            )
        }
    );
    // A later string overwrites, null is ignored.
    let overwritten = run(&[
        chunk(json!({"content":"x"}), Some("length")),
        chunk(json!({}), Some("stop")),
        chunk(json!({}), None),
        "[DONE]".into(),
    ]);
    assert_eq!(finish_of(&overwritten), FinishReason::Stop);
}

#[test]
fn empty_completion_is_empty_response_after_usage_but_reasoning_only_succeeds() {
    let mut last: Value = serde_json::from_str(&chunk(json!({}), Some("stop"))).unwrap();
    last["usage"] = json!({"prompt_tokens":0,"completion_tokens":0,"total_tokens":0});
    let chunks = run(&[
        chunk(json!({"role":"assistant","content":""}), None),
        last.to_string(),
        "[DONE]".into(),
    ]);
    let lines: Vec<String> = chunks
        .iter()
        .map(|c| serde_json::to_string(c).unwrap())
        .collect();
    assert_eq!(
        lines,
        vec![
            r#"{"type":"usage","usage":{"inputTokens":0,"outputTokens":0}}"#,
            r#"{"type":"finish","reason":{"kind":"error","failure":{"message":"model returned a completed response with no content","code":"EMPTY_RESPONSE"}}}"#,
        ]
    );
    let reasoning_only = run(&[
        chunk(json!({"reasoning_content":"hmm"}), Some("stop")),
        "[DONE]".into(),
    ]);
    assert_eq!(finish_of(&reasoning_only), FinishReason::Stop);
}

#[test]
fn length_with_cut_call_reports_max_tokens() {
    let chunks = run(&[
        chunk(
            json!({"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"write","arguments":"{\"path\":\"a\",\"cont"}}]}),
            Some("length"),
        ),
        "[DONE]".into(),
    ]);
    assert_eq!(finish_of(&chunks), FinishReason::MaxTokens);
    let mut assembler = crate::BlockAssembler::new();
    for c in &chunks {
        assembler.push(c);
    }
    assert_eq!(assembler.blocks().unwrap(), vec![]);
}

#[test]
fn malformed_payload_fails_with_a_truncated_message() {
    let mut translator = Translator::new();
    let long = format!("{{not json {}", "x".repeat(200));
    let failure = translator.on_data(&long).unwrap_err();
    assert_eq!(failure.code, "MALFORMED_RESPONSE");
    assert_eq!(
        failure.message,
        format!("malformed SSE payload: {}", &long[..120])
    );
}
