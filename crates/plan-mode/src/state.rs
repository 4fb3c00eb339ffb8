//! The plan-mode state: log fold, pending selections, narration, the section and the pre-step
//! listener that applies pending selections.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::PreStepDecision;
use dsh_agent::prompt::PromptRegistry;
use dsh_agent::prompt::Section;
use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_session::Event;
use dsh_session::LogFold;
use dsh_session::SessionLog;
use serde_json::Value;
use serde_json::json;

use crate::PLUGIN;
use crate::SECTION;
use crate::modes::plan_state_of;

/// The shipped guidance (prose of our own; the configured text replaces it verbatim).
pub const DEFAULT_SECTION: &str = "Plan mode is active. Stay in plan mode until exit_plan_mode succeeds or the user switches the session back. Explore with reads, searches and checks that change nothing: no edits, no configuration changes, no formatter rewrites, no commits. Mutating tools stay listed only so the tool list does not change; do not use them now. Do not use todo_write to plan. Use ask_user_question only for choices that belong to the user. Make the plan decision-complete: someone else should be able to carry it out without further questions. Submit the complete plan, starting with a # title, through exit_plan_mode as your only and final tool call; after a rejection, revise and submit again. If the review channel is unavailable, stay in plan mode and tell the user.";

/// Why a plan-mode config was refused (upstream's load-time messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanModeConfigError {
    #[error("PlanModeConfig needs a string `section`")]
    NoSection,
    #[error("PlanModeConfig needs a non-empty `section`")]
    EmptySection,
    #[error("PlanModeConfig has unknown key(s) {0} — config is {{ section }}")]
    UnknownKeys(String),
}

/// `{section}` with upstream's load-time validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanModeConfig {
    pub section: String,
}

impl PlanModeConfig {
    /// Validates a JSON config object with upstream's messages.
    pub fn from_json(value: &Value) -> Result<Self, PlanModeConfigError> {
        let Some(map) = value.as_object() else {
            return Err(PlanModeConfigError::NoSection);
        };
        let unknown: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "section")
            .collect();
        if !unknown.is_empty() {
            return Err(PlanModeConfigError::UnknownKeys(unknown.join(", ")));
        }
        match map.get("section").and_then(Value::as_str) {
            None => Err(PlanModeConfigError::NoSection),
            Some(text) if text.trim().is_empty() => Err(PlanModeConfigError::EmptySection),
            Some(text) => Ok(Self {
                section: text.to_owned(),
            }),
        }
    }
}

impl Default for PlanModeConfig {
    fn default() -> Self {
        Self {
            section: DEFAULT_SECTION.to_owned(),
        }
    }
}

/// The plan state after `events` (`false` before any `plan/mode`).
pub fn fold_plan(events: &[Arc<Event>]) -> bool {
    events
        .iter()
        .rev()
        .find(|e| e.kind == "plan/mode")
        .and_then(|e| e.data.get("active").and_then(Value::as_bool))
        .unwrap_or(false)
}

/// The plan state the latest `request/header` was taken under (`None` before any request), as
/// a fold kept across calls: the events before `next_seq` are folded.
#[derive(Debug, Clone, Copy, Default)]
struct HeaderFold {
    next_seq: u64,
    /// [`fold_plan`] of the folded events.
    active: bool,
    /// [`fold_plan`] of the events before the latest folded `request/header`.
    at_header: Option<bool>,
}

impl HeaderFold {
    /// Folds what `log` appended since the last call. A log shorter than what was folded is
    /// another instance under the same id (a reload): the fold starts over.
    fn catch_up(&mut self, log: &SessionLog) {
        if let Err(error) = log.catch_up(self) {
            // The fold keeps what it folded; the next call tries again.
            tracing::warn!(%error, "plan mode: cannot read the session log");
        }
    }
}

impl LogFold for HeaderFold {
    fn next_seq(&mut self) -> &mut u64 {
        &mut self.next_seq
    }

    fn apply(&mut self, event: &Event) {
        match event.kind.as_str() {
            "plan/mode" => self.active = plan_state_of(event).unwrap_or(false),
            "request/header" => self.at_header = Some(self.active),
            _ => {}
        }
    }
}

/// The switch narration.
pub fn narration(active: bool) -> Message {
    let text = if active {
        "The user switched this session to plan mode."
    } else {
        "The user switched this session back to the default mode."
    };
    Message::user(
        vec![ContentBlock::text(text)],
        MessageSource::plugin(PLUGIN)
            .with("form", "notice")
            .with("summary", text),
    )
}

/// What `set` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetOutcome {
    Committed,
    Queued,
    Cancelled,
    Noop,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    active: bool,
    narrate: bool,
}

/// The plan-mode service (one per composition).
pub struct PlanMode {
    config: PlanModeConfig,
    pending: Mutex<HashMap<String, Pending>>,
    /// The header fold of each agent that needed one, by agent id.
    headers: Mutex<HashMap<String, HeaderFold>>,
}

impl std::fmt::Debug for PlanMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanMode").finish_non_exhaustive()
    }
}

