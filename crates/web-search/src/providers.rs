//! The three search providers over HTTPS JSON APIs: DeepSeek (Anthropic-compatible native web
//! search), Exa and Perplexity. Redirects are errors; keys are read per call and never logged.

use std::sync::Arc;

use futures::future::BoxFuture;
use reqwest::header::HeaderMap;
use reqwest::header::HeaderName;
use reqwest::header::HeaderValue;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::service::RequestLog;
use crate::service::SearchProvider;
use crate::service::SearchRequest;
use crate::service::SearchResult;
use crate::service::Source;
use crate::service::WebError;

const USER_AGENT: &str = "deepseek-harness/0.0.1";

fn provider_error(message: String) -> WebError {
    WebError::new("WEB_PROVIDER_ERROR", message)
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default()
}

/// A literal key, else the named environment variable.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Secret(Option<String>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Secret(<set>)"
        } else {
            "Secret(<unset>)"
        })
    }
}

/// A key is never written out: `dsh config show` and friends see `<redacted>`.
impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Some(_) => serializer.serialize_str("<redacted>"),
            None => serializer.serialize_none(),
        }
    }
}

impl Secret {
    pub fn literal(key: impl Into<String>) -> Self {
        Self(Some(key.into()))
    }

    fn resolve(&self, env: &str) -> Option<String> {
        self.0
            .clone()
            .filter(|k| !k.trim().is_empty())
            .or_else(|| dsh_secrets::var(env).filter(|k| !k.trim().is_empty()))
    }
}

/// POSTs `body`; maps transport failures, aborts, non-2xx answers and bad bodies.
async fn post(
    name: &str,
    url: &str,
    headers: HeaderMap,
    body: &Value,
    signal: &CancellationToken,
) -> Result<Value, WebError> {
    let request = client()
        .post(url)
        .headers(headers)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("user-agent", USER_AGENT)
        .body(body.to_string())
        .send();
    let response = tokio::select! {
        response = request => response.map_err(|e| provider_error(format!("{name} search request failed: {e}")))?,
        () = signal.cancelled() => return Err(WebError::new("WEB_ABORTED", format!("{name} search aborted"))),
    };
    let status = response.status();
    let text = tokio::select! {
        text = response.text() => text.map_err(|e| provider_error(format!("{name} search request failed: {e}")))?,
        () = signal.cancelled() => return Err(WebError::new("WEB_ABORTED", format!("{name} search aborted"))),
    };
    if !status.is_success() {
        let parsed: Option<Value> = serde_json::from_str(&text).ok();
        let detail = parsed.as_ref().and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .or_else(|| v.get("error").and_then(Value::as_str))
                .or_else(|| v.get("message").and_then(Value::as_str))
                .map(str::to_owned)
        });
        return Err(provider_error(detail.unwrap_or_else(|| {
            format!("{name} API error (HTTP {})", status.as_u16())
        })));
    }
    serde_json::from_str(&text).map_err(|e| {
        provider_error(format!(
            "{name} returned an unprocessable response body: {e}"
        ))
    })
}

fn header(map: &mut HeaderMap, name: &'static str, value: &str) -> Result<(), WebError> {
    let value = HeaderValue::from_str(value)
        .map_err(|_| provider_error(format!("invalid value for header {name}")))?;
    map.insert(HeaderName::from_static(name), value);
    Ok(())
}

fn non_empty(value: Option<&Value>) -> Option<String> {
    value
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn base_ok(base: &str) -> bool {
    reqwest::Url::parse(base).is_ok()
}

fn join(base: &str, path: &str) -> String {
    format!("{}/{path}", base.trim_end_matches('/'))
}

/// `web-search-deepseek` settings (provider id `deepseek-official`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeepSeekConfig {
    pub api_key: Secret,
    pub api_key_env: String,
    pub base_url: Option<String>,
    pub model: String,
    pub api_version: String,
    pub max_tokens: u64,
    pub max_uses: u64,
}

impl Default for DeepSeekConfig {
    fn default() -> Self {
        Self {
            api_key: Secret::default(),
            api_key_env: "DEEPSEEK_API_KEY".to_owned(),
            base_url: None,
            model: "deepseek-v4-flash".to_owned(),
            api_version: "2023-06-01".to_owned(),
            max_tokens: 4096,
            max_uses: 5,
        }
    }
}

#[derive(Debug, Clone)]
pub struct DeepSeekSearch {
    pub config: DeepSeekConfig,
}

impl DeepSeekSearch {
    fn base(&self) -> String {
        self.config
            .base_url
            .clone()
            .or_else(|| std::env::var("DEEPSEEK_SEARCH_BASE_URL").ok())
            .unwrap_or_else(|| "https://api.deepseek.com/anthropic/v1".to_owned())
    }
}

