//! `/plan [off|message]` (upstream plan-mode's command): its texts, and the steer of a message.

use dsh_agent::AgentHandle;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;

use crate::PlanMode;
use crate::SetOutcome;

pub const NAME: &str = "plan";
pub const DESCRIPTION: &str = "Enter or leave plan mode";
pub const HINT: &str = "[off|message]";

/// A command result (never model-visible).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success(String),
    Error(String),
}

/// Runs `/plan <input>`; `images` are the attachments' content blocks, steered with the text.
pub fn run(
    plan: &PlanMode,
    agent: &AgentHandle,
    input: &str,
    images: Vec<ContentBlock>,
) -> Outcome {
    let trimmed = input.trim();
    if trimmed.eq_ignore_ascii_case("off") {
        if !images.is_empty() {
            return Outcome::Error("Image attachments cannot accompany /plan off.".into());
        }
        return Outcome::Success(
            match plan.set(agent, false) {
                SetOutcome::Committed => "Plan mode off.",
                SetOutcome::Queued => "Leaving plan mode (applies from the next step).",
                SetOutcome::Cancelled => "Plan mode entry cancelled.",
                SetOutcome::Noop if plan.logged(agent) => {
                    "Leaving plan mode (applies from the next step)."
                }
                SetOutcome::Noop => "Plan mode is already inactive.",
            }
            .into(),
        );
    }
    let outcome = plan.set(agent, true);
    if !trimmed.is_empty() || !images.is_empty() {
        let mut content = images;
        if !trimmed.is_empty() {
            content.push(ContentBlock::text(trimmed));
        }
        if let Err(error) = agent.steer(Message::user(content, MessageSource::user())) {
            return Outcome::Error(format!("command failed: {error}"));
        }
    }
    let applied = outcome == SetOutcome::Committed
        || (outcome == SetOutcome::Noop && plan.logged(agent) && !plan.has_pending(agent));
    Outcome::Success(
        if applied {
            "Plan mode on. Use /plan off to leave."
        } else {
            "Entering plan mode (applies from the next step). Use /plan off to leave."
        }
        .into(),
    )
}

/// Registers `/plan` on the slash-command registry, owned by `owner`.
pub fn register(
    registry: &dsh_commands::CommandRegistry,
    owner: &dsh_kernel::Scope,
    plan: std::sync::Arc<PlanMode>,
) -> Result<dsh_kernel::Disposer, dsh_commands::CommandError> {
    let spec = dsh_commands::CommandSpec::new(
        NAME,
        DESCRIPTION,
        move |call: dsh_commands::CommandCall| {
            let plan = plan.clone();
            async move {
                Ok(
                    match run(&plan, &call.agent, call.argument(), call.images.clone()) {
                        Outcome::Success(text) => dsh_commands::CommandResult::text(text),
                        Outcome::Error(text) => dsh_commands::CommandResult::error(text),
                    },
                )
            }
        },
    )
    .input(HINT)
    .images(true);
    registry.register(owner, spec)
}
