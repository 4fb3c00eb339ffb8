//! Successful and in-band-failing streams through the real adapter and a real socket.

use std::time::Duration;

use dsh_llm::BlockAssembler;
use dsh_llm::CancellationToken;
use dsh_llm::ContentBlock;
use dsh_llm::DeepSeekAdapter;
use dsh_llm::DeepSeekConfig;
use dsh_llm::FinishReason;
use dsh_llm::Message;
use dsh_llm::ModelAdapter;
use dsh_llm::ModelRequest;
use dsh_llm::RequestPurpose;
use dsh_llm::StreamChunk;
use dsh_llm::TokenUsage;
use futures::StreamExt;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::server::Reply;
use super::server::Server;
use super::server::Step;
use super::server::delta;
use super::server::done;
use super::server::events;
use super::server::frames;
use super::server::last;

pub const KEY: &str = "sk-test-SECRET-0123456789";

pub fn adapter_with(base_url: &str, idle: Duration) -> DeepSeekAdapter {
    DeepSeekAdapter::new(DeepSeekConfig {
        base_url: base_url.to_owned(),
        api_key: Some(KEY.to_owned()),
        idle_timeout: idle,
        user_id: Some("user-1".to_owned()),
        ..DeepSeekConfig::default()
    })
    .unwrap()
}

pub fn adapter(base_url: &str) -> DeepSeekAdapter {
    adapter_with(base_url, Duration::from_secs(10))
}

pub fn prompt(text: &str) -> ModelRequest {
    ModelRequest {
        model: "deepseek-v4-flash".into(),
        messages: vec![Message::user_text(text)].into(),
        session_id: Some("sid-1".into()),
        ..ModelRequest::default()
    }
}

pub async fn collect(adapter: &DeepSeekAdapter, request: ModelRequest) -> Vec<StreamChunk> {
    let chunks: Vec<StreamChunk> = adapter
        .stream(request, CancellationToken::new())
        .collect()
        .await;
    assert_single_finish(&chunks);
    chunks
}

pub fn assert_single_finish(chunks: &[StreamChunk]) {
    let finishes = chunks
        .iter()
        .filter(|c| matches!(c, StreamChunk::Finish { .. }))
        .count();
    assert_eq!(finishes, 1, "{chunks:?}");
    assert!(
        matches!(chunks.last(), Some(StreamChunk::Finish { .. })),
        "{chunks:?}"
    );
}

pub fn finish_of(chunks: &[StreamChunk]) -> FinishReason {
    match chunks.last() {
        Some(StreamChunk::Finish { reason, .. }) => reason.clone(),
        other => panic!("not a finish: {other:?}"),
    }
}

fn fold(chunks: &[StreamChunk]) -> BlockAssembler {
    let mut assembler = BlockAssembler::new();
    chunks.iter().for_each(|c| assembler.push(c));
    assembler
}

fn lines(chunks: &[StreamChunk]) -> Vec<String> {
    chunks
        .iter()
        .map(|c| serde_json::to_string(c).unwrap())
        .collect()
}

