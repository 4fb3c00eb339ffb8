//! The `compaction` service (§8.1): `compact_if_needed`, `compact_now` and `compact_region`,
//! all built on one transaction (§8.3).
//!
//! The lock is the log itself: a `compaction/start` with no matching `compaction/end` after
//! the newest `session/end-seed`. The check and the append of `compaction/start` happen under
//! one short mutex with no await in between, and the three commit appends are contiguous.

use dsh_sync::lock;
use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::AgentHandle;
use dsh_llm::ModelAdapter;
use dsh_protocol::ContentBlock;
use dsh_session::Event;
use dsh_session::LogFold;
use dsh_session::SessionLog;
use dsh_session::SurfaceIntent;
use dsh_session::data::EpochHeader;
use dsh_session::data::RequestHeader;
use dsh_session::data::UserMessage;
use dsh_session::kind;
use dsh_token_meter::Node;
use dsh_token_meter::TokenMeter;
use dsh_token_meter::estimate_message;
use dsh_token_meter::event_message;
use tokio_util::sync::CancellationToken;

use crate::checkpoint::checkpoint_message;
use crate::config::BasicCompactionConfig;
use crate::config::Policy;
use crate::config::ToolResultPruneConfig;
use crate::error::CompactionError;
use crate::error::LOCK_BUSY;
use crate::error::MANUAL_NOT_IDLE;
use crate::error::MANUAL_OPEN_TURN;
use crate::error::METER_MISMATCH;
use crate::error::ManualCode;
use crate::error::ManualCompactionError;
use crate::error::NO_OPEN_TURN;
use crate::error::SPAN_CHANGED;
use crate::error::SPAN_INVALID;
use crate::error::SPAN_REWRITTEN;
use crate::error::SURFACE_CHANGED;
use crate::pairing::PairingView;
use crate::pruner::prune_session;
use crate::range::select_compactable_range;
use crate::summarizer::SummaryError;
use crate::summarizer::build_request;
use crate::summarizer::resolve_target;
use crate::summarizer::summarize;
use crate::vocabulary::COMPACTION_END;
use crate::vocabulary::COMPACTION_START;
use crate::vocabulary::CompactionEnd;
use crate::vocabulary::CompactionStart;
use crate::vocabulary::CompactionSummary;
use crate::vocabulary::ShadowedRange;

/// Resolves a provider id to its adapter (the host's provider registry).
pub trait ModelRoutes: Send + Sync {
    fn adapter(&self, provider: &str) -> Option<Arc<dyn ModelAdapter>>;
}

/// What asked for a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// A pre-step found the request pressure at or over the threshold.
    Pressure,
    /// The provider refused the request as too long (`CONTEXT_WINDOW_EXCEEDED`).
    ContextOverflow,
}

/// `CompactionResult`.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionResult {
    pub compaction_id: String,
    pub source_command_id: Option<String>,
    pub start_seq: u64,
    pub summary_seq: u64,
    pub end_seq: u64,
    pub summary: Vec<ContentBlock>,
    pub shadowed_range: ShadowedRange,
    pub shadowed_seqs: Vec<u64>,
    pub shadowed_token_count: u64,
}

/// Who owns a bracket: automatic ones live inside the open turn and need the whole surface
/// unchanged; manual ones run with no turn and need only their span unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    Automatic,
    Manual { source_command_id: Option<String> },
}

impl Owner {
    fn source_command_id(&self) -> Option<&str> {
        match self {
            Self::Automatic => None,
            Self::Manual { source_command_id } => source_command_id.as_deref(),
        }
    }
}

/// Folds the lock state of one session incrementally.
#[derive(Debug, Default)]
struct LockFold {
    next_seq: u64,
    open: Option<(String, u64)>,
    end_seed: Option<u64>,
}

impl LockFold {
    fn catch_up(&mut self, log: &SessionLog) {
        if let Err(error) = log.catch_up(self) {
            // The fold keeps what it folded; the next call tries again.
            tracing::warn!(%error, "compaction: cannot read the session log");
        }
    }

    /// Folds an event just appended (the fold is caught up).
    fn advance(&mut self, event: &Event) {
        self.next_seq = event.seq + 1;
        self.apply(event);
    }

