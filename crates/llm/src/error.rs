//! The crate's error type and the canonical failure codes.

use dsh_protocol::LlmFailure;

/// Canonical failure codes (`LlmFailure::code`).
pub mod codes {
    pub const ABORTED: &str = "ABORTED";
    pub const AUTH: &str = "AUTH";
    pub const CONTEXT_WINDOW_EXCEEDED: &str = "CONTEXT_WINDOW_EXCEEDED";
    pub const EMPTY_RESPONSE: &str = "EMPTY_RESPONSE";
    pub const INVALID_CONFIG: &str = "INVALID_CONFIG";
    pub const INVALID_CREDENTIAL: &str = "INVALID_CREDENTIAL";
    pub const INVALID_REQUEST: &str = "INVALID_REQUEST";
    pub const MALFORMED_RESPONSE: &str = "MALFORMED_RESPONSE";
    pub const MISSING_CREDENTIAL: &str = "MISSING_CREDENTIAL";
    pub const QUOTA: &str = "QUOTA";
    pub const RATE_LIMIT: &str = "RATE_LIMIT";
    pub const SERVER: &str = "SERVER";
    pub const STREAM_CLOSED: &str = "STREAM_CLOSED";
    pub const TIMEOUT: &str = "TIMEOUT";
    pub const TRANSPORT: &str = "TRANSPORT";
    pub const UNKNOWN_BLOCK_TYPE: &str = "UNKNOWN_BLOCK_TYPE";
    pub const UNSUPPORTED_CONTENT: &str = "UNSUPPORTED_CONTENT";
    pub const UNSUPPORTED_REASONING_EFFORT: &str = "UNSUPPORTED_REASONING_EFFORT";
}

/// Where a base URL was set, as errors name it: `set by DEEPSEEK_BASE_URL`, `set by [model]
/// base_url in FILE:LINE`, or the provider's default and how to change it.
pub(crate) fn url_origin(source: Option<&str>) -> String {
    match source {
        Some(source) => format!("set by {source}"),
        None => "the provider's default; set `[model] base_url` or DEEPSEEK_BASE_URL to change it"
            .to_owned(),
    }
}

/// A provider base URL must be an absolute `http(s)` URL with a host: anything else fails when
/// the adapter is built, never as a retried transport error on the first request. The error
/// names where the URL was set (`source`).
pub(crate) fn check_base_url(url: &str, source: Option<&str>) -> Result<(), LlmError> {
    let bad = |why: String| LlmError::InvalidConfig {
        reason: format!(
            "base_url `{url}` ({}) is not a valid http(s) URL: {why}",
            url_origin(source)
        ),
    };
    let parsed = reqwest::Url::parse(url).map_err(|e| bad(e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad(format!("the scheme is `{}`", parsed.scheme())));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad("it names no host".to_owned()));
    }
    Ok(())
}

/// Why a request never reached the server, in a person's words: the innermost cause of a
/// transport error (`connection refused`, a DNS failure, a TLS error), not the client's
/// generic wrapper.
pub(crate) fn transport_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut innermost = error;
    while let Some(source) = innermost.source() {
        innermost = source;
    }
    if let Some(io) = innermost.downcast_ref::<std::io::Error>() {
        match io.kind() {
            std::io::ErrorKind::ConnectionRefused => return "connection refused".to_owned(),
            std::io::ErrorKind::ConnectionReset => return "connection reset".to_owned(),
            std::io::ErrorKind::TimedOut => return "connection timed out".to_owned(),
            _ => {}
        }
    }
    innermost.to_string()
}

/// Errors raised outside a stream (construction, assembly). Failures of a provider attempt are
/// not errors: they arrive in-band as a `finish` chunk.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The adapter configuration is unusable; fails at load, not per request.
    #[error("invalid model adapter configuration: {reason}")]
    InvalidConfig { reason: String },
    /// The HTTP client could not be built (TLS backend, …).
    #[error("cannot build the HTTP client: {reason}")]
    Client { reason: String },
    /// A block opened with a type the assembler cannot build from deltas was never closed.
    #[error("cannot assemble open block {index} of unknown type `{block_type}`")]
    UnknownBlockType { index: u32, block_type: String },
}

impl LlmError {
    /// The canonical code for this error, as it would appear in a failure.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidConfig { .. } => codes::INVALID_CONFIG,
            Self::Client { .. } => codes::TRANSPORT,
            Self::UnknownBlockType { .. } => codes::UNKNOWN_BLOCK_TYPE,
        }
    }

    pub fn to_failure(&self) -> LlmFailure {
        LlmFailure::new(self.code(), self.to_string())
    }
}

/// Why the bytes behind an image block could not be loaded (the request then fails with
/// `cannot load image attachment: <this>`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageLoadError {
    #[error("no attachment store is mounted")]
    NoStore,
    #[error("invalid image attachment record: {0}")]
    InvalidRecord(#[source] serde_json::Error),
    /// The store's own reason (missing, corrupt, unreadable).
    #[error("{0}")]
    Unavailable(String),
}
