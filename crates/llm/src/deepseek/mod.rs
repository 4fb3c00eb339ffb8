//! The DeepSeek chat-completions adapter (spec §3.6): route `deepseek-official`, always
//! streaming, `POST {base}/chat/completions`.

pub(crate) mod body;
mod http_error;
pub(crate) mod images;
mod sse;
pub(crate) mod stream;
mod translate;
mod user_id;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::header::HeaderName;
use reqwest::header::HeaderValue;
use tokio_util::sync::CancellationToken;

pub use body::chat_request_body;
pub use body::chat_request_body_with;
use dsh_protocol::LlmFailure;
pub use images::AttachmentResolver;
pub use images::ImageData;
pub use user_id::anonymous_user_id;

use crate::ChunkStream;
use crate::LlmError;
use crate::ModelAdapter;
use crate::ModelInfo;
use crate::ModelRequest;
use crate::RequestPurpose;
use crate::RetryPolicy;
use crate::codes;
use crate::http::LazyClient;
use crate::wire::HistoryEncoder;
use crate::wire::WireBody;

/// The provider route id (also the `provider` of assistant message sources).
pub const PROVIDER: &str = "deepseek-official";
pub const DEFAULT_BASE_URL: &str = "https://api.deepseek.com";
pub const DEFAULT_MODEL: &str = "deepseek-v4-flash";
/// Sent on every provider request.
pub const USER_AGENT: &str = concat!(
    "deepseek-harness/",
    env!("CARGO_PKG_VERSION"),
    " (+https://github.com/deepseek-ai/deepseek-harness)"
);
const DEFAULT_API_KEY_ENV: &str = "DEEPSEEK_API_KEY";
const DEFAULT_MAX_TOKENS: u32 = 256_000;
const DEFAULT_CONTEXT_WINDOW: u64 = 1_000_000;
const DEFAULT_MAX_REQUEST_IMAGE_BYTES: usize = 20 * 1024 * 1024;

/// One catalog entry. The catalog is advisory: unlisted ids are sent as given (text-only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelEntry {
    pub id: String,
    pub name: Option<String>,
    pub context_window: Option<u64>,
    pub max_tokens: Option<u32>,
    /// `text`, `image`; empty means text-only.
    pub input_modalities: Vec<String>,
}

impl ModelEntry {
    pub fn new(id: &str, name: &str) -> Self {
        Self {
            id: id.to_owned(),
            name: Some(name.to_owned()),
            context_window: None,
            max_tokens: None,
            input_modalities: vec!["text".to_owned()],
        }
    }

    pub(crate) fn accepts_images(&self) -> bool {
        self.input_modalities.iter().any(|m| m == "image")
    }
}

/// The deployment's `thinking` switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thinking {
    Enabled,
    Disabled,
}

impl Thinking {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enabled => "enabled",
            Self::Disabled => "disabled",
        }
    }
}

/// Adapter settings. `api_key` never appears in `Debug` output.
#[derive(Clone)]
pub struct DeepSeekConfig {
    pub base_url: String,
    /// Where `base_url` was set (`DEEPSEEK_BASE_URL`, `[model] base_url in FILE:LINE`), named
    /// in the errors a wrong URL causes; `None`: the default.
    pub base_url_source: Option<String>,
    pub api_key: Option<String>,
    /// The variable the key is read from, named in the missing-key message.
    pub api_key_env: String,
    /// Watchdog for a stalled response (headers or body); exceeded → `TIMEOUT`.
    pub idle_timeout: Duration,
    pub connect_timeout: Duration,
    pub user_agent: String,
    /// `x-deepseek-harness-user-id` (the anonymous id kept under `$DSH_HOME`), when known.
    pub user_id: Option<String>,
    pub thinking: Option<Thinking>,
    /// Configured default effort (`off|low|high|max`); `None` → `high` (or `off` when
    /// thinking is disabled).
    pub reasoning_effort: Option<String>,
    pub max_tokens: u32,
    pub context_window: u64,
    pub retry_policy: RetryPolicy,
    /// The model catalog (default: `deepseek-v4-flash`, `deepseek-v4-pro`, text-only).
    pub models: Vec<ModelEntry>,
    /// Base64 budget for the images of one request; oldest images beyond it become a placeholder.
    pub max_request_image_bytes: usize,
    /// Where image attachments are read from; without one, images are rejected.
    pub attachments: Option<Arc<dyn AttachmentResolver>>,
}

