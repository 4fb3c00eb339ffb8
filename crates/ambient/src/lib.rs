//! `dsh-ambient`: readings of the user's surroundings that the model cannot see otherwise —
//! the time (context-spec §5) and the tmux location (§6).
//!
//! Owns: both pre-step producers, their exact texts and sources, their refresh scheduling
//! (pure folds over the log, shadowed readings included), and the shell seam the tmux query
//! runs through (a harness-owned script, never model-written).
//! Must not depend on: front-ends, tools.

mod plugin;
mod time;
mod tmux;

pub use plugin::TimeContextPlugin;
pub use plugin::TimeContextSettings;
pub use plugin::TmuxContextPlugin;
pub use plugin::TmuxContextSettings;

pub use time::Clock;
pub use time::TIME_PLUGIN;
pub use time::TimeContext;
pub use time::TimeContextConfig;
pub use time::TimeContextError;
pub use time::format_elapsed;
pub use time::format_timestamp;
pub use time::parse_interval;
pub use tmux::LocalShell;
pub use tmux::ShellExecutor;
pub use tmux::ShellOutput;
pub use tmux::TMUX_PLUGIN;
pub use tmux::TmuxContext;
pub use tmux::location_script;
pub use tmux::parse_location;
pub use tmux::parse_tmux_config;
