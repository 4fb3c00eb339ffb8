//! Failures before and around the stream: HTTP statuses, transport, credentials, redaction.

use std::io::Write;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use dsh_llm::DeepSeekAdapter;
use dsh_llm::DeepSeekConfig;
use dsh_llm::FinishReason;
use dsh_llm::LlmFailure;
use dsh_llm::ModelAdapter;
use dsh_llm::Thinking;
use pretty_assertions::assert_eq;
use serde_json::json;
use wiremock::Mock;
use wiremock::MockServer;
use wiremock::ResponseTemplate;
use wiremock::matchers::method;
use wiremock::matchers::path;

use super::server::Reply;
use super::server::Server;
use super::server::Step;
use super::server::delta;
use super::server::events;
use super::stream::KEY;
use super::stream::adapter;
use super::stream::collect;
use super::stream::finish_of;
use super::stream::prompt;

fn error_failure(reason: FinishReason) -> LlmFailure {
    match reason {
        FinishReason::Error { failure } => failure,
        other => panic!("not an error finish: {other:?}"),
    }
}

async fn failure_for(template: ResponseTemplate) -> LlmFailure {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(template)
        .mount(&server)
        .await;
    error_failure(finish_of(
        &collect(&adapter(&server.uri()), prompt("x")).await,
    ))
}

fn error_body(status: u16, message: &str, kind: &str, code: &str) -> ResponseTemplate {
    let body = json!({"error":{"message":message,"type":kind,"code":code}}).to_string();
    ResponseTemplate::new(status).set_body_raw(body, "application/json")
}

#[tokio::test]
async fn http_statuses_map_to_codes_with_body_messages_and_facts() {
    let auth = failure_for(error_body(
        401,
        "simulated provider error (HTTP 401)",
        "authentication_error",
        "invalid_api_key",
    ))
    .await;
    assert_eq!(
        auth,
        LlmFailure {
            status: Some(401),
            ..LlmFailure::new("AUTH", "simulated provider error (HTTP 401)")
        }
    );

    let limited = failure_for(
        error_body(
            429,
            "snapshot transient failure",
            "rate_limit_error",
            "rate_limit_exceeded",
        )
        .insert_header("retry-after", "2")
        .insert_header("x-request-id", "req-42"),
    )
    .await;
    assert_eq!(
        limited,
        LlmFailure {
            message: "snapshot transient failure".into(),
            code: "RATE_LIMIT".into(),
            status: Some(429),
            provider_retry_after_ms: Some(2000),
            request_id: Some("req-42".into()),
        }
    );
    assert_eq!(
        dsh_llm::RetryPolicy::default().decide(1, &limited),
        Some(Duration::from_millis(2000))
    );

    let overflow = failure_for(error_body(
        400,
        "This model's maximum context length is 1000000 tokens.",
        "invalid_request_error",
        "context_length_exceeded",
    ))
    .await;
    assert_eq!(
        (overflow.code.as_str(), overflow.status),
        ("CONTEXT_WINDOW_EXCEEDED", Some(400))
    );

    let invalid = failure_for(error_body(
        400,
        "unknown field `foo`",
        "invalid_request_error",
        "",
    ))
    .await;
    assert_eq!(
        (invalid.code.as_str(), invalid.message.as_str()),
        ("INVALID_REQUEST", "unknown field `foo`")
    );

    let server = failure_for(ResponseTemplate::new(500).set_body_raw("oops", "text/plain")).await;
    assert_eq!(
        (server.code.as_str(), server.message.as_str(), server.status),
        ("SERVER", "DeepSeek API error (HTTP 500)", Some(500))
    );

    let quota = failure_for(error_body(
        402,
        "Insufficient Balance",
        "unknown_error",
        "invalid_request_error",
    ))
    .await;
    assert_eq!(quota.code, "QUOTA");
}

#[tokio::test]
async fn connection_refused_is_transport() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let failure = error_failure(finish_of(&collect(&adapter(&base), prompt("x")).await));
    assert_eq!(
        failure,
        LlmFailure::new(
            "TRANSPORT",
            format!("DeepSeek API request to {base} failed: connection refused")
        )
    );
}

