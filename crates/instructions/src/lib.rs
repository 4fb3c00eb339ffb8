//! `dsh-instructions`: workspace instructions (`AGENTS.md`, `CLAUDE.md`, local overlays;
//! context-spec §2).
//!
//! Owns: discovery (user-global file, project root by marker, root → cwd chain, nested
//! directories touched by file tools), the exact model-visible rendering with its byte budget,
//! the baseline lifecycle (first step, replacement on a changed identity, reconciliation on
//! resume, re-recording after compaction shadows it), refresh deltas through the next-step
//! inbox, and the per-session version cache. The only durable record is the logged
//! `user/message` and its typed `source.changes`.
//! Must not depend on: front-ends, concrete file tools (it observes results by tool name and
//! reads through its own [`InstructionFs`] seam).

mod compose;
mod config;
mod fs;
mod layout;
mod plugin;
mod render;
mod service;

pub use compose::Action;
pub use compose::Cache;
pub use compose::Cached;
pub use compose::Change;
pub use compose::Composer;
pub use compose::SOURCE_KIND;
pub use compose::baseline_identity;
pub use compose::instruction_message;
pub use compose::is_instructions;
pub use compose::merge;
pub use config::ConfigError;
pub use config::DshHome;
pub use config::Environment;
pub use config::InstructionsConfig;
pub use fs::FileVersion;
pub use fs::InstructionFs;
pub use fs::LocalFs;
pub use fs::Probe;
pub use fs::ReadOutcome;
pub use fs::sha1_hex;
pub use layout::Candidate;
pub use layout::Layout;
pub use layout::USER_GLOBAL;
pub use plugin::InstructionsSettings;
pub use plugin::PolicyFs;
pub use plugin::WorkspaceInstructionsPlugin;
pub use render::COMPACT_INTRO;
pub use render::EMPTY_REPLACEMENT_INTRO;
pub use render::INTRO;
pub use render::REPLACEMENT_PREFIX;
pub use render::Rendered;
pub use render::Section;
pub use render::frame;
pub use render::render;
pub use render::replacement_intro;
pub use service::FsProvider;
pub use service::TOUCHING_TOOLS;
pub use service::WorkspaceInstructions;
pub use service::same_fs;
