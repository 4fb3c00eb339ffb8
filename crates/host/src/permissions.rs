//! `[plugins.sandbox]` and `[plugins.approval]`: the permissions new sessions start with, the
//! runtime-context sections that tell the model about them, and re-applying them to live
//! sessions that follow the configuration.

use dsh_kernel::Scope;
use dsh_plugin::ApprovalPolicy;
use dsh_plugin::DefaultPermissions;
use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Permissions;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_plugin::SandboxMode;
use dsh_plugin::Section;
use dsh_plugin::SessionContext;
use dsh_plugin::Slot;
use serde::Deserialize;
use serde::Serialize;

/// `[plugins.sandbox]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSettings {
    /// `read-only`, `workspace-write` or `danger-full-access`.
    #[serde(default = "default_mode")]
    pub mode: SandboxMode,
    /// Network of confined commands under `workspace-write`: `allow` or `deny`. `read-only`
    /// never has the network.
    #[serde(default)]
    pub network: dsh_tools::NetworkAccess,
}

fn default_mode() -> SandboxMode {
    SandboxMode::WorkspaceWrite
}

impl Default for SandboxSettings {
    fn default() -> Self {
        Self {
            mode: default_mode(),
            network: dsh_tools::NetworkAccess::default(),
        }
    }
}

/// The standing sandbox mode of new sessions (read by [`ApprovalPlugin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxDefault(pub SandboxMode);

/// The sandbox mode and its `sandbox:policy` runtime context.
#[derive(Debug, Default)]
pub struct SandboxPlugin;

impl Plugin for SandboxPlugin {
    type Config = SandboxSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, config: SandboxSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        ctx.provide(std::sync::Arc::new(SandboxDefault(config.mode)))?;
        ctx.provide(std::sync::Arc::new(dsh_plugin::SandboxNetwork(
            config.network,
        )))?;
        host.prompts.register_context(
            ctx,
            Section::dynamic("sandbox:policy", Slot::Sandbox, |agent| {
                SessionContext::of(agent)
                    .map(|session| dsh_tool_fs::session_policy(&session, None).policy_text())
                    .unwrap_or_default()
            }),
        );
        Ok(())
    }
}

impl HostPlugin for SandboxPlugin {
    const NAME: &'static str = "sandbox";
}

/// `[plugins.approval]`
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalSettings {
    /// `ask` or `never`; default: `never` under danger-full-access, else `ask`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<ApprovalPolicy>,
}

/// The approval policy, the combined default permissions and the `approval:policy` runtime
/// context. (Live sessions that follow the configuration are moved to new defaults by the
/// host after a reload: see `Host::reload`.)
#[derive(Debug, Default)]
pub struct ApprovalPlugin;

impl Plugin for ApprovalPlugin {
    type Config = ApprovalSettings;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, config: ApprovalSettings) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        let sandbox = ctx
            .service::<SandboxDefault>()
            .map_or(SandboxMode::WorkspaceWrite, |mode| mode.0);
        let permissions = Permissions {
            sandbox,
            approval: config
                .policy
                .unwrap_or_else(|| ApprovalPolicy::default_for(sandbox)),
        };
        ctx.provide(std::sync::Arc::new(DefaultPermissions(permissions)))?;
        host.prompts.register_context(
            ctx,
            Section::dynamic("approval:policy", Slot::Approval, |agent| {
                SessionContext::of(agent)
                    .map(|session| dsh_plugin::approval_text(session.permissions().approval))
                    .unwrap_or_default()
                    .to_owned()
            }),
        );
        Ok(())
    }
}

impl HostPlugin for ApprovalPlugin {
    const NAME: &'static str = "approval";
    const USES: &'static [&'static str] = &["sandbox"];
}