#[test]
fn a_malformed_base_url_fails_when_the_adapter_is_built() {
    for (url, why) in [
        ("ht tp://bad url", "relative URL without a base"),
        ("ftp://example.com", "the scheme is `ftp`"),
        ("localhost:8080", "the scheme is `localhost`"),
    ] {
        let config = dsh_llm::DeepSeekConfig {
            base_url: url.to_owned(),
            ..dsh_llm::DeepSeekConfig::default()
        };
        let error = dsh_llm::DeepSeekAdapter::new(config).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "invalid model adapter configuration: base_url `{url}` (the provider's default; set `[model] base_url` or DEEPSEEK_BASE_URL to change it) is not a valid http(s) URL: {why}"
            )
        );
        // Where the URL was set is named.
        let config = dsh_llm::DeepSeekConfig {
            base_url: url.to_owned(),
            base_url_source: Some("[model] base_url in /home/config.toml:2".to_owned()),
            ..dsh_llm::DeepSeekConfig::default()
        };
        let error = dsh_llm::DeepSeekAdapter::new(config).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("(set by [model] base_url in /home/config.toml:2) is not a valid"),
            "{error}"
        );
    }
}

/// A 200 whose body is not an event stream says what came back (content type, first bytes
/// escaped) and where the URL was set; it is not retried.
#[tokio::test]
async fn a_body_that_is_not_an_event_stream_is_named_and_not_retried() {
    let server = Server::start(vec![Reply {
        status: 200,
        headers: vec![("content-type".into(), "text/html".into())],
        steps: vec![Step::Send(b"<html>\n\x1b[31mhello</html>".to_vec())],
    }])
    .await;
    let failure = error_failure(finish_of(
        &collect(&adapter(&server.base_url), prompt("x")).await,
    ));
    assert_eq!(failure.code, "MALFORMED_RESPONSE", "{failure:?}");
    assert!(
        failure
            .message
            .contains("answered `text/html`, not an event stream")
            && failure
                .message
                .contains(r#""<html>\n\u{1b}[31mhello</html>""#)
            && !failure.message.contains('\u{1b}'),
        "{failure:?}"
    );
    assert!(!dsh_llm::RetryPolicy::default().is_retryable(&failure));
}

#[tokio::test]
async fn reset_mid_stream_is_transport() {
    let first = events(&[delta(json!({"content":"partial"}), None)]);
    let server = Server::start(vec![Reply::sse(vec![Step::Send(first), Step::Reset])]).await;
    let failure = error_failure(finish_of(
        &collect(&adapter(&server.base_url), prompt("x")).await,
    ));
    assert_eq!(
        failure,
        LlmFailure::new(
            "TRANSPORT",
            format!("DeepSeek API stream from {} failed", server.base_url)
        )
    );
}

#[tokio::test]
async fn missing_key_fails_without_a_request() {
    let server = Server::start(vec![]).await;
    for key in [None, Some("   ".to_owned())] {
        let adapter = DeepSeekAdapter::new(DeepSeekConfig {
            base_url: server.base_url.clone(),
            api_key: key,
            ..DeepSeekConfig::default()
        })
        .unwrap();
        let chunks = collect(&adapter, prompt("x")).await;
        assert_eq!(chunks.len(), 1);
        assert_eq!(
            error_failure(finish_of(&chunks)),
            LlmFailure::new(
                "MISSING_CREDENTIAL",
                "llm-deepseek: no API key for provider route \"deepseek-official\"; export DEEPSEEK_API_KEY=<your key> in the environment dsh starts in, or set `model.api_key_env` to the name of the variable that holds it"
            )
        );
    }
    let adapter = DeepSeekAdapter::new(DeepSeekConfig {
        base_url: server.base_url.clone(),
        api_key: Some("sk-with space".into()),
        ..DeepSeekConfig::default()
    })
    .unwrap();
    let failure = error_failure(finish_of(&collect(&adapter, prompt("x")).await));
    assert_eq!(failure.code, "INVALID_CREDENTIAL");
    assert!(!failure.message.contains("sk-with"));
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn invalid_effort_and_images_fail_before_sending() {
    let server = Server::start(vec![]).await;
    let adapter = adapter(&server.base_url);
    let mut request = prompt("x");
    request.reasoning_effort = Some("extreme".into());
    assert_eq!(
        error_failure(finish_of(&collect(&adapter, request).await)).code,
        "UNSUPPORTED_REASONING_EFFORT"
    );
    let mut request = prompt("x");
    request.messages.push(dsh_llm::Message::tool_result(
        "c1",
        vec![dsh_llm::ContentBlock::Image {
            attachment: json!({"sha256":"abc"}),
        }],
        false,
    ));
    assert_eq!(
        error_failure(finish_of(&collect(&adapter, request).await)).code,
        "UNSUPPORTED_CONTENT"
    );
    assert!(server.requests().is_empty());
}

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn api_key_never_reaches_debug_errors_or_logs() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let config = DeepSeekConfig {
        api_key: Some(KEY.into()),
        ..DeepSeekConfig::default()
    };
    assert!(!format!("{config:?}").contains(KEY));
    assert!(format!("{config:?}").contains("[REDACTED]"));

    // A server that echoes the key back in its error message.
    let echo = failure_for(error_body(
        401,
        &format!("invalid key {KEY}"),
        "authentication_error",
        "",
    ))
    .await;
    assert_eq!(echo.message, "invalid key [REDACTED]");

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&server)
        .await;
    let adapter = adapter(&server.uri());
    assert!(!format!("{adapter:?}").contains(KEY));
    let chunks = collect(&adapter, prompt("x")).await;
    for chunk in &chunks {
        assert!(!serde_json::to_string(chunk).unwrap().contains(KEY));
    }
    let refused = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        super::stream::adapter(&base)
    };
    collect(&refused, prompt("x")).await;

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("DeepSeek request"),
        "the adapter logged nothing: {logs}"
    );
    assert!(!logs.contains(KEY), "{logs}");
    assert!(!logs.contains("SECRET"), "{logs}");
}

