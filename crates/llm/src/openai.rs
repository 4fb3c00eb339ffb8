//! A generic OpenAI-compatible chat-completions adapter, for local and third-party servers
//! (llama.cpp, vLLM, an Ollama OpenAI endpoint): the same streaming wire as DeepSeek without
//! its extensions. No `thinking` field, no `reasoning_content` sent back, no harness headers;
//! reasoning is optional (`reasoning_content` deltas are read when a server sends them), and
//! the API key is optional (most local servers need none).

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::header::HeaderValue;
use serde_json::Value;

use crate::ChunkStream;
use crate::LlmError;
use crate::LlmFailure;
use crate::ModelAdapter;
use crate::ModelEntry;
use crate::ModelInfo;
use crate::ModelRequest;
use crate::RetryPolicy;
use crate::codes;
use crate::deepseek::body;
use crate::deepseek::images;
use crate::deepseek::stream;
use crate::http::LazyClient;
use crate::providers::EnvLookup;
use crate::providers::ProviderSettings;
use crate::wire::WireBody;
use tokio_util::sync::CancellationToken;

/// The provider route id of this adapter.
pub const PROVIDER: &str = "openai-compatible";
/// The key variable when `[model] api_key_env` names none.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";
/// The endpoint when `[model] base_url` names none (a local server's usual address).
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:8080/v1";
/// Efforts this adapter forwards as `reasoning_effort`.
const EFFORTS: [&str; 3] = ["low", "medium", "high"];

/// Settings of the OpenAI-compatible adapter. `api_key` never appears in `Debug` output.
#[derive(Clone)]
pub struct OpenAiConfig {
    pub base_url: String,
    /// Where `base_url` was set, named in the errors a wrong URL causes (`None`: the default).
    pub base_url_source: Option<String>,
    pub api_key: Option<String>,
    pub api_key_env: String,
    /// `low`, `medium` or `high` is sent as `reasoning_effort`; `off` or none sends nothing.
    pub reasoning_effort: Option<String>,
    pub models: Vec<ModelEntry>,
    pub idle_timeout: Duration,
    pub connect_timeout: Duration,
    pub user_agent: String,
    pub context_window: u64,
    pub retry_policy: RetryPolicy,
    pub max_request_image_bytes: usize,
    pub attachments: Option<Arc<dyn crate::AttachmentResolver>>,
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("api_key_env", &self.api_key_env)
            .field("reasoning_effort", &self.reasoning_effort)
            .field("models", &self.models)
            .finish_non_exhaustive()
    }
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        let deepseek = crate::DeepSeekConfig::default();
        Self {
            base_url: DEFAULT_BASE_URL.to_owned(),
            base_url_source: None,
            api_key: None,
            api_key_env: DEFAULT_API_KEY_ENV.to_owned(),
            reasoning_effort: None,
            models: Vec::new(),
            idle_timeout: deepseek.idle_timeout,
            connect_timeout: deepseek.connect_timeout,
            user_agent: deepseek.user_agent,
            context_window: deepseek.context_window,
            retry_policy: deepseek.retry_policy,
            max_request_image_bytes: deepseek.max_request_image_bytes,
            attachments: None,
        }
    }
}

/// The adapter. One HTTP client (connection pool) per adapter.
pub struct OpenAiCompatibleAdapter {
    config: OpenAiConfig,
    client: LazyClient,
}

impl std::fmt::Debug for OpenAiCompatibleAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiCompatibleAdapter")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

pub(crate) fn build(
    settings: ProviderSettings,
    env: EnvLookup<'_>,
) -> Result<Arc<dyn ModelAdapter>, LlmError> {
    let mut config = OpenAiConfig::default();
    if let Some(base) = settings.base_url {
        config.base_url = base.trim_end_matches('/').to_owned();
        config.base_url_source = settings.base_url_source;
    }
    if let Some(var) = settings.api_key_env {
        config.api_key_env = var;
    }
    config.api_key = env(&config.api_key_env).filter(|key| !key.trim().is_empty());
    config.reasoning_effort = settings.reasoning_effort;
    config.models = settings.models;
    config.attachments = settings.attachments;
    Ok(Arc::new(OpenAiCompatibleAdapter::new(config)?))
}

impl OpenAiCompatibleAdapter {
    /// Validates the configuration.
    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        if let Some(effort) = config.reasoning_effort.as_deref()
            && effort != "off"
            && !EFFORTS.contains(&effort)
        {
            return Err(LlmError::InvalidConfig {
                reason: format!(
                    "reasoning effort `{effort}` is not one of off, low, medium, high for provider {PROVIDER}"
                ),
            });
        }
        crate::error::check_base_url(&config.base_url, config.base_url_source.as_deref())?;
        let client = LazyClient::new(&config.base_url, config.connect_timeout);
        Ok(Self { config, client })
    }

    fn entry(&self, model: &str) -> Option<&ModelEntry> {
        self.config.models.iter().find(|entry| entry.id == model)
    }

    fn body(&self, request: &ModelRequest) -> Result<WireBody, LlmFailure> {
        let mut value = if body::has_image(&request.messages) {
            let accepts = self
                .entry(&request.model)
                .is_some_and(ModelEntry::accepts_images);
            let (true, Some(resolver)) = (accepts, self.config.attachments.as_deref()) else {
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
            body::build(request, None, Some(&mut urls))
        } else {
            body::build(request, None, None)
        };
        strip_extensions(&mut value, self.effort(request));
        let bytes = serde_json::to_vec(&value).map_err(|error| {
            LlmFailure::new(
                codes::INVALID_REQUEST,
                format!("cannot encode the request body: {error}"),
            )
        })?;
        let mut wire = WireBody::new();
        wire.push(bytes.into());
        Ok(wire)
    }

    /// The effort to forward: the request's, else the configured one; `off` forwards nothing.
    fn effort(&self, request: &ModelRequest) -> Option<String> {
        request
            .reasoning_effort
            .clone()
            .or_else(|| self.config.reasoning_effort.clone())
            .filter(|effort| EFFORTS.contains(&effort.as_str()))
    }

    fn headers(&self) -> Result<HeaderMap, LlmFailure> {
        let mut headers = HeaderMap::new();
        if let Some(key) = self.config.api_key.as_deref() {
            let mut authorization = HeaderValue::from_str(&format!("Bearer {}", key.trim()))
                .map_err(|_| {
                    LlmFailure::new(
                        codes::INVALID_CREDENTIAL,
                        format!(
                            "the API key in {} must be printable ASCII without spaces",
                            self.config.api_key_env
                        ),
                    )
                })?;
            authorization.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, authorization);
        }
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            reqwest::header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        if let Ok(agent) = HeaderValue::from_str(&self.config.user_agent) {
            headers.insert(reqwest::header::USER_AGENT, agent);
        }
        Ok(headers)
    }
}