#[tokio::test]
async fn text_turn_sends_the_harness_request_and_streams_chunks() {
    let body = [
        events(&[
            delta(
                json!({"role":"assistant","content":"","reasoning_content":""}),
                None,
            ),
            delta(json!({"reasoning_content":"The user wants PONG."}), None),
            delta(json!({"content":"P"}), None),
            delta(json!({"content":"ONG"}), None),
            last(
                "stop",
                json!({"prompt_tokens":3091,"completion_tokens":23,"total_tokens":3114,
                "prompt_cache_hit_tokens":1000,"prompt_cache_miss_tokens":2091,
                "completion_tokens_details":{"reasoning_tokens":20}}),
            ),
        ]),
        done(),
    ]
    .concat();
    let server =
        Server::start_with_prefix(vec![Reply::sse(vec![Step::Send(body)])], "/prefix").await;
    let chunks = collect(&adapter(&server.base_url), prompt("Reply PONG")).await;
    assert_eq!(
        lines(&chunks),
        vec![
            r#"{"type":"block-start","index":0,"blockType":"reasoning"}"#,
            r#"{"type":"reasoning-delta","index":0,"text":"The user wants PONG."}"#,
            r#"{"type":"block-start","index":1,"blockType":"text"}"#,
            r#"{"type":"text-delta","index":1,"text":"P"}"#,
            r#"{"type":"text-delta","index":1,"text":"ONG"}"#,
            r#"{"type":"block-end","index":0,"block":{"type":"reasoning","text":"The user wants PONG."}}"#,
            r#"{"type":"block-end","index":1,"block":{"type":"text","text":"PONG"}}"#,
            r#"{"type":"usage","usage":{"inputTokens":2091,"outputTokens":23,"cacheReadTokens":1000,"reasoningTokens":20}}"#,
            r#"{"type":"finish","reason":{"kind":"stop"}}"#,
        ]
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(
        request.request_line,
        "POST /prefix/chat/completions HTTP/1.1"
    );
    let harness_headers: Vec<(String, String)> = request
        .headers
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "host" | "content-length"))
        .cloned()
        .collect();
    let expected = [
        ("authorization", format!("Bearer {KEY}")),
        ("content-type", "application/json".to_owned()),
        ("accept", "text/event-stream".to_owned()),
        (
            "user-agent",
            format!(
                "deepseek-harness/{} (+https://github.com/deepseek-ai/deepseek-harness)",
                env!("CARGO_PKG_VERSION")
            ),
        ),
        ("x-deepseek-harness-user-id", "user-1".to_owned()),
        ("x-deepseek-harness-session-id", "sid-1".to_owned()),
    ]
    .map(|(n, v)| (n.to_owned(), v))
    .to_vec();
    assert_eq!(harness_headers, expected);
    // Adapter defaults are materialized: max_tokens 256000, thinking enabled, effort high.
    assert_eq!(
        String::from_utf8(request.body.clone()).unwrap(),
        r#"{"model":"deepseek-v4-flash","messages":[{"role":"user","content":"Reply PONG"}],"stream":true,"stream_options":{"include_usage":true},"thinking":{"type":"enabled"},"reasoning_effort":"high","max_tokens":256000}"#
    );
}

#[tokio::test]
async fn reasoning_and_tool_call_survive_frames_split_at_any_byte() {
    let body = [
        b": keep-alive\r\n\r\n".to_vec(),
        events(&[
            delta(json!({"role":"assistant","content":null,"reasoning_content":"I should call a tool. é€"}), None),
            delta(json!({"tool_calls":[{"index":0,"id":"call_fake_001","type":"function","function":{"name":"bash","arguments":""}}]}), None),
            delta(json!({"tool_calls":[{"index":0,"function":{"arguments":"{\"command\":\"echo hi\",\"d"}}]}), None),
            delta(json!({"tool_calls":[{"index":0,"function":{"arguments":"escription\":\"Print hi\"}"}}]}), None),
            last("tool_calls", json!({"prompt_tokens":8034,"completion_tokens":20,"total_tokens":8054,
                "prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":8034})),
        ]),
        done(),
    ]
    .concat();
    let crlf = String::from_utf8(body.clone())
        .unwrap()
        .replace("\n\n", "\r\n\r\n")
        .into_bytes();
    let mut replies = Vec::new();
    for size in [1, 3, 7, 64] {
        replies.push(Reply::sse(frames(&body, size)));
    }
    replies.push(Reply::sse(frames(&crlf, 5)));
    let server = Server::start(replies).await;
    let adapter = adapter(&server.base_url);
    let mut outputs = Vec::new();
    for _ in 0..5 {
        outputs.push(collect(&adapter, prompt("go")).await);
    }
    for output in &outputs[1..] {
        assert_eq!(output, &outputs[0]);
    }
    let chunks = &outputs[0];
    assert_eq!(finish_of(chunks), FinishReason::ToolCalls);
    let assembler = fold(chunks);
    assert_eq!(
        assembler.blocks().unwrap(),
        vec![
            ContentBlock::Reasoning {
                text: "I should call a tool. é€".into()
            },
            ContentBlock::ToolCall {
                id: "call_fake_001".into(),
                name: "bash".into(),
                arguments: "{\"command\":\"echo hi\",\"description\":\"Print hi\"}".into(),
            },
        ]
    );
    assert_eq!(
        assembler.usage(),
        Some(&TokenUsage {
            input_tokens: 8034,
            output_tokens: 20,
            cache_read_tokens: Some(0),
            ..TokenUsage::default()
        })
    );
    let deltas = chunks
        .iter()
        .filter(|c| matches!(c, StreamChunk::ToolCallDelta { .. }))
        .count();
    assert_eq!(deltas, 3);
}

