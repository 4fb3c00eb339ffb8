//! The adapters' HTTP client, built on the first request rather than with the adapter.
//!
//! Building a `reqwest` client sets up TLS: for an `https://` endpoint that reads every root
//! certificate in `/etc/ssl/certs` (milliseconds of CPU, and the TLS stack's pages resident).
//! The host builds its adapter at start, so `dsh tools`, `dsh config show` or a TUI waiting for
//! its first prompt would pay that for nothing; the first request pays it instead.

use std::sync::OnceLock;
use std::time::Duration;

use dsh_protocol::LlmFailure;

use crate::error::LlmError;
use crate::error::codes;

/// A client made on first use, then shared (clones are cheap handles to one pool).
#[derive(Debug)]
pub(crate) struct LazyClient {
    connect_timeout: Duration,
    plain_http: bool,
    client: OnceLock<reqwest::Client>,
}

impl LazyClient {
    pub(crate) fn new(base_url: &str, connect_timeout: Duration) -> Self {
        Self {
            connect_timeout,
            plain_http: base_url
                .get(..7)
                .is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://")),
            client: OnceLock::new(),
        }
    }

    /// The client, built now if this is the first request. A failed build is reported and
    /// tried again by the next request.
    pub(crate) fn get(&self) -> Result<reqwest::Client, LlmError> {
        if let Some(client) = self.client.get() {
            return Ok(client.clone());
        }
        let mut builder = reqwest::Client::builder().connect_timeout(self.connect_timeout);
        if self.plain_http {
            // A plain-HTTP endpoint (a local proxy, the replay server) never negotiates TLS:
            // an empty trust store skips reading the platform's roots, and a redirect to
            // https then fails verification instead of trusting anything.
            builder = builder.tls_certs_only(Vec::new());
        }
        let built = builder.build().map_err(|error| LlmError::Client {
            reason: error.to_string(),
        })?;
        // Two first requests racing build two clients; one is kept and both work.
        Ok(self.client.get_or_init(|| built).clone())
    }

    /// [`Self::get`] for a request: a client that cannot be built fails the request as a
    /// configuration error (not retried).
    pub(crate) fn for_request(&self) -> Result<reqwest::Client, LlmFailure> {
        self.get()
            .map_err(|error| LlmFailure::new(codes::INVALID_CONFIG, error.to_string()))
    }

    /// Whether the client exists yet (tests of the laziness).
    #[cfg(test)]
    pub(crate) fn is_built(&self) -> bool {
        self.client.get().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_is_built_on_first_use_and_then_shared() {
        let lazy = LazyClient::new("https://api.example.com", Duration::from_secs(1));
        assert!(!lazy.is_built());
        assert!(lazy.get().is_ok());
        assert!(lazy.is_built());
        assert!(lazy.get().is_ok());
    }

    #[test]
    fn only_plain_http_skips_the_platform_roots() {
        assert!(LazyClient::new("HTTP://127.0.0.1:9", Duration::from_secs(1)).plain_http);
        assert!(!LazyClient::new("https://api.deepseek.com", Duration::from_secs(1)).plain_http);
    }
}
