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

/// `[plugins.web]`: which addresses `web_fetch` may reach besides public ones. Both widen
/// what the model can reach, so a project's own configuration cannot set them until the folder
/// is trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSettings {
    /// Fetch any address: loopback, private networks, link-local, metadata endpoints.
    #[serde(default)]
    pub allow_private: bool,
    /// Hosts (as written in a URL: `localhost`, `intranet.example`, `10.0.0.5`, `[::1]`)
    /// fetched whatever they resolve to.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
}

/// The `web_fetch` plugin.
#[derive(Debug, Default)]
pub struct WebPlugin;

impl Plugin for WebPlugin {
    type Config = WebSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, config: WebSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let policy = crate::AddressPolicy {
            allow_private: config.allow_private,
            allow_hosts: config.allow_hosts,
        };
        crate::register(&host.tools, ctx, policy).map_err(PluginError::other)?;
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