/// Sources of an Anthropic-style answer: every `web_search_result` of every result block.
pub fn deepseek_sources(body: &Value) -> Result<Vec<Source>, WebError> {
    let blocks = body["content"].as_array().cloned().unwrap_or_default();
    let results: Vec<&Value> = blocks
        .iter()
        .filter(|b| b["type"] == "web_search_tool_result")
        .collect();
    if results.is_empty() {
        return Err(provider_error(
            "DeepSeek returned no web_search_tool_result blocks; the request may not have triggered native web search".to_owned(),
        ));
    }
    let citations: Vec<&Value> = blocks
        .iter()
        .filter(|b| b["type"] == "text")
        .flat_map(|b| b["citations"].as_array().into_iter().flatten())
        .collect();
    let mut sources: Vec<Source> = Vec::new();
    for block in results {
        for item in block["content"].as_array().into_iter().flatten() {
            if item["type"] != "web_search_result" {
                continue;
            }
            let Some(url) = non_empty(item.get("url")) else {
                continue;
            };
            if sources.iter().any(|s| s.url == url) {
                continue;
            }
            let snippet = citations
                .iter()
                .filter(|c| c["url"].as_str() == Some(url.as_str()))
                .find_map(|c| non_empty(c.get("cited_text")));
            sources.push(Source {
                title: non_empty(item.get("title")),
                snippet,
                published_at: non_empty(item.get("page_age")),
                url,
            });
        }
    }
    Ok(sources)
}

impl SearchProvider for DeepSeekSearch {
    fn id(&self) -> &str {
        "deepseek-official"
    }

    fn available(&self) -> bool {
        self.config
            .api_key
            .resolve(&self.config.api_key_env)
            .is_some()
            && base_ok(&self.base())
            && self.config.max_tokens > 0
            && self.config.max_uses > 0
    }

    fn search(
        &self,
        request: SearchRequest,
        log: Option<RequestLog>,
        signal: CancellationToken,
    ) -> BoxFuture<'static, Result<SearchResult, WebError>> {
        let this = self.clone();
        Box::pin(async move {
            let reference = this.config.api_key_env.clone();
            let key = this.config.api_key.resolve(&reference).ok_or_else(|| {
                WebError::new(
                    "WEB_PROVIDER_CREDENTIAL_MISSING",
                    format!("DeepSeek search has no API key for \"{reference}\"; store it through the credentials service (the web Models page writes it), export it in the launching environment, or set a literal \"apiKey\" in the web-search-deepseek config"),
                )
            })?;
            let endpoint = join(&this.base(), "messages");
            let body = json!({
                "model": this.config.model,
                "max_tokens": this.config.max_tokens,
                "messages": [{"role": "user", "content": [{"type": "text", "text": format!("Perform a web search for the query: {}", request.query)}]}],
                "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": this.config.max_uses}],
            });
            if let Some(log) = &log {
                // Log-only and key-free: the endpoint, version and body, never the headers.
                log(
                    "web/deepseek-search-llm-request",
                    json!({"endpoint": endpoint, "apiVersion": this.config.api_version, "body": body}),
                );
            }
            let mut headers = HeaderMap::new();
            header(&mut headers, "x-api-key", &key)?;
            header(&mut headers, "authorization", &format!("Bearer {key}"))?;
            header(&mut headers, "anthropic-version", &this.config.api_version)?;
            let answer = post("DeepSeek", &endpoint, headers, &body, &signal).await?;
            Ok(SearchResult {
                content: None,
                sources: deepseek_sources(&answer)?,
                truncated: false,
            })
        })
    }
}

/// `web-search-exa` settings (provider id `exa`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExaConfig {
    pub api_key: Secret,
    pub base_url: String,
    pub search_type: String,
    pub num_results: Option<u64>,
    pub highlights_per_result: u64,
}

impl Default for ExaConfig {
    fn default() -> Self {
        Self {
            api_key: Secret::default(),
            base_url: "https://api.exa.ai".to_owned(),
            search_type: "auto".to_owned(),
            num_results: None,
            highlights_per_result: 1,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ExaSearch {
    pub config: ExaConfig,
}

/// Exa results with a non-blank highlight.
pub fn exa_sources(body: &Value) -> Vec<Source> {
    body["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| {
            let snippet = item["highlights"]
                .as_array()
                .and_then(|h| h.first())
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())?
                .to_owned();
            Some(Source {
                url: non_empty(item.get("url"))?,
                title: non_empty(item.get("title")),
                snippet: Some(snippet),
                published_at: non_empty(item.get("publishedDate")),
            })
        })
        .collect()
}

impl SearchProvider for ExaSearch {
    fn id(&self) -> &str {
        "exa"
    }

    fn available(&self) -> bool {
        self.config.api_key.resolve("EXA_API_KEY").is_some()
            && base_ok(&self.config.base_url)
            && matches!(
                self.config.search_type.as_str(),
                "auto" | "keyword" | "neural"
            )
    }