    /// An unmatched start after the newest end-seed (an older one is a crashed process's).
    fn busy(&self) -> bool {
        self.open
            .as_ref()
            .is_some_and(|(_, seq)| self.end_seed.is_none_or(|seed| *seq > seed))
    }
}

impl LogFold for LockFold {
    fn next_seq(&mut self) -> &mut u64 {
        &mut self.next_seq
    }

    fn apply(&mut self, event: &Event) {
        let id = || {
            event
                .data
                .get("compactionId")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        match event.kind.as_str() {
            COMPACTION_START => {
                if let Some(id) = id() {
                    self.open = Some((id, event.seq));
                }
            }
            COMPACTION_END
                if self.open.as_ref().map(|(open, _)| Some(open.clone())) == Some(id()) =>
            {
                self.open = None;
            }
            kind::END_SEED => self.end_seed = Some(event.seq),
            _ => {}
        }
    }
}

#[derive(Debug, Default)]
struct OverflowState {
    retries: u64,
    checked_to: u64,
}

/// The compaction capability of a composition.
pub struct Compaction {
    config: BasicCompactionConfig,
    pruner: Option<ToolResultPruneConfig>,
    meter: Arc<TokenMeter>,
    routes: Option<Arc<dyn ModelRoutes>>,
    locks: Mutex<HashMap<String, LockFold>>,
    overflow: Mutex<HashMap<String, OverflowState>>,
    warned: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for Compaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compaction")
            .field("config", &self.config)
            .field("pruner", &self.pruner)
            .finish_non_exhaustive()
    }
}

/// The latest logged request header.
pub fn latest_header(log: &SessionLog) -> Option<EpochHeader> {
    let event = log.request_header()?;
    event.decode::<RequestHeader>()?.ok().map(|h| h.header)
}

impl Compaction {
    pub fn new(
        config: BasicCompactionConfig,
        pruner: Option<ToolResultPruneConfig>,
        meter: Arc<TokenMeter>,
        routes: Option<Arc<dyn ModelRoutes>>,
    ) -> Self {
        Self {
            config,
            pruner,
            meter,
            routes,
            locks: Mutex::new(HashMap::new()),
            overflow: Mutex::new(HashMap::new()),
            warned: Mutex::new(HashSet::new()),
        }
    }

    pub fn config(&self) -> &BasicCompactionConfig {
        &self.config
    }

    pub fn meter(&self) -> &Arc<TokenMeter> {
        &self.meter
    }

    fn adapter_for(&self, agent: &AgentHandle, provider: &str) -> Option<Arc<dyn ModelAdapter>> {
        if let Some(adapter) = self.routes.as_ref().and_then(|r| r.adapter(provider)) {
            return Some(adapter);
        }
        (agent.adapter().provider() == provider).then(|| agent.adapter().clone())
    }

    fn context_window(&self, agent: &AgentHandle, provider: &str, model: &str) -> Option<u64> {
        self.adapter_for(agent, provider)?
            .model_info(model)
            .map(|info| info.context_window)
    }

    /// The policy for the session's current route (latest header, else the agent options).
    fn route_policy(&self, agent: &AgentHandle, header: Option<&EpochHeader>) -> Policy {
        match header {
            Some(h) => self.config.policy(&h.config.provider, &h.config.model),
            None => self.config.policy(agent.provider(), agent.model()),
        }
    }

    fn lock_busy(&self, log: &SessionLog) -> bool {
        let mut locks = lock(&self.locks);
        let fold = locks.entry(log.id().to_owned()).or_default();
        fold.catch_up(log);
        fold.busy()
    }

    fn measure_total(&self, log: &SessionLog) -> Result<u64, CompactionError> {
        self.meter
            .with_fold(log, |fold| fold.total_tokens(None))
            .map_err(|e| CompactionError::Meter(e.to_string()))
    }

    fn priced_surface(&self, log: &SessionLog) -> Result<Vec<Node>, CompactionError> {
        let nodes = self
            .meter
            .with_fold(log, |fold| fold.nodes().to_vec())
            .map_err(|e| CompactionError::Meter(e.to_string()))?;
        let seqs = log.surface_seqs();
        if nodes.len() != seqs.len() || nodes.iter().zip(&seqs).any(|(n, s)| n.seq != *s) {
            return Err(CompactionError::Meter(METER_MISMATCH.to_owned()));
        }
        Ok(nodes)
    }

