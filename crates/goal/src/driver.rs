//! The goal-round driver (upstream `goal-round-driver`): while the current goal is active and
//! armed, each whole-agent idle queues the next `<goal_round>` prompt as a new turn.
//!
//! Deviation, documented: a goal message found stale at pre-step (goal no longer active and
//! armed, revision changed, or not the next round) is dropped from the batch rather than
//! rejecting the step and re-queuing the other claimed messages.

use std::sync::Arc;

use dsh_agent::AgentEvent;
use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::AgentStatus;
use dsh_agent::PreStepDecision;
use dsh_agent::SessionStarted;
use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_session::SessionLog;
use serde_json::Value;

use crate::Activation;
use crate::BlockedReason;
use crate::GoalState;
use crate::Goals;
use crate::Phase;
use crate::domain::goal_round_of;

/// The round prompt, exactly.
pub fn round_message(state: &GoalState, round: u64) -> Message {
    let goal = &state.goal;
    let text = format!(
        "<goal_round>\nObjective: {}\nRound: {round}/{}\n\nContinue working toward the objective in this same session. Treat the current workspace, tool results, and durable session state as authoritative; inspect them instead of assuming earlier narration is still current. Make concrete progress and verify the result. Before claiming completion, gather evidence that the whole objective is achieved, read the current goal, and mark it complete. If work remains, leave the goal active for the next round. Follow the configured goal-tool policy before reporting a blocker.\n</goal_round>",
        Value::from(goal.objective.as_str()),
        goal.max_goal_rounds
    );
    let source = MessageSource::from_map(
        serde_json::json!({"kind": "goal", "goalId": goal.id, "revision": goal.revision, "round": round})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    )
    .unwrap_or_else(MessageSource::user);
    Message::user(vec![ContentBlock::text(text)], source)
}

fn is_goal_message(message: &Message) -> bool {
    message.source.kind() == "goal"
}

/// Whether the last finished turn was an aborted goal round.
fn cancelled_round(log: &SessionLog) -> bool {
    let Some(end) = log.last_of_kind("turn/end") else {
        return false;
    };
    let aborted = end.data.pointer("/reason/kind").and_then(Value::as_str) == Some("aborted");
    if !aborted {
        return false;
    }
    let start = match log.last_of_kind("turn/start") {
        Some(start) if start.seq < end.seq => start.seq,
        None => 0,
        // A turn opened after that end (not at idle): find the ended turn's own start.
        Some(_) => match log.events() {
            Ok(events) => events
                .get(..usize::try_from(end.seq).unwrap_or(usize::MAX))
                .and_then(|before| before.iter().rposition(|e| e.kind == "turn/start"))
                .map_or(0, |at| at as u64),
            Err(error) => {
                tracing::warn!(%error, "goal: cannot read the session log");
                return false;
            }
        },
    };
    // A long turn is read back a window at a time, never held whole.
    let mut goal_round = false;
    let read = log.visit_since(start, |e| {
        goal_round |= e.seq < end.seq
            && (e.kind == "user/message" || e.kind == "agent/inbox/spliced")
            && e.data.to_string().contains("\"kind\":\"goal\"");
    });
    if let Err(error) = read {
        tracing::warn!(%error, "goal: cannot read the session log");
        return false;
    }
    goal_round
}

/// One drive at idle.
pub fn drive(goals: &Goals, agent: &AgentHandle) {
    // A closed agent (a one-shot run whose task has ended, or one being disposed) gets no
    // round, and no `queue-failed` block either: not being able to queue is not a failure.
    if !agent.accepts_input() || agent.status() != AgentStatus::Idle {
        return;
    }
    let Some(state) = goals.current(agent) else {
        return;
    };
    if state.goal.phase != Phase::Active || goals.activation(agent) != Activation::Armed {
        return;
    }
    if cancelled_round(agent.log()) {
        if let Err(error) = goals.pause(agent, None) {
            tracing::warn!(%error, "cannot pause the goal after a cancelled round");
        }
        return;
    }
    if agent.pending().0.iter().any(is_goal_message) {
        return;
    }
    if state.rounds_started >= state.goal.max_goal_rounds {
        let reason = BlockedReason {
            code: "round-limit".into(),
            message: format!(
                "Goal reached its configured limit of {} rounds.",
                state.goal.max_goal_rounds
            ),
        };
        if let Err(error) = goals.block(agent, None, reason) {
            tracing::warn!(%error, "cannot block the goal at its round limit");
        }
        return;
    }
    let round = state.rounds_started + 1;
    if let Err(error) = agent.followup(round_message(&state, round)) {
        let reason = BlockedReason {
            code: "queue-failed".into(),
            message: format!("Could not queue goal round {round}: {error}"),
        };
        if let Err(error) = goals.block(agent, None, reason) {
            tracing::warn!(%error, "cannot block the goal after a failed queue");
        }
    }
}

fn spawn_drive(goals: &Arc<Goals>, scope: &Scope) {
    let (goals, scope) = (goals.clone(), scope.clone());
    if tokio::runtime::Handle::try_current().is_err() {
        return;
    }
    tokio::spawn(async move {
        if let Some(agent) = AgentHandle::from_scope(&scope) {
            drive(&goals, &agent);
        }
    });
}