impl fmt::Debug for DeepSeekConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeepSeekConfig")
            .field("base_url", &self.base_url)
            .field("base_url_source", &self.base_url_source)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("api_key_env", &self.api_key_env)
            .field("idle_timeout", &self.idle_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("user_agent", &self.user_agent)
            .field("user_id", &self.user_id)
            .field("thinking", &self.thinking)
            .field("reasoning_effort", &self.reasoning_effort)
            .field("max_tokens", &self.max_tokens)
            .field("context_window", &self.context_window)
            .field("retry_policy", &self.retry_policy)
            .field("models", &self.models)
            .field("max_request_image_bytes", &self.max_request_image_bytes)
            .field(
                "attachments",
                &self.attachments.as_ref().map(|_| "AttachmentResolver"),
            )
            .finish()
    }
}

impl Default for DeepSeekConfig {
    fn default() -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.to_owned(),
            base_url_source: None,
            api_key: None,
            api_key_env: DEFAULT_API_KEY_ENV.to_owned(),
            idle_timeout: Duration::from_millis(300_000),
            connect_timeout: Duration::from_secs(30),
            user_agent: USER_AGENT.to_owned(),
            user_id: None,
            thinking: None,
            reasoning_effort: None,
            max_tokens: DEFAULT_MAX_TOKENS,
            context_window: DEFAULT_CONTEXT_WINDOW,
            retry_policy: RetryPolicy::default(),
            models: vec![
                ModelEntry::new("deepseek-v4-flash", "DeepSeek-V4-Flash"),
                ModelEntry::new("deepseek-v4-pro", "DeepSeek-V4-Pro"),
            ],
            max_request_image_bytes: DEFAULT_MAX_REQUEST_IMAGE_BYTES,
            attachments: None,
        }
    }
}

