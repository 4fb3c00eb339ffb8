//! The inbox (§2.2): two ordered pending lists, a projection of durable `agent/inbox/spliced`
//! events. This type only holds the lists and computes splices; the agent writes each splice
//! to the log before applying it, so the log always leads the live state.

use dsh_protocol::Message;
use dsh_session::SessionLog;
use dsh_session::data::InboxSpliced;
use dsh_session::data::InboxTarget;
use dsh_session::data::SpliceOutcome;

use crate::agent::AgentHandle;
use crate::error::AgentError;
use crate::hooks::AgentEvent;
use dsh_sync::lock;

#[derive(Debug, Default, Clone)]
pub(crate) struct Inbox {
    pub(crate) next_turn: Vec<Message>,
    pub(crate) next_step: Vec<Message>,
}

impl Inbox {
    pub(crate) fn list(&self, target: InboxTarget) -> &Vec<Message> {
        match target {
            InboxTarget::NextTurn => &self.next_turn,
            InboxTarget::NextStep => &self.next_step,
        }
    }

    fn list_mut(&mut self, target: InboxTarget) -> &mut Vec<Message> {
        match target {
            InboxTarget::NextTurn => &mut self.next_turn,
            InboxTarget::NextStep => &mut self.next_step,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.next_turn.is_empty() && self.next_step.is_empty()
    }

    pub(crate) fn contains_id(&self, id: &str) -> bool {
        self.next_turn
            .iter()
            .chain(&self.next_step)
            .any(|m| m.id == id)
    }

    /// The splice that appends `inserted` at the end of `target`.
    pub(crate) fn append_splice(
        &self,
        target: InboxTarget,
        inserted: Vec<Message>,
    ) -> InboxSpliced {
        InboxSpliced {
            target,
            start: self.list(target).len() as u64,
            removed_count: None,
            inserted,
            outcome: None,
        }
    }

    /// The pure-deletion splices of a claim (next-step batch first, then the next-turn item).
    pub(crate) fn claim_splices(&self, target: InboxTarget) -> Vec<InboxSpliced> {
        let mut out = Vec::new();
        if !self.next_step.is_empty() {
            out.push(deletion(InboxTarget::NextStep, self.next_step.len(), None));
        }
        if target == InboxTarget::NextTurn && !self.next_turn.is_empty() {
            out.push(deletion(InboxTarget::NextTurn, 1, None));
        }
        out
    }

    /// The canceling splices of `clear()` (next-step first, then next-turn).
    pub(crate) fn clear_splices(&self) -> Vec<InboxSpliced> {
        let mut out = Vec::new();
        for target in [InboxTarget::NextStep, InboxTarget::NextTurn] {
            let len = self.list(target).len();
            if len > 0 {
                out.push(deletion(target, len, Some(SpliceOutcome::Canceled)));
            }
        }
        out
    }

    /// Applies a splice; returns the removed messages. Errors when it does not fit the lists.
    pub(crate) fn apply(&mut self, splice: &InboxSpliced) -> Result<Vec<Message>, String> {
        let list = self.list_mut(splice.target);
        let start = splice.start as usize;
        let removed = splice.removed_count.unwrap_or(0) as usize;
        if start > list.len() || start + removed > list.len() {
            return Err(format!(
                "splice {start}+{removed} does not fit a list of {}",
                list.len()
            ));
        }
        Ok(list
            .splice(start..start + removed, splice.inserted.iter().cloned())
            .collect())
    }
}

fn deletion(target: InboxTarget, count: usize, outcome: Option<SpliceOutcome>) -> InboxSpliced {
    InboxSpliced {
        target,
        start: 0,
        removed_count: Some(count as u64),
        inserted: Vec::new(),
        outcome,
    }
}

/// The durable inbox operations of an agent: each splice is appended to the log first, then
/// applied to the live lists, under the agent's gate.
impl AgentHandle {
    /// A new prompt: the sole ordinary input of its own turn. Wakes the agent.
    pub fn followup(&self, message: Message) -> Result<(), AgentError> {
        self.send(message, InboxTarget::NextTurn, true)
    }

    /// The agent's final input (the one-shot runner's task): queued like [`Self::followup`],
    /// and once the activity that runs it ends the agent takes no more input — decided in
    /// the same step that makes it idle, so nothing an idle listener queues can start.
    pub fn followup_final(&self, message: Message) -> Result<(), AgentError> {
        self.send_checked(message, InboxTarget::NextTurn, true, true)
    }