    fn search(
        &self,
        request: SearchRequest,
        _log: Option<RequestLog>,
        signal: CancellationToken,
    ) -> BoxFuture<'static, Result<SearchResult, WebError>> {
        let this = self.clone();
        Box::pin(async move {
            let key = this.config.api_key.resolve("EXA_API_KEY").ok_or_else(|| {
                WebError::new(
                    "WEB_PROVIDER_CREDENTIAL_MISSING",
                    "Exa search has no API key",
                )
            })?;
            let mut body = json!({
                "query": request.query,
                "type": this.config.search_type,
                "contents": {"highlights": {"highlightsPerUrl": this.config.highlights_per_result}},
            });
            let count = Some(request.max_results as u64).or(this.config.num_results);
            if let Some(count) = count {
                body["numResults"] = json!(count);
            }
            let mut headers = HeaderMap::new();
            header(&mut headers, "authorization", &format!("Bearer {key}"))?;
            let answer = post(
                "Exa",
                &join(&this.config.base_url, "search"),
                headers,
                &body,
                &signal,
            )
            .await?;
            Ok(SearchResult {
                content: None,
                sources: exa_sources(&answer),
                truncated: false,
            })
        })
    }
}

/// `web-search-perplexity` settings (provider id `perplexity`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PerplexityConfig {
    pub api_key: Secret,
    pub base_url: String,
    pub model: String,
    pub max_tokens: u64,
    pub search_recency: Option<String>,
}

impl Default for PerplexityConfig {
    fn default() -> Self {
        Self {
            api_key: Secret::default(),
            base_url: "https://api.perplexity.ai".to_owned(),
            model: "sonar".to_owned(),
            max_tokens: 1024,
            search_recency: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct PerplexitySearch {
    pub config: PerplexityConfig,
}

/// Perplexity's answer and sources (`search_results`, else bare `citations`).
pub fn perplexity_result(body: &Value) -> SearchResult {
    let content = non_empty(body.pointer("/choices/0/message/content"));
    let sources = match body["search_results"].as_array() {
        Some(results) => results
            .iter()
            .filter_map(|r| {
                Some(Source {
                    url: non_empty(r.get("url"))?,
                    title: non_empty(r.get("title")),
                    snippet: non_empty(r.get("snippet")),
                    published_at: non_empty(r.get("date")),
                })
            })
            .collect(),
        None => body["citations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| {
                Some(Source {
                    url: c.as_str().filter(|u| !u.is_empty())?.to_owned(),
                    title: None,
                    snippet: None,
                    published_at: None,
                })
            })
            .collect(),
    };
    SearchResult {
        content,
        sources,
        truncated: false,
    }
}

impl SearchProvider for PerplexitySearch {
    fn id(&self) -> &str {
        "perplexity"
    }

    fn available(&self) -> bool {
        self.config.api_key.resolve("PERPLEXITY_API_KEY").is_some()
            && base_ok(&self.config.base_url)
            && self.config.max_tokens > 0
    }

    fn search(
        &self,
        request: SearchRequest,
        _log: Option<RequestLog>,
        signal: CancellationToken,
    ) -> BoxFuture<'static, Result<SearchResult, WebError>> {
        let this = self.clone();
        Box::pin(async move {
            let key = this
                .config
                .api_key
                .resolve("PERPLEXITY_API_KEY")
                .ok_or_else(|| {
                    WebError::new(
                        "WEB_PROVIDER_CREDENTIAL_MISSING",
                        "Perplexity search has no API key",
                    )
                })?;
            let mut body = json!({
                "model": this.config.model,
                "max_tokens": this.config.max_tokens,
                "messages": [{"role": "user", "content": request.query}],
            });
            if let Some(recency) = &this.config.search_recency {
                body["search_recency_filter"] = json!(recency);
            }
            let mut headers = HeaderMap::new();
            header(&mut headers, "authorization", &format!("Bearer {key}"))?;
            let answer = post(
                "Perplexity",
                &join(&this.config.base_url, "chat/completions"),
                headers,
                &body,
                &signal,
            )
            .await?;
            Ok(perplexity_result(&answer))
        })
    }
}

/// Every configured provider.
pub fn providers(
    deepseek: Option<DeepSeekConfig>,
    exa: Option<ExaConfig>,
    perplexity: Option<PerplexityConfig>,
) -> Vec<Arc<dyn SearchProvider>> {
    let mut out: Vec<Arc<dyn SearchProvider>> = Vec::new();
    if let Some(config) = deepseek {
        out.push(Arc::new(DeepSeekSearch { config }));
    }
    if let Some(config) = exa {
        out.push(Arc::new(ExaSearch { config }));
    }
    if let Some(config) = perplexity {
        out.push(Arc::new(PerplexitySearch { config }));
    }
    out
}
