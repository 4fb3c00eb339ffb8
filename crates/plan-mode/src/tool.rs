//! `exit_plan_mode`: presents the plan for review through the user-questions seam; approval
//! leaves plan mode from the next step, anything else keeps planning.

use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_protocol::ContentBlock;
use dsh_tools::DefineError;
use dsh_tools::Tool;
use dsh_tools::ToolCallKind;
use dsh_tools::ToolCallView;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRun;
use dsh_user_questions::Caller;
use dsh_user_questions::QuestionErrorCode;
use dsh_user_questions::QuestionIntent;
use dsh_user_questions::QuestionOption;
use dsh_user_questions::QuestionRequest;
use dsh_user_questions::UserQuestions;
use serde_json::Value;
use serde_json::json;

use crate::PlanMode;

pub const NAME: &str = "exit_plan_mode";
pub const APPROVED: &str =
    "Plan approved — plan mode exited; carry out the plan starting with your next step.";
const APPROVE: &str = "Approve";

fn fail(message: &str) -> ToolError {
    ToolError::new(message)
}

/// Whether `plan` (trimmed) starts with a `#` heading: `^#\s+\S`.
pub fn has_heading(plan: &str) -> bool {
    let Some(rest) = plan.trim().strip_prefix('#') else {
        return false;
    };
    let after = rest.trim_start();
    after.len() < rest.len() && !after.is_empty()
}

/// The first Markdown heading's text (the call card title), else `Plan`.
pub fn plan_title(plan: &str) -> String {
    plan.lines()
        .find_map(|line| {
            let trimmed = line.trim_start();
            let text = trimmed.trim_start_matches('#');
            (text.len() < trimmed.len() && text.starts_with(char::is_whitespace))
                .then(|| text.trim().to_owned())
                .filter(|t| !t.is_empty())
        })
        .unwrap_or_else(|| "Plan".to_owned())
}

/// The review question, exactly.
pub fn review_question(plan: &str) -> dsh_user_questions::Question {
    let mut question =
        dsh_user_questions::Question::new("plan-review", "Approve this plan and leave plan mode?");
    question.header = Some("Plan review".into());
    question.detail = Some(plan.to_owned());
    question.options = Some(vec![
        QuestionOption::new(
            APPROVE,
            Some("Leave plan mode; the plan is carried out from the next step."),
        ),
        QuestionOption::new(
            "Keep planning",
            Some("Stay in plan mode; feedback goes back to the model."),
        ),
    ]);
    question.intent = Some(QuestionIntent::PlanReview {
        approve: APPROVE.into(),
    });
    question
}

pub fn definition(plan_mode: Arc<PlanMode>) -> Result<ToolDefinition, DefineError> {
    Tool::builder(NAME)
        .description("Use only in plan mode: present the complete plan, as Markdown starting with a # heading, for the user's review. Approval leaves plan mode and the plan is carried out from the next step; otherwise the user's feedback comes back.")
        .raw_parameters(json!({
            "type": "object",
            "properties": {"plan": {"type": "string", "description": "The complete plan, as markdown, starting with a # heading that names it."}},
            "required": ["plan"]
        }))
        .raw_output(json!({"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]}), |_, _| {
            Ok(vec![ContentBlock::text(APPROVED)])
        })
        .present_call(|args: &Value| {
            let plan = args.get("plan").and_then(Value::as_str).unwrap_or("");
            let mut card = ToolCallView::generic(plan_title(plan)).kind(ToolCallKind::Other);
            if let ToolCallView::Generic { content, .. } = &mut card {
                *content = Some(vec![ContentBlock::text(plan)]);
            }
            Some(card)
        })
        .run(move |args: Value, run: ToolRun| {
            let plan_mode = plan_mode.clone();
            async move { exit(&plan_mode, &args, &run).await }
        })
        .build()
}

async fn exit(plan_mode: &PlanMode, args: &Value, run: &ToolRun) -> Result<Value, ToolError> {
    let agent = run
        .agent()
        .and_then(|a| AgentHandle::from_scope(a.scope()))
        .ok_or_else(|| fail("exit_plan_mode requires a calling agent (no session to switch)"))?;
    if !plan_mode.logged(&agent) {
        return Err(fail("exit_plan_mode is only available in plan mode"));
    }
    let plan = args.get("plan").and_then(Value::as_str).unwrap_or("");
    if !has_heading(plan) {
        return Err(fail(
            "exit_plan_mode requires a non-empty markdown plan starting with a # heading",
        ));
    }
    let service = UserQuestions::for_scope(agent.scope()).filter(|s| s.has_provider());
    let Some(service) = service else {
        return Err(fail(
            "no user-questions channel is available to review the plan; ask the user to switch the session mode instead",
        ));
    };
    let request = QuestionRequest {
        questions: vec![review_question(plan)],
        caller: Some(Caller {
            agent_id: agent.id().to_owned(),
            scope: agent.scope().clone(),
        }),
        signal: run.signal().clone(),
    };
    let answers = match service.ask(request).await {
        Ok(answers) => answers,
        Err(error) if error.code == QuestionErrorCode::AskCancelled => {
            return Err(fail(
                "The user dismissed the plan review to speak instead; stay in plan mode, stop here, and wait for their message.",
            ));
        }
        Err(error) => return Err(fail(&error.message)),
    };
    let answer = answers.answers.first();
    let approved = answer
        .is_some_and(|a| a.selected.len() == 1 && a.selected[0] == APPROVE && a.custom.is_none());
    if !approved {
        let feedback = answer
            .and_then(|a| a.custom.as_deref())
            .map(str::trim)
            .filter(|c| !c.is_empty());
        return Err(fail(&match feedback {
            Some(custom) => format!("The user chose to keep planning; their feedback: {custom}"),
            None => "The user chose to keep planning; revise the plan and present it again.".into(),
        }));
    }
    plan_mode.approve_exit(&agent);
    Ok(json!({"approved": true}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_and_titles() {
        assert!(has_heading("  # Ship it\nsteps"));
        // `^#\s+\S`: a second `#` is not whitespace.
        assert!(!has_heading("## Sub"));
        assert!(!has_heading("#NoSpace"));
        assert!(!has_heading("# "));
        assert!(!has_heading("Plan without heading"));
        assert_eq!(plan_title("intro\n# The plan\nbody"), "The plan");
        assert_eq!(plan_title("no heading"), "Plan");
    }
}