    fn select(&self, log: &SessionLog, retain: u64) -> Result<Option<(u64, u64)>, CompactionError> {
        let nodes = self.priced_surface(log)?;
        let pairing = PairingView::of(log).map_err(|e| CompactionError::Invalid(e.to_string()))?;
        Ok(select_compactable_range(&nodes, &pairing, retain))
    }

    /// `compactIfNeeded(agent, trigger)`.
    pub async fn compact_if_needed(
        &self,
        agent: &AgentHandle,
        trigger: Trigger,
        signal: &CancellationToken,
    ) -> Result<Option<CompactionResult>, CompactionError> {
        let log = agent.log();
        let Some(header) = latest_header(log) else {
            return Ok(None);
        };
        let (provider, model) = (header.config.provider.clone(), header.config.model.clone());
        let policy = self.config.policy(&provider, &model);
        if trigger == Trigger::ContextOverflow {
            if let Some(pruner) = &self.pruner {
                prune_session(log, pruner).map_err(|e| CompactionError::Session(e.to_string()))?;
            }
            let Some((start, end)) = self.select(log, 0)? else {
                return Ok(None);
            };
            return self
                .region(agent, start, end, &Owner::Automatic, signal)
                .await
                .map(Some);
        }
        let window = self.context_window(agent, &provider, &model).ok_or_else(|| {
            CompactionError::Config(format!(
                "compaction-basic: no context capacity for {provider}/{model}; configure contextWindow on that adapter model"
            ))
        })?;
        if self.lock_busy(log) {
            return Err(CompactionError::Busy(LOCK_BUSY.to_owned()));
        }
        let (threshold, retain) = policy.scaled(window);
        if retain >= threshold {
            return Err(CompactionError::Config(format!(
                "BasicCompactionConfig: {provider}/{model} retainTokens ({retain}) must be less than threshold tokens {threshold}"
            )));
        }
        let mut total = self.measure_total(log)?;
        if total < threshold {
            return Ok(None);
        }
        if let Some(pruner) = &self.pruner {
            prune_session(log, pruner).map_err(|e| CompactionError::Session(e.to_string()))?;
            total = self.measure_total(log)?;
            if total < threshold {
                return Ok(None);
            }
        }
        let mut last = None;
        let attempts = 1 + policy.compaction_retries;
        for _ in 0..attempts {
            let Some((start, end)) = self.select(log, retain)? else {
                return Ok(last);
            };
            let result = self
                .region(agent, start, end, &Owner::Automatic, signal)
                .await?;
            tracing::info!(
                session = %log.id(),
                "compaction (step pressure): shadowed {} surface nodes (seqs {}-{}, ~{} tokens)",
                result.shadowed_seqs.len(),
                result.shadowed_range.start,
                result.shadowed_range.end,
                result.shadowed_token_count
            );
            last = Some(result);
            total = self.measure_total(log)?;
            if total < threshold {
                return Ok(last);
            }
        }
        Err(CompactionError::StillAbove(format!(
            "compaction still above threshold after {attempts} compaction attempts ({total} estimated tokens >= threshold {threshold})"
        )))
    }

    /// `compactRegion(start, end, agent)`: an automatic bracket over an explicit span; the
    /// session must have an open turn.
    pub async fn compact_region(
        &self,
        start: u64,
        end: u64,
        agent: &AgentHandle,
        signal: &CancellationToken,
    ) -> Result<CompactionResult, CompactionError> {
        self.region(agent, start, end, &Owner::Automatic, signal)
            .await
    }

    /// `compactNow`: a manual compaction of everything but the newest indivisible unit, with
    /// the agent held idle. `Ok(None)` when nothing is compactable (nothing is written).
    pub async fn compact_now(
        &self,
        agent: &AgentHandle,
        signal: &CancellationToken,
        source_command_id: Option<String>,
    ) -> Result<Option<CompactionResult>, ManualCompactionError> {
        let guard = agent
            .begin_maintenance()
            .map_err(|_| ManualCompactionError::new(ManualCode::Busy, MANUAL_NOT_IDLE))?;
        let combined = guard.token().child_token();
        let link = {
            let (signal, combined) = (signal.clone(), combined.clone());
            tokio::spawn(async move {
                tokio::select! {
                    () = signal.cancelled() => combined.cancel(),
                    () = combined.cancelled() => {}
                }
            })
        };
        let outcome = self
            .manual(agent, &combined, Owner::Manual { source_command_id })
            .await;
        link.abort();
        drop(guard);
        outcome
    }

