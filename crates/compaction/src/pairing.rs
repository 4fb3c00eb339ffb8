//! Tool-pairing boundaries (§8.4): a span may only be replaced when no assistant tool call
//! crosses either of its edges, so a call and its result are never separated.

use dsh_protocol::ContentBlock;
use dsh_session::Event;
use dsh_session::SessionLog;
use dsh_session::kind;
use dsh_token_meter::event_message;

/// One surface node with the tool calls it opens and answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairedNode {
    pub seq: u64,
    pub opens: u64,
    pub answers: u64,
}

/// The surface seen as a running balance of open tool calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairingView {
    nodes: Vec<PairedNode>,
    /// `before[i]` = open calls before node `i`; `before[len]` = after the last node.
    before: Vec<u64>,
}

/// A surface that cannot be read as call/result pairs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PairingError {
    #[error("tool pairing: seq {0} is not on the surface")]
    NotOnSurface(u64),
    #[error("tool pairing: surface event seq {0} is missing from the log")]
    MissingEvent(u64),
    #[error("tool pairing: surface event seq {seq} cannot be read: {reason}")]
    Unreadable { seq: u64, reason: String },
    #[error("tool pairing: tool/result seq {0} answers no open tool call (corrupt surface)")]
    UnmatchedResult(u64),
    #[error("tool pairing: surface event seq {seq} is not a message: {reason}")]
    Malformed { seq: u64, reason: String },
}

fn counts(event: &Event) -> Result<(u64, u64), PairingError> {
    let message = event_message(event).map_err(|reason| PairingError::Malformed {
        seq: event.seq,
        reason,
    })?;
    let Some(message) = message else {
        return Ok((0, 0));
    };
    let count =
        |f: fn(&ContentBlock) -> bool| message.content.iter().filter(|b| f(b)).count() as u64;
    Ok(match event.kind.as_str() {
        kind::ASSISTANT_MESSAGE => (count(|b| matches!(b, ContentBlock::ToolCall { .. })), 0),
        kind::TOOL_RESULT => (0, count(|b| matches!(b, ContentBlock::ToolResult { .. }))),
        _ => (0, 0),
    })
}

impl PairingView {
    /// Reads the current surface of `log`.
    pub fn of(log: &SessionLog) -> Result<Self, PairingError> {
        let seqs = log.surface_seqs();
        let mut nodes = Vec::with_capacity(seqs.len());
        for seq in seqs {
            let event = log
                .get(seq)
                .map_err(|e| PairingError::Unreadable {
                    seq,
                    reason: e.to_string(),
                })?
                .ok_or(PairingError::MissingEvent(seq))?;
            let (opens, answers) = counts(&event)?;
            nodes.push(PairedNode {
                seq,
                opens,
                answers,
            });
        }
        Self::from_nodes(nodes)
    }

    /// Builds the view from already classified nodes (surface order).
    pub fn from_nodes(nodes: Vec<PairedNode>) -> Result<Self, PairingError> {
        let mut before = Vec::with_capacity(nodes.len() + 1);
        let mut balance = 0u64;
        before.push(0);
        for node in &nodes {
            balance += node.opens;
            balance = balance
                .checked_sub(node.answers)
                .ok_or(PairingError::UnmatchedResult(node.seq))?;
            before.push(balance);
        }
        Ok(Self { nodes, before })
    }

    pub fn nodes(&self) -> &[PairedNode] {
        &self.nodes
    }

    /// The surface position of `seq` (the latest, as the session resolves positions).
    pub fn position(&self, seq: u64) -> Option<usize> {
        self.nodes.iter().rposition(|n| n.seq == seq)
    }

    /// Open calls before the node at `position` is 0.
    pub fn balanced_before_at(&self, position: usize) -> bool {
        self.before.get(position) == Some(&0)
    }

    /// Open calls after the node at `position` is 0.
    pub fn balanced_after_at(&self, position: usize) -> bool {
        self.before.get(position + 1) == Some(&0)
    }

    /// `toolPairingBalancedBefore(session, seq)`.
    pub fn balanced_before(&self, seq: u64) -> Result<bool, PairingError> {
        let position = self.position(seq).ok_or(PairingError::NotOnSurface(seq))?;
        Ok(self.balanced_before_at(position))
    }

    /// `toolPairingBalancedAfter(session, seq)`.
    pub fn balanced_after(&self, seq: u64) -> Result<bool, PairingError> {
        let position = self.position(seq).ok_or(PairingError::NotOnSurface(seq))?;
        Ok(self.balanced_after_at(position))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(seq: u64, opens: u64, answers: u64) -> PairedNode {
        PairedNode {
            seq,
            opens,
            answers,
        }
    }

    #[test]
    fn balance_counts_calls_minus_results_over_the_prefix() {
        // user, assistant(2 calls), result, result, user
        let view = PairingView::from_nodes(vec![
            node(1, 0, 0),
            node(2, 2, 0),
            node(3, 0, 1),
            node(4, 0, 1),
            node(5, 0, 0),
        ])
        .unwrap();
        assert!(view.balanced_before(1).unwrap());
        assert!(view.balanced_before(2).unwrap());
        assert!(!view.balanced_before(3).unwrap());
        assert!(!view.balanced_before(4).unwrap());
        assert!(view.balanced_before(5).unwrap());
        assert!(!view.balanced_after(2).unwrap());
        assert!(!view.balanced_after(3).unwrap());
        assert!(view.balanced_after(4).unwrap());
        assert_eq!(view.balanced_before(9), Err(PairingError::NotOnSurface(9)));
    }

    #[test]
    fn a_result_without_an_open_call_is_corrupt() {
        let error = PairingView::from_nodes(vec![node(1, 0, 0), node(2, 0, 1)]).unwrap_err();
        assert_eq!(error, PairingError::UnmatchedResult(2));
    }
}
