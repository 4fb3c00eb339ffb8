//! `get_goal`, `create_goal`, `update_goal` (upstream `tool-goal`): exclusive tools with the
//! authority rules of `authority.ts` and the wrap-up notice of `wrapup.ts`.

use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_agent::AgentStatus;
use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_tools::DefineError;
use dsh_tools::Tool;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolRun;
use dsh_user_questions::AgentDirectory;
use dsh_user_questions::Caller;
use dsh_user_questions::CallerStanding;
use serde_json::Value;
use serde_json::json;

use crate::BlockedReason;
use crate::GoalError;
use crate::GoalRef;
use crate::GoalState;
use crate::Goals;
use crate::MAX_SAFE_INTEGER;
use crate::domain::goal_round_of;

pub const GET_GOAL: &str = "get_goal";
pub const CREATE_GOAL: &str = "create_goal";
pub const UPDATE_GOAL: &str = "update_goal";
/// The system-prompt section id and slot (upstream order 114).
pub const SECTION: (&str, dsh_agent::prompt::Slot) = ("tool:goal", dsh_agent::prompt::Slot::Tools);

/// The `tool:goal` section, with the configured blocking threshold.
pub fn section_text(blocked_after_rounds: u64) -> String {
    format!(
        "Goal tools track one long-running objective across rounds in this session. Create a goal only when the person directly asks for sustained work toward an outcome (their request may be in any language); routine tasks need no goal. Before update_goal, call get_goal and copy its exact id and revision. After a resumed or forked session, call update_goal with action resume only when the person asks to continue. Mark a goal complete only once the whole objective is achieved and verified. Report it blocked only after the same blocking condition has held for at least {blocked_after_rounds} consecutive goal rounds."
    )
}

/// Tool configuration.
#[derive(Debug, Clone, Copy)]
pub struct GoalToolsConfig {
    pub blocked_after_rounds: u64,
}

impl Default for GoalToolsConfig {
    fn default() -> Self {
        Self {
            blocked_after_rounds: crate::DEFAULT_BLOCKED_AFTER_ROUNDS,
        }
    }
}

fn harness(message: &str, code: &str) -> ToolError {
    ToolError::harness(message, code)
}

fn goal_error(error: GoalError) -> ToolError {
    ToolError::coded("GoalError", error.code, error.message)
}

/// The live agent a goal tool may act for.
fn driver_agent(run: &ToolRun) -> Result<AgentHandle, ToolError> {
    let Some(caller) = run.agent() else {
        return Err(harness(
            "goal tools require a calling agent",
            "GOAL_TOOL_AGENT_REQUIRED",
        ));
    };
    let agent = AgentHandle::from_scope(caller.scope())
        .filter(|a| a.id() == caller.id() && a.status() == AgentStatus::Running)
        .ok_or_else(|| {
            harness(
                "goal tools require the exact live calling agent inside its active driver",
                "GOAL_TOOL_DRIVER_REQUIRED",
            )
        })?;
    if agent.log().turn_state().open_turn.is_none() {
        return Err(harness(
            "goal tools require an open model turn",
            "GOAL_TOOL_DRIVER_REQUIRED",
        ));
    }
    Ok(agent)
}

/// The sources of the current turn's `user/message`s.
fn turn_sources(agent: &AgentHandle) -> Vec<Value> {
    let log = agent.log();
    let start = log.last_of_kind("turn/start").map_or(0, |e| e.seq);
    let mut sources = Vec::new();
    let read = log.visit_since(start, |e| {
        if e.kind == "user/message"
            && let Some(source) = e.data.get("source")
        {
            sources.push(source.clone());
        }
    });
    if let Err(error) = read {
        tracing::warn!(%error, "goal: cannot read the session log");
    }
    sources
}

fn is_root(agent: &AgentHandle) -> bool {
    let caller = Caller {
        agent_id: agent.id().to_owned(),
        scope: agent.scope().clone(),
    };
    match agent.scope().service::<dyn AgentDirectory>() {
        Some(directory) => directory.standing(&caller) == CallerStanding::Root,
        None => agent.log().header().origin.as_deref() != Some("subagent"),
    }
}

fn direct_human(agent: &AgentHandle) -> bool {
    is_root(agent)
        && turn_sources(agent)
            .iter()
            .any(|s| s.get("kind").and_then(Value::as_str) == Some("user"))
}

fn in_goal_round(agent: &AgentHandle, current: Option<&GoalState>) -> bool {
    let Some(current) = current else {
        return false;
    };
    turn_sources(agent).iter().any(|s| {
        goal_round_of(s).is_some_and(|(id, revision, round)| {
            id == current.goal.id
                && revision == current.goal.revision
                && round == current.rounds_started
        })
    })
}

const NEEDS_HUMAN: &str = "this goal operation requires a direct human turn on a top-level agent";

fn render(value: &Value) -> Vec<ContentBlock> {
    vec![ContentBlock::text(value.to_string())]
}