    async fn manual(
        &self,
        agent: &AgentHandle,
        signal: &CancellationToken,
        owner: Owner,
    ) -> Result<Option<CompactionResult>, ManualCompactionError> {
        let log = agent.log();
        if signal.is_cancelled() {
            return Err(ManualCompactionError::from_attempt(
                &CompactionError::Cancelled,
            ));
        }
        let range = self
            .select(log, 0)
            .map_err(|e| ManualCompactionError::from_attempt(&e))?;
        let Some((start, end)) = range else {
            return Ok(None);
        };
        let before = log.len();
        let result = self.region(agent, start, end, &owner, signal).await;
        let closed = self.bracket_closed(log, before);
        match result {
            Ok(result) => {
                log.sync().await.map_err(|_| {
                    ManualCompactionError::new(
                        ManualCode::Persistence,
                        crate::error::MANUAL_PERSISTENCE,
                    )
                })?;
                Ok(Some(result))
            }
            Err(error) => {
                if closed && let Err(flush) = log.sync().await {
                    tracing::warn!(session = %log.id(), %flush, "manual compaction: flush after a failed attempt failed");
                }
                let error = if signal.is_cancelled() {
                    CompactionError::Cancelled
                } else {
                    error
                };
                Err(ManualCompactionError::from_attempt(&error))
            }
        }
    }

    /// Whether the bracket opened after `from` (if any) was closed.
    fn bracket_closed(&self, log: &SessionLog, from: u64) -> bool {
        // Unreadable: counted as not closed (the caller then only skips a flush).
        let Ok(events) = log.events_since(from) else {
            return false;
        };
        let started = events.iter().any(|e| e.kind == COMPACTION_START);
        started && events.iter().any(|e| e.kind == COMPACTION_END)
    }

    /// The transaction (§8.3).
    async fn region(
        &self,
        agent: &AgentHandle,
        start: u64,
        end: u64,
        owner: &Owner,
        signal: &CancellationToken,
    ) -> Result<CompactionResult, CompactionError> {
        let log = agent.log();
        let pairing = PairingView::of(log).map_err(|e| CompactionError::Invalid(e.to_string()))?;
        let (from, to) = validate_span(&pairing, start, end)?;
        let compaction_id = uuid::Uuid::new_v4().to_string();
        let source_command_id = owner.source_command_id().map(str::to_owned);
        let (turn, start_seq) = {
            let mut locks = lock(&self.locks);
            let fold = locks.entry(log.id().to_owned()).or_default();
            fold.catch_up(log);
            if fold.busy() {
                return Err(CompactionError::Busy(LOCK_BUSY.to_owned()));
            }
            let open_turn = log.turn_state().open_turn;
            let turn = match owner {
                Owner::Automatic => {
                    Some(open_turn.ok_or_else(|| CompactionError::Invalid(NO_OPEN_TURN.into()))?)
                }
                Owner::Manual { .. } => {
                    if open_turn.is_some() {
                        return Err(CompactionError::Busy(MANUAL_OPEN_TURN.to_owned()));
                    }
                    None
                }
            };
            let event = log
                .append_data(
                    &CompactionStart {
                        compaction_id: compaction_id.clone(),
                        source_command_id: source_command_id.clone(),
                        turn,
                    },
                    None,
                )
                .map_err(|e| CompactionError::Session(e.to_string()))?;
            fold.advance(&event);
            (turn, event.seq)
        };
        let bracket = Bracket {
            compaction_id,
            source_command_id,
            turn,
            start_seq,
        };
        let mut end_written = false;
        let outcome = self
            .region_body(agent, &bracket, owner, (from, to), signal, &mut end_written)
            .await;
        match outcome {
            Ok(result) => Ok(result),
            Err(error) => {
                let error = if signal.is_cancelled() {
                    CompactionError::Cancelled
                } else {
                    error
                };
                if !end_written {
                    // Exactly one attempt; when it fails the unmatched start stays as this
                    // process's busy signal.
                    if let Err(append) =
                        log.append_data(&bracket.end(Some(error.to_string())), None)
                    {
                        tracing::error!(session = %log.id(), %append, "compaction: cannot close the bracket");
                    }
                }
                Err(error)
            }
        }
    }

