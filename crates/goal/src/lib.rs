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