fn output_schema() -> Value {
    json!({"type": "object"})
}

fn result_of(goals: &Goals, agent: &AgentHandle, state: Option<GoalState>) -> Value {
    match state {
        Some(state) => state.view(goals.activation(agent)),
        None => json!({"goal": null}),
    }
}

/// The three definitions.
pub fn definitions(
    goals: Arc<Goals>,
    config: GoalToolsConfig,
) -> Result<Vec<ToolDefinition>, DefineError> {
    let get = {
        let goals = goals.clone();
        Tool::builder(GET_GOAL)
            .description("Read the current goal of this session: its id, revision, objective, phase, rounds started, round cap, blocker and whether the goal-round driver is armed.")
            .raw_parameters(json!({"type": "object", "properties": {}}))
            .raw_output(output_schema(), |_, value| Ok(render(value)))
            .run(move |_args: Value, run: ToolRun| {
                let goals = goals.clone();
                async move {
                    let agent = driver_agent(&run)?;
                    Ok(result_of(&goals, &agent, goals.current(&agent)))
                }
            })
            .build()?
    };
    let create = {
        let goals = goals.clone();
        Tool::builder(CREATE_GOAL)
            .description("Create one persisted completion goal for a long-running objective the person directly asked for. Only a direct human request on a top-level agent may create a goal; subagents and automated turns cannot.")
            .raw_parameters(json!({
                "type": "object",
                "properties": {
                    "objective": {"type": "string", "description": "The outcome to reach, stated so that its completion can be verified."},
                    "max_goal_rounds": {"type": "number", "description": "Optional cap on autonomous goal rounds."}
                },
                "required": ["objective"]
            }))
            .raw_output(output_schema(), |_, value| Ok(render(value)))
            .run(move |args: Value, run: ToolRun| {
                let goals = goals.clone();
                async move {
                    let agent = driver_agent(&run)?;
                    if !direct_human(&agent) {
                        return Err(harness(NEEDS_HUMAN, "GOAL_TOOL_AUTHORITY_REQUIRED"));
                    }
                    let objective = args.get("objective").and_then(Value::as_str).unwrap_or("");
                    let max = args
                        .get("max_goal_rounds")
                        .and_then(Value::as_f64)
                        .filter(|n| *n != 0.0);
                    let state = goals.create(&agent, objective, max).map_err(goal_error)?;
                    Ok(result_of(&goals, &agent, Some(state)))
                }
            })
            .build()?
    };
    let update = {
        let goals = goals.clone();
        Tool::builder(UPDATE_GOAL)
            .description("Update the current goal at its exact revision (copy id and revision from get_goal). edit changes the objective or round cap, pause and resume stop and restart goal rounds, complete marks the objective achieved, blocked reports a persistent blocker.")
            .raw_parameters(json!({
                "type": "object",
                "properties": {
                    "goal_id": {"type": "string", "description": "The id from get_goal."},
                    "revision": {"type": "number", "description": "The revision from get_goal."},
                    "action": {"type": "string", "enum": ["edit", "pause", "resume", "complete", "blocked"], "description": "edit | pause | resume | complete | blocked"},
                    "objective": {"type": "string", "description": "New objective (edit only)."},
                    "max_goal_rounds": {"type": "number", "description": "New round cap (edit only)."},
                    "blocked_reason": {"type": "string", "description": "What blocks the goal (blocked only)."}
                },
                "required": ["goal_id", "revision", "action"]
            }))
            .raw_output(output_schema(), |_, value| Ok(render(value)))
            .run(move |args: Value, run: ToolRun| {
                let goals = goals.clone();
                async move { update_goal(&goals, config, &args, &run) }
            })
            .build()?
    };
    Ok(vec![get, create, update])
}

