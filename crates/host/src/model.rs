//! The host's model adapter: a stable route whose inner adapter is rebuilt from `[model]` on a
//! reload, and a late-bound image resolver that reads through the attachments plugin's store
//! as it is at request time.

use std::sync::Arc;
use std::sync::RwLock;

use dsh_kernel::Scope;
use dsh_llm::AttachmentResolver;
use dsh_llm::ChunkStream;
use dsh_llm::ImageData;
use dsh_llm::LlmError;
use dsh_llm::ModelAdapter;
use dsh_llm::ModelEntry;
use dsh_llm::ModelInfo;
use dsh_llm::ModelRequest;
use dsh_llm::ProviderSettings;
use dsh_llm::RetryPolicy;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::core::Modality;
use crate::core::ModelSettings;

/// Routes every call to the adapter built from the current `[model]` table.
pub struct RoutedAdapter {
    provider: String,
    current: RwLock<Arc<dyn ModelAdapter>>,
}

impl std::fmt::Debug for RoutedAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutedAdapter")
            .field("provider", &self.provider)
            .finish_non_exhaustive()
    }
}

impl RoutedAdapter {
    pub fn new(inner: Arc<dyn ModelAdapter>) -> Self {
        Self {
            provider: inner.provider().to_owned(),
            current: RwLock::new(inner),
        }
    }

    fn current(&self) -> Arc<dyn ModelAdapter> {
        dsh_sync::read(&self.current).clone()
    }

    /// Swaps the inner adapter; requests already streaming keep the old one.
    pub fn replace(&self, inner: Arc<dyn ModelAdapter>) {
        *dsh_sync::write(&self.current) = inner;
    }
}

impl ModelAdapter for RoutedAdapter {
    fn provider(&self) -> &str {
        &self.provider
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ChunkStream {
        self.current().stream(request, cancel)
    }

    fn model_info(&self, model: &str) -> Option<ModelInfo> {
        self.current().model_info(model)
    }

    fn retry_policy(&self) -> RetryPolicy {
        self.current().retry_policy()
    }
}

/// Loads images through whatever `dyn AttachmentResolver` the root provides when asked.
struct LateResolver(Scope);

impl AttachmentResolver for LateResolver {
    fn load(&self, attachment: &Value) -> Result<ImageData, dsh_llm::ImageLoadError> {
        self.0
            .service::<dyn AttachmentResolver>()
            .ok_or(dsh_llm::ImageLoadError::NoStore)?
            .load(attachment)
    }
}

/// Where `[model] base_url` was set, as the model server's errors name it: the variable, the
/// `-c` flag, or the file and line; `None` when no layer set it (the provider's default).
pub fn base_url_source(config: &crate::config::Config) -> Option<String> {
    use crate::config::Layer;
    let origin = config.origin_exact("model.base_url")?;
    Some(match (origin.layer, &origin.file, origin.line) {
        (Layer::Default, ..) => return None,
        (Layer::Env, ..) => "DEEPSEEK_BASE_URL".to_owned(),
        (Layer::Flag, ..) => "`-c model.base_url`".to_owned(),
        (_, Some(file), Some(line)) => format!("[model] base_url in {}:{line}", file.display()),
        (_, Some(file), None) => format!("[model] base_url in {}", file.display()),
        (_, None, _) => "[model] base_url".to_owned(),
    })
}

/// Builds the adapter `[model]` names, reading keys from the process environment;
/// `base_url_source` ([`base_url_source`]) is named in the errors a wrong URL causes.
pub fn build(
    settings: &ModelSettings,
    base_url_source: Option<String>,
    root: &Scope,
) -> Result<Arc<dyn ModelAdapter>, LlmError> {
    let models = settings
        .catalog
        .iter()
        .map(|entry| ModelEntry {
            id: entry.id.clone(),
            name: entry.name.clone(),
            context_window: entry.context_window,
            max_tokens: entry.max_tokens,
            input_modalities: entry
                .input
                .iter()
                .map(|m| match m {
                    Modality::Text => "text".to_owned(),
                    Modality::Image => "image".to_owned(),
                })
                .collect(),
        })
        .collect();
    let provider = ProviderSettings {
        base_url: settings.base_url.clone(),
        base_url_source,
        api_key_env: settings.api_key_env.clone(),
        reasoning_effort: settings.reasoning_effort.map(|e| e.as_str().to_owned()),
        models,
        attachments: Some(Arc::new(LateResolver(root.clone()))),
    };
    let env = |name: &str| {
        // Credential-like variables were taken out of the process environment at start-up.
        let value = dsh_secrets::var(name);
        // The key never reaches a child process or a tool result (see `dsh-secrets`).
        if name.contains("KEY")
            && let Some(key) = value.as_deref().filter(|key| !key.trim().is_empty())
        {
            dsh_secrets::register_secret(key.to_owned());
        }
        value
    };
    dsh_llm::build_adapter(&settings.provider, provider, &env)
}
