//! The per-session fold (§7.2–§7.3): surface node prices, the running surface sum, and the
//! provider-usage anchor of the latest assistant message.

use std::collections::BTreeMap;

use dsh_llm::BlockAssembler;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_protocol::StreamChunk;
use dsh_protocol::TokenUsage;
use dsh_session::Event;
use dsh_session::SurfaceOp;
use dsh_session::data::AssistantChunk;
use dsh_session::data::AssistantMessage;
use dsh_session::data::EpochHeader;
use dsh_session::data::RequestHeader;
use dsh_session::kind;

use crate::estimate::estimate_header;
use crate::estimate::estimate_message;

/// One surface node and its heuristic price.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    pub seq: u64,
    pub tokens: u64,
}

/// What a measurement starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Baseline {
    /// No anchor applies and nothing is known about the envelope.
    None,
    /// The heuristic value at the anchor (provider usage was missing or implausibly small).
    Estimated { tokens: u64 },
    /// The provider's own count (input + cache read + cache write + output).
    Usage { tokens: u64, usage: TokenUsage },
}

impl Baseline {
    pub fn tokens(&self) -> u64 {
        match self {
            Self::None => 0,
            Self::Estimated { tokens } | Self::Usage { tokens, .. } => *tokens,
        }
    }
}

/// `measure(session, header?)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenMeasurement {
    /// Number of log events folded (the log length at measurement).
    pub log_revision: u64,
    pub baseline: Baseline,
    /// Signed change of the surface price since the anchor (0 without an applicable anchor).
    pub surface_delta_tokens: i64,
    pub total_tokens: u64,
    pub surface_tokens: u64,
    pub nodes: Vec<Node>,
}

/// Why a log cannot be metered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MeterError {
    #[error("token meter: event seq {got} out of order (expected {expected})")]
    OutOfOrder { expected: u64, got: u64 },
    #[error(
        "token meter: assistant/message seq {seq} (turn {turn}, step {step}) is not inside a matching step/start"
    )]
    AssistantOutsideStep { seq: u64, turn: u64, step: u64 },
    #[error("token meter: replace {start}..{end} at seq {seq} does not match the metered surface")]
    BadReplace { seq: u64, start: u64, end: u64 },
    #[error("token meter: cannot read {kind} seq {seq}: {reason}")]
    Malformed {
        kind: String,
        seq: u64,
        reason: String,
    },
    /// The log's older events could not be read back (the fold is unchanged; a later call
    /// tries again).
    #[error("token meter: cannot read the session log: {reason}")]
    Unreadable { reason: String },
}

#[derive(Debug, Clone)]
struct Anchor {
    header: EpochHeader,
    surface_tokens: u64,
    baseline: Baseline,
}

/// The fold of one session's events. Feed every event in seq order with [`MeterFold::advance`]
/// (or let [`MeterFold::catch_up`] read what is new); a fold that met a malformed log keeps
/// reporting that error.
#[derive(Debug, Clone, Default)]
pub struct MeterFold {
    next_seq: u64,
    nodes: Vec<Node>,
    surface_tokens: u64,
    header: Option<EpochHeader>,
    /// `(turn, step, surface tokens at its step/start)` of the open step.
    step_start: Option<(u64, u64, u64)>,
    /// Chunks of the open step by seq, to price what the provider actually produced.
    step_chunks: BTreeMap<u64, StreamChunk>,
    anchor: Option<Anchor>,
    failed: Option<MeterError>,
}

impl MeterFold {
    pub fn new() -> Self {
        Self::default()
    }

    /// The seq the fold expects next (= number of events folded).
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn surface_tokens(&self) -> u64 {
        self.surface_tokens
    }

    /// The latest folded `request/header`.
    pub fn header(&self) -> Option<&EpochHeader> {
        self.header.as_ref()
    }

    /// The error that stopped the fold, if any.
    pub fn error(&self) -> Option<&MeterError> {
        self.failed.as_ref()
    }