#[test]
fn config_from_environment_and_validation() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    let config = DeepSeekConfig::from_lookup(env(&[]));
    assert_eq!(config.base_url, "https://api.deepseek.com");
    assert_eq!(config.api_key, None);
    assert_eq!(config.idle_timeout, Duration::from_secs(300));
    let config = DeepSeekConfig::from_lookup(env(&[
        ("DEEPSEEK_BASE_URL", "http://127.0.0.1:9"),
        ("DEEPSEEK_API_KEY", "k"),
    ]));
    assert_eq!(
        (config.base_url.as_str(), config.api_key.as_deref()),
        ("http://127.0.0.1:9", Some("k"))
    );

    let adapter = DeepSeekAdapter::new(DeepSeekConfig::default()).unwrap();
    assert_eq!(adapter.provider(), "deepseek-official");
    let info = adapter.model_info("deepseek-v4-flash").unwrap();
    assert_eq!(
        (info.context_window, info.default_max_tokens),
        (1_000_000, Some(256_000))
    );
    assert_eq!(info.default_effort.as_deref(), Some("high"));
    assert_eq!(info.efforts, vec!["off", "low", "high", "max"]);
    assert_eq!(adapter.retry_policy(), dsh_llm::RetryPolicy::default());

    let disabled = DeepSeekConfig {
        thinking: Some(Thinking::Disabled),
        ..DeepSeekConfig::default()
    };
    let info = DeepSeekAdapter::new(disabled.clone())
        .unwrap()
        .model_info("x")
        .unwrap();
    assert_eq!(
        (info.efforts, info.default_effort),
        (vec!["off".to_owned()], Some("off".to_owned()))
    );
    let conflicting = DeepSeekConfig {
        reasoning_effort: Some("high".into()),
        ..disabled
    };
    assert!(DeepSeekAdapter::new(conflicting).is_err());
    let unknown = DeepSeekConfig {
        reasoning_effort: Some("extreme".into()),
        ..DeepSeekConfig::default()
    };
    assert!(DeepSeekAdapter::new(unknown).is_err());
}