fn update_goal(
    goals: &Goals,
    config: GoalToolsConfig,
    args: &Value,
    run: &ToolRun,
) -> Result<Value, ToolError> {
    let agent = driver_agent(run)?;
    let invalid = |message: &str| harness(message, "GOAL_TOOL_INVALID_UPDATE");
    let text = |key: &str| {
        args.get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let goal_id = args.get("goal_id").and_then(Value::as_str).unwrap_or("");
    let revision = args.get("revision").and_then(Value::as_f64).unwrap_or(0.0);
    let action = args.get("action").and_then(Value::as_str).unwrap_or("");
    let objective = text("objective");
    let max_rounds = args
        .get("max_goal_rounds")
        .and_then(Value::as_f64)
        .filter(|n| *n != 0.0);
    let blocked_reason = text("blocked_reason");
    let revision_ok = revision.is_finite()
        && revision >= 1.0
        && revision.fract() == 0.0
        && revision <= MAX_SAFE_INTEGER as f64;
    if goal_id.is_empty() || goal_id.trim() != goal_id || !revision_ok {
        return Err(invalid(
            "goal_id must be non-empty and revision must be a positive safe integer",
        ));
    }
    let edits = objective.is_some() || max_rounds.is_some();
    match action {
        "edit" if blocked_reason.is_some() => {
            return Err(invalid("blocked_reason is valid only with action blocked"));
        }
        "pause" | "resume" if edits || blocked_reason.is_some() => {
            return Err(invalid(
                "objective and max_goal_rounds are valid only with action edit; blocked_reason is valid only with action blocked",
            ));
        }
        "complete" | "blocked" if edits => {
            return Err(invalid(
                "objective and max_goal_rounds are valid only with action edit",
            ));
        }
        "complete" if blocked_reason.is_some() => {
            return Err(invalid("blocked_reason is valid only with action blocked"));
        }
        "blocked" if blocked_reason.is_none_or(|r| r.trim().is_empty()) => {
            return Err(invalid("blocked_reason is required with action blocked"));
        }
        _ => {}
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let reference = GoalRef {
        id: goal_id.to_owned(),
        revision: revision as u64,
    };
    let human = direct_human(&agent);
    let current = goals.current(&agent);
    let by_round = !human && in_goal_round(&agent, current.as_ref());
    match action {
        "edit" | "pause" | "resume" if !human => {
            return Err(harness(NEEDS_HUMAN, "GOAL_TOOL_AUTHORITY_REQUIRED"));
        }
        "complete" | "blocked" if !human && !by_round => {
            return Err(harness(
                "complete and blocked require a direct human turn or the current goal round",
                "GOAL_TOOL_AUTHORITY_REQUIRED",
            ));
        }
        "blocked" if by_round => {
            let round = current.as_ref().map_or(0, |c| c.rounds_started);
            if round < config.blocked_after_rounds {
                return Err(harness(
                    &format!(
                        "blocked requires at least {} consecutive goal rounds; current round is {round}",
                        config.blocked_after_rounds
                    ),
                    "GOAL_TOOL_BLOCK_THRESHOLD",
                ));
            }
        }
        _ => {}
    }
    let state = match action {
        "edit" => goals.edit(&agent, Some(&reference), objective, max_rounds),
        "pause" => goals.pause(&agent, Some(&reference)),
        "resume" => goals.resume(&agent, Some(&reference)),
        "complete" => goals.complete(&agent, Some(&reference)),
        "blocked" => goals.block(
            &agent,
            Some(&reference),
            BlockedReason {
                code: "model-reported".into(),
                message: blocked_reason.unwrap_or_default().to_owned(),
            },
        ),
        other => return Err(invalid(&format!("unknown action {other}"))),
    }
    .map_err(goal_error)?;
    if by_round && matches!(action, "complete" | "blocked") {
        run.defer_context(wrap_up(action, &state));
    }
    Ok(result_of(goals, &agent, Some(state)))
}

fn bounded(text: &str, cap: usize) -> String {
    if text.chars().count() <= cap {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(cap.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The closing notice deferred after a goal round's successful `complete` / `blocked`.
pub fn wrap_up(action: &str, state: &GoalState) -> Message {
    let objective = Value::from(state.goal.objective.as_str()).to_string();
    let text = match action {
        "complete" => format!(
            "<goal_complete>\nObjective: {objective}\nThe goal is marked complete and this autonomous run is ending. Write the closing message to the user now: state the outcome, summarize what was done and how it was verified, and point to the concrete results (files, commits, or other artifacts). Report only what earlier rounds and tool results in this session actually establish; when a detail is not in the session, say so instead of inventing it. Note anything the user should review or do next. Address the user directly. Do not call any more tools in this run; further work waits for the user's next instruction.\n</goal_complete>"
        ),
        _ => {
            let reason = state
                .goal
                .blocked_reason
                .as_ref()
                .map_or(String::new(), |r| r.message.clone());
            format!(
                "<goal_blocked>\nObjective: {objective}\nBlocked: {}\nThe goal is marked blocked and this autonomous run is ending. Write the closing message to the user now: state what has been completed so far, describe the concrete blocking condition and what you tried, and say exactly what you need from the user to continue. Report only what earlier rounds and tool results in this session actually establish; when a detail is not in the session, say so instead of inventing it. Address the user directly. Do not call any more tools in this run; further work waits for the user's next instruction.\n</goal_blocked>",
                Value::from(reason)
            )
        }
    };
    let summary = bounded(&format!("{action}: {}", state.goal.objective), 80);
    Message::user(
        vec![ContentBlock::text(text)],
        MessageSource::plugin("tool-goal")
            .with("form", "notice")
            .with("summary", summary),
    )
}

/// Registers the three tools on `registry`, owned by `owner`.
pub fn register(
    registry: &ToolRegistry,
    owner: &Scope,
    goals: Arc<Goals>,
    config: GoalToolsConfig,
) -> Result<Vec<Disposer>, dsh_tools::SetupError> {
    let mut disposers = Vec::new();
    for definition in definitions(goals, config)? {
        disposers.push(registry.register(owner, definition)?);
    }
    Ok(disposers)
}
