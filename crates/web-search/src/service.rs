//! The web seam's search half (`ctx.web`): providers register under an id; each call picks
//! the configured one, or the only usable one; results are capped at `maxResults`.

use std::sync::Arc;
use std::sync::Mutex;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

/// A `WebError`: exact message, stable code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct WebError {
    pub code: &'static str,
    pub message: String,
}

impl WebError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// One source of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_at: Option<String>,
}

/// `{content?, sources, truncated}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SearchResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    pub sources: Vec<Source>,
    pub truncated: bool,
}

/// What a provider is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchRequest {
    pub query: String,
    pub max_results: usize,
}

/// Where a provider logs its side requests (the initiating session's log, if any).
pub type RequestLog = Arc<dyn Fn(&str, serde_json::Value) + Send + Sync>;

/// A search backend.
pub trait SearchProvider: Send + Sync {
    fn id(&self) -> &str;
    /// Whether it can serve a call now (a key, a valid base URL, …).
    fn available(&self) -> bool;
    fn search(
        &self,
        request: SearchRequest,
        log: Option<RequestLog>,
        signal: CancellationToken,
    ) -> BoxFuture<'static, Result<SearchResult, WebError>>;
}

/// The registry plus selection.
#[derive(Default)]
pub struct WebSearch {
    providers: Mutex<Vec<Arc<dyn SearchProvider>>>,
    /// `searchProvider` (else `DSH_WEB_SEARCH_PROVIDER`).
    configured: Option<String>,
}

impl std::fmt::Debug for WebSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSearch")
            .field("configured", &self.configured)
            .finish_non_exhaustive()
    }
}

impl WebSearch {
    pub fn new(configured: Option<String>) -> Arc<Self> {
        Arc::new(Self {
            providers: Mutex::new(Vec::new()),
            configured: configured.filter(|id| !id.trim().is_empty()),
        })
    }

    pub fn register(&self, provider: Arc<dyn SearchProvider>) -> Result<(), WebError> {
        let mut providers = dsh_sync::lock(&self.providers);
        if providers.iter().any(|p| p.id() == provider.id()) {
            return Err(WebError::new(
                "WEB_DUPLICATE_PROVIDER",
                format!(
                    "a web provider with id \"{}\" is already registered",
                    provider.id()
                ),
            ));
        }
        providers.push(provider);
        Ok(())
    }

    /// Whether any call could be served (the tool is offered only then).
    pub fn any_available(&self) -> bool {
        dsh_sync::lock(&self.providers)
            .iter()
            .any(|p| p.available())
    }

    /// The provider for this call.
    pub fn select(&self) -> Result<Arc<dyn SearchProvider>, WebError> {
        let providers = dsh_sync::lock(&self.providers);
        if let Some(id) = &self.configured {
            let provider = providers.iter().find(|p| p.id() == id).ok_or_else(|| {
                WebError::new(
                    "WEB_PROVIDER_CONFIGURED_MISSING",
                    format!("configured web provider \"{id}\" is not registered"),
                )
            })?;
            if !provider.available() {
                return Err(WebError::new(
                    "WEB_PROVIDER_CONFIGURED_UNAVAILABLE",
                    format!("configured web provider \"{id}\" is registered but unavailable"),
                ));
            }
            return Ok(provider.clone());
        }
        let usable: Vec<&Arc<dyn SearchProvider>> =
            providers.iter().filter(|p| p.available()).collect();
        match usable.as_slice() {
            [] => Err(WebError::new(
                "WEB_PROVIDER_UNAVAILABLE",
                "no usable web provider is registered",
            )),
            [one] => Ok((*one).clone()),
            many => Err(WebError::new(
                "WEB_PROVIDER_AMBIGUOUS",
                format!(
                    "multiple usable web providers are registered ({}); configure one explicitly",
                    many.iter().map(|p| p.id()).collect::<Vec<_>>().join(", ")
                ),
            )),
        }
    }

    /// One search, capped at `max_results` sources.
    pub async fn search(
        &self,
        request: SearchRequest,
        log: Option<RequestLog>,
        signal: CancellationToken,
    ) -> Result<SearchResult, WebError> {
        let provider = self.select()?;
        let max = request.max_results;
        let mut result = provider.search(request, log, signal).await?;
        if result.sources.len() > max {
            result.sources.truncate(max);
            result.truncated = true;
        }
        Ok(result)
    }
}
