#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::http::header;
use axum::response::IntoResponse;
use axum::response::Redirect;
use axum::routing::get;
use dsh_protocol::text_of;
use dsh_tools::CancellationToken;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolCallInput;
use pretty_assertions::assert_eq;

use super::*;

async fn serve() -> String {
    let big = "x".repeat(MAX_TEXT_CHARS + 10);
    let app = Router::new()
        .route(
            "/page.html",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                    "<h1>Hi</h1><p>there &amp; back</p>",
                )
            }),
        )
        .route(
            "/missing",
            get(|| async {
                (
                    StatusCode::NOT_FOUND,
                    [(header::CONTENT_TYPE, "text/plain")],
                    "nothing here",
                )
            }),
        )
        .route("/hop", get(|| async { Redirect::temporary("/data.json") }))
        .route(
            "/away",
            get(|| async { Redirect::temporary("http://localhost:9/elsewhere") }),
        )
        .route(
            "/data.json",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    "{\"a\": [1, 2]}",
                )
            }),
        )
        .route(
            "/image.png",
            get(|| async { ([(header::CONTENT_TYPE, "image/png")], vec![0u8, 1, 2]) }),
        )
        .route(
            "/huge.txt",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/plain")],
                    vec![b'a'; MAX_BODY_BYTES + 1],
                )
            }),
        )
        .route(
            "/big.txt",
            get(move || {
                let big = big.clone();
                async move { ([(header::CONTENT_TYPE, "text/plain")], big).into_response() }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    format!("http://{addr}")
}

/// The test servers listen on loopback, which only an explicit allowance reaches.
fn local() -> AddressPolicy {
    AddressPolicy {
        allow_private: false,
        allow_hosts: vec!["127.0.0.1".to_owned()],
    }
}

async fn call(arguments: Value) -> Arc<dsh_tools::ToolResult> {
    let root = Scope::root();
    let registry: Arc<ToolRegistry> = ToolRegistry::new(RegistryConfig::default());
    let _disposer = register(&registry, &root, local()).unwrap();
    let input = ToolCallInput::new("c1", NAME, arguments, CancellationToken::new());
    registry.execute(input).await
}

#[tokio::test]
async fn html_page_is_converted_and_meta_is_set() {
    let base = serve().await;
    let result = call(json!({"url": format!("{base}/page.html")})).await;
    assert!(!result.is_error);
    assert_eq!(
        text_of(&result.content),
        format!("Fetched {base}/page.html (HTTP 200)\n\n# Hi\n\nthere & back")
    );
    assert_eq!(
        result.meta,
        Some(json!({"url": format!("{base}/page.html"), "statusCode": 200, "truncated": false}))
    );
}

#[tokio::test]
async fn error_status_is_a_successful_result_with_its_body() {
    let base = serve().await;
    let result = call(json!({"url": format!("{base}/missing")})).await;
    assert!(!result.is_error);
    assert_eq!(
        text_of(&result.content),
        format!("Fetched {base}/missing (HTTP 404)\n\nnothing here")
    );
}

#[tokio::test]
async fn same_origin_redirect_is_followed_and_reports_the_final_url() {
    let base = serve().await;
    let result = call(json!({"url": format!("{base}/hop")})).await;
    assert_eq!(
        text_of(&result.content),
        format!("Fetched {base}/data.json (HTTP 200)\n\n{{\"a\": [1, 2]}}")
    );
}

#[tokio::test]
async fn cross_origin_redirect_is_not_followed() {
    let base = serve().await;
    let result = call(json!({"url": format!("{base}/away")})).await;
    assert!(result.is_error);
    assert_eq!(
        text_of(&result.content),
        "Error: redirect to http://localhost:9/elsewhere was not followed: redirects must stay on the same origin"
    );
}

#[tokio::test]
async fn bare_origin_gains_a_trailing_slash() {
    let base = serve().await;
    let result = call(json!({"url": base.clone()})).await;
    assert!(text_of(&result.content).starts_with(&format!("Fetched {base}/ (HTTP 404)")));
}

#[tokio::test]
async fn unsupported_content_type_fails() {
    let base = serve().await;
    let result = call(json!({"url": format!("{base}/image.png")})).await;
    assert!(result.is_error);
    assert_eq!(
        text_of(&result.content),
        "Error: unsupported content type \"image/png\""
    );
}

#[tokio::test]
async fn long_text_is_truncated_with_the_footer() {
    let base = serve().await;
    let result = call(json!({"url": format!("{base}/big.txt")})).await;
    let text = text_of(&result.content);
    let head = format!("Fetched {base}/big.txt (HTTP 200)\n\n");
    assert!(text.starts_with(&head));
    assert_eq!(
        text,
        format!("{head}{}{FOOTER}", "x".repeat(MAX_TEXT_CHARS))
    );
    assert_eq!(result.meta.as_ref().unwrap()["truncated"], json!(true));
}

#[tokio::test]
async fn blank_url_is_an_error() {
    let result = call(json!({"url": "  "})).await;
    assert!(result.is_error);
    assert_eq!(
        text_of(&result.content),
        "Error: url must be a non-empty string"
    );
}

#[test]
fn render_caps_the_whole_text_and_keeps_the_footer() {
    let fetched = Fetched {
        url: "http://h/".to_owned(),
        status: 200,
        text: "y".repeat(MAX_OUTPUT_CHARS),
        truncated: false,
    };
    let text = render(&fetched);
    assert_eq!(text.chars().count(), MAX_OUTPUT_CHARS);
    assert!(text.ends_with(FOOTER));
}

#[test]
fn definition_is_concurrency_safe_with_the_fetch_timeout() {
    let def = definition(Fetcher::new()).unwrap();
    assert!(def.is_concurrency_safe(&json!({"url": "http://x/"})));
    assert_eq!(def.timeout_ms(), Some(TIMEOUT_MS));
}

#[tokio::test]
async fn declared_length_over_the_byte_cap_fails() {
    let base = serve().await;
    let result = call(json!({"url": format!("{base}/huge.txt")})).await;
    assert!(result.is_error);
    assert_eq!(
        text_of(&result.content),
        "Error: response exceeds the maximum of 5000000 bytes"
    );
}

#[tokio::test]
async fn the_http_client_is_built_on_the_first_fetch_not_at_registration() {
    let fetcher = Fetcher::with_policy(local());
    let def = definition(fetcher.clone()).unwrap();
    drop(def);
    assert!(
        !fetcher.is_connected(),
        "registration must not build the client"
    );
    let base = serve().await;
    let fetched = fetcher.fetch(&format!("{base}/page.html")).await.unwrap();
    assert_eq!(fetched.status, 200);
    assert!(fetcher.is_connected());
}

/// Set in the child run of the test below.
const NO_CERTS_CHILD: &str = "DSH_TEST_WEB_FETCH_NO_CERTS";

#[tokio::test]
async fn http_fetch_works_on_a_machine_without_ca_certificates() {
    if std::env::var_os(NO_CERTS_CHILD).is_some() {
        // The child: the certificate store points at nothing.
        let base = serve().await;
        let result = call(json!({"url": format!("{base}/page.html")})).await;
        assert!(!result.is_error, "{:?}", result.content);
        return;
    }
    let empty = tempfile_dir();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tests::http_fetch_works_on_a_machine_without_ca_certificates",
            "--nocapture",
        ])
        .env(NO_CERTS_CHILD, "1")
        .env("SSL_CERT_FILE", empty.join("missing.pem"))
        .env("SSL_CERT_DIR", &empty)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&empty);
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("dsh-no-certs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