    async fn region_body(
        &self,
        agent: &AgentHandle,
        bracket: &Bracket,
        owner: &Owner,
        (from, to): (usize, usize),
        signal: &CancellationToken,
        end_written: &mut bool,
    ) -> Result<CompactionResult, CompactionError> {
        let log = agent.log();
        let priced = self.priced_surface(log)?;
        let span = priced[from..=to].to_vec();
        let shadowed_seqs: Vec<u64> = span.iter().map(|n| n.seq).collect();
        let shadowed_tokens: u64 = span.iter().map(|n| n.tokens).sum();
        let mut shadowed = Vec::with_capacity(span.len());
        for seq in &shadowed_seqs {
            let event = log
                .get(*seq)
                .map_err(|e| CompactionError::Session(e.to_string()))?
                .ok_or_else(|| {
                    CompactionError::Invalid(format!("compaction: seq {seq} missing"))
                })?;
            if let Some(message) = event_message(&event).map_err(CompactionError::Invalid)? {
                shadowed.push(message);
            }
        }
        let header = latest_header(log);
        let policy = self.route_policy(agent, header.as_ref());
        let target = resolve_target(
            policy.summarization_route(),
            header.as_ref(),
            (agent.provider(), agent.model()),
        )
        .map_err(CompactionError::Summary)?;
        let adapter = self.adapter_for(agent, &target.provider).ok_or_else(|| {
            CompactionError::Summary(SummaryError::new(
                "NO_ADAPTER",
                format!(
                    "no model adapter is registered for provider \"{}\"",
                    target.provider
                ),
            ))
        })?;
        let request = build_request(
            header.as_ref(),
            shadowed,
            &target,
            policy.max_tokens,
            log.id(),
        );
        let output = summarize(adapter, request, signal.clone())
            .await
            .map_err(CompactionError::Summary)?;
        if signal.is_cancelled() {
            return Err(CompactionError::Cancelled);
        }
        let checkpoint = checkpoint_message(
            &bracket.compaction_id,
            bracket.source_command_id.as_deref(),
            &output.summary,
        );
        let framed = estimate_message(&checkpoint);
        if framed >= shadowed_tokens {
            return Err(CompactionError::NotSmaller(format!(
                "summary is not smaller than the shadowed content ({framed} estimated framed tokens >= {shadowed_tokens})"
            )));
        }
        self.check_stable(log, owner, &priced, &span)?;
        let (start, end) = (shadowed_seqs[0], shadowed_seqs[shadowed_seqs.len() - 1]);
        // Commit: three appends, no await in between.
        let commit = |e: dsh_session::SessionError| {
            CompactionError::Commit(format!("compaction: commit failed: {e}"))
        };
        let summary_event = log
            .append_data(
                &CompactionSummary {
                    compaction_id: bracket.compaction_id.clone(),
                    source_command_id: bracket.source_command_id.clone(),
                    summary: output.summary.clone(),
                    raw_output: Some(output.raw_output),
                    llm_stream_call: true,
                    shadowed_range: ShadowedRange { start, end },
                    shadowed_seqs: shadowed_seqs.clone(),
                    shadowed_token_count: shadowed_tokens,
                    provider: target.provider.clone(),
                    model: target.model.clone(),
                    max_tokens: Some(policy.max_tokens),
                    usage: output.usage,
                },
                None,
            )
            .map_err(commit)?;
        let mut sources = Vec::with_capacity(shadowed_seqs.len() + 2);
        sources.push(bracket.start_seq);
        sources.push(summary_event.seq);
        sources.extend(&shadowed_seqs);
        log.append_data(
            &UserMessage(checkpoint),
            Some(SurfaceIntent::replace(start, end, sources)),
        )
        .map_err(commit)?;
        *end_written = true;
        let end_event = log.append_data(&bracket.end(None), None).map_err(commit)?;
        Ok(CompactionResult {
            compaction_id: bracket.compaction_id.clone(),
            source_command_id: bracket.source_command_id.clone(),
            start_seq: bracket.start_seq,
            summary_seq: summary_event.seq,
            end_seq: end_event.seq,
            summary: output.summary,
            shadowed_range: ShadowedRange { start, end },
            shadowed_seqs,
            shadowed_token_count: shadowed_tokens,
        })
    }

