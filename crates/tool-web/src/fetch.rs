//! The default HTTP provider (`web-fetch-http`): one GET with same-origin redirects, a byte cap
//! on the body stream, content-type dispatch and the decoded-text cap. Only public addresses
//! are connected to unless the [`AddressPolicy`] allows more (see [`crate::address`]); the
//! environment's proxy settings are not used, since a proxy would connect on dsh's behalf to
//! addresses this process never checked.

use std::sync::Arc;

use futures::StreamExt;
use reqwest::Url;
use reqwest::redirect::Policy;
use tokio::sync::OnceCell;

use crate::address::AddressPolicy;
use crate::address::CheckedResolver;
use crate::address::Refused;
use crate::markdown::html_to_markdown;

/// Bytes read from a body stream before it is cut.
pub const MAX_BODY_BYTES: usize = 5_000_000;
/// Characters of decoded text kept.
pub const MAX_TEXT_CHARS: usize = 100_000;
/// Redirect hops followed before giving up.
const MAX_REDIRECTS: usize = 10;

/// What a fetch produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The URL after redirects, WHATWG-serialized.
    pub url: String,
    pub status: u16,
    pub text: String,
    pub truncated: bool,
}

/// Why a fetch failed; the `Display` text is the model-facing message.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("url must be a non-empty string")]
    BlankUrl,
    #[error("invalid URL {0:?}: {1}")]
    InvalidUrl(String, String),
    #[error("unsupported URL scheme \"{0}\" (only http and https can be fetched)")]
    Scheme(String),
    #[error("unsupported content type \"{0}\"")]
    ContentType(String),
    #[error("response exceeds the maximum of {MAX_BODY_BYTES} bytes")]
    TooLarge,
    #[error("redirect to {0} was not followed: redirects must stay on the same origin")]
    CrossOriginRedirect(String),
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error("fetch failed: {0}")]
    Http(String),
}

/// A reusable fetcher (one connection pool). The HTTP client is built on the first fetch, not
/// at registration: building it loads the platform's root certificates (every file in
/// `/etc/ssl/certs`), which `dsh tools` or a session that never fetches must not pay for, and
/// must not fail on when the machine has no certificates at all.
#[derive(Debug, Clone, Default)]
pub struct Fetcher {
    client: Arc<OnceCell<reqwest::Client>>,
    policy: Arc<AddressPolicy>,
}

impl Fetcher {
    /// A fetcher of public addresses whose client is not built yet (cheap; does no I/O).
    pub fn new() -> Self {
        Self::default()
    }

    /// A fetcher under `policy` (which addresses besides public ones it may reach).
    pub fn with_policy(policy: AddressPolicy) -> Self {
        Self {
            client: Arc::default(),
            policy: Arc::new(policy),
        }
    }

    /// Whether the HTTP client has been built (it is, from the first fetch on).
    pub fn is_connected(&self) -> bool {
        self.client.initialized()
    }

    async fn client(&self) -> Result<&reqwest::Client, FetchError> {
        let policy = self.policy.clone();
        self.client
            .get_or_try_init(|| async {
                // Reading the certificate store is blocking file I/O: keep it off the workers.
                tokio::task::spawn_blocking(move || build_client(policy))
                    .await
                    .map_err(|e| FetchError::Http(e.to_string()))?
            })
            .await
    }

    /// Fetches `url` and decodes its body to text (Markdown for HTML).
    pub async fn fetch(&self, url: &str) -> Result<Fetched, FetchError> {
        let url = url.trim();
        if url.is_empty() {
            return Err(FetchError::BlankUrl);
        }
        let parsed =
            Url::parse(url).map_err(|e| FetchError::InvalidUrl(url.to_owned(), e.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(FetchError::Scheme(parsed.scheme().to_owned()));
        }
        // A name is checked when the client resolves it; an IP literal is never resolved.
        self.policy.check_host(parsed.host_str().unwrap_or(""))?;
        let response =
            self.client()
                .await?
                .get(parsed)
                .send()
                .await
                .map_err(|e| match refusal_in(&e) {
                    Some(refused) => FetchError::Refused(refused),
                    None => FetchError::Http(error_chain(&e)),
                })?;
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            return Err(FetchError::CrossOriginRedirect(location));
        }
        let final_url = response.url().to_string();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let kind = classify(&content_type)?;
        if response
            .content_length()
            .is_some_and(|len| len > MAX_BODY_BYTES as u64)
        {
            return Err(FetchError::TooLarge);
        }
        let (bytes, mut truncated) = read_capped(response).await?;
        let raw = decode_body(&bytes, &content_type).into_owned();
        drop(bytes);
        let text = match kind {
            // Up to MAX_BODY_BYTES of CPU-bound parsing: never on an async worker.
            Kind::Html => tokio::task::spawn_blocking(move || html_to_markdown(&raw))
                .await
                .map_err(|e| FetchError::Http(format!("HTML conversion failed: {e}")))?,
            Kind::Text => raw,
        };
        let text = match text.char_indices().nth(MAX_TEXT_CHARS) {
            Some((cut, _)) => {
                truncated = true;
                text[..cut].to_owned()
            }
            None => text,
        };
        Ok(Fetched {
            url: final_url,
            status: status.as_u16(),
            text,
            truncated,
        })
    }
}

