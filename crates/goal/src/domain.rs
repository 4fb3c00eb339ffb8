//! The goal domain: the log fold, the mutation rules with upstream's exact errors, and the
//! process-local activation.

use dsh_sync::lock;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::AgentHandle;
use dsh_session::Event;
use dsh_session::LogFold;
use dsh_session::SessionLog;
use serde_json::Map;
use serde_json::Value;
use serde_json::json;

use crate::DEFAULT_MAX_GOAL_ROUNDS;
use crate::MAX_SAFE_INTEGER;

/// A goal's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Active,
    Paused,
    Blocked,
    Complete,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Paused => "paused",
            Self::Blocked => "blocked",
            Self::Complete => "complete",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "active" => Self::Active,
            "paused" => Self::Paused,
            "blocked" => Self::Blocked,
            "complete" => Self::Complete,
            _ => return None,
        })
    }
}

/// Why a goal is blocked; `code` is lower-kebab-case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedReason {
    pub code: String,
    pub message: String,
}

/// The persisted part of a goal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoalSnapshot {
    pub id: String,
    pub revision: u64,
    pub objective: String,
    pub phase: Phase,
    pub blocked_reason: Option<BlockedReason>,
    pub max_goal_rounds: u64,
}

/// The current goal as folded from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoalState {
    pub goal: GoalSnapshot,
    pub rounds_started: u64,
    pub created_at: u64,
    pub updated_at: u64,
}

/// Process-local: whether the driver may start rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Activation {
    Armed,
    #[default]
    Disarmed,
}

impl Activation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Armed => "armed",
            Self::Disarmed => "disarmed",
        }
    }
}

/// `{id, revision}` as a tool passes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoalRef {
    pub id: String,
    pub revision: u64,
}

/// `GoalError(message, code)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct GoalError {
    pub code: &'static str,
    pub message: String,
}

impl GoalError {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn not_found() -> Self {
        Self::new("GOAL_NOT_FOUND", "no current goal")
    }
}

fn block_code_ok(code: &str) -> bool {
    // ^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$
    let mut parts = code.split('-');
    let Some(first) = parts.next() else {
        return false;
    };
    let mut chars = first.chars();
    if !chars.next().is_some_and(|c| c.is_ascii_lowercase()) {
        return false;
    }
    if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) {
        return false;
    }
    parts.all(|p| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    })
}

impl GoalSnapshot {
    /// The persisted shape: `{id, revision, objective, phase, blockedReason?, maxGoalRounds}`.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("id".into(), self.id.clone().into());
        map.insert("revision".into(), self.revision.into());
        map.insert("objective".into(), self.objective.clone().into());
        map.insert("phase".into(), self.phase.as_str().into());
        if let Some(reason) = &self.blocked_reason {
            map.insert(
                "blockedReason".into(),
                json!({"code": reason.code, "message": reason.message}),
            );
        }
        map.insert("maxGoalRounds".into(), self.max_goal_rounds.into());
        Value::Object(map)
    }

    pub(crate) fn from_json(value: &Value) -> Option<Self> {
        let blocked_reason = value.get("blockedReason").and_then(|r| {
            Some(BlockedReason {
                code: r.get("code")?.as_str()?.to_owned(),
                message: r.get("message")?.as_str()?.to_owned(),
            })
        });
        Some(Self {
            id: value.get("id")?.as_str()?.to_owned(),
            revision: value.get("revision")?.as_u64()?,
            objective: value.get("objective")?.as_str()?.to_owned(),
            phase: Phase::parse(value.get("phase")?.as_str()?)?,
            blocked_reason,
            max_goal_rounds: value.get("maxGoalRounds")?.as_u64()?,
        })
    }
}