    /// Step 7: nothing the summary stands for may have changed while it was written.
    fn check_stable(
        &self,
        log: &SessionLog,
        owner: &Owner,
        priced: &[Node],
        span: &[Node],
    ) -> Result<(), CompactionError> {
        let now = self.priced_surface(log)?;
        match owner {
            Owner::Automatic => {
                if now != priced {
                    return Err(CompactionError::Changed(SURFACE_CHANGED.to_owned()));
                }
            }
            Owner::Manual { .. } => {
                let (first, last) = (span[0].seq, span[span.len() - 1].seq);
                let pairing = PairingView::of(log)
                    .map_err(|_| CompactionError::Changed(SPAN_INVALID.to_owned()))?;
                let (from, to) = validate_span(&pairing, first, last)
                    .map_err(|_| CompactionError::Changed(SPAN_INVALID.to_owned()))?;
                let current = &now[from..=to];
                if current.iter().map(|n| n.seq).ne(span.iter().map(|n| n.seq)) {
                    return Err(CompactionError::Changed(SPAN_CHANGED.to_owned()));
                }
                if current != span {
                    return Err(CompactionError::Changed(SPAN_REWRITTEN.to_owned()));
                }
            }
        }
        Ok(())
    }

    // ---- overflow retry budget (per agent, in memory) ----

    /// Whether another overflow retry is allowed; resets after any `assistant/message`.
    pub(crate) fn overflow_allowed(&self, log: &SessionLog, max: u64) -> bool {
        let mut map = lock(&self.overflow);
        let state = map.entry(log.id().to_owned()).or_default();
        // Unreadable: no answer seen, so the budget is not reset (the safe side).
        let answered = log
            .events_since(state.checked_to)
            .is_ok_and(|events| events.iter().any(|e| e.kind == kind::ASSISTANT_MESSAGE));
        if answered {
            state.retries = 0;
        }
        state.checked_to = log.len();
        state.retries < max
    }

    pub(crate) fn note_overflow_retry(&self, log: &SessionLog) {
        let mut map = lock(&self.overflow);
        let state = map.entry(log.id().to_owned()).or_default();
        state.retries += 1;
        state.checked_to = log.len();
    }

    pub(crate) fn reset_overflow(&self, session: &str) {
        lock(&self.overflow).remove(session);
    }

    /// `true` the first time a key is seen (config warnings are issued once per route).
    pub(crate) fn first_warning(&self, key: &str) -> bool {
        lock(&self.warned).insert(key.to_owned())
    }

    pub(crate) fn policy_for(&self, agent: &AgentHandle) -> Policy {
        self.route_policy(agent, latest_header(agent.log()).as_ref())
    }
}

struct Bracket {
    compaction_id: String,
    source_command_id: Option<String>,
    turn: Option<u64>,
    start_seq: u64,
}

impl Bracket {
    fn end(&self, error: Option<String>) -> CompactionEnd {
        CompactionEnd {
            compaction_id: self.compaction_id.clone(),
            source_command_id: self.source_command_id.clone(),
            turn: self.turn,
            error,
        }
    }
}

/// Step 1: both seqs on the surface, in order, with balanced edges.
fn validate_span(
    pairing: &PairingView,
    start: u64,
    end: u64,
) -> Result<(usize, usize), CompactionError> {
    let invalid = |m: String| CompactionError::Invalid(m);
    let from = pairing.position(start).ok_or_else(|| {
        invalid(format!(
            "compactRegion: start seq {start} not found in surface"
        ))
    })?;
    let to = pairing
        .position(end)
        .ok_or_else(|| invalid(format!("compactRegion: end seq {end} not found in surface")))?;
    if from > to {
        return Err(invalid(format!(
            "compactRegion: start seq {start} (position {from}) is after end seq {end} (position {to}) on the surface"
        )));
    }
    if !pairing.balanced_before_at(from) {
        return Err(invalid(format!(
            "compactRegion: start seq {start} is not a balanced boundary (would split a step's tool-call/result pair)"
        )));
    }
    if !pairing.balanced_after_at(to) {
        return Err(invalid(format!(
            "compactRegion: end seq {end} is not a balanced boundary (would split a step, or the step is still open)"
        )));
    }
    Ok((from, to))
}
