//! `dsh-plan-mode`: plan mode (upstream `plan-mode`).
//!
//! Owns: the durable `plan/mode {active}` state (a fold over the log, so resume, fork and
//! compaction recover it), pending selections made while a turn runs (applied at the next
//! pre-step), the switch narration, the `plan:policy` system-prompt section (order 50, empty
//! when inactive — the tool list never changes), the `exit_plan_mode` tool with its review
//! through the user-questions seam, and `/plan`'s texts.
//! Plan mode is guidance only: nothing is filtered or enforced.
//! Must not depend on: front-ends.

pub mod command;
pub mod modes;
mod state;
pub mod tool;

pub use state::DEFAULT_SECTION;
pub use state::PlanMode;
pub use state::PlanModeConfig;
pub use state::PlanModeConfigError;
pub use state::SetOutcome;
pub use state::fold_plan;
pub use state::install;
pub use state::narration;

/// The section id and slot (upstream order 50).
pub const SECTION: (&str, dsh_agent::prompt::Slot) =
    ("plan:policy", dsh_agent::prompt::Slot::Policy);
/// The narration's plugin name.
pub const PLUGIN: &str = "plan-mode";

/// `[plugins.plan-mode]`: `section` replaces the shipped guidance (non-empty).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanModeSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
}

/// Plan mode as a host plugin: the service, the section, `exit_plan_mode`, `/plan`.
#[derive(Debug, Default)]
pub struct PlanModePlugin;

impl dsh_plugin::Plugin for PlanModePlugin {
    type Config = PlanModeSettings;

    fn name(&self) -> &str {
        <Self as dsh_plugin::HostPlugin>::NAME
    }

    fn apply(
        &self,
        ctx: &dsh_kernel::Scope,
        config: PlanModeSettings,
    ) -> Result<(), dsh_plugin::PluginError> {
        let config = match config.section {
            Some(section) => PlanModeConfig::from_json(&serde_json::json!({ "section": section }))
                .map_err(|e| dsh_plugin::PluginError::msg(e.to_string()))?,
            None => PlanModeConfig::default(),
        };
        let host = dsh_plugin::HostServices::of(ctx)?;
        let plan = std::sync::Arc::new(PlanMode::new(config));
        ctx.provide(plan.clone())?;
        ctx.provide::<dyn dsh_plugin::ModeAxis>(plan.clone())?;
        install(&plan, &host.hooks, &host.prompts, ctx);
        host.presenters
            .register(ctx, "plan/mode", modes::present)
            .map_err(dsh_plugin::PluginError::other)?;
        let definition = tool::definition(plan.clone()).map_err(dsh_plugin::PluginError::other)?;
        host.tools
            .register(ctx, definition)
            .map_err(dsh_plugin::PluginError::other)?;
        if let Some(commands) = dsh_commands::CommandRegistry::of(ctx) {
            command::register(&commands, ctx, plan).map_err(dsh_plugin::PluginError::other)?;
        }
        Ok(())
    }
}

impl dsh_plugin::HostPlugin for PlanModePlugin {
    const NAME: &'static str = "plan-mode";
    const EVENT_KINDS: &'static [&'static str] = &["plan/mode"];
    // On like upstream's base bundle: `/plan`, the ACP `+plan` modes and `exit_plan_mode`.
    const ENABLED_BY_DEFAULT: bool = true;
}
