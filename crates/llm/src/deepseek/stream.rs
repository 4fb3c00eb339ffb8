//! One DeepSeek attempt as a pull-driven chunk stream: send, check status, frame SSE, translate,
//! all under the caller's cancel token and the idle watchdog.

use std::collections::VecDeque;
use std::time::Duration;
use std::time::SystemTime;

use bytes::Bytes;
use dsh_protocol::FinishReason;
use dsh_protocol::LlmFailure;
use dsh_protocol::StreamChunk;
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::HeaderMap;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::http_error::failure_from_http;
use super::sse::SseItem;
use super::sse::SseParser;
use super::translate::Outcome;
use super::translate::Translator;
use crate::ChunkStream;
use crate::codes;
use crate::wire::WireBody;

/// Error bodies are read for their message only; a misbehaving server must not make us buffer
/// without bound.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Everything one attempt needs, prepared (and validated) by the adapter.
pub(crate) struct Attempt {
    pub(crate) client: reqwest::Client,
    pub(crate) url: String,
    pub(crate) base_url: String,
    /// Where `base_url` was set (`set by DEEPSEEK_BASE_URL`), for the errors a wrong URL causes.
    pub(crate) base_url_origin: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: WireBody,
    pub(crate) idle_timeout: Duration,
    /// The API key, only to scrub it from any text that leaves the adapter.
    pub(crate) secret: String,
    /// How failure messages name the service (`DeepSeek API`).
    pub(crate) label: &'static str,
}

/// A stream holding exactly one chunk: the finish for a failure found before any I/O.
pub(crate) fn failed(failure: LlmFailure) -> ChunkStream {
    let reason = if failure.code == codes::ABORTED {
        FinishReason::Aborted { failure }
    } else {
        FinishReason::Error { failure }
    };
    futures::stream::iter([StreamChunk::Finish {
        reason,
        replay_state: None,
    }])
    .boxed()
}

pub(crate) fn run(attempt: Attempt, cancel: CancellationToken) -> ChunkStream {
    let state = State {
        attempt,
        cancel,
        sent: false,
        body: None,
        parser: SseParser::new(),
        translator: Translator::new(),
        queue: VecDeque::new(),
        done: false,
        content_type: String::new(),
        first_bytes: Vec::new(),
        saw_data: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        let chunk = state.next().await?;
        Some((chunk, state))
    })
    .boxed()
}

struct State {
    attempt: Attempt,
    cancel: CancellationToken,
    sent: bool,
    /// `None` before sending and after EOF.
    body: Option<BoxStream<'static, reqwest::Result<Bytes>>>,
    parser: SseParser,
    translator: Translator,
    queue: VecDeque<StreamChunk>,
    done: bool,
    /// What the response said it carries, and its first bytes: named when what came back was
    /// not an event stream.
    content_type: String,
    first_bytes: Vec<u8>,
    /// Whether any SSE data or comment arrived.
    saw_data: bool,
}

/// How many leading bytes of a body that is not an event stream an error quotes.
const QUOTED_BYTES: usize = 160;

impl State {
    async fn next(&mut self) -> Option<StreamChunk> {
        if self.queue.is_empty()
            && !self.done
            && let Err(reason) = self.pump().await
        {
            self.queue.clear();
            self.queue.push_back(StreamChunk::Finish {
                reason,
                replay_state: None,
            });
            self.done = true;
            self.body = None;
        }
        self.queue.pop_front()
    }

