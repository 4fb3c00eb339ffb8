use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_protocol::ToolSchema;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap()
}

fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        model: "deepseek-v4-flash".into(),
        messages: messages.into(),
        ..ModelRequest::default()
    }
}

#[test]
fn captured_continuation_request_is_reproduced_byte_for_byte() {
    let mut req = request(vec![
        Message::user_text("Run echo hi in bash and tell me what it printed."),
        Message::user(
            vec![ContentBlock::text("Current runtime context. …")],
            MessageSource::plugin("p"),
        ),
        Message::assistant(
            vec![
                ContentBlock::Reasoning {
                    text: "I should call a tool.".into(),
                },
                ContentBlock::ToolCall {
                    id: "call_fake_001".into(),
                    name: "bash".into(),
                    arguments: "{\"command\":\"echo hi\",\"description\":\"Print hi\"}".into(),
                },
            ],
            MessageSource::model("deepseek-official", "deepseek-v4-flash"),
        ),
        Message::tool_result("call_fake_001", vec![ContentBlock::text("hi\n")], false),
    ]);
    req.system = Some("You are an AI agent powered by DeepSeek Harness.".into());
    req.tools = vec![ToolSchema {
        name: "bash".into(),
        description: "Execute a bash command.".into(),
        parameters: json!({"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}),
    }];
    req.max_tokens = Some(256_000);
    req.reasoning_effort = Some("high".into());
    req.session_id = Some("sid".into());
    assert_eq!(
        compact(&chat_request_body(&req)),
        concat!(
            r#"{"model":"deepseek-v4-flash","messages":["#,
            r#"{"role":"system","content":"You are an AI agent powered by DeepSeek Harness."},"#,
            r#"{"role":"user","content":"Run echo hi in bash and tell me what it printed."},"#,
            r#"{"role":"user","content":"Current runtime context. …"},"#,
            r#"{"role":"assistant","content":"","reasoning_content":"I should call a tool.","tool_calls":[{"id":"call_fake_001","type":"function","function":{"name":"bash","arguments":"{\"command\":\"echo hi\",\"description\":\"Print hi\"}"}}]},"#,
            r#"{"role":"tool","tool_call_id":"call_fake_001","content":"hi\n"}],"#,
            r#""stream":true,"stream_options":{"include_usage":true},"thinking":{"type":"enabled"},"reasoning_effort":"high","#,
            r#""tools":[{"type":"function","function":{"name":"bash","description":"Execute a bash command.","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}}],"#,
            r#""max_tokens":256000}"#
        )
    );
}

#[test]
fn session_title_request_disables_thinking_only() {
    let mut req = request(vec![Message::user_text("Generate the session title")]);
    req.system = Some("Create a concise title".into());
    req.max_tokens = Some(64);
    req.reasoning_effort = Some("high".into());
    req.purpose = Some(RequestPurpose::SessionTitle);
    assert_eq!(
        compact(&chat_request_body(&req)),
        r#"{"model":"deepseek-v4-flash","messages":[{"role":"system","content":"Create a concise title"},{"role":"user","content":"Generate the session title"}],"stream":true,"stream_options":{"include_usage":true},"thinking":{"type":"disabled"},"max_tokens":64}"#
    );
}

#[test]
fn effort_resolution() {
    let body = |effort: Option<&str>, configured: Option<Thinking>| {
        let mut req = request(vec![]);
        req.reasoning_effort = effort.map(String::from);
        let value = chat_request_body_with(&req, configured);
        (
            value.get("thinking").cloned(),
            value.get("reasoning_effort").cloned(),
        )
    };
    assert_eq!(
        body(Some("off"), Some(Thinking::Enabled)),
        (Some(json!({"type":"disabled"})), None)
    );
    assert_eq!(
        body(Some("max"), None),
        (Some(json!({"type":"enabled"})), Some(json!("max")))
    );
    assert_eq!(
        body(Some("low"), None),
        (Some(json!({"type":"enabled"})), Some(json!("low")))
    );
    assert_eq!(
        body(None, Some(Thinking::Disabled)),
        (Some(json!({"type":"disabled"})), None)
    );
    assert_eq!(body(None, None), (None, None));
}

#[test]
fn optional_fields_are_omitted_and_others_keep_their_order() {
    let mut req = request(vec![]);
    assert_eq!(
        compact(&chat_request_body(&req)),
        r#"{"model":"deepseek-v4-flash","messages":[],"stream":true,"stream_options":{"include_usage":true}}"#
    );
    req.system = Some(String::new());
    req.temperature = Some(1.0);
    req.max_tokens = Some(10);
    req.stop = vec!["END".into()];
    assert_eq!(
        compact(&chat_request_body(&req)),
        r#"{"model":"deepseek-v4-flash","messages":[],"stream":true,"stream_options":{"include_usage":true},"temperature":1,"max_tokens":10,"stop":["END"]}"#
    );
    req.temperature = Some(0.7);
    assert_eq!(chat_request_body(&req)["temperature"], json!(0.7));
}

#[test]
fn message_mapping_edge_cases() {
    let model = MessageSource::model("deepseek-official", "m");
    let mut audio = serde_json::Map::new();
    audio.insert("type".into(), json!("audio"));
    let req = request(vec![
        Message {
            role: Role::System,
            ..Message::user(
                vec![ContentBlock::text("sys "), ContentBlock::text("history")],
                MessageSource::user(),
            )
        },
        Message::user(vec![], MessageSource::user()),
        Message::user(
            vec![
                ContentBlock::text("see "),
                ContentBlock::Other(audio),
                ContentBlock::text("results"),
                ContentBlock::ToolResult {
                    tool_call_id: "a".into(),
                    content: vec![],
                    is_error: Some(true),
                },
                ContentBlock::ToolResult {
                    tool_call_id: "b".into(),
                    content: vec![ContentBlock::text("x"), ContentBlock::text("y")],
                    is_error: None,
                },
            ],
            MessageSource::user(),
        ),
        Message::assistant(
            vec![
                ContentBlock::Reasoning { text: "r1".into() },
                ContentBlock::text("Done."),
                ContentBlock::Reasoning { text: "r2".into() },
            ],
            model.clone(),
        ),
        Message::assistant(vec![ContentBlock::text("plain")], model.clone()),
        Message::assistant(
            vec![
                ContentBlock::ToolCall {
                    id: "c1".into(),
                    name: "a".into(),
                    arguments: "{}".into(),
                },
                ContentBlock::ToolCall {
                    id: "c2".into(),
                    name: "b".into(),
                    arguments: "{\"x\":1}".into(),
                },
            ],
            model,
        ),
        Message::tool_result("c1", vec![ContentBlock::text("one")], false),
        Message::tool_result("c2", vec![], false),
    ]);
    assert_eq!(
        chat_request_body(&req)["messages"],
        json!([
            {"role":"system","content":"sys history"},
            {"role":"user","content":""},
            {"role":"user","content":"see results"},
            {"role":"tool","tool_call_id":"a","content":"(no output)"},
            {"role":"tool","tool_call_id":"b","content":"xy"},
            {"role":"assistant","content":"Done.","reasoning_content":"r1r2"},
            {"role":"assistant","content":"plain"},
            {"role":"assistant","content":"","tool_calls":[
                {"id":"c1","type":"function","function":{"name":"a","arguments":"{}"}},
                {"id":"c2","type":"function","function":{"name":"b","arguments":"{\"x\":1}"}}]},
            {"role":"tool","tool_call_id":"c1","content":"one"},
            {"role":"tool","tool_call_id":"c2","content":"(no output)"},
        ])
    );
}

#[test]
fn non_ascii_is_written_raw() {
    let req = request(vec![Message::user_text("héllo – 你好")]);
    let bytes = serde_json::to_vec(&chat_request_body(&req)).unwrap();
    assert!(String::from_utf8(bytes).unwrap().contains("héllo – 你好"));
}

#[test]
fn images_are_detected_inside_tool_results() {
    let image = ContentBlock::Image {
        attachment: json!({"sha256":"x"}),
    };
    assert!(message_has_image(&Message::tool_result(
        "c",
        vec![image.clone()],
        false
    )));
    assert!(message_has_image(&Message::user(
        vec![image],
        MessageSource::user()
    )));
    assert!(!message_has_image(&Message::user_text("no")));
}

struct Pixels;

impl super::super::images::AttachmentResolver for Pixels {
    fn load(
        &self,
        attachment: &Value,
    ) -> Result<super::super::images::ImageData, crate::ImageLoadError> {
        let id = attachment["attachmentId"]
            .as_str()
            .ok_or_else(|| crate::ImageLoadError::Unavailable("no id".into()))?;
        Ok(super::super::images::ImageData {
            media_type: "image/png".into(),
            bytes: id.as_bytes().to_vec(),
        })
    }
}

#[test]
fn images_become_ordered_parts_and_tool_images_follow_the_tool_entries() {
    let image = |id: &str| ContentBlock::Image {
        attachment: json!({"attachmentId": id, "mediaType": "image/png"}),
    };
    let req = request(vec![
        Message::user(
            vec![
                ContentBlock::text("look "),
                image("abc"),
                ContentBlock::text(" here"),
            ],
            MessageSource::user(),
        ),
        Message::tool_result(
            "c1",
            vec![ContentBlock::text("read ok"), image("xyz")],
            false,
        ),
    ]);
    // Budget: base64("abc") and base64("xyz") are 4 bytes each; 4 keeps only the newest.
    for (budget, first) in [
        (
            8,
            json!({"type":"image_url","image_url":{"url":"data:image/png;base64,YWJj"}}),
        ),
        (
            4,
            json!({"type":"text","text":"[image omitted: request image size limit exceeded]"}),
        ),
    ] {
        let mut urls = super::super::images::resolve(&req.messages, &Pixels, budget).unwrap();
        let body = build(&req, None, Some(&mut urls));
        assert_eq!(
            body["messages"],
            json!([
                {"role":"user","content":[{"type":"text","text":"look "}, first, {"type":"text","text":" here"}]},
                {"role":"tool","tool_call_id":"c1","content":"read ok"},
                {"role":"user","content":[{"type":"text","text":"Attached image(s) from tool result:"},
                                          {"type":"image_url","image_url":{"url":"data:image/png;base64,eHl6"}}]},
            ])
        );
    }
    // Without resolved images (the pure builder) image blocks are skipped.
    assert_eq!(
        chat_request_body(&req)["messages"],
        json!([{"role":"user","content":"look  here"}, {"role":"tool","tool_call_id":"c1","content":"read ok"}])
    );
}

/// The pieced body must be byte-identical to the body built whole, whatever the request.
fn assert_pieces_match(request: &ModelRequest, encoder: &HistoryEncoder) {
    let body = encode(request, Some(Thinking::Enabled), encoder).unwrap();
    let whole = serde_json::to_vec(&build(request, Some(Thinking::Enabled), None)).unwrap();
    assert_eq!(
        String::from_utf8(body.to_vec()).unwrap(),
        String::from_utf8(whole).unwrap()
    );
    assert_eq!(body.len(), body.to_vec().len());
}

#[test]
fn the_pieced_body_equals_the_whole_one() {
    let encoder = HistoryEncoder::new();
    let empty_result = Message::tool_result("c0", vec![], false);
    let call = Message::assistant(
        vec![
            ContentBlock::Reasoning {
                text: "think".into(),
            },
            ContentBlock::text("calling"),
            ContentBlock::ToolCall {
                id: "c0".into(),
                name: "bash".into(),
                arguments: r#"{"command":"ls"}"#.into(),
            },
        ],
        MessageSource::model("p", "m"),
    );
    let mut req = request(vec![Message::user_text("hi \"quoted\" \u{1F600}")]);
    req.session_id = Some("s".into());
    // No system entry: the first history entry must lose its leading comma.
    assert_pieces_match(&req, &encoder);
    req.system = Some("system text".into());
    req.tools = vec![ToolSchema {
        name: "bash".into(),
        description: "run".into(),
        parameters: json!({"type": "object"}),
    }];
    req.temperature = Some(0.5);
    req.max_tokens = Some(100);
    req.stop = vec!["STOP".into()];
    req.reasoning_effort = Some("max".into());
    let mut messages = req.messages.clone();
    messages.push(std::sync::Arc::new(call));
    messages.push(std::sync::Arc::new(empty_result));
    req.messages = messages;
    assert_pieces_match(&req, &encoder);
    // A request with no history at all, and one for a title (its own cache slot).
    req.messages = dsh_protocol::MessageList::new();
    assert_pieces_match(&req, &encoder);
    req.purpose = Some(crate::RequestPurpose::SessionTitle);
    req.messages = vec![Message::user_text("title me")].into();
    assert_pieces_match(&req, &encoder);
    req.system = None;
    assert_pieces_match(&req, &encoder);
}

#[test]
fn a_message_with_an_image_sends_the_request_down_the_whole_path() {
    let encoder = HistoryEncoder::new();
    let image = ContentBlock::Image {
        attachment: json!({"sha256": "x"}),
    };
    let req = request(vec![Message::user(vec![image], MessageSource::user())]);
    assert!(encode(&req, None, &encoder).is_none());
}