/// Installs the driver: session starts disarm and subscribe the agent, idles and goal changes
/// drive, `agent/error` disarms, stale goal messages are dropped at pre-step.
pub fn install(goals: &Arc<Goals>, hooks: &Arc<AgentHooks>, owner: &Scope) -> Vec<Disposer> {
    let mut disposers = Vec::new();
    {
        let goals = goals.clone();
        let hooks_for_agent = hooks.clone();
        disposers.push(
            hooks
                .session_start
                .register(owner, move |event: &SessionStarted| {
                    let agent = &event.agent;
                    goals.disarm(agent);
                    {
                        // The agent's goal fold goes with it.
                        let (goals, id) = (Arc::downgrade(&goals), agent.id().to_owned());
                        agent.scope().defer(move || {
                            if let Some(goals) = goals.upgrade() {
                                goals.forget(&id);
                            }
                        });
                    }
                    let scope = agent.scope().clone();
                    let goals = goals.clone();
                    let listener = hooks_for_agent
                        .events
                        .register(agent.scope(), move |event| {
                            match event {
                                AgentEvent::Status {
                                    status: AgentStatus::Idle,
                                    ..
                                } => spawn_drive(&goals, &scope),
                                AgentEvent::Error { .. } => {
                                    if let Some(agent) = AgentHandle::from_scope(&scope) {
                                        goals.disarm(&agent);
                                    }
                                }
                                _ => {}
                            }
                            Ok(())
                        });
                    // Owned by the agent's scope: removed with the agent.
                    drop(listener);
                    Ok(())
                }),
        );
    }
    {
        let weak = Arc::downgrade(goals);
        goals.on_change(move |agent| {
            if let Some(goals) = weak.upgrade() {
                spawn_drive(&goals, agent.scope());
            }
        });
    }
    {
        let goals = goals.clone();
        disposers.push(hooks.pre_step.register(owner, move |mut input, next| {
            let goals = goals.clone();
            Box::pin(async move {
                if input.messages.iter().any(is_goal_message) {
                    let current = goals.current(&input.agent);
                    let armed = goals.activation(&input.agent) == Activation::Armed;
                    input.messages.retain(|message| {
                        let Some((id, revision, round)) =
                            goal_round_of(&Value::Object(message.source.as_map().clone()))
                        else {
                            return true;
                        };
                        current.as_ref().is_some_and(|c| {
                            armed
                                && c.goal.phase == Phase::Active
                                && c.goal.id == id
                                && c.goal.revision == revision
                                && round == c.rounds_started + 1
                        })
                    });
                }
                let decision = next.run(input).await?;
                Ok::<PreStepDecision, dsh_kernel::HookError>(decision)
            })
        }));
    }
    disposers
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use dsh_session::Event;
    use dsh_session::SessionHeader;
    use dsh_session::SurfaceIntent;
    use dsh_session::data::UserMessage;
    use serde_json::json;

    use super::*;
    use crate::GoalSnapshot;

    /// The definition, over the whole log.
    fn whole_log(events: &[Arc<Event>]) -> bool {
        let Some(end) = events.iter().rposition(|e| e.kind == "turn/end") else {
            return false;
        };
        let aborted = events[end]
            .data
            .pointer("/reason/kind")
            .and_then(Value::as_str)
            == Some("aborted");
        if !aborted {
            return false;
        }
        let start = events[..end]
            .iter()
            .rposition(|e| e.kind == "turn/start")
            .unwrap_or(0);
        events[start..end].iter().any(|e| {
            (e.kind == "user/message" || e.kind == "agent/inbox/spliced")
                && e.data.to_string().contains("\"kind\":\"goal\"")
        })
    }

    fn append(log: &SessionLog, step: &str, turn: u64) {
        match step {
            "start" => drop(
                log.append("turn/start", json!({"turn": turn}), None)
                    .unwrap(),
            ),
            "aborted" | "completed" => drop(
                log.append(
                    "turn/end",
                    json!({"turn": turn, "reason": {"kind": step}}),
                    None,
                )
                .unwrap(),
            ),
            "goal" | "human" => {
                let message = if step == "goal" {
                    let state = GoalState {
                        goal: GoalSnapshot {
                            id: "g".into(),
                            revision: 1,
                            objective: "o".into(),
                            phase: Phase::Active,
                            blocked_reason: None,
                            max_goal_rounds: 9,
                        },
                        rounds_started: 0,
                        created_at: 0,
                        updated_at: 0,
                    };
                    round_message(&state, 1)
                } else {
                    Message::user_text("hi")
                };
                log.append_data(&UserMessage(message), Some(SurfaceIntent::append()))
                    .unwrap();
            }
            _ => drop(log.append("other/event", json!({}), None).unwrap()),
        }
    }

    #[test]
    fn a_cancelled_round_is_read_from_the_last_turn_only() {
        let scripts: &[&[&str]] = &[
            &[],
            &["goal", "aborted"],
            &["start", "goal", "x", "aborted"],
            &["start", "goal", "completed"],
            &["start", "goal", "completed", "start", "human", "aborted"],
            &[
                "start",
                "human",
                "completed",
                "start",
                "x",
                "goal",
                "aborted",
            ],
            // A turn opened after the aborted one: its start is found by walking back.
            &["start", "goal", "aborted", "start", "human"],
            &[
                "start",
                "goal",
                "completed",
                "start",
                "human",
                "aborted",
                "start",
                "goal",
            ],
            &["goal", "x", "aborted", "start", "x"],
        ];
        let mut expected = Vec::new();
        for script in scripts {
            let log = SessionLog::in_memory(SessionHeader::new("s", None));
            let mut turn = 0;
            for step in *script {
                if *step == "start" {
                    turn += 1;
                }
                append(&log, step, turn);
            }
            let cancelled = cancelled_round(&log);
            assert_eq!(cancelled, whole_log(&log.events().unwrap()), "{script:?}");
            expected.push(cancelled);
        }
        assert_eq!(
            expected,
            [false, true, true, false, false, true, true, false, true]
        );
    }
}
