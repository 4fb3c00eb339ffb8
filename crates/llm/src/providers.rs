//! The provider registry: `[model] provider` names an entry, whose builder makes the adapter
//! from provider-neutral settings.

use std::sync::Arc;

use crate::AttachmentResolver;
use crate::DeepSeekAdapter;
use crate::DeepSeekConfig;
use crate::LlmError;
use crate::ModelAdapter;
use crate::ModelEntry;

/// What every provider is built from (the `[model]` table, resolved).
#[derive(Clone, Default)]
pub struct ProviderSettings {
    /// `None`: the provider's default endpoint.
    pub base_url: Option<String>,
    /// Where `base_url` was set (`DEEPSEEK_BASE_URL`, `[model] base_url in FILE:LINE`), named
    /// in the errors a wrong URL causes.
    pub base_url_source: Option<String>,
    /// `None`: the provider's default variable.
    pub api_key_env: Option<String>,
    /// `off`, `low`, `medium`, `high` or `max`; what each provider accepts is its own rule.
    pub reasoning_effort: Option<String>,
    /// Catalog entries laid over the provider's built-in list (a known id is replaced).
    pub models: Vec<ModelEntry>,
    /// Where image attachments are read from.
    pub attachments: Option<Arc<dyn AttachmentResolver>>,
}

impl std::fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderSettings")
            .field("base_url", &self.base_url)
            .field("base_url_source", &self.base_url_source)
            .field("api_key_env", &self.api_key_env)
            .field("reasoning_effort", &self.reasoning_effort)
            .field("models", &self.models)
            .finish_non_exhaustive()
    }
}

/// Reads an environment variable (the process environment in production).
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// One entry of the registry.
#[derive(Clone, Copy)]
pub struct Provider {
    /// The route id adapters report (`ModelAdapter::provider`).
    pub id: &'static str,
    /// Other names `[model] provider` accepts for it.
    pub aliases: &'static [&'static str],
    pub build: fn(ProviderSettings, EnvLookup<'_>) -> Result<Arc<dyn ModelAdapter>, LlmError>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider").field("id", &self.id).finish()
    }
}

/// Every provider this build knows, DeepSeek first.
pub const PROVIDERS: &[Provider] = &[
    Provider {
        id: crate::PROVIDER,
        aliases: &["deepseek"],
        build: build_deepseek,
    },
    Provider {
        id: crate::openai::PROVIDER,
        aliases: &["openai"],
        build: crate::openai::build,
    },
];

/// The provider `name` (an id or an alias).
pub fn provider(name: &str) -> Option<&'static Provider> {
    PROVIDERS
        .iter()
        .find(|p| p.id == name || p.aliases.contains(&name))
}

/// Builds the adapter of provider `name`.
pub fn build_adapter(
    name: &str,
    settings: ProviderSettings,
    env: EnvLookup<'_>,
) -> Result<Arc<dyn ModelAdapter>, LlmError> {
    let known: Vec<&str> = PROVIDERS.iter().map(|p| p.id).collect();
    let provider = provider(name).ok_or_else(|| LlmError::InvalidConfig {
        reason: format!("unknown provider `{name}` (known: {})", known.join(", ")),
    })?;
    (provider.build)(settings, env)
}

/// Lays `overlay` over `models`: an entry with a known id replaces it, a new id is added.
pub fn apply_catalog(models: &mut Vec<ModelEntry>, overlay: &[ModelEntry]) {
    for entry in overlay {
        match models.iter_mut().find(|m| m.id == entry.id) {
            Some(existing) => *existing = entry.clone(),
            None => models.push(entry.clone()),
        }
    }
}

fn build_deepseek(
    settings: ProviderSettings,
    env: EnvLookup<'_>,
) -> Result<Arc<dyn ModelAdapter>, LlmError> {
    let mut config = DeepSeekConfig::from_lookup(env);
    if let Some(base) = settings.base_url {
        config.base_url = base.trim_end_matches('/').to_owned();
        config.base_url_source = settings.base_url_source;
    }
    if let Some(var) = settings.api_key_env {
        config.api_key = env(&var);
        config.api_key_env = var;
    }
    config.reasoning_effort = settings.reasoning_effort;
    apply_catalog(&mut config.models, &settings.models);
    config.attachments = settings.attachments;
    Ok(Arc::new(DeepSeekAdapter::new(config)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_select_an_adapter_and_unknown_ones_are_named() {
        let env = |_: &str| None;
        let adapter = build_adapter("deepseek", ProviderSettings::default(), &env).unwrap();
        assert_eq!(adapter.provider(), crate::PROVIDER);
        let adapter =
            build_adapter("openai-compatible", ProviderSettings::default(), &env).unwrap();
        assert_eq!(adapter.provider(), crate::openai::PROVIDER);
        let error = build_adapter("nosuch", ProviderSettings::default(), &env)
            .err()
            .unwrap();
        assert!(
            error.to_string().contains("unknown provider `nosuch`"),
            "{error}"
        );
    }

    #[test]
    fn a_deepseek_only_effort_is_refused_at_build() {
        let env = |_: &str| None;
        let settings = ProviderSettings {
            reasoning_effort: Some("medium".into()),
            ..ProviderSettings::default()
        };
        assert!(build_adapter("deepseek", settings, &env).is_err());
    }
}
