//! `/goal` (upstream `command-goal`): parsing and the exact texts. The command registry calls
//! [`run`]; results are never model-visible.

use dsh_agent::AgentHandle;

use crate::Activation;
use crate::GoalState;
use crate::Goals;
use crate::Phase;

pub const NAME: &str = "goal";
pub const DESCRIPTION: &str = "set or view the goal for a long-running task";
pub const HINT: &str = "[<objective>|clear|edit <objective>|pause|resume]";
pub const USAGE: &str = "Usage: /goal [<objective>|clear|edit <objective>|pause|resume]";
const INVALID: &str =
    "The goal command is not valid for the current state. Run /goal to view available commands.";
/// The text of the reference-images message a create/edit with images submits.
pub const IMAGES_TEXT: &str = "Reference images for the goal objective.";

/// A command result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success(String),
    Error(String),
}

/// What `/goal <input>` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    Show,
    Clear,
    Pause,
    Resume,
    /// `edit` alone.
    InvalidEdit,
    Edit(String),
    Create(String),
}

pub fn parse(input: &str) -> Parsed {
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Parsed::Show;
    }
    match trimmed.to_ascii_lowercase().as_str() {
        "clear" => return Parsed::Clear,
        "pause" => return Parsed::Pause,
        "resume" => return Parsed::Resume,
        "edit" => return Parsed::InvalidEdit,
        _ => {}
    }
    if let Some(rest) = trimmed.strip_prefix("edit")
        && rest.starts_with(char::is_whitespace)
    {
        return Parsed::Edit(rest.trim().to_owned());
    }
    Parsed::Create(trimmed.to_owned())
}

fn hint(state: &GoalState, activation: Activation) -> &'static str {
    match (state.goal.phase, activation) {
        (Phase::Active, Activation::Armed) => "/goal edit <objective>, /goal pause, /goal clear",
        (Phase::Complete, _) => "/goal <objective>, /goal clear",
        _ => "/goal edit <objective>, /goal resume, /goal clear",
    }
}

/// The goal rendering: title, status, blocker, objective, rounds, activation, commands.
pub fn render(title: &str, state: &GoalState, activation: Activation) -> String {
    let mut lines = vec![
        title.to_owned(),
        format!("Status: {}", state.goal.phase.as_str()),
    ];
    if let Some(reason) = &state.goal.blocked_reason {
        lines.push(format!("Blocker: {}: {}", reason.code, reason.message));
    }
    lines.push(format!("Objective: {}", state.goal.objective));
    lines.push(format!(
        "Rounds: {}/{}",
        state.rounds_started, state.goal.max_goal_rounds
    ));
    lines.push(format!("Activation: {}", activation.as_str()));
    lines.push(String::new());
    lines.push(format!("Commands: {}", hint(state, activation)));
    lines.join("\n")
}

/// Runs `/goal <input>`; `images` = attachments accompanied the command (the caller submits
/// them with [`IMAGES_TEXT`] after a successful create/edit).
pub fn run(goals: &Goals, agent: &AgentHandle, input: &str, images: bool) -> Outcome {
    let parsed = parse(input);
    if images && !matches!(parsed, Parsed::Create(_) | Parsed::Edit(_)) {
        return Outcome::Error(
            "Image attachments only accompany a goal objective: /goal <objective> or /goal edit <objective>."
                .into(),
        );
    }
    let current = goals.current(agent);
    let view = |title: &str, state: &GoalState| {
        Outcome::Success(render(title, state, goals.activation(agent)))
    };
    let needs_goal = |action: &str| {
        Outcome::Error(format!(
            "No goal is currently set; /goal {action} requires one. {USAGE}"
        ))
    };
    let result = match parsed {
        Parsed::Show => {
            return match &current {
                Some(state) => view("Goal", state),
                None => Outcome::Success(format!("No goal is currently set.\n{USAGE}")),
            };
        }
        Parsed::InvalidEdit => {
            return Outcome::Error(format!(
                "Goal editing requires a replacement objective.\n{USAGE}"
            ));
        }
        Parsed::Clear => {
            return match goals.clear(agent) {
                Ok(Some(_)) => Outcome::Success("Goal cleared.".into()),
                Ok(None) => Outcome::Success("No goal to clear.".into()),
                Err(_) => Outcome::Error(INVALID.into()),
            };
        }
        Parsed::Create(objective) => {
            if let Some(state) = current.as_ref().filter(|s| s.goal.phase != Phase::Complete) {
                return Outcome::Error(format!(
                    "A goal is already {}. Use /goal edit <objective> to change it or /goal clear before replacing it.",
                    state.goal.phase.as_str()
                ));
            }
            goals
                .create(agent, &objective, None)
                .map(|s| ("Goal created", s))
        }
        Parsed::Edit(objective) => match &current {
            None => return needs_goal("edit"),
            Some(state) if state.goal.phase == Phase::Complete => goals
                .create(agent, &objective, None)
                .map(|s| ("Goal created", s)),
            Some(_) => goals
                .edit(agent, None, Some(&objective), None)
                .map(|s| ("Goal updated", s)),
        },
        Parsed::Pause => match &current {
            None => return needs_goal("pause"),
            Some(_) => goals.pause(agent, None).map(|s| ("Goal paused", s)),
        },
        Parsed::Resume => match &current {
            None => return needs_goal("resume"),
            Some(_) => goals.resume(agent, None).map(|s| ("Goal resumed", s)),
        },
    };
    match result {
        Ok((title, state)) => view(title, &state),
        Err(_) => Outcome::Error(INVALID.into()),
    }
}

/// Registers `/goal` on the slash-command registry, owned by `owner`.
pub fn register(
    registry: &dsh_commands::CommandRegistry,
    owner: &dsh_kernel::Scope,
    goals: std::sync::Arc<Goals>,
) -> Result<dsh_kernel::Disposer, dsh_commands::CommandError> {
    let spec = dsh_commands::CommandSpec::new(
        NAME,
        DESCRIPTION,
        move |call: dsh_commands::CommandCall| {
            let goals = goals.clone();
            async move {
                let images = !call.images.is_empty();
                let parsed = parse(call.argument());
                let outcome = run(&goals, &call.agent, call.argument(), images);
                match outcome {
                    Outcome::Success(text) => {
                        if images && matches!(parsed, Parsed::Create(_) | Parsed::Edit(_)) {
                            let mut content = call.images.clone();
                            content.push(dsh_protocol::ContentBlock::text(IMAGES_TEXT));
                            call.agent
                                .followup(dsh_protocol::Message::user(
                                    content,
                                    dsh_protocol::MessageSource::user(),
                                ))
                                .map_err(|e| e.to_string())?;
                        }
                        Ok(dsh_commands::CommandResult::text(text))
                    }
                    Outcome::Error(text) => Ok(dsh_commands::CommandResult::error(text)),
                }
            }
        },
    )
    .input(HINT)
    .images(true);
    registry.register(owner, spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_follows_the_trimmed_case_insensitive_rules() {
        assert_eq!(parse("  "), Parsed::Show);
        assert_eq!(parse("CLEAR"), Parsed::Clear);
        assert_eq!(parse(" Pause "), Parsed::Pause);
        assert_eq!(parse("resume"), Parsed::Resume);
        assert_eq!(parse("edit"), Parsed::InvalidEdit);
        assert_eq!(parse("edit   new thing "), Parsed::Edit("new thing".into()));
        assert_eq!(
            parse("editor tweaks"),
            Parsed::Create("editor tweaks".into())
        );
        assert_eq!(
            parse("pause after verification"),
            Parsed::Create("pause after verification".into())
        );
    }
}
