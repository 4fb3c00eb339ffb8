//! The HTTP server: routes, the gate in front of them, and the orderly stop.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::extract::Request;
use axum::extract::State;
use axum::extract::ws::WebSocketUpgrade;
use axum::http::HeaderMap;
use axum::http::HeaderValue;
use axum::http::Method;
use axum::http::StatusCode;
use axum::http::header;
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::routing::get;
use axum::routing::post;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::WebError;
use crate::gate;
use crate::gate::Gate;
use crate::gate::Refusal;

/// How the server is set up.
#[derive(Debug, Clone, Default)]
pub struct WebConfig {
    /// How the ACP side introduces itself at `initialize`.
    pub bridge: dsh_acp::BridgeConfig,
    /// The `--host` value as given (a name there is also an accepted `Host`).
    pub host: Option<String>,
    /// `--trusted-host` values: more accepted `Host` authorities (`host` or `host:port`).
    pub trusted_hosts: Vec<String>,
    /// The access secret (`DSH_ACCESS_SECRET`); blank counts as none.
    pub access_secret: Option<String>,
    /// The folders the workspace picker may list (and their sub-folders).
    pub roots: Vec<std::path::PathBuf>,
    /// The most frame bytes held for a viewer that is not reading before it is dropped
    /// (default [`crate::VIEWER_QUEUE_BYTES`]).
    pub viewer_queue_bytes: Option<usize>,
}

pub(crate) struct App {
    pub(crate) sessions: dsh_host::SessionHost,
    /// The live sessions every connection shares.
    pub(crate) live: dsh_acp::LiveSessions,
    pub(crate) bridge: dsh_acp::BridgeConfig,
    pub(crate) viewer_queue_bytes: usize,
    /// Canonical folder roots of the picker.
    pub(crate) roots: Vec<std::path::PathBuf>,
    pub(crate) gate: Gate,
    /// Fired when the server stops: every socket ends its connection.
    pub(crate) stop: CancellationToken,
    /// The served sockets; the stop waits for each to tear its sessions down.
    pub(crate) sockets: TaskTracker,
}

/// The access secret to use (trimmed; `None` when blank), or why the server must not start
/// on `local` with `config`: a non-loopback address without a secret, a secret too short.
pub fn check(config: &WebConfig, local: SocketAddr) -> Result<Option<&str>, WebError> {
    let secret = config
        .access_secret
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty());
    if let Some(secret) = secret
        && secret.chars().count() < gate::MIN_SECRET_CHARS
    {
        return Err(WebError::SecretTooShort {
            len: secret.chars().count(),
        });
    }
    if secret.is_none() && !local.ip().is_loopback() {
        return Err(WebError::SecretRequired { addr: local });
    }
    Ok(secret)
}

/// Serves on `listener` until `stop` completes; then closes every connection, ends every
/// session as `dsh acp` does at end of input (prompts cancelled and answered, agents disposed,
/// logs synced) and returns. Refuses to start, before accepting anything, on a non-loopback
/// address without an access secret.
pub async fn serve(
    listener: tokio::net::TcpListener,
    sessions: dsh_host::SessionHost,
    config: WebConfig,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), WebError> {
    let local = listener.local_addr()?;
    let secret = check(&config, local)?;
    let app = Arc::new(App {
        sessions,
        live: dsh_acp::LiveSessions::new(),
        bridge: config.bridge.clone(),
        viewer_queue_bytes: config
            .viewer_queue_bytes
            .unwrap_or(crate::acp_ws::VIEWER_QUEUE_BYTES),
        roots: config
            .roots
            .iter()
            .filter_map(|root| std::fs::canonicalize(root).ok())
            .collect(),
        gate: Gate::new(local, config.host.as_deref(), &config.trusted_hosts, secret),
        stop: CancellationToken::new(),
        sockets: TaskTracker::new(),
    });
    let router = router(app.clone());
    let stopping = app.stop.clone();
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        stop.await;
        stopping.cancel();
    })
    .await?;
    // First the sessions end while every socket is still open: turns cancelled, agents
    // disposed with their logs synced, so each open prompt's answer ("cancelled") reaches its
    // client. Then the sockets close, each after its queued frames (close code 1001).
    app.live.shutdown().await;
    app.stop.cancel();
    app.sockets.close();
    if tokio::time::timeout(SOCKET_DRAIN, app.sockets.wait())
        .await
        .is_err()
    {
        tracing::warn!("some viewers did not take their last frames in time");
    }
    Ok(())
}

fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/acp", get(acp))
        .route("/__dsh/access", post(login))
        .route("/__dsh/access/logout", post(logout))
        .merge(crate::api::routes())
        .fallback(asset)
        .layer(axum::middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
}