impl PlanMode {
    pub fn new(config: PlanModeConfig) -> Self {
        Self {
            config,
            pending: Mutex::new(HashMap::new()),
            headers: Mutex::new(HashMap::new()),
        }
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        dsh_sync::lock(&self.pending)
    }

    /// The plan state the latest `request/header` of `log` (agent `id`) was taken under, if any
    /// request was made: the latest `plan/mode` before that header. O(1) unless a `plan/mode`
    /// was logged since the header; then the agent's header fold answers.
    fn header_state(&self, id: &str, log: &SessionLog) -> Option<bool> {
        let header = log.last_of_kind("request/header")?;
        match log.last_of_kind("plan/mode") {
            None => Some(false),
            Some(mode) if mode.seq < header.seq => Some(plan_state_of(&mode).unwrap_or(false)),
            Some(_) => {
                let mut headers = dsh_sync::lock(&self.headers);
                let fold = headers.entry(id.to_owned()).or_default();
                fold.catch_up(log);
                fold.at_header
            }
        }
    }

    /// The logged state: the latest `plan/mode` event (O(1); the system prompt asks on every
    /// request, so a scan of the log here made each step cost the length of the session).
    pub fn logged(&self, agent: &AgentHandle) -> bool {
        agent
            .log()
            .last_of_kind("plan/mode")
            .and_then(|e| crate::modes::plan_state_of(&e))
            .unwrap_or(false)
    }

    /// The pending selection, else the logged state (what an ACP client shows).
    pub fn current(&self, agent: &AgentHandle) -> bool {
        self.pending()
            .get(agent.id())
            .map_or_else(|| self.logged(agent), |p| p.active)
    }

    /// Whether a selection waits for the next pre-step.
    pub fn has_pending(&self, agent: &AgentHandle) -> bool {
        self.pending().contains_key(agent.id())
    }

    /// Selects plan mode on or off (`planMode.set`).
    pub fn set(&self, agent: &AgentHandle, active: bool) -> SetOutcome {
        self.select(agent, active, true)
    }

    /// `exit_plan_mode`'s approval: leave plan mode at the next pre-step, without narration.
    pub fn approve_exit(&self, agent: &AgentHandle) {
        self.pending().insert(
            agent.id().to_owned(),
            Pending {
                active: false,
                narrate: false,
            },
        );
    }

    fn select(&self, agent: &AgentHandle, active: bool, narrate: bool) -> SetOutcome {
        let logged = self.logged(agent);
        if active == self.current(agent) {
            return SetOutcome::Noop;
        }
        if agent.log().turn_state().open_turn.is_some() {
            self.pending()
                .insert(agent.id().to_owned(), Pending { active, narrate });
            return if active == logged {
                SetOutcome::Cancelled
            } else {
                SetOutcome::Queued
            };
        }
        self.pending().remove(agent.id());
        let log = agent.log();
        // Read before the append (which does not move it), while the latest `plan/mode` is
        // still most likely older than the latest header.
        let at_header = narrate
            .then(|| self.header_state(agent.id(), log))
            .flatten();
        if let Err(error) = log.append("plan/mode", json!({ "active": active }), None) {
            tracing::warn!(%error, "cannot log plan/mode");
            return SetOutcome::Noop;
        }
        if at_header == Some(!active)
            && let Err(error) = agent.inject(narration(active))
        {
            tracing::warn!(%error, "cannot inject the plan-mode narration");
        }
        SetOutcome::Committed
    }

    /// The `plan:policy` text for an agent: the configured section while active. The loop
    /// assembles the prompt just before the pre-step that applies a pending selection, so the
    /// pending state is what the coming request is taken under.
    pub fn section_text(&self, agent: &AgentHandle) -> String {
        if self.current(agent) {
            self.config.section.clone()
        } else {
            String::new()
        }
    }
}

/// Installs plan mode: the `plan:policy` section (computed per agent); pending selections are
/// applied at pre-step (after the inner chain, on an entering decision).
pub fn install(
    plan: &Arc<PlanMode>,
    hooks: &Arc<AgentHooks>,
    prompts: &Arc<PromptRegistry>,
    owner: &Scope,
) -> Vec<Disposer> {
    let mut disposers = Vec::new();
    {
        let plan = plan.clone();
        disposers.push(prompts.register_section(
            owner,
            Section::dynamic(SECTION.0, SECTION.1, move |scope| {
                AgentHandle::from_scope(scope)
                    .map(|agent| plan.section_text(&agent))
                    .unwrap_or_default()
            }),
        ));
    }
    {
        let plan = plan.clone();
        disposers.push(hooks.pre_step.register(owner, move |input, next| {
            let plan = plan.clone();
            Box::pin(async move {
                let agent = input.agent.clone();
                let signal = input.signal.clone();
                let decision = next.run(input).await?;
                let PreStepDecision::Enter(mut messages) = decision else {
                    return Ok(decision);
                };
                if signal.is_cancelled() {
                    return Ok(PreStepDecision::Enter(messages));
                }
                let Some(pending) = plan.pending().remove(agent.id()) else {
                    return Ok(PreStepDecision::Enter(messages));
                };
                let log = agent.log();
                // Both read before the append, like the narration decision always was.
                let logged = plan.logged(&agent);
                let at_header = pending
                    .narrate
                    .then(|| plan.header_state(agent.id(), log))
                    .flatten();
                if logged != pending.active
                    && let Err(error) =
                        log.append("plan/mode", json!({ "active": pending.active }), None)
                {
                    tracing::warn!(%error, "cannot log plan/mode");
                }
                if at_header == Some(!pending.active) {
                    messages.push(narration(pending.active));
                }
                Ok(PreStepDecision::Enter(messages))
            })
        }));
    }
    disposers
}

