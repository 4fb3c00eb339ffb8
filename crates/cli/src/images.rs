//! Image support: the model catalog's input modalities (`[[model.catalog]]`) and the local
//! attachment store (`[plugins.attachments]`), wired into `read_image`, MCP image results, the
//! DeepSeek adapter and the ACP bridge's prompt images.

use std::sync::Arc;

use anyhow::Context;
use dsh_acp::ImageStoreError;
use dsh_acp::PromptImage;
use dsh_acp::PromptImageStore;
use dsh_attachments::AttachmentError;
use dsh_attachments::LocalAttachmentStore;
use dsh_llm::ModelEntry;
use dsh_tool_fs::read_image::ImageRoute;
use dsh_tools::ImageAttachment;
use serde::Deserialize;

use crate::compose::Harness;
use crate::config::Config;

/// One `[[model.catalog]]` entry: what a model id accepts as input.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogEntry {
    pub id: String,
    pub name: Option<String>,
    /// `text` and/or `image`.
    #[serde(default = "text_only")]
    pub input: Vec<String>,
    pub context_window: Option<u64>,
    pub max_tokens: Option<u32>,
}

fn text_only() -> Vec<String> {
    vec!["text".to_owned()]
}

/// `[plugins.attachments]` (only `enabled` for now; the table is still checked for typos).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttachmentSettings {}

/// The `[[model.catalog]]` entries, checked.
pub fn catalog(config: &Config) -> anyhow::Result<Vec<CatalogEntry>> {
    let Some(value) = config.get("model.catalog") else {
        return Ok(Vec::new());
    };
    let entries: Vec<CatalogEntry> =
        serde_json::from_value(value.clone()).context("invalid [[model.catalog]] entry")?;
    for entry in &entries {
        if entry.id.trim().is_empty() {
            anyhow::bail!("[[model.catalog]] id must be a non-empty string");
        }
        if let Some(bad) = entry
            .input
            .iter()
            .find(|m| !matches!(m.as_str(), "text" | "image"))
        {
            anyhow::bail!(
                "[[model.catalog]] {}: input must list text and/or image, not {bad:?}",
                entry.id
            );
        }
    }
    Ok(entries)
}

/// Lays the configured catalog over the adapter's built-in one: an entry with a known id
/// replaces it, a new id is added.
pub fn apply_catalog(models: &mut Vec<ModelEntry>, catalog: &[CatalogEntry]) {
    for entry in catalog {
        let model = ModelEntry {
            id: entry.id.clone(),
            name: entry.name.clone(),
            context_window: entry.context_window,
            max_tokens: entry.max_tokens,
            input_modalities: entry.input.clone(),
        };
        match models.iter_mut().find(|m| m.id == entry.id) {
            Some(existing) => *existing = model,
            None => models.push(model),
        }
    }
}

/// `read_image`'s view of a route: `None` (another provider) is unresolvable.
pub fn fs_route(model: &str, accepts_images: Option<bool>) -> ImageRoute {
    match accepts_images {
        None => ImageRoute::Unresolved,
        Some(accepts_images) => ImageRoute::Model {
            model: model.to_owned(),
            accepts_images,
        },
    }
}

impl Harness {
    /// Whether `model` on `provider` declares image input; `None` when the route cannot be
    /// resolved (a provider this harness has no adapter for, or a model it knows nothing of).
    pub fn accepts_images(&self, provider: &str, model: &str) -> Option<bool> {
        if provider != self.adapter.provider() {
            return None;
        }
        let info = self.adapter.model_info(model)?;
        Some(info.input_modalities.iter().any(|m| m == "image"))
    }

    /// MCP image results become attachments when a store is mounted and the configured model
    /// takes images.
    pub(crate) fn mcp_options(&self) -> dsh_mcp::McpOptions {
        let (provider, model) = (&self.settings.provider, &self.settings.model);
        let accepts = self.accepts_images(provider, model).unwrap_or(false);
        dsh_mcp::McpOptions {
            images: self
                .attachments
                .as_ref()
                .map(|attachments| attachments.mcp_support(accepts)),
            startup_budget: None,
            roots: Vec::new(),
        }
    }
}

/// The mounted store, with the glue each consumer needs.
#[derive(Debug, Clone)]
pub struct Attachments {
    pub store: Arc<LocalAttachmentStore>,
}

impl Attachments {
    /// The store under `$DSH_HOME/attachments`, or `None` when the plugin is disabled.
    pub fn mount(config: &Config) -> anyhow::Result<Option<Self>> {
        if !config.plugin_enabled("attachments", true)? {
            return Ok(None);
        }
        let _: AttachmentSettings = serde_json::from_value(config.plugin_settings("attachments"))
            .context("invalid [plugins.attachments] settings")?;
        Ok(Some(Self {
            store: Arc::new(LocalAttachmentStore::under_home(&config.home)),
        }))
    }

    pub fn fs_support(&self, route: ImageRoute) -> dsh_tool_fs::read_image::ImageSupport {
        dsh_tool_fs::read_image::ImageSupport {
            store: self.store.clone(),
            accepted_media_types: self.store.accepted_media_types(),
            route,
        }
    }

