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
    /// Processes (threads count) one confined command may run at once.
    #[serde(default = "default_max_processes")]
    pub max_processes: u64,
    /// Memory one process of a confined command may allocate, in MiB.
    #[serde(default = "default_max_memory_mb")]
    pub max_memory_mb: u64,
    /// Size of a confined command's private `/tmp`, in MiB.
    #[serde(default = "default_tmp_size_mb")]
    pub tmp_size_mb: u64,
}

fn default_mode() -> SandboxMode {
    SandboxMode::WorkspaceWrite
}

fn default_max_processes() -> u64 {
    dsh_tools::SandboxLimits::DEFAULT_MAX_PROCESSES
}

fn default_max_memory_mb() -> u64 {
    dsh_tools::SandboxLimits::DEFAULT_MAX_MEMORY_MB
}

fn default_tmp_size_mb() -> u64 {
    dsh_tools::SandboxLimits::DEFAULT_TMP_SIZE_MB
}

/// The smallest values that still start a shell under bubblewrap.
const LIMIT_FLOORS: [(&str, u64); 3] = [
    ("max_processes", 8),
    ("max_memory_mb", 16),
    ("tmp_size_mb", 1),
];

impl SandboxSettings {
    /// The limits, or an error naming the setting below its floor.
    pub fn limits(&self) -> Result<dsh_tools::SandboxLimits, PluginError> {
        let values = [self.max_processes, self.max_memory_mb, self.tmp_size_mb];
        for ((name, floor), value) in LIMIT_FLOORS.iter().zip(values) {
            if value < *floor {
                return Err(PluginError::msg(format!(
                    "[plugins.sandbox] {name} = {value} is too small: a confined command needs at least {floor}; raise it or remove the setting for the default"
                )));
            }
        }
        Ok(dsh_tools::SandboxLimits {
            max_processes: self.max_processes,
            max_memory_mb: self.max_memory_mb,
            tmp_size_mb: self.tmp_size_mb,
        })
    }
}

impl Default for SandboxSettings {
    fn default() -> Self {
        Self {
            mode: default_mode(),
            network: dsh_tools::NetworkAccess::default(),
            max_processes: default_max_processes(),
            max_memory_mb: default_max_memory_mb(),
            tmp_size_mb: default_tmp_size_mb(),
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
        ctx.provide(std::sync::Arc::new(dsh_plugin::SandboxLimits(
            config.limits()?,
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