impl GoalState {
    /// The tool result (and `get_goal`) shape, in upstream's key order.
    pub fn view(&self, activation: Activation) -> Value {
        let g = &self.goal;
        let mut goal = Map::new();
        goal.insert("id".into(), g.id.clone().into());
        goal.insert("revision".into(), g.revision.into());
        goal.insert("objective".into(), g.objective.clone().into());
        goal.insert("phase".into(), g.phase.as_str().into());
        goal.insert("roundsStarted".into(), self.rounds_started.into());
        goal.insert("maxGoalRounds".into(), g.max_goal_rounds.into());
        if let Some(reason) = &g.blocked_reason {
            goal.insert(
                "blockedReason".into(),
                json!({"code": reason.code, "message": reason.message}),
            );
        }
        json!({"goal": Value::Object(goal), "activation": activation.as_str()})
    }
}

/// Whether a `user/message` source is a goal round `{kind:"goal", goalId, revision, round}`.
pub(crate) fn goal_round_of(source: &Value) -> Option<(String, u64, u64)> {
    if source.get("kind")?.as_str()? != "goal" {
        return None;
    }
    Some((
        source.get("goalId")?.as_str()?.to_owned(),
        source.get("revision")?.as_u64()?,
        source.get("round")?.as_u64()?,
    ))
}

/// Folds the current goal from a session's events.
pub fn fold_goal(events: &[Arc<Event>]) -> Option<GoalState> {
    let mut state: Option<GoalState> = None;
    for event in events {
        apply(&mut state, event);
    }
    state
}

/// One step of [`fold_goal`].
fn apply(state: &mut Option<GoalState>, event: &Event) {
    match event.kind.as_str() {
        "goal/change" => {
            let data = &event.data;
            if data.get("operation").and_then(Value::as_str) == Some("clear") {
                *state = None;
                return;
            }
            let Some(goal) = data.get("goal").and_then(GoalSnapshot::from_json) else {
                tracing::warn!(seq = event.seq, "unreadable goal/change; ignored");
                return;
            };
            let num = |k: &str| data.get(k).and_then(Value::as_u64).unwrap_or(0);
            *state = Some(GoalState {
                goal,
                rounds_started: num("roundsStarted"),
                created_at: num("createdAt"),
                updated_at: num("updatedAt"),
            });
        }
        "user/message" => {
            let (Some(current), Some((id, revision, round))) = (
                state.as_mut(),
                event.data.get("source").and_then(goal_round_of),
            ) else {
                return;
            };
            let g = &current.goal;
            if g.phase == Phase::Active
                && g.id == id
                && g.revision == revision
                && round == current.rounds_started + 1
                && round <= g.max_goal_rounds
            {
                current.rounds_started = round;
            } else {
                tracing::warn!(
                    seq = event.seq,
                    "goal round at session event {} is not the next admitted round of the active goal",
                    event.seq
                );
            }
        }
        _ => {}
    }
}

/// [`fold_goal`] kept up to date across calls: the events before `next_seq` are folded into
/// `state`, so a read costs only what the log appended since the last one.
#[derive(Debug, Clone, Default)]
struct GoalFold {
    next_seq: u64,
    state: Option<GoalState>,
}

impl GoalFold {
    /// Folds what `log` appended since the last call. A log shorter than what was folded is
    /// another instance under the same id (a reload): the fold starts over.
    fn catch_up(&mut self, log: &SessionLog) {
        if let Err(error) = log.catch_up(self) {
            // The fold keeps what it folded; the next call tries again.
            tracing::warn!(%error, "goal: cannot read the session log");
        }
    }
}

impl LogFold for GoalFold {
    fn next_seq(&mut self) -> &mut u64 {
        &mut self.next_seq
    }

    fn apply(&mut self, event: &Event) {
        apply(&mut self.state, event);
    }
}

type ChangeFn = Arc<dyn Fn(&AgentHandle) + Send + Sync>;

/// The goals service: one per composition.
pub struct Goals {
    default_max_rounds: u64,
    activation: Mutex<HashMap<String, Activation>>,
    /// The goal fold of each agent, by agent id (a fork or a child has its own id).
    folds: Mutex<HashMap<String, Arc<Mutex<GoalFold>>>>,
    listeners: Mutex<Vec<ChangeFn>>,
}

impl std::fmt::Debug for Goals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Goals")
            .field("default_max_rounds", &self.default_max_rounds)
            .finish_non_exhaustive()
    }
}