    /// Runs until at least one chunk is queued or the stream is done. The watchdog deadline is
    /// armed here, i.e. only while the consumer waits; comments re-arm it, data that yields no
    /// chunk does not.
    async fn pump(&mut self) -> Result<(), FinishReason> {
        let idle = self.attempt.idle_timeout;
        let mut deadline = Instant::now() + idle;
        if !self.sent {
            self.sent = true;
            let response = self.send(deadline).await?;
            self.content_type = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("no content type")
                .to_owned();
            self.body = Some(response.bytes_stream().boxed());
            deadline = Instant::now() + idle;
        }
        loop {
            while let Some(item) = self.parser.next_item() {
                match item {
                    SseItem::Comment => {
                        self.saw_data = true;
                        deadline = Instant::now() + idle;
                    }
                    SseItem::Data(data) => {
                        self.saw_data = true;
                        match self.translator.on_data(&data) {
                            Ok(Outcome::Chunks(chunks)) => self.queue.extend(chunks),
                            Ok(Outcome::Done(chunks)) => {
                                // Anything after [DONE] is ignored: stop reading.
                                self.queue.extend(chunks);
                                self.done = true;
                                self.body = None;
                                return Ok(());
                            }
                            Err(failure) => return Err(self.error(failure)),
                        }
                    }
                }
                if !self.queue.is_empty() {
                    return Ok(());
                }
            }
            let Some(body) = self.body.as_mut() else {
                if !self.saw_data {
                    return Err(self.error(self.not_an_event_stream()));
                }
                return Err(self.error(closed()));
            };
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => return Err(aborted()),
                () = tokio::time::sleep_until(deadline) => return Err(self.error(timeout(idle))),
                next = body.next() => match next {
                    Some(Ok(bytes)) => {
                        if self.first_bytes.len() < QUOTED_BYTES {
                            let room = QUOTED_BYTES - self.first_bytes.len();
                            self.first_bytes.extend_from_slice(&bytes[..bytes.len().min(room)]);
                        }
                        self.parser.feed(&bytes);
                    }
                    Some(Err(error)) => {
                        tracing::warn!(base_url = %self.attempt.base_url, %error, "DeepSeek stream read failed");
                        let message = format!("{} stream from {} failed", self.attempt.label, self.attempt.base_url);
                        return Err(self.error(LlmFailure::new(codes::TRANSPORT, message)));
                    }
                    None => {
                        self.parser.end_of_input();
                        self.body = None;
                    }
                },
            }
        }
    }

    async fn send(&mut self, deadline: Instant) -> Result<reqwest::Response, FinishReason> {
        let attempt = &mut self.attempt;
        tracing::debug!(url = %attempt.url, bytes = attempt.body.len(), "DeepSeek request");
        let body = std::mem::take(&mut attempt.body);
        let request = attempt
            .client
            .post(&attempt.url)
            .headers(attempt.headers.clone())
            // The pieces stream without being joined; the length keeps it a plain
            // length-delimited body (hyper honours a length the caller sets).
            .header(reqwest::header::CONTENT_LENGTH, body.len())
            .body(body.into_http())
            .send();
        let response = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return Err(aborted()),
            () = tokio::time::sleep_until(deadline) => {
                return Err(self.error(timeout(self.attempt.idle_timeout)));
            }
            response = request => response,
        };
        let response = match response {
            Ok(response) => response,
            Err(error) => {
                tracing::warn!(base_url = %self.attempt.base_url, %error, "DeepSeek request failed");
                let message = format!(
                    "{} request to {} failed: {}",
                    self.attempt.label,
                    self.attempt.base_url,
                    crate::error::transport_cause(&error)
                );
                return Err(self.error(LlmFailure::new(codes::TRANSPORT, message)));
            }
        };
        let status = response.status();
        if status.is_success() {
            if status.as_u16() == 204 || status.as_u16() == 205 {
                let failure = LlmFailure::new(
                    codes::EMPTY_RESPONSE,
                    format!("{} returned no response body", self.attempt.label),
                );
                return Err(self.error(failure));
            }
            return Ok(response);
        }
        let headers = response.headers().clone();
        let body = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return Err(aborted()),
            () = tokio::time::sleep(self.attempt.idle_timeout) => String::new(),
            body = read_limited(response) => body,
        };
        let mut failure = failure_from_http(status.as_u16(), &headers, &body, SystemTime::now());
        if status.as_u16() == 404 {
            // Nothing there: almost always a wrong base URL (a missing `/v1`, another
            // service's address).
            failure.message = format!(
                "{} (HTTP 404): nothing answers at {}; check the base URL `{}` ({})",
                failure.message.trim_end_matches(" (HTTP 404)"),
                self.attempt.url,
                self.attempt.base_url,
                self.attempt.base_url_origin
            );
        }
        Err(self.error(failure))
    }

    /// The body ended and none of it was an event stream: say what came back (its content type
    /// and first bytes, escaped so nothing in them acts on a terminal) and where the URL was
    /// set. Not retried: the same server gives the same answer.
    fn not_an_event_stream(&self) -> LlmFailure {
        let text = String::from_utf8_lossy(&self.first_bytes);
        let quoted: String = text.chars().flat_map(char::escape_debug).collect();
        let first = if self.first_bytes.is_empty() {
            "an empty body".to_owned()
        } else {
            format!("\"{quoted}\"")
        };
        LlmFailure::new(
            codes::MALFORMED_RESPONSE,
            format!(
                "{} at {} answered `{}`, not an event stream: {first}; check the base URL `{}` ({})",
                self.attempt.label,
                self.attempt.url,
                self.content_type,
                self.attempt.base_url,
                self.attempt.base_url_origin
            ),
        )
    }

    /// An error finish with the key scrubbed from its text (a server may echo what it got).
    fn error(&self, mut failure: LlmFailure) -> FinishReason {
        if !self.attempt.secret.is_empty() && failure.message.contains(&self.attempt.secret) {
            failure.message = failure.message.replace(&self.attempt.secret, "[REDACTED]");
        }
        tracing::debug!(code = %failure.code, status = ?failure.status, "DeepSeek attempt failed");
        FinishReason::Error { failure }
    }
}

async fn read_limited(response: reqwest::Response) -> String {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(Ok(bytes)) = stream.next().await {
        body.extend_from_slice(&bytes);
        if body.len() >= MAX_ERROR_BODY {
            body.truncate(MAX_ERROR_BODY);
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

pub(crate) fn aborted() -> FinishReason {
    FinishReason::Aborted {
        failure: LlmFailure::new(codes::ABORTED, "DeepSeek API request aborted"),
    }
}

fn timeout(idle: Duration) -> LlmFailure {
    LlmFailure::new(
        codes::TIMEOUT,
        format!("DeepSeek stream idle timeout after {}ms", idle.as_millis()),
    )
}

fn closed() -> LlmFailure {
    LlmFailure::new(codes::STREAM_CLOSED, "SSE stream ended without [DONE]")
}