    /// Steering: entered at the next step boundary of the running turn. Wakes the agent.
    pub fn steer(&self, message: Message) -> Result<(), AgentError> {
        self.send(message, InboxTarget::NextStep, true)
    }

    /// Context for the next request that never wakes an idle agent.
    pub fn inject(&self, message: Message) -> Result<(), AgentError> {
        self.send(message, InboxTarget::NextStep, false)
    }

    /// `send(message, target, wakeup)` (§2.3).
    pub fn send(
        &self,
        message: Message,
        target: InboxTarget,
        wakeup: bool,
    ) -> Result<(), AgentError> {
        self.send_checked(message, target, wakeup, false)
    }

    fn send_checked(
        &self,
        message: Message,
        target: InboxTarget,
        wakeup: bool,
        last: bool,
    ) -> Result<(), AgentError> {
        {
            let _gate = lock(&self.inner.gate);
            let target = {
                let state = lock(&self.inner.state);
                self.check_open(&state)?;
                if state.inbox.contains_id(&message.id) {
                    return Err(AgentError::DuplicateMessageId(message.id.clone()));
                }

                // Waking input cannot join an aborted activity.
                if wakeup && state.phase.aborted() {
                    InboxTarget::NextTurn
                } else {
                    target
                }
            };
            let splice = lock(&self.inner.state)
                .inbox
                .append_splice(target, vec![message.clone()]);
            self.write_splice(&splice)?;
            if last {
                // Set before the wake below: the idle that follows this message's turn is
                // the one that closes the input.
                lock(&self.inner.state).final_input = Some(message.id.clone());
            }
        }
        self.emit(AgentEvent::InboxInserted {
            agent: self.inner.id.clone(),
            message,
        });
        if wakeup {
            self.wake();
        }
        Ok(())
    }

    fn check_open(&self, state: &crate::agent::State) -> Result<(), AgentError> {
        if state.disposing {
            return Err(AgentError::Disposed(self.inner.id.clone()));
        }
        if state.input_closed {
            return Err(AgentError::InputClosed(self.inner.id.clone()));
        }
        Ok(())
    }

    /// Appends a splice durably, then applies it to the live lists. Caller holds the gate.
    fn write_splice(&self, splice: &InboxSpliced) -> Result<Vec<Message>, AgentError> {
        self.inner.log.append_data(splice, None)?;
        lock(&self.inner.state)
            .inbox
            .apply(splice)
            .map_err(|reason| AgentError::InconsistentInbox {
                seq: self.inner.log.len().saturating_sub(1),
                reason,
            })
    }

    /// Removes the claimable batch: all next-step items, plus the first next-turn item when
    /// `target` is next-turn. Claimed messages are gone whatever happens next.
    pub(crate) fn claim(&self, target: InboxTarget, turn: u64) -> Result<Vec<Message>, AgentError> {
        let claimed = {
            let _gate = lock(&self.inner.gate);
            let splices = lock(&self.inner.state).inbox.claim_splices(target);
            let mut claimed = Vec::new();
            for splice in &splices {
                claimed.extend(self.write_splice(splice)?);
            }
            claimed
        };
        for message in &claimed {
            self.emit(AgentEvent::InboxClaimed {
                agent: self.inner.id.clone(),
                message: message.clone(),
                turn,
            });
        }
        Ok(claimed)
    }

    /// Appends tool contexts to the end of next-step (no wake: the loop is already running).
    pub(crate) fn append_next_step(&self, messages: Vec<Message>) -> Result<(), AgentError> {
        if messages.is_empty() {
            return Ok(());
        }
        {
            let _gate = lock(&self.inner.gate);
            let splice = lock(&self.inner.state)
                .inbox
                .append_splice(InboxTarget::NextStep, messages.clone());
            self.write_splice(&splice)?;
        }
        for message in messages {
            self.emit(AgentEvent::InboxInserted {
                agent: self.inner.id.clone(),
                message,
            });
        }
        Ok(())
    }