impl Default for Goals {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_GOAL_ROUNDS)
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn quote(text: &str) -> String {
    Value::from(text).to_string()
}

impl Goals {
    pub fn new(default_max_rounds: u64) -> Self {
        Self {
            default_max_rounds,
            activation: Mutex::new(HashMap::new()),
            folds: Mutex::new(HashMap::new()),
            listeners: Mutex::new(Vec::new()),
        }
    }

    /// Called after every committed mutation (the live `goal/changed`).
    pub fn on_change(&self, listener: impl Fn(&AgentHandle) + Send + Sync + 'static) {
        lock(&self.listeners).push(Arc::new(listener));
    }

    /// The current goal: [`fold_goal`] over the agent's log, advanced incrementally (the driver
    /// asks at every idle, the tools at every call).
    pub fn current(&self, agent: &AgentHandle) -> Option<GoalState> {
        let fold = lock(&self.folds)
            .entry(agent.id().to_owned())
            .or_default()
            .clone();
        let mut fold = lock(&fold);
        fold.catch_up(agent.log());
        fold.state.clone()
    }

    /// Drops an agent's fold (its agent is gone; a later `current` folds again from the start).
    pub(crate) fn forget(&self, agent_id: &str) {
        lock(&self.folds).remove(agent_id);
    }

    pub fn activation(&self, agent: &AgentHandle) -> Activation {
        lock(&self.activation)
            .get(agent.id())
            .copied()
            .unwrap_or_default()
    }

    /// Disarms (session start, cancellation, `agent/error`).
    pub fn disarm(&self, agent: &AgentHandle) {
        lock(&self.activation).insert(agent.id().to_owned(), Activation::Disarmed);
    }

    fn set_activation(&self, agent: &AgentHandle, activation: Activation) {
        lock(&self.activation).insert(agent.id().to_owned(), activation);
    }

    fn commit(
        &self,
        agent: &AgentHandle,
        operation: &str,
        previous: Option<&GoalState>,
        goal: GoalSnapshot,
        rounds_started: u64,
        activation: Option<Activation>,
    ) -> Result<GoalState, GoalError> {
        let now = now_ms();
        let created_at = previous.map_or(now, |p| p.created_at);
        let updated_at = previous.map_or(now, |p| now.max(p.updated_at));
        let data = json!({
            "kind": "goal/change",
            "version": 1,
            "operation": operation,
            "goal": goal.to_json(),
            "roundsStarted": rounds_started,
            "createdAt": created_at,
            "updatedAt": updated_at,
        });
        agent
            .log()
            .append("goal/change", data, None)
            .map_err(|e| GoalError::new("GOAL_APPEND_FAILED", e.to_string()))?;
        if let Some(activation) = activation {
            self.set_activation(agent, activation);
        }
        self.notify(agent);
        Ok(GoalState {
            goal,
            rounds_started,
            created_at,
            updated_at,
        })
    }

    fn notify(&self, agent: &AgentHandle) {
        let listeners: Vec<ChangeFn> = lock(&self.listeners).clone();
        for listener in listeners {
            listener(agent);
        }
    }

