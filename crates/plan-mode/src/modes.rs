//! Plan mode as a second axis of a front-end's session modes (ACP `session/set_mode`).
//!
//! ACP session modes already select permission presets; plan mode is independent of them
//! (guidance only). The two axes are offered as *combined modes*: every base mode `<m>` also
//! exists as `<m>+plan`. These helpers own the id scheme so the front-end and the tests agree.

use dsh_session::Event;
use serde_json::Value;

/// The suffix that marks a combined mode with plan mode on.
pub const PLAN_SUFFIX: &str = "+plan";

/// The combined id: `base` with plan mode on or off.
pub fn mode_id(base: &str, plan: bool) -> String {
    if plan {
        format!("{base}{PLAN_SUFFIX}")
    } else {
        base.to_owned()
    }
}

/// Splits a combined id into its base mode and whether plan mode is on.
pub fn split_mode_id(id: &str) -> (&str, bool) {
    match id.strip_suffix(PLAN_SUFFIX) {
        Some(base) if !base.is_empty() => (base, true),
        _ => (id, false),
    }
}

/// The display name of `base`'s plan variant.
pub fn plan_mode_name(base_name: &str) -> String {
    format!("{base_name} · plan")
}

/// The description of `base`'s plan variant.
pub fn plan_mode_description(base_description: Option<&str>) -> String {
    let plan = "plan mode: explore and propose a plan for review before changing anything";
    match base_description {
        Some(base) if !base.is_empty() => format!("{base}; {plan}"),
        _ => plan.to_owned(),
    }
}

/// The plan state a committed event moves the session to (`plan/mode {active}`), if any.
pub fn plan_state_of(event: &Event) -> Option<bool> {
    (event.kind == "plan/mode")
        .then(|| event.data.get("active").and_then(Value::as_bool))
        .flatten()
}

/// `plan/mode` as every front-end shows it: the session's mode, with a line for the person.
pub fn present(event: &Event) -> Vec<dsh_plugin::transcript::Item> {
    let Some(active) = plan_state_of(event) else {
        return Vec::new();
    };
    let (mode, text) = if active {
        ("plan", "plan mode on: the agent plans, it does not edit")
    } else {
        ("default", "plan mode off")
    };
    vec![dsh_plugin::transcript::Item::Mode(
        dsh_plugin::transcript::ModeChange {
            mode: mode.to_owned(),
            text: Some(text.to_owned()),
        },
    )]
}

/// The combined id after `event`, given the current one: `Some` only when the event moves
/// plan mode (a `/plan`, an approved `exit_plan_mode`, a pending selection applied).
pub fn follow(current: &str, event: &Event) -> Option<String> {
    let active = plan_state_of(event)?;
    Some(mode_id(split_mode_id(current).0, active))
}

/// Plan mode as the front-ends' second mode axis: what ACP offers as `<preset>+plan`, reached
/// through `dyn dsh_plugin::ModeAxis` so no front-end names this crate.
impl dsh_plugin::ModeAxis for crate::PlanMode {
    fn suffix(&self) -> &str {
        PLAN_SUFFIX
    }

    fn variant_name(&self, base_name: &str) -> String {
        plan_mode_name(base_name)
    }

    fn variant_description(&self, base_description: Option<&str>) -> String {
        plan_mode_description(base_description)
    }

    fn is_on(&self, agent: &dsh_agent::AgentHandle) -> bool {
        self.current(agent)
    }

    fn set(&self, agent: &dsh_agent::AgentHandle, on: bool) {
        crate::PlanMode::set(self, agent, on);
    }

    fn state_of(&self, event: &Event) -> Option<bool> {
        plan_state_of(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        assert_eq!(mode_id("read-only", true), "read-only+plan");
        assert_eq!(mode_id("read-only", false), "read-only");
        assert_eq!(split_mode_id("read-only+plan"), ("read-only", true));
        assert_eq!(split_mode_id("workspace-write"), ("workspace-write", false));
        // A bare suffix is not a combined id.
        assert_eq!(split_mode_id("+plan"), ("+plan", false));
    }

    #[test]
    fn the_mode_axis_composes_the_same_ids() {
        let plan: std::sync::Arc<dyn dsh_plugin::ModeAxis> =
            std::sync::Arc::new(crate::PlanMode::new(crate::PlanModeConfig::default()));
        assert_eq!(plan.mode_id("read-only", true), "read-only+plan");
        assert_eq!(plan.split_mode_id("read-only+plan"), ("read-only", true));
        assert_eq!(plan.split_mode_id("+plan"), ("+plan", false));
        let on = Event::new("plan/mode", 0, 0, serde_json::json!({"active": true}));
        assert_eq!(
            plan.follow("workspace-write", &on).as_deref(),
            Some("workspace-write+plan")
        );
        assert_eq!(plan.variant_name("auto"), plan_mode_name("auto"));
    }

    #[test]
    fn plan_mode_presents_itself_as_a_mode_item() {
        use dsh_plugin::transcript::Item;
        let event = |data: Value| Event::new("plan/mode", 0, 0, data);
        let modes: Vec<String> = [true, false]
            .into_iter()
            .flat_map(|active| present(&event(serde_json::json!({"active": active}))))
            .map(|item| match item {
                Item::Mode(change) => change.mode,
                other => panic!("not a mode: {other:?}"),
            })
            .collect();
        assert_eq!(modes, ["plan", "default"]);
        assert!(present(&event(serde_json::json!({}))).is_empty());
    }

    #[test]
    fn only_plan_mode_events_move_the_mode() {
        let event = |kind: &str, data: Value| Event::new(kind, 0, 0, data);
        let on = event("plan/mode", serde_json::json!({"active": true}));
        let off = event("plan/mode", serde_json::json!({"active": false}));
        let other = event("turn/start", serde_json::json!({"turn": 1}));
        assert_eq!(
            follow("workspace-write", &on).as_deref(),
            Some("workspace-write+plan")
        );
        assert_eq!(
            follow("workspace-write+plan", &off).as_deref(),
            Some("workspace-write")
        );
        assert_eq!(follow("workspace-write", &other), None);
    }
}