#[tokio::test]
async fn length_drops_the_cut_tool_call() {
    let body = [
        events(&[
            delta(json!({"content":"Writing the file."}), None),
            delta(json!({"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"write","arguments":"{\"path\":\"a.txt\",\"cont"}}]}), None),
            last("length", json!({"prompt_tokens":10,"completion_tokens":5,"total_tokens":15})),
        ]),
        done(),
    ]
    .concat();
    let server = Server::start(vec![Reply::sse(vec![Step::Send(body)])]).await;
    let chunks = collect(&adapter(&server.base_url), prompt("write")).await;
    assert_eq!(finish_of(&chunks), FinishReason::MaxTokens);
    assert_eq!(
        fold(&chunks).blocks().unwrap(),
        vec![ContentBlock::text("Writing the file.")]
    );
}

#[tokio::test]
async fn empty_completion_is_empty_response_with_usage_first() {
    let body = [
        events(&[
            delta(json!({"role":"assistant","content":""}), None),
            last(
                "stop",
                json!({"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}),
            ),
        ]),
        done(),
    ]
    .concat();
    let server = Server::start(vec![Reply::sse(vec![Step::Send(body)])]).await;
    let chunks = collect(&adapter(&server.base_url), prompt("x")).await;
    assert_eq!(
        lines(&chunks),
        vec![
            r#"{"type":"usage","usage":{"inputTokens":0,"outputTokens":0}}"#,
            r#"{"type":"finish","reason":{"kind":"error","failure":{"message":"model returned a completed response with no content","code":"EMPTY_RESPONSE"}}}"#,
        ]
    );
}

#[tokio::test]
async fn unknown_finish_reason_becomes_an_upper_cased_code() {
    let body = [
        events(&[
            delta(json!({"content":"partial"}), None),
            last("content_filter", json!(null)),
        ]),
        done(),
    ]
    .concat();
    let server = Server::start(vec![Reply::sse(vec![Step::Send(body)])]).await;
    let chunks = collect(&adapter(&server.base_url), prompt("x")).await;
    let FinishReason::Error { failure } = finish_of(&chunks) else {
        panic!("{chunks:?}")
    };
    assert_eq!(
        (failure.code.as_str(), failure.message.as_str()),
        ("CONTENT_FILTER", "model stopped: content_filter")
    );
}

#[tokio::test]
async fn eof_without_done_is_stream_closed_and_data_after_done_is_ignored() {
    let cut = events(&[delta(json!({"content":"hi"}), Some("stop"))]);
    let unterminated = [cut.clone(), b"data: [DONE]".to_vec()].concat();
    let after_done = [cut.clone(), done(), b"data: {not json}\n\n".to_vec()].concat();
    let server = Server::start(vec![
        Reply::sse(vec![Step::Send(cut)]),
        Reply::sse(vec![Step::Send(unterminated)]),
        Reply::sse(vec![Step::Send(after_done)]),
    ])
    .await;
    let adapter = adapter(&server.base_url);
    for _ in 0..2 {
        let chunks = collect(&adapter, prompt("x")).await;
        let FinishReason::Error { failure } = finish_of(&chunks) else {
            panic!("{chunks:?}")
        };
        assert_eq!(
            (failure.code.as_str(), failure.message.as_str()),
            ("STREAM_CLOSED", "SSE stream ended without [DONE]")
        );
        // Deltas already streamed stay visible; no block-end was emitted.
        assert!(
            !chunks
                .iter()
                .any(|c| matches!(c, StreamChunk::BlockEnd { .. }))
        );
    }
    let chunks = collect(&adapter, prompt("x")).await;
    assert_eq!(finish_of(&chunks), FinishReason::Stop);
}

#[tokio::test]
async fn malformed_payload_fails_the_stream() {
    let body = [b"data: {\"choices\": [oops\n\n".to_vec(), done()].concat();
    let server = Server::start(vec![Reply::sse(vec![Step::Send(body)])]).await;
    let chunks = collect(&adapter(&server.base_url), prompt("x")).await;
    let FinishReason::Error { failure } = finish_of(&chunks) else {
        panic!("{chunks:?}")
    };
    assert_eq!(failure.code, "MALFORMED_RESPONSE");
    assert_eq!(
        failure.message,
        "malformed SSE payload: {\"choices\": [oops"
    );
}

#[tokio::test]
async fn stall_mid_stream_is_timeout_not_a_hang() {
    let first = events(&[delta(json!({"content":"partial"}), None)]);
    let server = Server::start(vec![Reply::sse(vec![Step::Send(first), Step::Hang])]).await;
    let adapter = adapter_with(&server.base_url, Duration::from_millis(300));
    let started = std::time::Instant::now();
    let chunks = tokio::time::timeout(Duration::from_secs(5), collect(&adapter, prompt("x")))
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(chunks.len(), 3, "{chunks:?}");
    let FinishReason::Error { failure } = finish_of(&chunks) else {
        panic!("{chunks:?}")
    };
    assert_eq!(
        (failure.code.as_str(), failure.message.as_str()),
        ("TIMEOUT", "DeepSeek stream idle timeout after 300ms")
    );
}

#[tokio::test]
async fn stall_before_headers_is_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let hold = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
        drop(socket);
    });
    let chunks = collect(
        &adapter_with(&base, Duration::from_millis(200)),
        prompt("x"),
    )
    .await;
    let FinishReason::Error { failure } = finish_of(&chunks) else {
        panic!("{chunks:?}")
    };
    assert_eq!(failure.code, "TIMEOUT");
    hold.abort();
}