/// Removes what only DeepSeek understands: `thinking`, its efforts, and `reasoning_content` on
/// assistant history entries; then sets the forwarded effort, if any.
fn strip_extensions(body: &mut Value, effort: Option<String>) {
    let Some(map) = body.as_object_mut() else {
        return;
    };
    map.shift_remove("thinking");
    map.shift_remove("reasoning_effort");
    if let Some(Value::Array(messages)) = map.get_mut("messages") {
        for message in messages {
            if let Some(entry) = message.as_object_mut() {
                entry.shift_remove("reasoning_content");
            }
        }
    }
    if let Some(effort) = effort {
        map.insert("reasoning_effort".into(), Value::from(effort));
    }
}

impl ModelAdapter for OpenAiCompatibleAdapter {
    fn provider(&self) -> &str {
        PROVIDER
    }

    fn stream(&self, mut request: ModelRequest, cancel: CancellationToken) -> ChunkStream {
        if cancel.is_cancelled() {
            return stream::failed(LlmFailure::new(
                codes::ABORTED,
                "chat-completions request aborted",
            ));
        }
        if request.max_tokens.is_none() {
            request.max_tokens = self.entry(&request.model).and_then(|e| e.max_tokens);
        }
        let prepared = self.body(&request).and_then(|body| {
            Ok(stream::Attempt {
                client: self.client.for_request()?,
                url: format!("{}/chat/completions", self.config.base_url),
                base_url: self.config.base_url.clone(),
                base_url_origin: crate::error::url_origin(self.config.base_url_source.as_deref()),
                headers: self.headers()?,
                body,
                idle_timeout: self.config.idle_timeout,
                secret: self.config.api_key.clone().unwrap_or_default(),
                label: "chat-completions API",
            })
        });
        match prepared {
            Ok(attempt) => stream::run(attempt, cancel),
            Err(failure) => stream::failed(failure),
        }
    }

    fn model_info(&self, model: &str) -> Option<ModelInfo> {
        let entry = self.entry(model);
        Some(ModelInfo {
            context_window: entry
                .and_then(|e| e.context_window)
                .unwrap_or(self.config.context_window),
            default_max_tokens: entry.and_then(|e| e.max_tokens),
            efforts: ["off", "low", "medium", "high"].map(String::from).to_vec(),
            default_effort: self.config.reasoning_effort.clone(),
            input_modalities: entry
                .map(|e| e.input_modalities.clone())
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| vec!["text".to_owned()]),
        })
    }

    fn retry_policy(&self) -> RetryPolicy {
        self.config.retry_policy.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_protocol::ContentBlock;
    use dsh_protocol::Message;
    use dsh_protocol::MessageSource;

    #[test]
    fn the_body_carries_no_deepseek_extension() {
        let adapter = OpenAiCompatibleAdapter::new(OpenAiConfig::default()).unwrap();
        let mut assistant = Message::assistant(
            vec![
                ContentBlock::Reasoning {
                    text: "thinking".into(),
                },
                ContentBlock::text("hi"),
            ],
            MessageSource::user(),
        );
        assistant.role = dsh_protocol::Role::Assistant;
        let request = ModelRequest {
            model: "local".into(),
            messages: vec![assistant].into(),
            reasoning_effort: Some("high".into()),
            ..ModelRequest::default()
        };
        let body: Value =
            serde_json::from_slice(&adapter.body(&request).unwrap().to_vec()).unwrap();
        assert!(body.get("thinking").is_none());
        assert_eq!(body["reasoning_effort"], "high");
        assert!(body["messages"][0].get("reasoning_content").is_none());
        let quiet = ModelRequest {
            reasoning_effort: Some("off".into()),
            ..request
        };
        let body: Value = serde_json::from_slice(&adapter.body(&quiet).unwrap().to_vec()).unwrap();
        assert!(body.get("reasoning_effort").is_none());
    }

    #[test]
    fn efforts_and_urls_are_checked_at_build() {
        let bad = OpenAiConfig {
            reasoning_effort: Some("max".into()),
            ..OpenAiConfig::default()
        };
        assert!(OpenAiCompatibleAdapter::new(bad).is_err());
        let bad = OpenAiConfig {
            base_url: "not a url".into(),
            ..OpenAiConfig::default()
        };
        assert!(OpenAiCompatibleAdapter::new(bad).is_err());
    }
}
