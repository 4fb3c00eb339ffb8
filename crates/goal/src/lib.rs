//! `dsh-goal`: goals (upstream `goal`, `tool-goal`, `goal-round-driver`, `command-goal`).
//!
//! Owns: the goal domain — at most one current goal per session, folded from the log's
//! `goal/change` events and goal-sourced `user/message`s (so resume and fork are correct for
//! free) plus the process-local activation (armed / disarmed); the three model tools
//! (`get_goal`, `create_goal`, `update_goal`) with their authority rules and exact texts; the
//! goal-round driver that queues `<goal_round>` prompts while a goal is active and armed; and
//! the `/goal` command's parsing and texts.
//! Does not own: the command registry (a front-end registers [`command::run`]), how a
//! session's log is stored.
//! Must not depend on: front-ends, concrete tool crates.

pub mod command;
mod domain;
pub mod driver;
pub mod present;
pub mod tools;

pub use domain::Activation;
pub use domain::BlockedReason;
pub use domain::GoalError;
pub use domain::GoalRef;
pub use domain::GoalSnapshot;
pub use domain::GoalState;
pub use domain::Goals;
pub use domain::Phase;
pub use domain::fold_goal;

/// Upstream's `defaultMaxGoalRounds`.
pub const DEFAULT_MAX_GOAL_ROUNDS: u64 = 256;
/// Upstream's `blockedAfterConsecutiveRounds`.
pub const DEFAULT_BLOCKED_AFTER_ROUNDS: u64 = 3;
/// `Number.MAX_SAFE_INTEGER`.
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// `[plugins.goal]` (off by default, like upstream's goal overlay).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalSettings {
    #[serde(default = "default_rounds")]
    pub default_max_goal_rounds: u64,
    #[serde(default = "default_blocked")]
    pub blocked_after_consecutive_rounds: u64,
}

fn default_rounds() -> u64 {
    DEFAULT_MAX_GOAL_ROUNDS
}

fn default_blocked() -> u64 {
    DEFAULT_BLOCKED_AFTER_ROUNDS
}

impl Default for GoalSettings {
    fn default() -> Self {
        Self {
            default_max_goal_rounds: DEFAULT_MAX_GOAL_ROUNDS,
            blocked_after_consecutive_rounds: DEFAULT_BLOCKED_AFTER_ROUNDS,
        }
    }
}

/// Goals as a host plugin: the service, the three tools, the `tool:goal` section, the driver
/// and `/goal`.
#[derive(Debug, Default)]
pub struct GoalPlugin;

impl dsh_plugin::Plugin for GoalPlugin {
    type Config = GoalSettings;

    fn name(&self) -> &str {
        <Self as dsh_plugin::HostPlugin>::NAME
    }

    fn apply(
        &self,
        ctx: &dsh_kernel::Scope,
        config: GoalSettings,
    ) -> Result<(), dsh_plugin::PluginError> {
        let positive = |v: u64, key: &str| {
            if v == 0 || v > MAX_SAFE_INTEGER {
                Err(dsh_plugin::PluginError::msg(format!(
                    "goal: {key} must be a positive safe integer"
                )))
            } else {
                Ok(v)
            }
        };
        let rounds = positive(config.default_max_goal_rounds, "default_max_goal_rounds")?;
        let blocked = positive(
            config.blocked_after_consecutive_rounds,
            "blocked_after_consecutive_rounds",
        )?;
        let host = dsh_plugin::HostServices::of(ctx)?;
        let goals = std::sync::Arc::new(Goals::new(rounds));
        ctx.provide(goals.clone())?;
        let tool_config = tools::GoalToolsConfig {
            blocked_after_rounds: blocked,
        };
        tools::register(&host.tools, ctx, goals.clone(), tool_config)
            .map_err(dsh_plugin::PluginError::other)?;
        host.prompts.register_section(
            ctx,
            dsh_plugin::Section::new(
                tools::SECTION.0,
                tools::SECTION.1,
                tools::section_text(blocked),
            ),
        );
        host.presenters
            .register(ctx, present::KIND, present::present)
            .map_err(dsh_plugin::PluginError::other)?;
        driver::install(&goals, &host.hooks, ctx);
        if let Some(commands) = dsh_commands::CommandRegistry::of(ctx) {
            command::register(&commands, ctx, goals).map_err(dsh_plugin::PluginError::other)?;
        }
        Ok(())
    }
}

impl dsh_plugin::HostPlugin for GoalPlugin {
    const NAME: &'static str = "goal";
    const EVENT_KINDS: &'static [&'static str] = &[present::KIND];
    // On like upstream's base bundle: `/goal` and the goal tools work out of the box.
    const ENABLED_BY_DEFAULT: bool = true;
}