    /// Inserts `message` at the front of the next-step list (durable; never wakes). Producers
    /// whose context must enter before other pending items use it.
    pub fn prepend_next_step(&self, message: Message) -> Result<(), AgentError> {
        {
            let _gate = lock(&self.inner.gate);
            {
                let state = lock(&self.inner.state);
                self.check_open(&state)?;
                if state.inbox.contains_id(&message.id) {
                    return Err(AgentError::DuplicateMessageId(message.id.clone()));
                }
            }
            let splice = InboxSpliced {
                target: InboxTarget::NextStep,
                start: 0,
                removed_count: None,
                inserted: vec![message.clone()],
                outcome: None,
            };
            self.write_splice(&splice)?;
        }
        self.emit(AgentEvent::InboxInserted {
            agent: self.inner.id.clone(),
            message,
        });
        Ok(())
    }

    /// Removes the pending item `id` (`outcome: "canceled"`), or replaces it in place by
    /// `replacement`. Returns the removed message; `None` (nothing written) when no pending
    /// item has that id.
    pub fn remove_pending(
        &self,
        id: &str,
        replacement: Option<Message>,
    ) -> Result<Option<Message>, AgentError> {
        let removed = {
            let _gate = lock(&self.inner.gate);
            let found = {
                let state = lock(&self.inner.state);
                [InboxTarget::NextStep, InboxTarget::NextTurn]
                    .into_iter()
                    .find_map(|target| {
                        state
                            .inbox
                            .list(target)
                            .iter()
                            .position(|m| m.id == id)
                            .map(|at| (target, at))
                    })
            };
            let Some((target, at)) = found else {
                return Ok(None);
            };
            let splice = InboxSpliced {
                target,
                start: at as u64,
                removed_count: Some(1),
                inserted: replacement.clone().into_iter().collect(),
                outcome: Some(SpliceOutcome::Canceled),
            };
            self.write_splice(&splice)?
        };
        for message in &removed {
            self.emit(AgentEvent::InboxDiscarded {
                agent: self.inner.id.clone(),
                message: message.clone(),
            });
        }
        if let Some(message) = replacement {
            self.emit(AgentEvent::InboxInserted {
                agent: self.inner.id.clone(),
                message,
            });
        }
        Ok(removed.into_iter().next())
    }

    /// Durably discards every pending item (`outcome: "canceled"`).
    pub(crate) fn clear_inbox(&self) -> Result<(), AgentError> {
        let discarded = {
            let _gate = lock(&self.inner.gate);
            let splices = lock(&self.inner.state).inbox.clear_splices();
            let mut discarded = Vec::new();
            for splice in &splices {
                discarded.extend(self.write_splice(splice)?);
            }
            discarded
        };
        for message in discarded {
            self.emit(AgentEvent::InboxDiscarded {
                agent: self.inner.id.clone(),
                message,
            });
        }
        Ok(())
    }
}

/// Replays every `agent/inbox/spliced` after the seed (a fork starts with an empty inbox).
pub(crate) fn restore_inbox(log: &SessionLog) -> Result<Inbox, AgentError> {
    let from = log.header().seed_length.unwrap_or(0);
    let mut inbox = Inbox::default();
    for event in log.events_since(from)? {
        let Some(decoded) = event.decode::<InboxSpliced>() else {
            continue;
        };
        let splice = decoded.map_err(|e| AgentError::InconsistentInbox {
            seq: event.seq,
            reason: e.to_string(),
        })?;
        inbox
            .apply(&splice)
            .map_err(|reason| AgentError::InconsistentInbox {
                seq: event.seq,
                reason,
            })?;
    }
    Ok(inbox)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn claim_takes_all_next_step_items_then_one_next_turn_item() {
        let mut inbox = Inbox::default();
        let a = Message::user_text("a");
        let b = Message::user_text("b");
        let s = Message::user_text("s");
        for (target, m) in [
            (InboxTarget::NextTurn, &a),
            (InboxTarget::NextTurn, &b),
            (InboxTarget::NextStep, &s),
        ] {
            let splice = inbox.append_splice(target, vec![m.clone()]);
            inbox.apply(&splice).unwrap();
        }
        let splices = inbox.claim_splices(InboxTarget::NextTurn);
        let claimed: Vec<Message> = splices
            .iter()
            .flat_map(|sp| inbox.apply(sp).unwrap())
            .collect();
        assert_eq!(claimed, vec![s, a]);
        assert_eq!(inbox.next_turn, vec![b]);
        assert!(
            inbox
                .apply(&deletion(InboxTarget::NextStep, 1, None))
                .is_err()
        );
    }
}