impl DeepSeekConfig {
    /// Defaults plus `DEEPSEEK_BASE_URL` and `DEEPSEEK_API_KEY` from the process environment.
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Like [`Self::from_env`], reading variables through `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let mut config = Self::default();
        if let Some(base) = lookup("DEEPSEEK_BASE_URL").filter(|v| !v.trim().is_empty()) {
            config.base_url = base.trim().to_owned();
            config.base_url_source = Some("DEEPSEEK_BASE_URL".to_owned());
        }
        config.api_key = lookup(&config.api_key_env);
        config
    }
}

/// The DeepSeek adapter. Cheap to share; one HTTP client (connection pool) per adapter, and
/// one cache of encoded history per session (see [`crate::wire`]).
pub struct DeepSeekAdapter {
    config: DeepSeekConfig,
    client: LazyClient,
    history: HistoryEncoder,
}

impl fmt::Debug for DeepSeekAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeepSeekAdapter")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl DeepSeekAdapter {
    /// Validates the configuration (misconfiguration fails here, not per request).
    pub fn new(config: DeepSeekConfig) -> Result<Self, LlmError> {
        if let Some(effort) = config.reasoning_effort.as_deref() {
            if effort != "off" && !body::WIRE_EFFORTS.contains(&effort) {
                return Err(LlmError::InvalidConfig {
                    reason: format!("unknown reasoning effort `{effort}`"),
                });
            }
            if config.thinking == Some(Thinking::Disabled) && effort != "off" {
                return Err(LlmError::InvalidConfig {
                    reason: format!("reasoning effort `{effort}` needs thinking enabled"),
                });
            }
        }
        crate::error::check_base_url(&config.base_url, config.base_url_source.as_deref())?;
        let client = LazyClient::new(&config.base_url, config.connect_timeout);
        Ok(Self {
            config,
            client,
            history: HistoryEncoder::new(),
        })
    }

    pub fn config(&self) -> &DeepSeekConfig {
        &self.config
    }

    fn entry(&self, model: &str) -> Option<&ModelEntry> {
        self.config.models.iter().find(|entry| entry.id == model)
    }

    fn default_effort(&self) -> &str {
        match (
            self.config.thinking,
            self.config.reasoning_effort.as_deref(),
        ) {
            (_, Some(effort)) => effort,
            (Some(Thinking::Disabled), None) => "off",
            _ => "high",
        }
    }

    /// Fills what the runtime would materialize: `max_tokens` and the effort.
    fn materialize(&self, mut request: ModelRequest) -> ModelRequest {
        if request.model.is_empty() {
            request.model = DEFAULT_MODEL.to_owned();
        }
        let default_max_tokens = self.entry(&request.model).and_then(|e| e.max_tokens);
        request
            .max_tokens
            .get_or_insert(default_max_tokens.unwrap_or(self.config.max_tokens));
        if request.reasoning_effort.is_none() {
            request.reasoning_effort = Some(self.default_effort().to_owned());
        }
        request
    }

    fn prepare(&self, request: ModelRequest) -> Result<stream::Attempt, LlmFailure> {
        let key = self.api_key()?;
        let request = self.materialize(request);
        if request.purpose != Some(RequestPurpose::SessionTitle)
            && let Some(effort) = request.reasoning_effort.as_deref()
        {
            let known = effort == "off" || body::WIRE_EFFORTS.contains(&effort);
            if !known || (self.config.thinking == Some(Thinking::Disabled) && effort != "off") {
                return Err(LlmFailure::new(
                    codes::UNSUPPORTED_REASONING_EFFORT,
                    format!(
                        "reasoning effort \"{effort}\" is not supported by model \"{}\"",
                        request.model
                    ),
                ));
            }
        }
        let body = self.encode(&request)?;
        Ok(stream::Attempt {
            client: self.client.for_request()?,
            url: format!("{}/chat/completions", self.config.base_url),
            base_url: self.config.base_url.clone(),
            base_url_origin: crate::error::url_origin(self.config.base_url_source.as_deref()),
            headers: self.headers(&key, &request)?,
            body,
            idle_timeout: self.config.idle_timeout,
            secret: key,
            label: "DeepSeek API",
        })
    }

    /// The body `stream` would send for `request` (adapter defaults materialized), assembled
    /// from this adapter's per-session cache of encoded messages.
    pub fn request_body(&self, request: ModelRequest) -> Result<WireBody, LlmFailure> {
        self.encode(&self.materialize(request))
    }

    fn encode(&self, request: &ModelRequest) -> Result<WireBody, LlmFailure> {
        match body::encode(request, self.config.thinking, &self.history) {
            Some(body) => {
                #[cfg(debug_assertions)]
                debug_assert_eq!(
                    String::from_utf8_lossy(&body.to_vec()),
                    body::build(request, self.config.thinking, None).to_string(),
                    "the body assembled from cached pieces must equal the one built whole"
                );
                Ok(body)
            }
            None => self.whole_body_with_images(request),
        }
    }

    /// A request with images: their parts share one byte budget, so it is built whole.
    fn whole_body_with_images(&self, request: &ModelRequest) -> Result<WireBody, LlmFailure> {
        let resolver = self.config.attachments.as_deref();
        let accepts = self
            .entry(&request.model)
            .is_some_and(ModelEntry::accepts_images);
        let (true, Some(resolver)) = (accepts, resolver) else {
            return Err(LlmFailure::new(
                codes::UNSUPPORTED_CONTENT,
                format!("model \"{}\" does not accept image input", request.model),
            ));
        };
        let mut urls = images::resolve(
            &request.messages,
            resolver,
            self.config.max_request_image_bytes,
        )?;
        let body = body::build(request, self.config.thinking, Some(&mut urls));
        let bytes = serde_json::to_vec(&body).map_err(|error| {
            LlmFailure::new(
                codes::INVALID_REQUEST,
                format!("cannot encode the request body: {error}"),
            )
        })?;
        let mut wire = WireBody::new();
        wire.push(bytes.into());
        Ok(wire)
    }

    fn api_key(&self) -> Result<String, LlmFailure> {
        let env = &self.config.api_key_env;
        let key = self
            .config
            .api_key
            .as_deref()
            .map(str::trim)
            .unwrap_or_default();
        if key.is_empty() {
            return Err(LlmFailure::new(
                codes::MISSING_CREDENTIAL,
                format!(
                    "llm-deepseek: no API key for provider route \"{PROVIDER}\"; export {env}=<your key> in the environment dsh starts in, or set `model.api_key_env` to the name of the variable that holds it"
                ),
            ));
        }
        if !key.bytes().all(|b| (0x21..=0x7E).contains(&b)) {
            return Err(LlmFailure::new(
                codes::INVALID_CREDENTIAL,
                format!(
                    "llm-deepseek: the API key for provider route \"{PROVIDER}\" ({env}) must be printable ASCII without spaces"
                ),
            ));
        }
        Ok(key.to_owned())
    }

    /// The harness headers, in upstream's order.
    fn headers(&self, key: &str, request: &ModelRequest) -> Result<HeaderMap, LlmFailure> {
        let invalid = |name: &str| {
            LlmFailure::new(
                codes::INVALID_REQUEST,
                format!("invalid value for request header {name}"),
            )
        };
        let mut headers = HeaderMap::new();
        let mut authorization = HeaderValue::from_str(&format!("Bearer {key}"))
            .map_err(|_| invalid("authorization"))?;
        authorization.set_sensitive(true);
        headers.insert(reqwest::header::AUTHORIZATION, authorization);
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            reqwest::header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        let agent =
            HeaderValue::from_str(&self.config.user_agent).map_err(|_| invalid("user-agent"))?;
        headers.insert(reqwest::header::USER_AGENT, agent);
        let mut custom = |name: &'static str, value: &str| -> Result<(), LlmFailure> {
            let value = HeaderValue::from_str(value).map_err(|_| invalid(name))?;
            headers.insert(HeaderName::from_static(name), value);
            Ok(())
        };
        if let Some(user_id) = &self.config.user_id {
            custom("x-deepseek-harness-user-id", user_id)?;
        }
        if let Some(session_id) = &request.session_id {
            custom("x-deepseek-harness-session-id", session_id)?;
        }
        if request.purpose == Some(RequestPurpose::Compaction) {
            custom("x-deepseek-harness-compact", "1")?;
        }
        Ok(headers)
    }
}

impl ModelAdapter for DeepSeekAdapter {
    fn provider(&self) -> &str {
        PROVIDER
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ChunkStream {
        if cancel.is_cancelled() {
            return stream::failed(LlmFailure::new(
                codes::ABORTED,
                "DeepSeek API request aborted",
            ));
        }
        match self.prepare(request) {
            Ok(attempt) => stream::run(attempt, cancel),
            Err(failure) => {
                tracing::debug!(code = %failure.code, "DeepSeek request not sent");
                stream::failed(failure)
            }
        }
    }

    fn model_info(&self, model: &str) -> Option<ModelInfo> {
        let entry = self.entry(model);
        let efforts = if self.config.thinking == Some(Thinking::Disabled) {
            vec!["off".to_owned()]
        } else {
            ["off", "low", "high", "max"].map(String::from).to_vec()
        };
        let modalities = entry
            .map(|e| e.input_modalities.clone())
            .filter(|m| !m.is_empty());
        Some(ModelInfo {
            context_window: entry
                .and_then(|e| e.context_window)
                .unwrap_or(self.config.context_window),
            default_max_tokens: Some(
                entry
                    .and_then(|e| e.max_tokens)
                    .unwrap_or(self.config.max_tokens),
            ),
            efforts,
            default_effort: Some(self.default_effort().to_owned()),
            input_modalities: modalities.unwrap_or_else(|| vec!["text".to_owned()]),
        })
    }

    fn retry_policy(&self) -> RetryPolicy {
        self.config.retry_policy.clone()
    }
}