    fn objective(text: &str) -> Result<String, GoalError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(GoalError::new(
                "GOAL_INVALID_OBJECTIVE",
                "goal objective must be a non-empty string",
            ));
        }
        Ok(trimmed.to_owned())
    }

    fn max_rounds(value: f64) -> Result<u64, GoalError> {
        if value.is_finite()
            && value >= 1.0
            && value.fract() == 0.0
            && value <= MAX_SAFE_INTEGER as f64
        {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            return Ok(value as u64);
        }
        Err(GoalError::new(
            "GOAL_INVALID_MAX_ROUNDS",
            "maxGoalRounds must be a positive safe integer",
        ))
    }

    /// The current goal matching `reference` (when given).
    fn target(
        &self,
        agent: &AgentHandle,
        reference: Option<&GoalRef>,
    ) -> Result<GoalState, GoalError> {
        let current = self.current(agent).ok_or_else(GoalError::not_found)?;
        if let Some(r) = reference
            && (r.id != current.goal.id || r.revision != current.goal.revision)
        {
            return Err(GoalError::new(
                "GOAL_STALE_REVISION",
                format!(
                    "stale goal ref {} revision {}; current is {} revision {}",
                    quote(&r.id),
                    r.revision,
                    quote(&current.goal.id),
                    current.goal.revision
                ),
            ));
        }
        Ok(current)
    }

    fn transition(op: &str, state: &GoalState, allowed: &[Phase]) -> Result<(), GoalError> {
        if allowed.contains(&state.goal.phase) {
            return Ok(());
        }
        let names: Vec<&str> = allowed.iter().map(|p| p.as_str()).collect();
        let expected = match names.split_last() {
            Some((last, [])) => (*last).to_owned(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        Err(GoalError::new(
            "GOAL_INVALID_TRANSITION",
            format!(
                "cannot {op} goal {} from phase {}; expected {expected}",
                quote(&state.goal.id),
                quote(state.goal.phase.as_str())
            ),
        ))
    }

    pub fn create(
        &self,
        agent: &AgentHandle,
        objective: &str,
        max_goal_rounds: Option<f64>,
    ) -> Result<GoalState, GoalError> {
        if let Some(current) = self.current(agent)
            && current.goal.phase != Phase::Complete
        {
            return Err(GoalError::new(
                "GOAL_ALREADY_EXISTS",
                format!(
                    "goal {} already exists with phase {}",
                    quote(&current.goal.id),
                    quote(current.goal.phase.as_str())
                ),
            ));
        }
        let objective = Self::objective(objective)?;
        let max = match max_goal_rounds {
            Some(value) => Self::max_rounds(value)?,
            None => self.default_max_rounds,
        };
        let goal = GoalSnapshot {
            id: format!("goal-{}", uuid::Uuid::new_v4()),
            revision: 1,
            objective,
            phase: Phase::Active,
            blocked_reason: None,
            max_goal_rounds: max,
        };
        self.commit(agent, "create", None, goal, 0, Some(Activation::Armed))
            .map(|mut state| {
                // A new goal's clock starts now, not at an earlier goal's creation.
                state.created_at = state.updated_at;
                state
            })
    }

    pub fn edit(
        &self,
        agent: &AgentHandle,
        reference: Option<&GoalRef>,
        objective: Option<&str>,
        max_goal_rounds: Option<f64>,
    ) -> Result<GoalState, GoalError> {
        if objective.is_none() && max_goal_rounds.is_none() {
            return Err(GoalError::new(
                "GOAL_INVALID_EDIT",
                "goal edit requires objective and/or maxGoalRounds",
            ));
        }
        let state = self.target(agent, reference)?;
        let mut goal = state.goal.clone();
        if let Some(objective) = objective {
            goal.objective = Self::objective(objective)?;
        }
        if let Some(max) = max_goal_rounds {
            goal.max_goal_rounds = Self::max_rounds(max)?;
        }
        goal.revision += 1;
        self.commit(
            agent,
            "edit",
            Some(&state),
            goal,
            state.rounds_started,
            None,
        )
    }

    pub fn pause(
        &self,
        agent: &AgentHandle,
        reference: Option<&GoalRef>,
    ) -> Result<GoalState, GoalError> {
        let state = self.target(agent, reference)?;
        Self::transition("pause", &state, &[Phase::Active])?;
        let mut goal = state.goal.clone();
        goal.phase = Phase::Paused;
        goal.revision += 1;
        self.commit(
            agent,
            "pause",
            Some(&state),
            goal,
            state.rounds_started,
            Some(Activation::Disarmed),
        )
    }

    pub fn resume(
        &self,
        agent: &AgentHandle,
        reference: Option<&GoalRef>,
    ) -> Result<GoalState, GoalError> {
        let state = self.target(agent, reference)?;
        Self::transition(
            "resume",
            &state,
            &[Phase::Active, Phase::Paused, Phase::Blocked],
        )?;
        if state.goal.phase == Phase::Active && self.activation(agent) == Activation::Armed {
            return Err(GoalError::new(
                "GOAL_INVALID_TRANSITION",
                format!("goal {} is already active and armed", quote(&state.goal.id)),
            ));
        }
        if state.rounds_started >= state.goal.max_goal_rounds {
            return Err(GoalError::new(
                "GOAL_INVALID_TRANSITION",
                format!(
                    "goal {} exhausted {} goal rounds; increase maxGoalRounds before resuming",
                    quote(&state.goal.id),
                    state.goal.max_goal_rounds
                ),
            ));
        }
        let mut goal = state.goal.clone();
        goal.phase = Phase::Active;
        goal.blocked_reason = None;
        goal.revision += 1;
        self.commit(
            agent,
            "resume",
            Some(&state),
            goal,
            state.rounds_started,
            Some(Activation::Armed),
        )
    }

    pub fn complete(
        &self,
        agent: &AgentHandle,
        reference: Option<&GoalRef>,
    ) -> Result<GoalState, GoalError> {
        let state = self.target(agent, reference)?;
        Self::transition(
            "complete",
            &state,
            &[Phase::Active, Phase::Paused, Phase::Blocked],
        )?;
        let mut goal = state.goal.clone();
        goal.phase = Phase::Complete;
        goal.blocked_reason = None;
        goal.revision += 1;
        self.commit(
            agent,
            "complete",
            Some(&state),
            goal,
            state.rounds_started,
            Some(Activation::Disarmed),
        )
    }

    pub fn block(
        &self,
        agent: &AgentHandle,
        reference: Option<&GoalRef>,
        reason: BlockedReason,
    ) -> Result<GoalState, GoalError> {
        let message = reason.message.trim().to_owned();
        if !block_code_ok(&reason.code) || message.is_empty() {
            return Err(GoalError::new(
                "GOAL_INVALID_BLOCK_REASON",
                "goal block reason requires a lower-kebab-case code and a non-empty message",
            ));
        }
        let state = self.target(agent, reference)?;
        Self::transition("block", &state, &[Phase::Active])?;
        let mut goal = state.goal.clone();
        goal.phase = Phase::Blocked;
        goal.blocked_reason = Some(BlockedReason {
            code: reason.code,
            message,
        });
        goal.revision += 1;
        self.commit(
            agent,
            "block",
            Some(&state),
            goal,
            state.rounds_started,
            Some(Activation::Disarmed),
        )
    }

    /// Clears the current goal (tombstone); `Ok(None)` when there was none.
    pub fn clear(&self, agent: &AgentHandle) -> Result<Option<String>, GoalError> {
        let Some(state) = self.current(agent) else {
            return Ok(None);
        };
        let data = json!({
            "kind": "goal/change",
            "version": 1,
            "operation": "clear",
            "cleared": {"id": state.goal.id, "revision": state.goal.revision + 1},
            "clearedAt": now_ms().max(state.updated_at),
        });
        agent
            .log()
            .append("goal/change", data, None)
            .map_err(|e| GoalError::new("GOAL_APPEND_FAILED", e.to_string()))?;
        self.set_activation(agent, Activation::Disarmed);
        self.notify(agent);
        Ok(Some(state.goal.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_session::SessionHeader;
    use dsh_session::SurfaceIntent;
    use dsh_session::data::UserMessage;

    fn snapshot(id: &str, revision: u64, phase: Phase, max: u64) -> GoalSnapshot {
        GoalSnapshot {
            id: id.into(),
            revision,
            objective: format!("objective of {id}"),
            phase,
            blocked_reason: None,
            max_goal_rounds: max,
        }
    }

    fn change(log: &SessionLog, operation: &str, goal: &GoalSnapshot, rounds: u64) {
        let data = json!({
            "kind": "goal/change", "version": 1, "operation": operation,
            "goal": goal.to_json(), "roundsStarted": rounds, "createdAt": 1, "updatedAt": 2,
        });
        log.append("goal/change", data, None).unwrap();
    }

    fn clear(log: &SessionLog) {
        let data = json!({"kind": "goal/change", "version": 1, "operation": "clear"});
        log.append("goal/change", data, None).unwrap();
    }

    fn round(log: &SessionLog, goal: &GoalSnapshot, round: u64) {
        let state = GoalState {
            goal: goal.clone(),
            rounds_started: 0,
            created_at: 0,
            updated_at: 0,
        };
        let message = crate::driver::round_message(&state, round);
        log.append_data(&UserMessage(message), Some(SurfaceIntent::append()))
            .unwrap();
    }

    fn human(log: &SessionLog) {
        let message = dsh_protocol::Message::user_text("hello");
        log.append_data(&UserMessage(message), Some(SurfaceIntent::append()))
            .unwrap();
    }

    /// One append of a goal's life.
    enum Step {
        Human,
        Change(&'static str, GoalSnapshot, u64),
        Round(GoalSnapshot, u64),
        Clear,
    }

    fn run(log: &SessionLog, step: &Step) {
        match step {
            Step::Human => human(log),
            Step::Change(operation, goal, rounds) => change(log, operation, goal, *rounds),
            Step::Round(goal, n) => round(log, goal, *n),
            Step::Clear => clear(log),
        }
    }

    /// Every step of a goal's life, rounds out of order and stale ones included.
    fn script() -> Vec<Step> {
        let first = snapshot("goal-1", 1, Phase::Active, 3);
        let edited = snapshot("goal-1", 2, Phase::Active, 3);
        let second = snapshot("goal-2", 1, Phase::Active, 5);
        vec![
            Step::Human,
            Step::Change("create", first.clone(), 0),
            Step::Round(first.clone(), 1),
            Step::Round(first.clone(), 2),
            // Not the next round: ignored.
            Step::Round(first.clone(), 4),
            Step::Change("edit", edited.clone(), 2),
            // A round of the old revision: ignored.
            Step::Round(first, 3),
            Step::Round(edited.clone(), 3),
            Step::Human,
            Step::Clear,
            Step::Round(edited, 4),
            Step::Change("create", second.clone(), 0),
            Step::Round(second, 1),
        ]
    }

    #[test]
    fn the_incremental_fold_is_the_whole_log_fold() {
        // Caught up after every append, and after every third one.
        for every in [1, 3] {
            let log = SessionLog::in_memory(SessionHeader::new("s", None));
            let mut fold = GoalFold::default();
            for (i, step) in script().iter().enumerate() {
                run(&log, step);
                if i % every == 0 {
                    fold.catch_up(&log);
                    assert_eq!(
                        fold.state,
                        fold_goal(&log.events().unwrap()),
                        "after step {i}"
                    );
                    assert_eq!(fold.next_seq, log.len());
                }
            }
            fold.catch_up(&log);
            let whole = fold_goal(&log.events().unwrap());
            assert_eq!(fold.state, whole);
            let last = whole.unwrap();
            assert_eq!((last.goal.id.as_str(), last.rounds_started), ("goal-2", 1));
        }
    }

    #[test]
    fn a_shorter_log_under_the_same_id_restarts_the_fold() {
        let long = SessionLog::in_memory(SessionHeader::new("s", None));
        for step in script() {
            run(&long, &step);
        }
        let mut fold = GoalFold::default();
        fold.catch_up(&long);
        assert!(fold.state.is_some());
        // A reload of an earlier state of the session: the goal is not created yet.
        let short = SessionLog::in_memory(SessionHeader::new("s", None));
        human(&short);
        fold.catch_up(&short);
        assert_eq!(fold.state, None);
        assert_eq!(fold.next_seq, short.len());
        let goal = snapshot("goal-3", 1, Phase::Active, 2);
        change(&short, "create", &goal, 0);
        round(&short, &goal, 1);
        fold.catch_up(&short);
        assert_eq!(fold.state, fold_goal(&short.events().unwrap()));
        assert_eq!(fold.state.map(|s| s.rounds_started), Some(1));
    }

    #[test]
    fn block_codes_are_lower_kebab_case() {
        for ok in ["round-limit", "a", "model-reported", "x1-2b"] {
            assert!(block_code_ok(ok), "{ok}");
        }
        for bad in ["", "Round", "-a", "a-", "a--b", "1a", "a_b"] {
            assert!(!block_code_ok(bad), "{bad}");
        }
    }
}
