//! `[plugins.mcp]` with `[[mcp.servers]]`: the configured servers, connected when the plugin
//! applies; their tools live in the plugin's scope, so a reload or unmount removes them.

use std::sync::Arc;

use dsh_attachments::LocalAttachmentStore;
use dsh_kernel::Scope;
use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use serde::Deserialize;
use serde::Serialize;

use crate::McpOptions;
use crate::McpServerConfig;
use crate::error::McpStartError;

/// `[plugins.mcp]`; `servers` are the `[[mcp.servers]]` rows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSettings {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<McpServerConfig>,
}

/// How MCP image results are kept: as attachments when the store is mounted and the host's
/// configured model takes images.
pub fn options(scope: &Scope, host: &HostServices) -> McpOptions {
    let accepts = host
        .accepts_images(&host.info.provider, &host.info.model)
        .unwrap_or(false);
    McpOptions {
        images: scope
            .service::<LocalAttachmentStore>()
            .map(|store| crate::ImageSupport {
                accepted_media_types: store.accepted_media_types(),
                store: store as Arc<dyn dsh_tools::AttachmentStore>,
                accepts_images: Arc::new(move || accepts),
            }),
        startup_budget: None,
        // Configured servers serve every session: the launch folder is their root.
        roots: vec![host.info.launch_cwd.clone()],
        questions: dsh_user_questions::UserQuestions::for_scope(scope),
    }
}

/// `Instructions from MCP server "<name>":` blocks of every connected server visible from
/// `agent` (configured and session servers).
pub fn instructions_text(root: &Scope, agent: &Scope) -> String {
    let mut texts: Vec<String> = Vec::new();
    for servers in [
        root.service::<crate::McpServers>(),
        agent.service::<crate::McpServers>(),
    ]
    .into_iter()
    .flatten()
    {
        for server in &servers.servers {
            if let Some(text) = server.instructions() {
                let block = format!(
                    "Instructions from MCP server \"{}\":\n{}",
                    server.name(),
                    text.trim()
                );
                if !texts.contains(&block) {
                    texts.push(block);
                }
            }
        }
    }
    texts.join("\n\n")
}

/// The MCP client plugin.
#[derive(Debug, Default)]
pub struct McpPlugin;

impl Plugin for McpPlugin {
    type Config = McpSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, config: McpSettings) -> Result<(), PluginError> {
        for server in &config.servers {
            server.validate().map_err(PluginError::other)?;
        }
        // Disabled rows alone mount nothing: no connection task, no prompt section.
        if !config.servers.iter().any(|server| server.enabled) {
            return Ok(());
        }
        let host = HostServices::of(ctx)?;
        let options = options(ctx, &host);
        let task = host.startup.begin(Self::NAME);
        let (scope, registry) = (ctx.clone(), host.tools.clone());
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| PluginError::msg("the MCP plugin needs a tokio runtime"))?;
        let connect = handle.spawn(async move {
            let outcome = crate::mount_servers(&scope, &registry, &config.servers, &options)
                .await
                .map_err(McpStartError::Mount)
                .and_then(|servers| {
                    // Each server's prompts become slash commands once it is connected.
                    if let Some(commands) = dsh_commands::CommandRegistry::of(&scope) {
                        for server in &servers.servers {
                            let task = crate::register_prompt_commands(&commands, server);
                            server.scope().defer(move || task.abort());
                        }
                    }
                    // Front-ends find the servers here (resources for `@server:uri`, prompts).
                    scope
                        .provide(Arc::new(servers))
                        .map(drop)
                        .map_err(McpStartError::Provide)
                });
            task.finish(outcome);
        });
        // The servers' `instructions`, read at each assembly (servers connect late).
        let instructions_root = ctx.clone();
        host.prompts.register_section(
            ctx,
            dsh_plugin::Section::dynamic(
                "mcp:instructions",
                dsh_plugin::Slot::Tools,
                move |agent| instructions_text(&instructions_root, agent),
            ),
        );
        ctx.defer(move || connect.abort());
        Ok(())
    }
}

impl HostPlugin for McpPlugin {
    const NAME: &'static str = "mcp";
    const USES: &'static [&'static str] = &["attachments"];
    const ALSO: &'static [(&'static str, &'static str)] = &[("servers", "mcp.servers")];
}
