//! The bridges as host plugins: `[plugins.hooks-claude-code]` and `[plugins.hooks-codex]`.

use std::path::PathBuf;
use std::sync::Arc;

use crate::BridgeSettings;
use crate::Confiner;
use crate::Dialect;
use crate::HookBridge;
use crate::LocalExecutor;

/// `[plugins.hooks-claude-code]` and `[plugins.hooks-codex]` (upstream's camelCase keys in
/// snake_case). Absent `config_path` = the bridge is off.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksSettings {
    /// The hook file, read when the plugin applies; a relative path resolves against the
    /// launch directory. A file that cannot be loaded is a warning and no hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_path: Option<PathBuf>,
    /// Claude Code: replaces `${CLAUDE_PLUGIN_ROOT}` in commands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_root: Option<String>,
    /// Claude Code: replaces `${CLAUDE_PROJECT_DIR}`; hooks' `CLAUDE_PROJECT_DIR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_dir: Option<String>,
    /// Codex: the `model` stamped on payloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Timeout of a hook that sets none (default 600 000 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_timeout_ms: Option<f64>,
    /// Cap of `hook/result.stderrSummary` (default 500; a positive integer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_summary_max_chars: Option<f64>,
}

/// One hook bridge as a plugin; `D` picks the dialect.
#[derive(Debug, Default)]
pub struct HooksPlugin<D: DialectMarker>(std::marker::PhantomData<D>);

/// Type-level dialect of a [`HooksPlugin`].
pub trait DialectMarker: Default + Send + Sync + 'static {
    const DIALECT: Dialect;
    const NAME: &'static str;
}

/// The Claude Code bridge.
#[derive(Debug, Default)]
pub struct ClaudeCode;

/// The Codex bridge.
#[derive(Debug, Default)]
pub struct Codex;

impl DialectMarker for ClaudeCode {
    const DIALECT: Dialect = Dialect::ClaudeCode;
    const NAME: &'static str = "hooks-claude-code";
}

impl DialectMarker for Codex {
    const DIALECT: Dialect = Dialect::Codex;
    const NAME: &'static str = "hooks-codex";
}

impl<D: DialectMarker> dsh_plugin::Plugin for HooksPlugin<D> {
    type Config = HooksSettings;

    fn name(&self) -> &str {
        D::NAME
    }

    fn apply(
        &self,
        ctx: &dsh_kernel::Scope,
        config: HooksSettings,
    ) -> Result<(), dsh_plugin::PluginError> {
        let Some(path) = config.config_path else {
            return Ok(());
        };
        let host = dsh_plugin::HostServices::of(ctx)?;
        let mut settings = BridgeSettings::new(path.to_string_lossy());
        settings.base_dir = Some(host.info.launch_cwd.clone());
        settings.plugin_root = config.plugin_root;
        settings.project_dir = config.project_dir;
        settings.model = config.model.unwrap_or_default();
        if let Some(ms) = config.default_timeout_ms {
            settings.default_timeout_ms = ms;
        }
        if let Some(cap) = config.stderr_summary_max_chars {
            settings.stderr_summary_max_chars = cap;
        }
        // Hooks run under the sandbox `bash` gets in the calling session (§A.4).
        let permissions = ctx.service::<dsh_plugin::DefaultPermissions>().map_or_else(
            || dsh_plugin::Permissions::for_mode(dsh_plugin::SandboxMode::WorkspaceWrite),
            |p| p.0,
        );
        let mut sandbox = dsh_tool_shell::SandboxConfig::new(permissions.sandbox);
        if let Some(network) = ctx.service::<dsh_plugin::SandboxNetwork>() {
            sandbox.network = network.0;
        }
        if let Some(limits) = ctx.service::<dsh_plugin::SandboxLimits>() {
            sandbox.limits = limits.0;
        }
        let confiner = session_confiner(sandbox, Some(host.info.home.clone()));
        let executor = Arc::new(LocalExecutor::with_shared_filter().with_confiner(confiner));
        let loaded = HookBridge::load(D::DIALECT, settings, executor, None)
            .map_err(|e| dsh_plugin::PluginError::msg(e.to_string()))?;
        if let Some(bridge) = loaded.bridge {
            bridge.install(ctx, &host.tools, &host.hooks);
            if D::DIALECT == Dialect::ClaudeCode {
                // The subagent runtime finds the bridge here for SubagentStart / SubagentStop.
                ctx.provide(bridge)
                    .map_err(dsh_plugin::PluginError::other)?;
            }
        }
        Ok(())
    }
}

impl<D: DialectMarker> dsh_plugin::HostPlugin for HooksPlugin<D> {
    const NAME: &'static str = D::NAME;
    const EVENT_KINDS: &'static [&'static str] = &["hook/invoked", "hook/result"];
}

/// The confinement of a hook run: the calling session's live sandbox mode over its workspace
/// (the policy `bash` builds for that session: dsh's home `home` hidden, its skills and the
/// session's log readable); without a session, the standing mode over the hook's cwd.
/// `danger-full-access` runs unconfined.
pub fn session_confiner(
    standing: dsh_tool_shell::SandboxConfig,
    home: Option<PathBuf>,
) -> Confiner {
    Arc::new(move |session, cwd| {
        let (mode, root) = match session {
            Some(session) => (session.permissions().sandbox, session.cwd().to_path_buf()),
            None => (standing.mode, cwd.to_path_buf()),
        };
        let mut hidden = Vec::new();
        let mut exposed = Vec::new();
        let mut policy = standing.policy_in(mode, &root);
        if let Some(home) = &home {
            let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.clone());
            exposed.push(home.join("skills"));
            policy = policy.with_lock_dir(home.join(dsh_tool_shell::LOCK_DIR));
            hidden.push(home);
        }
        exposed.extend(session.and_then(dsh_plugin::SessionContext::log_path));
        policy.hiding(hidden).exposing(exposed).wrapper(cwd)
    })
}