fn text(status: StatusCode, body: &'static str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

/// Every request passes here first: the `Host`/`Origin` fence, then the login.
async fn guard(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    let upgrade = is_upgrade(request.headers());
    if let Err(refusal) = app
        .gate
        .check_request(request.method(), request.headers(), upgrade)
    {
        tracing::info!(%peer, path = %request.uri().path(), ?refusal, "request refused");
        return text(StatusCode::FORBIDDEN, "forbidden");
    }
    let path = request.uri().path();
    let login_path = matches!(path, "/__dsh/access" | "/__dsh/access/logout")
        && request.method() == Method::POST;
    if !login_path && app.gate.check_login(request.headers()) == Err(Refusal::Login) {
        let page = !upgrade
            && matches!(*request.method(), Method::GET | Method::HEAD)
            && !path.starts_with("/api")
            && path != "/acp";
        if page {
            return login_page(StatusCode::UNAUTHORIZED, None);
        }
        return text(StatusCode::UNAUTHORIZED, "Unauthorized");
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    response
}

/// `/acp`: the WebSocket of one ACP connection.
async fn acp(
    State(app): State<Arc<App>>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let Ok(upgrade) = upgrade else {
        return (
            StatusCode::UPGRADE_REQUIRED,
            [
                (header::CONNECTION, "Upgrade"),
                (header::UPGRADE, "websocket"),
            ],
            "upgrade required",
        )
            .into_response();
    };
    if app.stop.is_cancelled() {
        return text(StatusCode::SERVICE_UNAVAILABLE, "shutting down");
    }
    let sockets = app.sockets.clone();
    upgrade
        .max_message_size(crate::acp_ws::MAX_FRAME_BYTES)
        .on_upgrade(move |socket| {
            sockets.track_future(crate::acp_ws::serve_socket(
                socket,
                app.sessions.clone(),
                app.live.clone(),
                app.bridge.clone(),
                app.viewer_queue_bytes,
                app.stop.clone(),
            ))
        })
}

/// How long a stopping server waits for its sockets to take their last frames.
const SOCKET_DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// The largest login body (upstream's).
const MAX_LOGIN_BODY: usize = 4096;

/// Decodes one `application/x-www-form-urlencoded` value.
fn form_decode(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        match byte {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(index + 1..index + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                index += 2;
            }
            other => out.push(other),
        }
        index += 1;
    }
    String::from_utf8(out).ok()
}

fn submitted_secret(headers: &HeaderMap, body: &[u8]) -> Result<Option<String>, ()> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
    if json {
        let value: serde_json::Value = serde_json::from_slice(body).map_err(|_| ())?;
        return Ok(value
            .get("secret")
            .and_then(|s| s.as_str())
            .map(str::to_owned));
    }
    let body = std::str::from_utf8(body).map_err(|_| ())?;
    for pair in body.split('&') {
        if let Some(("secret", value)) = pair.split_once('=') {
            return form_decode(value).map(Some).ok_or(());
        }
    }
    Ok(None)
}

fn cookie(value: &str, max_age: u64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{}={value}; HttpOnly; Path=/; SameSite=Strict; Max-Age={max_age}{secure}",
        gate::COOKIE_NAME
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("invalid=1"))
}

/// `POST /__dsh/access`: the secret (JSON `{"secret"}` or a form field) for the cookie.
async fn login(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !app.gate.has_secret() {
        return text(StatusCode::NOT_FOUND, "Not Found");
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"));
    if let Err(wait) = app.gate.may_try(peer.ip()) {
        let mut response = login_page(
            StatusCode::TOO_MANY_REQUESTS,
            Some("Too many attempts; try again later."),
        );
        if let Ok(value) = HeaderValue::from_str(&wait.as_secs().max(1).to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        return response;
    }
    let Ok(body) = axum::body::to_bytes(body, MAX_LOGIN_BODY).await else {
        return text(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large");
    };
    let Ok(submitted) = submitted_secret(&headers, &body) else {
        return text(StatusCode::BAD_REQUEST, "Bad Request");
    };
    let token = submitted.and_then(|secret| app.gate.login(peer.ip(), &secret));
    let Some(token) = token else {
        tracing::info!(%peer, "wrong access secret");
        return login_page(StatusCode::UNAUTHORIZED, Some("Wrong access secret."));
    };
    let secure = gate::behind_tls(peer, &headers);
    let mut response = if json {
        StatusCode::NO_CONTENT.into_response()
    } else {
        (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response()
    };
    response.headers_mut().insert(
        header::SET_COOKIE,
        cookie(&token, gate::LOGIN_TTL.as_secs(), secure),
    );
    response
}

/// `POST /__dsh/access/logout`: forgets the cookie in this browser.
async fn logout(ConnectInfo(peer): ConnectInfo<SocketAddr>, headers: HeaderMap) -> Response {
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        cookie("", 0, gate::behind_tls(peer, &headers)),
    );
    response
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The login form: no JavaScript, posts the secret in the body (never in the URL).
fn login_page(status: StatusCode, error: Option<&str>) -> Response {
    let error = error
        .map(|e| format!("<p role=\"alert\">{}</p>", html_escape(e)))
        .unwrap_or_default();
    let page = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<meta name=\"color-scheme\" content=\"light dark\"><title>dsh</title>\
<style>body{{font:16px system-ui,sans-serif;max-width:22rem;margin:20vh auto;padding:0 1rem}}\
input,button{{font:inherit;padding:.5rem;width:100%;box-sizing:border-box;margin-top:.5rem}}</style>\
</head><body><main><h1>dsh</h1><p>Enter the access secret to continue.</p>{error}\
<form method=\"post\" action=\"/__dsh/access\"><label for=\"secret\">Access secret</label>\
<input id=\"secret\" name=\"secret\" type=\"password\" autocomplete=\"current-password\" required autofocus>\
<button type=\"submit\">Continue</button></form></main></body></html>\n"
    );
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        page,
    )
        .into_response()
}

/// Everything else: the app's embedded files.
async fn asset(method: Method, uri: axum::http::Uri) -> Response {
    if !matches!(method, Method::GET | Method::HEAD) {
        return text(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    }
    match crate::assets::find(uri.path()) {
        Some((content_type, bytes)) => (
            [
                (header::CONTENT_TYPE, content_type),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            bytes,
        )
            .into_response(),
        None => text(StatusCode::NOT_FOUND, "Not Found"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_values_decode() {
        assert_eq!(form_decode("a+b%21%C3%A9").as_deref(), Some("a b!é"));
        assert_eq!(form_decode("%zz"), None);
        assert_eq!(form_decode("%4"), None);
    }
}