fn redirect_policy(policy: Arc<AddressPolicy>) -> Policy {
    Policy::custom(move |attempt| {
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        let refused = policy.check_host(attempt.url().host_str().unwrap_or(""));
        if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error("too many redirects")
        } else if let Err(refused) = refused {
            attempt.error(refused)
        } else if same_origin {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

fn build_client(policy: Arc<AddressPolicy>) -> Result<reqwest::Client, FetchError> {
    let builder = || {
        reqwest::Client::builder()
            .redirect(redirect_policy(policy.clone()))
            .dns_resolver(CheckedResolver {
                policy: policy.clone(),
            })
            .no_proxy()
            .user_agent(concat!("dsh-web-fetch/", env!("CARGO_PKG_VERSION")))
    };
    // Without any usable root certificate the default build fails; plain http:// must still
    // work then, and an https:// fetch fails certificate verification with its own message.
    builder()
        .build()
        .or_else(|_| builder().tls_certs_only(Vec::new()).build())
        .map_err(|e| FetchError::Http(error_chain(&e)))
}

enum Kind {
    Html,
    Text,
}

fn classify(content_type: &str) -> Result<Kind, FetchError> {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if essence == "text/html" || essence == "application/xhtml+xml" {
        return Ok(Kind::Html);
    }
    let textual = essence.is_empty()
        || essence.starts_with("text/")
        || essence == "application/json"
        || essence.ends_with("+json")
        || essence == "application/xml"
        || essence.ends_with("+xml");
    if textual {
        Ok(Kind::Text)
    } else {
        Err(FetchError::ContentType(essence))
    }
}

/// UTF-8 (lossy) unless the declared charset is Latin-1, whose bytes map to code points.
fn decode_body<'a>(bytes: &'a [u8], content_type: &str) -> std::borrow::Cow<'a, str> {
    let charset = content_type
        .split(';')
        .skip(1)
        .filter_map(|param| param.split_once('='))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("charset"))
        .map(|(_, v)| v.trim().trim_matches('"').to_ascii_lowercase());
    match charset.as_deref() {
        Some("iso-8859-1" | "latin1" | "iso_8859-1" | "l1") => {
            std::borrow::Cow::Owned(bytes.iter().map(|b| char::from(*b)).collect())
        }
        _ => String::from_utf8_lossy(bytes),
    }
}

async fn read_capped(response: reqwest::Response) -> Result<(Vec<u8>, bool), FetchError> {
    let mut stream = response.bytes_stream();
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| FetchError::Http(error_chain(&e)))?;
        let room = MAX_BODY_BYTES - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// The address refusal behind a failed request (from the resolver or a redirect hop).
fn refusal_in(error: &(dyn std::error::Error + 'static)) -> Option<Refused> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(refused) = error.downcast_ref::<Refused>() {
            return Some(refused.clone());
        }
        current = error.source();
    }
    None
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_are_classified() {
        assert!(matches!(
            classify("text/html; charset=utf-8"),
            Ok(Kind::Html)
        ));
        assert!(matches!(classify("application/xhtml+xml"), Ok(Kind::Html)));
        assert!(matches!(classify("text/plain"), Ok(Kind::Text)));
        assert!(matches!(classify("application/ld+json"), Ok(Kind::Text)));
        assert!(matches!(classify("application/rss+xml"), Ok(Kind::Text)));
        assert_eq!(
            classify("application/pdf").err().map(|e| e.to_string()),
            Some("unsupported content type \"application/pdf\"".to_owned())
        );
    }

    #[test]
    fn latin1_bodies_are_decoded_by_charset() {
        assert_eq!(
            decode_body(b"caf\xe9", "text/plain; charset=ISO-8859-1"),
            "café"
        );
        assert_eq!(decode_body("café".as_bytes(), "text/plain"), "café");
    }
}
