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
mod state;
pub mod tool;

pub use state::DEFAULT_SECTION;
pub use state::PlanMode;
pub use state::PlanModeConfig;
pub use state::SetOutcome;
pub use state::fold_plan;
pub use state::install;
pub use state::narration;

/// The section id and slot (upstream order 50).
pub const SECTION: (&str, dsh_agent::prompt::Slot) =
    ("plan:policy", dsh_agent::prompt::Slot::Policy);
/// The narration's plugin name.
pub const PLUGIN: &str = "plan-mode";
