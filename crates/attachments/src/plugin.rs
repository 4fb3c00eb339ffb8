//! `[plugins.attachments]`: the store under `$DSH_HOME/attachments`, provided as a service
//! (`read_image`, MCP image results, the model adapter's resolver and ACP prompt images use it).

use std::sync::Arc;

use dsh_kernel::Scope;
use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use serde::Deserialize;
use serde::Serialize;

use crate::LocalAttachmentStore;

/// `[plugins.attachments]` (only `enabled` for now; the table is still checked for typos).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttachmentSettings {}

/// Provides the [`LocalAttachmentStore`] (also as `dyn dsh_tools::AttachmentStore` and
/// `dyn dsh_llm::AttachmentResolver`).
#[derive(Debug, Default)]
pub struct AttachmentsPlugin;

impl Plugin for AttachmentsPlugin {
    type Config = AttachmentSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, _config: AttachmentSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let store = Arc::new(LocalAttachmentStore::under_home(&host.info.home));
        ctx.provide(store.clone())?;
        ctx.provide::<dyn dsh_tools::AttachmentStore>(store.clone())?;
        ctx.provide::<dyn dsh_llm::AttachmentResolver>(store)?;
        Ok(())
    }
}

impl HostPlugin for AttachmentsPlugin {
    const NAME: &'static str = "attachments";
}
