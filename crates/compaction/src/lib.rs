//! `dsh-compaction`: keeping a long session inside the model's context window (context-spec §8).
//!
//! Owns: the durable vocabulary (`compaction/start|summary|end|prune`), the one transaction
//! every entry point uses (validate a tool-pairing-balanced span, take the log-based lock,
//! summarize through a side request, frame the exact checkpoint, re-check stability, commit
//! three contiguous appends), range selection, the summarization request, the tool-result
//! pruner, the automatic triggers (pressure before a step, recovery from a context-length
//! refusal) and `/compact`'s texts. Every decision reads the log (and the token meter's fold
//! of it), so resume and fork see the same state.
//! Must not depend on: front-ends, concrete tools, a wire format (summaries go through the
//! `ModelAdapter` seam).

mod checkpoint;
mod command;
mod config;
mod error;
mod notice;
mod pairing;
mod plugin;
mod pruner;
mod range;
mod service;
mod summarizer;
mod triggers;
mod vocabulary;

pub use checkpoint::CHECKPOINT_PLUGIN;
pub use checkpoint::PREAMBLE;
pub use checkpoint::SUMMARY_CLOSE;
pub use checkpoint::SUMMARY_OPEN;
pub use checkpoint::checkpoint_message;
pub use checkpoint::checkpoint_source;
pub use checkpoint::is_checkpoint_source;
pub use command::COMPACT_DESCRIPTION;
pub use command::COMPACT_NAME;
pub use command::CompactReply;
pub use command::register_compact;
pub use command::run_compact;
pub use config::BasicCompactionConfig;
pub use config::ConfigError;
pub use config::Policy;
pub use config::Retention;
pub use config::ToolResultPruneConfig;
pub use error::CompactionError;
pub use error::ManualCode;
pub use error::ManualCompactionError;
pub use notice::compaction_notice;
pub use pairing::PairingError;
pub use pairing::PairingView;
pub use plugin::CompactionPlugin;
pub use plugin::CompactionSettings;
pub use plugin::PrunerSettings;
pub use plugin::ToolResultPrunerPlugin;
pub use pruner::PRUNE_MARKER;
pub use pruner::prune_content;
pub use pruner::prune_session;
pub use range::select_compactable_range;
pub use service::Compaction;
pub use service::CompactionResult;
pub use service::ModelRoutes;
pub use service::Trigger;
pub use service::latest_header;
pub use summarizer::COMPACTION_INSTRUCTION;
pub use summarizer::INSTRUCTION_PLUGIN;
pub use summarizer::SUMMARY_SECTIONS;
pub use summarizer::SummaryError;
pub use triggers::CONTEXT_WINDOW_EXCEEDED;
pub use triggers::install_triggers;
pub use vocabulary::COMPACTION_END;
pub use vocabulary::COMPACTION_PRUNE;
pub use vocabulary::COMPACTION_START;
pub use vocabulary::COMPACTION_SUMMARY;
pub use vocabulary::CompactionEnd;
pub use vocabulary::CompactionPrune;
pub use vocabulary::CompactionStart;
pub use vocabulary::CompactionSummary;
pub use vocabulary::ShadowedRange;
