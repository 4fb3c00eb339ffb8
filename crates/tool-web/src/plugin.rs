//! `[plugins.web]`: `web_fetch` and its prompt guidance for every session.

use dsh_kernel::Scope;
use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_plugin::Section;
use dsh_plugin::Slot;
use serde::Deserialize;
use serde::Serialize;

/// `[plugins.web]` (only `enabled` for now; the table is still checked for typos).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSettings {}

/// The `web_fetch` plugin.
#[derive(Debug, Default)]
pub struct WebPlugin;

impl Plugin for WebPlugin {
    type Config = WebSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, _config: WebSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        crate::register(&host.tools, ctx).map_err(PluginError::other)?;
        host.prompts.register_section(
            ctx,
            Section::new(crate::SECTION, Slot::Tools, crate::SECTION_TEXT),
        );
        Ok(())
    }
}

impl HostPlugin for WebPlugin {
    const NAME: &'static str = "web";
}