#[tokio::test]
async fn comments_keep_a_slow_stream_alive() {
    let mut steps = vec![Step::Send(events(&[delta(json!({"content":"a"}), None)]))];
    for _ in 0..6 {
        steps.push(Step::Sleep(Duration::from_millis(100)));
        steps.push(Step::Send(b": ping\n\n".to_vec()));
    }
    steps.push(Step::Send(
        [
            events(&[delta(json!({"content":"b"}), Some("stop"))]),
            done(),
        ]
        .concat(),
    ));
    let server = Server::start(vec![Reply::sse(steps)]).await;
    let chunks = collect(
        &adapter_with(&server.base_url, Duration::from_millis(350)),
        prompt("x"),
    )
    .await;
    assert_eq!(finish_of(&chunks), FinishReason::Stop);
    assert_eq!(
        fold(&chunks).blocks().unwrap(),
        vec![ContentBlock::text("ab")]
    );
}

#[tokio::test]
async fn cancel_mid_stream_yields_aborted() {
    let first = events(&[delta(json!({"content":"partial"}), None)]);
    let server = Server::start(vec![Reply::sse(vec![Step::Send(first), Step::Hang])]).await;
    let adapter = adapter(&server.base_url);
    let cancel = CancellationToken::new();
    let mut stream = adapter.stream(prompt("x"), cancel.clone());
    let mut seen = Vec::new();
    for _ in 0..2 {
        seen.push(stream.next().await.unwrap());
    }
    assert_eq!(
        seen[1],
        StreamChunk::TextDelta {
            index: 0,
            text: "partial".into()
        }
    );
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.cancel();
    });
    let next = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap();
    let StreamChunk::Finish {
        reason: FinishReason::Aborted { failure },
        ..
    } = next
    else {
        panic!("{next:?}")
    };
    assert_eq!(failure.code, "ABORTED");
    assert!(stream.next().await.is_none());
    canceller.await.unwrap();
    assert_eq!(
        fold(&seen).interrupted_blocks(),
        vec![ContentBlock::text("partial")]
    );
}

