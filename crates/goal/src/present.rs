//! How a person sees the goal: `goal/change` as one status notice in every front-end's
//! transcript (registered in the host's presenter registry by the plugin).

use dsh_plugin::transcript::Event;
use dsh_plugin::transcript::Item;
use dsh_plugin::transcript::Notice;
use dsh_plugin::transcript::NoticeLevel;
use serde_json::Value;

use crate::GoalSnapshot;
use crate::Phase;

/// The event kind this presenter reads.
pub const KIND: &str = "goal/change";

/// `goal/change` → `goal <phase>: <objective> (round n/max)`, or `goal cleared`. An unreadable
/// record shows nothing (the domain fold ignores it too).
pub fn present(event: &Event) -> Vec<Item> {
    let data = &event.data;
    if data.get("operation").and_then(Value::as_str) == Some("clear") {
        return vec![notice(NoticeLevel::Info, "goal cleared".to_owned())];
    }
    let Some(goal) = data.get("goal").and_then(GoalSnapshot::from_json) else {
        return Vec::new();
    };
    let rounds = data
        .get("roundsStarted")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let level = match goal.phase {
        Phase::Blocked => NoticeLevel::Warning,
        Phase::Active | Phase::Paused | Phase::Complete => NoticeLevel::Info,
    };
    let text = format!(
        "goal {}: {} (round {rounds}/{})",
        goal.phase.as_str(),
        goal.objective,
        goal.max_goal_rounds
    );
    vec![notice(level, text)]
}

fn notice(level: NoticeLevel, text: String) -> Item {
    Item::Notice(Notice {
        level,
        source: "goal".to_owned(),
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_goal_change_is_one_status_notice() {
        let goal = json!({"id": "g1", "revision": 2, "objective": "ship it", "phase": "active",
            "maxGoalRounds": 7});
        let event = Event::new(
            KIND,
            4,
            0,
            json!({"kind": KIND, "version": 1, "operation": "create", "goal": goal,
                "roundsStarted": 1, "createdAt": 0, "updatedAt": 0}),
        );
        assert_eq!(
            present(&event),
            vec![Item::Notice(Notice {
                level: NoticeLevel::Info,
                source: "goal".into(),
                text: "goal active: ship it (round 1/7)".into(),
            })]
        );
        let cleared = Event::new(KIND, 5, 0, json!({"kind": KIND, "operation": "clear"}));
        assert_eq!(
            present(&cleared),
            vec![notice(NoticeLevel::Info, "goal cleared".into())]
        );
    }
}