    pub fn mcp_support(&self, accepts_images: bool) -> dsh_mcp::ImageSupport {
        dsh_mcp::ImageSupport {
            store: self.store.clone(),
            accepted_media_types: self.store.accepted_media_types(),
            accepts_images: Arc::new(move || accepts_images),
        }
    }

    pub fn prompt_store(&self) -> Arc<dyn PromptImageStore> {
        Arc::new(PromptImages(self.store.clone()))
    }
}

/// The ACP bridge's prompt-image seam over the local store.
struct PromptImages(Arc<LocalAttachmentStore>);

impl PromptImageStore for PromptImages {
    fn accepted_media_types(&self) -> Vec<String> {
        self.0.accepted_media_types()
    }

    fn save_images(&self, batch: &[PromptImage]) -> Result<Vec<ImageAttachment>, ImageStoreError> {
        let records = batch
            .iter()
            .map(|image| self.0.describe(&image.bytes, Some(&image.media_type), None))
            .collect::<Result<Vec<_>, _>>()
            .map_err(store_error)?;
        let pairs: Vec<(ImageAttachment, &[u8])> = records
            .iter()
            .cloned()
            .zip(batch.iter().map(|image| image.bytes.as_slice()))
            .collect();
        self.0.save_images(&pairs).map_err(store_error)?;
        Ok(records)
    }

    fn load_image(&self, attachment: &ImageAttachment) -> Result<Vec<u8>, String> {
        self.0.load(attachment).map_err(|e| e.to_string())
    }
}

fn store_error(error: AttachmentError) -> ImageStoreError {
    if error.is_rejection() {
        ImageStoreError::Rejected(error.to_string())
    } else {
        ImageStoreError::Failed(error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn config_in(dir: &tempfile::TempDir, toml: &str) -> Config {
        std::fs::create_dir_all(dir.path().join(".dsh")).unwrap();
        std::fs::write(dir.path().join(".dsh/config.toml"), toml).unwrap();
        let home = dir.path().join("home");
        Config::load_in(home, dir.path(), &crate::config::Overrides::default()).unwrap()
    }

    fn config(toml: &str) -> Config {
        config_in(&tempfile::tempdir().unwrap(), toml)
    }

    #[test]
    fn the_catalog_overlays_the_builtin_models() {
        let config = config(
            r#"
[[model.catalog]]
id = "deepseek-v4-flash-vision-exp"
input = ["text", "image"]

[[model.catalog]]
id = "deepseek-v4-pro"
name = "Pro"
max_tokens = 1000
"#,
        );
        let entries = catalog(&config).unwrap();
        let mut models = dsh_llm::DeepSeekConfig::default().models;
        apply_catalog(&mut models, &entries);
        let facts: Vec<(&str, Vec<String>, Option<u32>)> = models
            .iter()
            .map(|m| (m.id.as_str(), m.input_modalities.clone(), m.max_tokens))
            .collect();
        assert_eq!(
            facts,
            vec![
                ("deepseek-v4-flash", vec!["text".to_owned()], None),
                ("deepseek-v4-pro", vec!["text".to_owned()], Some(1000)),
                (
                    "deepseek-v4-flash-vision-exp",
                    vec!["text".to_owned(), "image".to_owned()],
                    None
                ),
            ]
        );
    }

    #[test]
    fn bad_catalog_and_attachment_settings_fail_at_load() {
        let bad = config("[[model.catalog]]\nid = \"x\"\ninput = [\"audio\"]\n");
        assert!(
            catalog(&bad)
                .unwrap_err()
                .to_string()
                .contains("input must list text and/or image")
        );
        let typo = config("[[model.catalog]]\nid = \"x\"\ninputs = [\"text\"]\n");
        assert!(catalog(&typo).is_err());
        let off = config("[plugins.attachments]\nenabled = false\n");
        assert!(Attachments::mount(&off).unwrap().is_none());
        let unknown = config("[plugins.attachments]\nroot = \"/x\"\n");
        assert!(Attachments::mount(&unknown).is_err());
    }

    #[test]
    fn prompt_images_are_stored_and_refusals_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let config = config_in(&dir, "");
        let attachments = Attachments::mount(&config).unwrap().unwrap();
        let store = attachments.prompt_store();
        let png = dsh_tools::sniff_image(&RED_PNG).map(|(m, _, _)| m);
        assert_eq!(png, Some("image/png"));
        let records = store
            .save_images(&[PromptImage {
                media_type: "image/png".into(),
                bytes: RED_PNG.to_vec(),
            }])
            .unwrap();
        assert_eq!(records[0].bytes, 69);
        assert_eq!(attachments.store.load(&records[0]).unwrap(), RED_PNG);
        let refused = store
            .save_images(&[PromptImage {
                media_type: "image/png".into(),
                bytes: b"not an image".to_vec(),
            }])
            .unwrap_err();
        assert_eq!(
            refused,
            ImageStoreError::Rejected("image bytes are not PNG/JPEG/WebP/GIF".into())
        );
    }

    const RED_PNG: [u8; 69] = [
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90,
        0x77, 0x53, 0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8,
        0xcf, 0xc0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef, 0x00, 0x00, 0x00,
        0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];
}
