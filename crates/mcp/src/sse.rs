//! The legacy HTTP+SSE transport (MCP protocol 2024-11-05), for servers older than streamable
//! HTTP. rmcp dropped its client for it, so this is a small one over `reqwest`:
//!
//! - `GET <url>` opens an event stream; the server's first `endpoint` event names the URL the
//!   client POSTs its messages to (normally relative, carrying a session id);
//! - every client message is one `POST <endpoint>` (the answer is `202 Accepted`, no body);
//! - the server's responses, requests and notifications arrive as `message` events on the
//!   stream; the stream's end is the session's end.
//!
//! Security: the configured headers go on the GET and on every POST, so the endpoint must be
//! on the stream's own origin (a server cannot send them elsewhere), redirects are followed
//! only within the origin, and nothing here logs a header or a query string.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use reqwest::Url;
use reqwest::header::HeaderMap;
use reqwest::header::HeaderName;
use reqwest::header::HeaderValue;
use rmcp::RoleClient;
use rmcp::model::ClientJsonRpcMessage;
use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_client::StreamableHttpClient;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How many server messages may wait for the service loop before the stream reader pauses.
const BACKLOG: usize = 64;

/// Why the SSE session could not start or a message could not be sent. The texts name the
/// stream's URL as configured and, for the endpoint, only its path (its query carries the
/// session id).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SseError {
    #[error("invalid SSE url \"{url}\": {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("cannot open the event stream at {url}: {reason}")]
    Open { url: String, reason: String },
    #[error("the event stream at {url} ended before the server sent its `endpoint` event")]
    NoEndpoint { url: String },
    #[error("the server's `endpoint` event is not a valid URL: {reason}")]
    BadEndpoint { reason: String },
    #[error(
        "the server's `endpoint` event points to another origin ({endpoint}); refusing to send this server's headers there"
    )]
    ForeignEndpoint { endpoint: String },
    #[error("POST {path} failed: {reason}")]
    Post { path: String, reason: String },
    #[error("POST {path} answered HTTP {status}")]
    Status { path: String, status: u16 },
}

/// One legacy-SSE session: the POST endpoint, and the server's messages as the stream reader
/// task decoded them.
pub(crate) struct SseClientTransport {
    client: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    /// Stops the stream reader when the transport is closed or dropped.
    stop: CancellationToken,
}

impl Drop for SseClientTransport {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// `scheme://host:port` of `url`, for messages (never its path or query).
fn origin_text(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// Follows a redirect only when it keeps the method and body (307/308) and stays on the
/// origin: the configured headers must not be replayed to another host.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if keeps_body && same_origin && attempt.previous().len() <= 10 {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// Resolves the `endpoint` event's data against the stream URL and keeps it on its origin.
pub(crate) fn resolve_endpoint(stream: &Url, data: &str) -> Result<Url, SseError> {
    let endpoint = stream
        .join(data.trim())
        .map_err(|e| SseError::BadEndpoint {
            reason: e.to_string(),
        })?;
    if endpoint.origin() != stream.origin() {
        return Err(SseError::ForeignEndpoint {
            endpoint: origin_text(&endpoint),
        });
    }
    Ok(endpoint)
}

impl SseClientTransport {
    /// Opens the event stream at `url` and waits for the server's `endpoint` event. The
    /// caller bounds the wait (it is part of connecting).
    pub(crate) async fn connect(
        url: &str,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<Self, SseError> {
        let stream_url = Url::parse(url).map_err(|e| SseError::InvalidUrl {
            url: url.to_owned(),
            reason: e.to_string(),
        })?;
        let client = reqwest::Client::builder()
            .redirect(same_origin_redirects())
            .build()
            .map_err(|e| SseError::Open {
                url: url.to_owned(),
                reason: e.to_string(),
            })?;
        // rmcp's GET helper brings the SSE framing (with its event-size bound) and refuses a
        // response that is not an event stream.
        let mut events = client
            .get_stream(Arc::from(url), None, None, None, headers.clone())
            .await
            .map_err(|e| SseError::Open {
                url: url.to_owned(),
                reason: e.to_string(),
            })?;
        let endpoint = loop {
            match events.next().await {
                Some(Ok(event)) if event.event.as_deref() == Some("endpoint") => {
                    break resolve_endpoint(&stream_url, event.data.as_deref().unwrap_or(""))?;
                }
                // Comments, keep-alives and anything before the endpoint carry nothing yet.
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    return Err(SseError::Open {
                        url: url.to_owned(),
                        reason: e.to_string(),
                    });
                }
                None => {
                    return Err(SseError::NoEndpoint {
                        url: url.to_owned(),
                    });
                }
            }
        };
        let (tx, incoming) = mpsc::channel(BACKLOG);
        let stop = CancellationToken::new();
        let reader_stop = stop.clone();
        tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    () = reader_stop.cancelled() => return,
                    event = events.next() => event,
                };
                let event = match event {
                    Some(Ok(event)) => event,
                    Some(Err(error)) => {
                        tracing::debug!(%error, "mcp sse stream failed");
                        return;
                    }
                    None => {
                        tracing::debug!("mcp sse stream ended");
                        return;
                    }
                };
                // The default event type is `message`.
                if !matches!(event.event.as_deref(), None | Some("message")) {
                    continue;
                }
                let Some(data) = event.data.as_deref().filter(|d| !d.trim().is_empty()) else {
                    continue;
                };
                match serde_json::from_str::<ServerJsonRpcMessage>(data) {
                    Ok(message) => {
                        if tx.send(message).await.is_err() {
                            return;
                        }
                    }
                    // Not the message itself: it may carry anything the server sends.
                    Err(error) => {
                        tracing::warn!(%error, "mcp sse: undecodable server message skipped")
                    }
                }
            }
        });
        let mut header_map = HeaderMap::new();
        header_map.extend(headers);
        Ok(Self {
            client,
            endpoint,
            headers: header_map,
            incoming,
            stop,
        })
    }
}

impl Transport<RoleClient> for SseClientTransport {
    type Error = SseError;

    fn name() -> std::borrow::Cow<'static, str> {
        "sse".into()
    }

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let request = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .json(&item);
        let path = self.endpoint.path().to_owned();
        async move {
            let response = request.send().await.map_err(|e| SseError::Post {
                path: path.clone(),
                reason: e.without_url().to_string(),
            })?;
            let status = response.status();
            if !status.is_success() {
                return Err(SseError::Status {
                    path,
                    status: status.as_u16(),
                });
            }
            Ok(())
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Ends the reader; the server sees the stream close, which ends the session there.
        self.stop.cancel();
        self.incoming.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_resolves_relative_and_stays_on_the_origin() {
        let stream = Url::parse("http://127.0.0.1:3001/sse").unwrap();
        let endpoint = resolve_endpoint(&stream, "/message?sessionId=abc\n").unwrap();
        assert_eq!(
            endpoint.as_str(),
            "http://127.0.0.1:3001/message?sessionId=abc"
        );
        let absolute =
            resolve_endpoint(&stream, "http://127.0.0.1:3001/other/messages?s=1").unwrap();
        assert_eq!(absolute.path(), "/other/messages");
        let foreign = resolve_endpoint(&stream, "http://evil.example:3001/message?s=1");
        assert_eq!(
            foreign.unwrap_err().to_string(),
            "the server's `endpoint` event points to another origin (http://evil.example:3001); refusing to send this server's headers there"
        );
        let other_port = resolve_endpoint(&stream, "http://127.0.0.1:4000/message");
        assert!(matches!(other_port, Err(SseError::ForeignEndpoint { .. })));
    }
}
