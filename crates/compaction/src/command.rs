//! `/compact` (§8.10): the command's name, description and result texts. The handler runs
//! [`Compaction::compact_now`] and maps its outcome; the command registry logs
//! `command/run` / `command/done` around it.

use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_commands::CommandCall;
use dsh_commands::CommandError;
use dsh_commands::CommandRegistry;
use dsh_commands::CommandResult;
use dsh_commands::CommandSpec;
use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use tokio_util::sync::CancellationToken;

use crate::error::ManualCode;
use crate::service::Compaction;

pub const COMPACT_NAME: &str = "compact";
pub const COMPACT_DESCRIPTION: &str = "Compact older conversation history";

pub const USAGE: &str = "Usage: /compact (no arguments)";
pub const NOTHING: &str = "No compactable history yet.";
pub const BUSY: &str = "Compaction is unavailable because this process has an active compaction, or the agent is not idle.";
pub const CANCELLED: &str = "Compaction cancelled.";
pub const CHANGED: &str = "The history selected for compaction changed before it could be replaced. The conversation is unchanged; the attempt is recorded in the session log.";
pub const SUMMARY: &str = "Compaction could not produce a useful summary. The conversation is unchanged; the attempt is recorded in the session log.";
pub const COMMIT: &str = "Compaction did not finish cleanly; some session history may have changed. Inspect the current session state before retrying.";
pub const PERSISTENCE: &str = "Compaction finished, but the session could not be saved.";

/// A command result (never model-visible).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactReply {
    pub success: bool,
    pub text: String,
    /// The `compaction/summary` seq of a successful run.
    pub source_event_seq: Option<u64>,
}

impl CompactReply {
    fn error(text: &str) -> Self {
        Self {
            success: false,
            text: text.to_owned(),
            source_event_seq: None,
        }
    }
}

/// Runs `/compact <args>` for `agent`. `command_id` becomes the bracket's `sourceCommandId`.
pub async fn run_compact(
    compaction: &Compaction,
    agent: &AgentHandle,
    args: &str,
    command_id: Option<String>,
    signal: &CancellationToken,
) -> CompactReply {
    if !args.trim().is_empty() {
        return CompactReply::error(USAGE);
    }
    let outcome = compaction.compact_now(agent, signal, command_id).await;
    if signal.is_cancelled() && !matches!(outcome, Ok(Some(_))) {
        return CompactReply::error(CANCELLED);
    }
    match outcome {
        Ok(None) => CompactReply {
            success: true,
            text: NOTHING.to_owned(),
            source_event_seq: None,
        },
        Ok(Some(result)) => CompactReply {
            success: true,
            text: format!(
                "Compacted {} history items (~{} tokens).",
                result.shadowed_seqs.len(),
                result.shadowed_token_count
            ),
            source_event_seq: Some(result.summary_seq),
        },
        Err(error) => CompactReply::error(match error.code {
            ManualCode::Busy => BUSY,
            ManualCode::Cancelled => CANCELLED,
            ManualCode::Changed => CHANGED,
            ManualCode::Summary => SUMMARY,
            ManualCode::Commit => COMMIT,
            ManualCode::Persistence => PERSISTENCE,
        }),
    }
}

/// Registers `/compact` (no input, no images) in `registry`, visible from `scope`'s level.
pub fn register_compact(
    registry: &CommandRegistry,
    scope: &Scope,
    compaction: Arc<Compaction>,
) -> Result<Disposer, CommandError> {
    let handler = move |call: CommandCall| {
        let compaction = compaction.clone();
        async move {
            let reply = run_compact(
                &compaction,
                &call.agent,
                &call.raw_input,
                Some(call.command_id.clone()),
                &call.signal,
            )
            .await;
            Ok(if reply.success {
                CommandResult::Success {
                    text: Some(reply.text),
                    source_event_seq: reply.source_event_seq,
                }
            } else {
                CommandResult::error(reply.text)
            })
        }
    };
    registry.register(
        scope,
        CommandSpec::new(COMPACT_NAME, COMPACT_DESCRIPTION, handler),
    )
}