#[tokio::test]
async fn cancelled_before_start_sends_nothing() {
    let server = Server::start(vec![]).await;
    let cancel = CancellationToken::new();
    cancel.cancel();
    let chunks: Vec<StreamChunk> = adapter(&server.base_url)
        .stream(prompt("x"), cancel)
        .collect()
        .await;
    assert!(matches!(finish_of(&chunks), FinishReason::Aborted { .. }));
    assert_eq!(chunks.len(), 1);
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn title_and_compaction_requests_shape_body_and_headers() {
    let ok = || {
        Reply::sse(vec![Step::Send(
            [
                events(&[delta(json!({"content":"T"}), Some("stop"))]),
                done(),
            ]
            .concat(),
        )])
    };
    let server = Server::start(vec![ok(), ok()]).await;
    let adapter = adapter(&server.base_url);
    let mut title = prompt("Generate the session title");
    title.system = Some("Create a concise title".into());
    title.max_tokens = Some(64);
    title.purpose = Some(RequestPurpose::SessionTitle);
    collect(&adapter, title).await;
    let mut compaction = prompt("summarize");
    compaction.purpose = Some(RequestPurpose::Compaction);
    compaction.reasoning_effort = Some("off".into());
    collect(&adapter, compaction).await;
    let requests = server.requests();
    assert_eq!(
        String::from_utf8(requests[0].body.clone()).unwrap(),
        r#"{"model":"deepseek-v4-flash","messages":[{"role":"system","content":"Create a concise title"},{"role":"user","content":"Generate the session title"}],"stream":true,"stream_options":{"include_usage":true},"thinking":{"type":"disabled"},"max_tokens":64}"#
    );
    assert_eq!(
        requests[0].header("x-deepseek-harness-session-id"),
        Some("sid-1")
    );
    assert_eq!(requests[0].header("x-deepseek-harness-compact"), None);
    assert_eq!(requests[1].header("x-deepseek-harness-compact"), Some("1"));
    assert_eq!(requests[1].json()["thinking"], json!({"type":"disabled"}));
    assert_eq!(requests[1].json().get("reasoning_effort"), None);
}

struct Store;

impl dsh_llm::AttachmentResolver for Store {
    fn load(
        &self,
        attachment: &serde_json::Value,
    ) -> Result<dsh_llm::ImageData, dsh_llm::ImageLoadError> {
        match attachment["attachmentId"].as_str() {
            Some("sha256:red") => Ok(dsh_llm::ImageData {
                media_type: "image/png".into(),
                bytes: vec![0x89, b'P', b'N', b'G'],
            }),
            _ => Err(dsh_llm::ImageLoadError::Unavailable(
                "unknown attachment".into(),
            )),
        }
    }
}

#[tokio::test]
async fn image_capable_catalog_model_sends_tool_result_images() {
    let ok = || {
        Reply::sse(vec![Step::Send(
            [
                events(&[delta(json!({"content":"DONE"}), Some("stop"))]),
                done(),
            ]
            .concat(),
        )])
    };
    let server = Server::start(vec![ok()]).await;
    let mut vision = dsh_llm::ModelEntry::new("deepseek-v4-flash-vision-exp", "Vision");
    vision.input_modalities = vec!["text".into(), "image".into()];
    let mut config = DeepSeekConfig {
        base_url: server.base_url.clone(),
        api_key: Some(KEY.into()),
        attachments: Some(std::sync::Arc::new(Store)),
        ..DeepSeekConfig::default()
    };
    config.models.push(vision);
    let adapter = DeepSeekAdapter::new(config).unwrap();
    assert_eq!(
        adapter
            .model_info("deepseek-v4-flash-vision-exp")
            .unwrap()
            .input_modalities,
        vec!["text", "image"]
    );
    let image = |id: &str| ContentBlock::Image {
        attachment: json!({"attachmentId": id, "mediaType": "image/png"}),
    };
    let mut request = prompt("look");
    request.model = "deepseek-v4-flash-vision-exp".into();
    request.messages.push(Message::tool_result(
        "c1",
        vec![ContentBlock::text("ok"), image("sha256:red")],
        false,
    ));
    let chunks = collect(&adapter, request.clone()).await;
    assert_eq!(finish_of(&chunks), FinishReason::Stop);
    assert_eq!(
        server.requests()[0].json()["messages"][2],
        json!({"role":"user","content":[{"type":"text","text":"Attached image(s) from tool result:"},
                                        {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw=="}}]})
    );
    // A missing attachment and a text-only model both fail before any request.
    request.messages.push(Message::tool_result(
        "c2",
        vec![image("sha256:gone")],
        false,
    ));
    let FinishReason::Error { failure } = finish_of(&collect(&adapter, request.clone()).await)
    else {
        panic!()
    };
    assert_eq!(failure.code, "UNSUPPORTED_CONTENT");
    request.model = "deepseek-v4-flash".into();
    let FinishReason::Error { failure } = finish_of(&collect(&adapter, request).await) else {
        panic!()
    };
    assert_eq!(
        failure.message,
        "model \"deepseek-v4-flash\" does not accept image input"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn consumer_time_between_chunks_is_not_idle_time() {
    // The server pauses longer than the idle timeout, but only while the consumer is busy.
    let steps = vec![
        Step::Send(events(&[delta(json!({"content":"a"}), None)])),
        Step::Sleep(Duration::from_millis(300)),
        Step::Send(
            [
                events(&[delta(json!({"content":"b"}), Some("stop"))]),
                done(),
            ]
            .concat(),
        ),
    ];
    let server = Server::start(vec![Reply::sse(steps)]).await;
    let adapter = adapter_with(&server.base_url, Duration::from_millis(150));
    let mut stream = adapter.stream(prompt("x"), CancellationToken::new());
    let mut chunks = vec![stream.next().await.unwrap()];
    tokio::time::sleep(Duration::from_millis(400)).await;
    while let Some(chunk) = stream.next().await {
        chunks.push(chunk);
    }
    assert_single_finish(&chunks);
    assert_eq!(finish_of(&chunks), FinishReason::Stop);
}
