//! `dsh-tool-ask-user`: the `ask_user_question` tool (upstream `tool-ask-user`).
//!
//! Owns: the tool's schema, the mapping of the model's questions onto the user-questions seam
//! (the model cannot set `detail` or `intent`), and the compact answer text.
//! Does not own: who answers or the admission rules (`dsh-user-questions`).
//! Must not depend on: the agent loop, front-ends.

use std::sync::Arc;

use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_tools::DefineError;
use dsh_tools::Tool;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolRun;
use dsh_user_questions::Caller;
use dsh_user_questions::Question;
use dsh_user_questions::QuestionOption;
use dsh_user_questions::QuestionRequest;
use dsh_user_questions::UserQuestionError;
use dsh_user_questions::UserQuestions;
use serde_json::Value;
use serde_json::json;

pub const NAME: &str = "ask_user_question";

/// The tool description, exactly (model-visible).
pub const DESCRIPTION: &str = "Ask the user a concise question when you need confirmation, a choice, or missing information before proceeding. Send one or more questions, each with a stable id that will be echoed in the answer.";

fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "questions": {
                "type": "array",
                "description": "Questions to ask before continuing.",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": "Stable id echoed in the answer."},
                        "question": {"type": "string", "description": "The question to ask."},
                        "header": {"type": "string", "description": "Short heading, e.g. \"Confirm\" or \"Choose Mode\"."},
                        "options": {
                            "type": "array",
                            "description": "Choices to offer; put a recommended one first and append \"(Recommended)\" to its label.",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "label": {"type": "string", "description": "The choice as shown."},
                                    "description": {"type": "string", "description": "What choosing it means."}
                                },
                                "required": ["label"]
                            }
                        },
                        "multi_select": {"type": "boolean", "description": "Allow several choices; defaults to false."}
                    },
                    "required": ["id", "question"],
                    "additionalProperties": true
                }
            }
        },
        "required": ["questions"]
    })
}

fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "answers": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "selected": {"type": "array", "items": {"type": "string"}},
                        "custom": {"type": "string"}
                    },
                    "required": ["id", "selected"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["answers"],
        "additionalProperties": false
    })
}

/// The model's questions in the seam's shape (`multi_select` → `multiSelect`).
pub fn questions_of(args: &Value) -> Vec<Question> {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    args.get("questions")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .map(|item| Question {
                    id: text(item, "id").unwrap_or_default(),
                    question: text(item, "question").unwrap_or_default(),
                    header: text(item, "header"),
                    detail: None,
                    options: item
                        .get("options")
                        .and_then(Value::as_array)
                        .map(|options| {
                            options
                                .iter()
                                .map(|o| QuestionOption {
                                    label: text(o, "label").unwrap_or_default(),
                                    description: text(o, "description"),
                                })
                                .collect()
                        }),
                    multi_select: item.get("multi_select").and_then(Value::as_bool),
                    intent: None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A failed ask as the tool reports it.
pub fn tool_error(error: UserQuestionError) -> ToolError {
    ToolError::coded("UserQuestionError", error.code.as_str(), error.message)
}

/// The tool; the service is looked up from the caller's scope, else `fallback`.
pub fn definition(fallback: Option<Arc<UserQuestions>>) -> Result<ToolDefinition, DefineError> {
    Tool::builder(NAME)
        .description(DESCRIPTION)
        .raw_parameters(parameters())
        .raw_output(output_schema(), |_, value| {
            Ok(vec![ContentBlock::text(value.to_string())])
        })
        .run(move |args: Value, run: ToolRun| {
            let fallback = fallback.clone();
            async move {
                let caller = run.agent().map(|agent| Caller {
                    agent_id: agent.id().to_owned(),
                    scope: agent.scope().clone(),
                });
                let service = caller
                    .as_ref()
                    .and_then(|c| UserQuestions::for_scope(&c.scope))
                    .or(fallback)
                    .ok_or_else(|| {
                        ToolError::coded(
                            "UserQuestionError",
                            "NO_PROVIDER",
                            dsh_user_questions::NO_PROVIDER,
                        )
                    })?;
                let request = QuestionRequest {
                    questions: questions_of(&args),
                    caller,
                    signal: run.signal().clone(),
                };
                let answers = service.ask(request).await.map_err(tool_error)?;
                serde_json::to_value(&answers).map_err(|e| ToolError::new(e.to_string()))
            }
        })
        .build()
}

/// Registers the tool on `registry`, owned by `owner`.
pub fn register(
    registry: &ToolRegistry,
    owner: &Scope,
    fallback: Option<Arc<UserQuestions>>,
) -> Result<Disposer, dsh_tools::SetupError> {
    Ok(registry.register(owner, definition(fallback)?)?)
}

#[cfg(test)]
mod tests;

/// No settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskUserSettings {}

/// The user-questions service (always, so front-ends can offer a provider) plus, when enabled,
/// `ask_user_question`.
#[derive(Debug, Default)]
pub struct UserQuestionsPlugin;

impl dsh_plugin::Plugin for UserQuestionsPlugin {
    type Config = AskUserSettings;

    fn name(&self) -> &str {
        <Self as dsh_plugin::HostPlugin>::NAME
    }

    fn apply(&self, ctx: &Scope, _config: AskUserSettings) -> Result<(), dsh_plugin::PluginError> {
        UserQuestions::install(ctx)?;
        Ok(())
    }
}

impl dsh_plugin::HostPlugin for UserQuestionsPlugin {
    const NAME: &'static str = "user-questions";
}

/// `ask_user_question` as a host plugin (off by default: the headless compositions upstream
/// ships have none).
#[derive(Debug, Default)]
pub struct AskUserPlugin;

impl dsh_plugin::Plugin for AskUserPlugin {
    type Config = AskUserSettings;

    fn name(&self) -> &str {
        <Self as dsh_plugin::HostPlugin>::NAME
    }

    fn apply(&self, ctx: &Scope, _config: AskUserSettings) -> Result<(), dsh_plugin::PluginError> {
        let host = dsh_plugin::HostServices::of(ctx)?;
        let service = UserQuestions::for_scope(ctx);
        register(&host.tools, ctx, service).map_err(dsh_plugin::PluginError::other)?;
        Ok(())
    }
}

impl dsh_plugin::HostPlugin for AskUserPlugin {
    const NAME: &'static str = "ask-user";
    // On: the TUI and ACP answer it; where no user can (`exec`, a child) it is the spec's
    // rejection.
    const ENABLED_BY_DEFAULT: bool = true;
}