#[cfg(test)]
mod tests {
    use dsh_session::SessionHeader;

    use super::*;

    #[test]
    fn config_refusals_name_what_to_fix() {
        use serde_json::json;
        assert_eq!(
            PlanModeConfig::from_json(&json!(3)),
            Err(PlanModeConfigError::NoSection)
        );
        assert_eq!(
            PlanModeConfig::from_json(&json!({"section": "  "}))
                .unwrap_err()
                .to_string(),
            "PlanModeConfig needs a non-empty `section`"
        );
        assert_eq!(
            PlanModeConfig::from_json(&json!({"section": "x", "extra": 1, "more": 2}))
                .unwrap_err()
                .to_string(),
            "PlanModeConfig has unknown key(s) extra, more — config is { section }"
        );
    }

    /// The definition: [`fold_plan`] of the events before the latest `request/header`.
    fn whole_log_header_state(events: &[Arc<Event>]) -> Option<bool> {
        let at = events.iter().rposition(|e| e.kind == "request/header")?;
        Some(fold_plan(&events[..at]))
    }

    fn append(log: &SessionLog, step: &str) {
        let (kind, data) = match step {
            "on" => ("plan/mode", json!({"active": true})),
            "off" => ("plan/mode", json!({"active": false})),
            "odd" => ("plan/mode", json!({"active": "yes"})),
            "header" => (
                "request/header",
                json!({"header": {"config": {"provider": "p", "model": "m"}}, "reason": "initial"}),
            ),
            _ => ("other/event", json!({})),
        };
        log.append(kind, data, None).unwrap();
    }

    /// Toggles with and without requests between them, so both the O(1) answer and the fold
    /// (a `plan/mode` since the latest header) are taken, the fold several times with appends
    /// in between.
    const SCRIPT: &[&str] = &[
        "x", "on", "x", "header", "x", "off", "on", "x", "header", "off", "x", "on", "off",
        "header", "header", "odd", "x", "header", "on", "x", "off", "x", "on", "header", "x",
        "off", "on", "off", "x",
    ];

    #[test]
    fn the_header_state_is_the_whole_log_one() {
        let plan = PlanMode::new(PlanModeConfig::default());
        let log = SessionLog::in_memory(SessionHeader::new("s", None));
        assert_eq!(plan.header_state("s", &log), None);
        let mut folded = 0;
        for (i, step) in SCRIPT.iter().enumerate() {
            append(&log, step);
            let whole = whole_log_header_state(&log.events().unwrap());
            assert_eq!(
                plan.header_state("s", &log),
                whole,
                "after step {i} ({step})"
            );
            // A fresh service (no fold yet) answers the same.
            let fresh = PlanMode::new(PlanModeConfig::default());
            assert_eq!(
                fresh.header_state("s", &log),
                whole,
                "fresh, after step {i}"
            );
            if let Some(fold) = plan.headers.lock().unwrap().get("s") {
                folded = fold.next_seq;
            }
        }
        // The fold answered some of them.
        assert!(folded > 0);
    }

    #[test]
    fn the_fold_is_the_whole_log_fold_at_every_length() {
        let log = SessionLog::in_memory(SessionHeader::new("s", None));
        let mut fold = HeaderFold::default();
        for (i, step) in SCRIPT.iter().enumerate() {
            append(&log, step);
            if i % 2 == 0 {
                fold.catch_up(&log);
                let events = log.events().unwrap();
                assert_eq!(fold.at_header, whole_log_header_state(&events), "step {i}");
                assert_eq!(fold.active, fold_plan(&events), "step {i}");
            }
        }
    }

    #[test]
    fn a_shorter_log_under_the_same_id_restarts_the_fold() {
        let plan = PlanMode::new(PlanModeConfig::default());
        let long = SessionLog::in_memory(SessionHeader::new("s", None));
        for step in ["on", "header", "off"] {
            append(&long, step);
        }
        assert_eq!(plan.header_state("s", &long), Some(true));
        // A reload of another state of the session: the fold must not keep `Some(true)`.
        let short = SessionLog::in_memory(SessionHeader::new("s", None));
        for step in ["header", "on"] {
            append(&short, step);
        }
        assert_eq!(plan.header_state("s", &short), Some(false));
        assert_eq!(
            plan.header_state("s", &short),
            whole_log_header_state(&short.events().unwrap())
        );
    }
}