    /// Folds events with seq >= `next_seq()` from `events` (older ones are skipped).
    pub fn advance_all<'a>(
        &mut self,
        events: impl IntoIterator<Item = &'a Event>,
    ) -> Result<(), MeterError> {
        for event in events {
            if event.seq < self.next_seq {
                continue;
            }
            self.advance(event)?;
        }
        Ok(())
    }

    /// Folds what the log appended since the last call.
    pub fn catch_up(&mut self, log: &dsh_session::SessionLog) -> Result<(), MeterError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        if log.len() == self.next_seq {
            return Ok(());
        }
        // A long stretch (a first catch-up late in a session) is read back a window at a time.
        let mut folded = Ok(());
        log.visit_since(self.next_seq, |event| {
            if folded.is_ok() && event.seq >= self.next_seq {
                folded = self.advance(event);
            }
        })
        .map_err(|e| MeterError::Unreadable {
            reason: e.to_string(),
        })?;
        folded
    }

    /// Folds one event; it must be the next by seq.
    pub fn advance(&mut self, event: &Event) -> Result<(), MeterError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let result = self.apply(event);
        match result {
            Ok(()) => {
                self.next_seq = event.seq + 1;
                Ok(())
            }
            Err(error) => {
                self.failed = Some(error.clone());
                Err(error)
            }
        }
    }

    fn apply(&mut self, event: &Event) -> Result<(), MeterError> {
        if event.seq != self.next_seq {
            return Err(MeterError::OutOfOrder {
                expected: self.next_seq,
                got: event.seq,
            });
        }
        match event.kind.as_str() {
            kind::REQUEST_HEADER => {
                let header = event
                    .data
                    .decode::<RequestHeader>()
                    .map_err(|e| malformed(event, e.to_string()))?;
                self.header = Some(header.header);
            }
            kind::STEP_START => {
                self.step_start = Some((
                    event.turn().unwrap_or(0),
                    event.step().unwrap_or(0),
                    self.surface_tokens,
                ));
                self.step_chunks.clear();
            }
            kind::STEP_END | kind::TURN_END => {
                self.step_start = None;
                self.step_chunks.clear();
            }
            kind::ASSISTANT_CHUNK => {
                if let Ok(chunk) = event.data.decode::<AssistantChunk>() {
                    self.step_chunks.insert(event.seq, chunk.chunk);
                }
            }
            _ => {}
        }
        if let Some(op) = event.surface_op() {
            let message = event_message(event).map_err(|reason| malformed(event, reason))?;
            let tokens = message.as_ref().map_or(0, estimate_message);
            match op {
                SurfaceOp::Append => {
                    self.nodes.push(Node {
                        seq: event.seq,
                        tokens,
                    });
                    self.surface_tokens = self.surface_tokens.saturating_add(tokens);
                }
                SurfaceOp::Replace { start, end } => self.replace(event.seq, start, end, tokens)?,
            }
            if event.kind == kind::ASSISTANT_MESSAGE {
                self.anchor_at(event, message.as_ref())?;
            }
        }
        Ok(())
    }

    fn replace(&mut self, seq: u64, start: u64, end: u64, tokens: u64) -> Result<(), MeterError> {
        let bad = || MeterError::BadReplace { seq, start, end };
        let from = self
            .nodes
            .iter()
            .rposition(|n| n.seq == start)
            .ok_or_else(bad)?;
        let to = self
            .nodes
            .iter()
            .rposition(|n| n.seq == end)
            .ok_or_else(bad)?;
        if from > to {
            return Err(bad());
        }
        let removed: u64 = self.nodes[from..=to].iter().map(|n| n.tokens).sum();
        self.nodes.splice(from..=to, [Node { seq, tokens }]);
        self.surface_tokens = self.surface_tokens - removed + tokens;
        Ok(())
    }

    fn anchor_at(&mut self, event: &Event, durable: Option<&Message>) -> Result<(), MeterError> {
        let data = event
            .data
            .decode::<AssistantMessage>()
            .map_err(|e| malformed(event, e.to_string()))?;
        let Some((turn, step, at_start)) = self
            .step_start
            .filter(|(turn, step, _)| *turn == data.turn && *step == data.step)
        else {
            return Err(MeterError::AssistantOutsideStep {
                seq: event.seq,
                turn: data.turn,
                step: data.step,
            });
        };
        let _ = (turn, step);
        let output = match event.source_event_seqs() {
            None => durable.map_or(0, estimate_message),
            Some([]) => 0,
            Some(seqs) => self.price_output(seqs, durable),
        };
        let anchor_surface = at_start + output;
        // The anchor belongs to the header current at the time; without one the heuristic
        // envelope is empty.
        let header = self.header.clone();
        let Some(header) = header else {
            return Ok(());
        };
        let heuristic = estimate_header(&header) + anchor_surface;
        let baseline = match data.usage {
            Some(usage) => {
                let provider = usage.total();
                if provider >= heuristic {
                    Baseline::Usage {
                        tokens: provider,
                        usage,
                    }
                } else {
                    Baseline::Estimated { tokens: heuristic }
                }
            }
            None => Baseline::Estimated { tokens: heuristic },
        };
        self.anchor = Some(Anchor {
            header,
            surface_tokens: anchor_surface,
            baseline,
        });
        Ok(())
    }

    /// The price of the message the provider streamed, re-assembled from the cited chunks.
    fn price_output(&self, seqs: &[u64], durable: Option<&Message>) -> u64 {
        let mut assembler = BlockAssembler::new();
        let mut found = false;
        for seq in seqs {
            if let Some(chunk) = self.step_chunks.get(seq) {
                assembler.push(chunk);
                found = true;
            }
        }
        if !found {
            return durable.map_or(0, estimate_message);
        }
        let blocks = assembler
            .blocks()
            .unwrap_or_else(|_| assembler.interrupted_blocks());
        let source = MessageSource::model("", "");
        estimate_message(&Message::assistant(blocks, source))
    }

    /// `measure(header).total_tokens` without copying the node list.
    pub fn total_tokens(&self, header: Option<&EpochHeader>) -> u64 {
        let header = header.or(self.header.as_ref());
        match self
            .anchor
            .as_ref()
            .filter(|anchor| header.is_some_and(|h| *h == anchor.header))
        {
            Some(anchor) => {
                let delta = self.surface_tokens as i64 - anchor.surface_tokens as i64;
                (anchor.baseline.tokens() as i64 + delta).max(0) as u64
            }
            None => header.map_or(0, estimate_header) + self.surface_tokens,
        }
    }

    /// Request pressure against `header` (the latest logged one when `None`).
    pub fn measure(&self, header: Option<&EpochHeader>) -> TokenMeasurement {
        let header = header.or(self.header.as_ref());
        let nodes = self.nodes.clone();
        let surface = self.surface_tokens;
        let anchored = self
            .anchor
            .as_ref()
            .filter(|anchor| header.is_some_and(|h| *h == anchor.header));
        match anchored {
            Some(anchor) => {
                let delta = surface as i64 - anchor.surface_tokens as i64;
                let total = (anchor.baseline.tokens() as i64 + delta).max(0) as u64;
                TokenMeasurement {
                    log_revision: self.next_seq,
                    baseline: anchor.baseline.clone(),
                    surface_delta_tokens: delta,
                    total_tokens: total,
                    surface_tokens: surface,
                    nodes,
                }
            }
            None => {
                let envelope = header.map_or(0, estimate_header);
                let baseline = match header {
                    Some(_) => Baseline::Estimated { tokens: envelope },
                    None => Baseline::None,
                };
                TokenMeasurement {
                    log_revision: self.next_seq,
                    baseline,
                    surface_delta_tokens: 0,
                    total_tokens: envelope + surface,
                    surface_tokens: surface,
                    nodes,
                }
            }
        }
    }
}

fn malformed(event: &Event, reason: String) -> MeterError {
    MeterError::Malformed {
        kind: event.kind.to_string(),
        seq: event.seq,
        reason,
    }
}

/// `deriveEventMessage`: the message a surface event contributes (`None` for an assistant
/// message with no content, and for non-surface events).
pub fn event_message(event: &Event) -> Result<Option<Message>, String> {
    // Decoded from the stored text: a resumed log's tool results never become `Value` trees.
    let message = match event.decode_message() {
        None => return Ok(None),
        Some(Ok(message)) => message,
        Some(Err(_)) if event.kind != kind::USER_MESSAGE && event.data.get("message").is_none() => {
            return Err("data.message is missing".to_owned());
        }
        Some(Err(e)) => return Err(e.to_string()),
    };
    if event.kind == kind::ASSISTANT_MESSAGE && message.content.is_empty() {
        return Ok(None);
    }
    Ok(Some(message))
}

#[cfg(test)]
#[path = "fold_tests.rs"]
mod tests;
