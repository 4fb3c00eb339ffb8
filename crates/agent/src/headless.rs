//! The headless one-shot runner's core (§7.2 steps 3–4): send one task, wait, fold the result.

use dsh_protocol::Message;
use dsh_session::data::AssistantMessage;
use dsh_session::data::TurnEnd;
use dsh_session::data::TurnEndReason;
use dsh_session::kind;

use crate::agent::AgentHandle;
use crate::error::AgentError;

/// What one headless run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The last non-empty text (text blocks joined without separator) of any assistant message.
    pub text: String,
    /// The last `turn/end` reason; `None` when no turn ran.
    pub reason: Option<TurnEndReason>,
    pub session_id: String,
}

impl RunOutcome {
    /// Exit status rule: success iff the last turn ended `completed`.
    pub fn succeeded(&self) -> bool {
        self.reason == Some(TurnEndReason::Completed)
    }
}

/// Waits for idle, sends `task` as a user followup, waits again, flushes, and folds the events
/// written since (from the first `turn/start` on). The agent stays open for more input.
pub async fn run_once(handle: &AgentHandle, task: &str) -> Result<RunOutcome, AgentError> {
    run(handle, task, false).await
}

/// The one-shot runner (`dsh exec`): like [`run_once`], but the task is the agent's final
/// input ([`AgentHandle::followup_final`]). Upstream's runner is done at the first idle after
/// its task and exits; whatever a plugin would start at that idle (a goal round, a
/// background-job notice) could only be cut off by the exit. Closing the input in the same
/// step that makes the agent idle means such work never starts, so the run's requests and
/// events end with the task's turn, every time.
pub async fn run_final(handle: &AgentHandle, task: &str) -> Result<RunOutcome, AgentError> {
    run(handle, task, true).await
}

async fn run(handle: &AgentHandle, task: &str, last: bool) -> Result<RunOutcome, AgentError> {
    handle.when_idle().await;
    let log = handle.log();
    let first_seq = log.len();
    let message = Message::user_text(task);
    if last {
        handle.followup_final(message)?;
    } else {
        handle.followup(message)?;
    }
    handle.when_idle().await;
    log.sync().await?;
    let mut text = String::new();
    let mut reason = None;
    let mut in_run = false;
    // A long run is read back a window at a time, never held whole.
    log.visit_since(first_seq, |event| {
        in_run |= event.kind == kind::TURN_START;
        if !in_run {
            return;
        }
        if let Some(Ok(message)) = event.decode::<AssistantMessage>() {
            let joined = dsh_protocol::text_of(&message.message.content);
            if !joined.is_empty() {
                text = joined;
            }
        } else if let Some(Ok(end)) = event.decode::<TurnEnd>() {
            reason = Some(end.reason);
        }
    })?;
    Ok(RunOutcome {
        text,
        reason,
        session_id: log.id().to_owned(),
    })
}
