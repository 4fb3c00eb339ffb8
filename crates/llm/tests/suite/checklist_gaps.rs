//! Gap-filling tests for agent-loop-spec §10 LLM items the other suites pin only in part
//! (see `docs/checklists.md`).

use dsh_llm::DeepSeekAdapter;
use dsh_llm::DeepSeekConfig;
use dsh_llm::FinishReason;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::server::Reply;
use super::server::Server;
use super::server::Step;
use super::server::delta;
use super::server::done;
use super::server::events;
use super::server::last;
use super::stream::adapter;
use super::stream::collect;
use super::stream::finish_of;
use super::stream::prompt;

fn body(comments: bool) -> Vec<u8> {
    let comment = |text: &str| {
        if comments {
            text.as_bytes().to_vec()
        } else {
            Vec::new()
        }
    };
    [
        comment(": keep-alive\n\n"),
        events(&[delta(json!({"content":"a"}), None)]),
        comment(":\n\n"),
        comment(": two\n: comment lines\n\n"),
        events(&[last(
            "stop",
            json!({"prompt_tokens":2,"completion_tokens":1}),
        )]),
        comment(": before done\n\n"),
        done(),
    ]
    .concat()
}

/// Item 68 (last clause): SSE comments add no chunk anywhere in the stream.
#[tokio::test]
async fn item_68_sse_comments_produce_no_chunks() {
    let server = Server::start(vec![
        Reply::sse(vec![Step::Send(body(false))]),
        Reply::sse(vec![Step::Send(body(true))]),
    ])
    .await;
    let adapter = adapter(&server.base_url);
    let plain = collect(&adapter, prompt("x")).await;
    let commented = collect(&adapter, prompt("x")).await;
    assert_eq!(finish_of(&plain), FinishReason::Stop);
    assert_eq!(commented, plain);
}

/// Item 59 (last clause): the session header is sent only when the request has a session id.
#[tokio::test]
async fn item_59_no_session_id_sends_no_session_header() {
    let reply = || {
        Reply::sse(vec![Step::Send(
            [
                events(&[delta(json!({"content":"ok"}), Some("stop"))]),
                done(),
            ]
            .concat(),
        )])
    };
    let server = Server::start(vec![reply(), reply()]).await;
    let adapter = adapter(&server.base_url);
    let mut anonymous = prompt("x");
    anonymous.session_id = None;
    collect(&adapter, anonymous).await;
    collect(&adapter, prompt("x")).await;
    let requests = server.requests();
    assert_eq!(requests[0].header("x-deepseek-harness-session-id"), None);
    assert_eq!(
        requests[1].header("x-deepseek-harness-session-id"),
        Some("sid-1")
    );
    assert!(
        requests[0]
            .header("user-agent")
            .is_some_and(|ua| ua.starts_with("deepseek-harness/")),
    );
}

/// Item 60: the key comes from the configured variable, and the failure names that variable.
#[tokio::test]
async fn item_60_the_missing_key_failure_names_the_configured_variable() {
    let server = Server::start(vec![]).await;
    let adapter = DeepSeekAdapter::new(DeepSeekConfig {
        base_url: server.base_url.clone(),
        api_key: None,
        api_key_env: "ACME_DEEPSEEK_KEY".into(),
        ..DeepSeekConfig::default()
    })
    .unwrap();
    let chunks = collect(&adapter, prompt("x")).await;
    let FinishReason::Error { failure } = finish_of(&chunks) else {
        panic!("expected an error finish: {chunks:?}")
    };
    assert_eq!(failure.code, "MISSING_CREDENTIAL");
    assert!(
        failure.message.contains("export ACME_DEEPSEEK_KEY"),
        "{}",
        failure.message
    );
    assert!(server.requests().is_empty());

    // Whitespace-only DEEPSEEK_BASE_URL falls back to the default endpoint.
    let config = DeepSeekConfig::from_lookup(|name| match name {
        "DEEPSEEK_BASE_URL" => Some("  ".into()),
        "DEEPSEEK_API_KEY" => Some("k".into()),
        _ => None,
    });
    assert_eq!(config.base_url, "https://api.deepseek.com");
    assert_eq!(config.api_key.as_deref(), Some("k"));
}
