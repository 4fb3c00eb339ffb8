//! The `ralph` tool (§4.4): a fixed workflow that runs one fresh structured-output child per
//! round toward one immutable objective, carrying only a bounded report between rounds.

use std::sync::Arc;

use dsh_agent::PromptRegistry;
use dsh_agent::prompt::Section;
use dsh_agent::prompt::Slot;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_tools::Tool;
use dsh_tools::ToolCallKind;
use dsh_tools::ToolCallView;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolRun;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use crate::RalphConfigError;
use crate::RalphResultError;
use crate::engine::WorkflowEngine;
use crate::engine::WorkflowRequest;
use crate::engine::WorkflowStop;
use crate::tool::caller;
use crate::tool::truncate_chars;

/// The fixed round script.
pub const RALPH_SCRIPT: &str = include_str!("ralph.js");

const MAX_SAFE: u64 = (1 << 53) - 1;

/// `tool-ralph` config.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RalphConfig {
    #[serde(default = "default_provider")]
    pub subagent_provider: String,
    #[serde(default = "default_rounds")]
    pub max_rounds: u64,
    #[serde(default = "default_chars")]
    pub max_handoff_chars: u64,
    #[serde(default = "default_chars")]
    pub max_result_chars: u64,
}

fn default_provider() -> String {
    "spawn".to_owned()
}
fn default_rounds() -> u64 {
    256
}
fn default_chars() -> u64 {
    16_384
}

impl Default for RalphConfig {
    fn default() -> Self {
        Self {
            subagent_provider: default_provider(),
            max_rounds: default_rounds(),
            max_handoff_chars: default_chars(),
            max_result_chars: default_chars(),
        }
    }
}

impl RalphConfig {
    pub fn validate(&self) -> Result<(), RalphConfigError> {
        if self.subagent_provider.is_empty()
            || self.subagent_provider.trim() != self.subagent_provider
        {
            return Err(RalphConfigError::Provider);
        }
        for (name, value) in [
            ("maxRounds", self.max_rounds),
            ("maxHandoffChars", self.max_handoff_chars),
            ("maxResultChars", self.max_result_chars),
        ] {
            if value == 0 || value > MAX_SAFE {
                return Err(RalphConfigError::NotPositiveSafe(name));
            }
        }
        Ok(())
    }
}

const DESCRIPTION: &str = "Run a Ralph loop toward one fixed objective, in the foreground, only when the user explicitly asks for it. Each round starts a new agent that sees none of this conversation and none of the earlier rounds: the workspace is the memory, and only a bounded structured report (status, summary, evidence, next steps, blocker) is handed to the next round. The loop ends when a worker reports the objective complete or blocked, or when the round budget runs out.";
const SECTION: &str = "Use `ralph` only when the user explicitly asks for a Ralph loop. Its reports are the workers' own assessments, not verified facts. For other multi-step work use the goal tools, subagents or workflows instead.";

#[derive(Deserialize)]
struct Args {
    objective: String,
    #[serde(default, rename = "maxRounds")]
    max_rounds: Option<Value>,
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "round" } else { "rounds" }
}

/// The terminal value's text (or the round-failure error).
fn render(result: &Value) -> Result<String, RalphResultError> {
    let malformed = || RalphResultError::Malformed;
    let status = result
        .get("status")
        .and_then(Value::as_str)
        .ok_or_else(malformed)?;
    let rounds = result
        .get("roundsStarted")
        .and_then(Value::as_u64)
        .filter(|n| *n > 0)
        .ok_or_else(malformed)?;
    let pretty = |v: &Value| dsh_code::pretty_json(v);
    match status {
        "complete" | "blocked" | "budget-limited" => {
            let report = result.get("report").ok_or_else(malformed)?;
            if status != "budget-limited" && !report.is_object() {
                return Err(malformed());
            }
            let head = match status {
                "complete" => format!(
                    "Ralph worker reported completion after {rounds} {}.",
                    plural(rounds)
                ),
                "blocked" => format!(
                    "Ralph worker reported a blocker after {rounds} {}.",
                    plural(rounds)
                ),
                _ => format!(
                    "Ralph reached its {rounds} {} limit; the worker reported work remaining.",
                    plural(rounds)
                ),
            };
            Ok(format!("{head}\nFinal report:\n{}", pretty(report)))
        }
        "round-failed" => {
            let last = result.get("lastReport").ok_or_else(malformed)?;
            let tail = if last.is_null() {
                "No previous handoff was available.".to_owned()
            } else {
                format!("Last successful handoff:\n{}", pretty(last))
            };
            Err(RalphResultError::RoundFailed { rounds, tail })
        }
        _ => Err(malformed()),
    }
}

/// Registers `ralph` (and its prompt section) under `scope`.
pub fn install(
    engine: &Arc<WorkflowEngine>,
    tools: &Arc<ToolRegistry>,
    prompts: Option<&Arc<PromptRegistry>>,
    scope: &Scope,
    config: RalphConfig,
) -> Result<(), ToolError> {
    config
        .validate()
        .map_err(|e| ToolError::new(e.to_string()))?;
    // Strong: the registration owns the engine; unregistering (scope disposal) releases it.
    let held = engine.clone();
    let config = Arc::new(config);
    let body_config = config.clone();
    let max_result = config.max_result_chars as usize;
    let definition = Tool::builder("ralph")
        .description(DESCRIPTION)
        .author_parameters(&json!({
            "objective": {"type": "string", "required": true, "description": "The one objective every round works toward; it never changes."},
            "maxRounds": {"type": "number", "description": "Round budget (bounded by the deployment)."}
        }))
        .raw_output(
            json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "runId": {"type": "string"},
                    "agentsStarted": {"type": "integer"},
                    "result": {"type": "object"}
                },
                "required": ["runId", "agentsStarted", "result"]
            }),
            move |_, value| {
                let text = match render(value.get("result").unwrap_or(&Value::Null)) {
                    Ok(text) => text,
                    Err(error) => error.to_string(),
                };
                Ok(vec![ContentBlock::text(truncate_chars(&text, max_result, |_| {
                    "\n… [truncated]".to_owned()
                }))])
            },
        )
        .present_call(|args: &Value| {
            Some(ToolCallView::Generic {
                title: "ralph".to_owned(),
                kind: Some(ToolCallKind::Other),
                raw_input: args.get("objective").cloned(),
                content: None,
                locations: None,
            })
        })
        .run(move |args: Value, run: ToolRun| {
            let held = held.clone();
            let config = body_config.clone();
            async move {
                let engine = held;
                execute(&engine, &config, args, run).await
            }
        })
        .build()
        .map_err(|e| ToolError::new(e.to_string()))?;
    tools
        .register(scope, definition)
        .map_err(|e| ToolError::new(e.to_string()))?;
    if let Some(prompts) = prompts {
        prompts.register_section(scope, Section::new("tool:ralph", Slot::Tools, SECTION));
    }
    Ok(())
}

async fn execute(
    engine: &Arc<WorkflowEngine>,
    config: &RalphConfig,
    args: Value,
    run: ToolRun,
) -> Result<Value, ToolError> {
    let args: Args = serde_json::from_value(args).map_err(|e| ToolError::new(e.to_string()))?;
    let Some(parent) = caller(engine, &run) else {
        return Err(ToolError::new(
            "Ralph tool requires a calling agent (exec.agent was undefined)",
        ));
    };
    let objective = args.objective.trim().to_owned();
    if objective.is_empty() {
        return Err(ToolError::new("Ralph objective must be a non-empty string"));
    }
    let max_rounds = match &args.max_rounds {
        None => config.max_rounds,
        Some(value) => {
            let rounds = value
                .as_u64()
                .filter(|n| *n > 0 && *n <= MAX_SAFE)
                .ok_or_else(|| ToolError::new("Ralph maxRounds must be a positive safe integer"))?;
            if rounds > config.max_rounds {
                return Err(ToolError::new(format!(
                    "Ralph maxRounds {value} exceeds the deployment ceiling {}",
                    config.max_rounds
                )));
            }
            rounds
        }
    };
    let name = &config.subagent_provider;
    let subagents = engine.subagents();
    let Some(provider) = subagents.provider(name) else {
        return Err(ToolError::new(format!(
            "Ralph subagent provider \"{name}\" is not registered"
        )));
    };
    if !provider.capabilities().output_schema {
        return Err(ToolError::new(format!(
            "Ralph subagent provider \"{name}\" does not support structured output"
        )));
    }
    if provider.inherits_parent_context() {
        return Err(ToolError::new(format!(
            "Ralph subagent provider \"{name}\" inherits parent context; Ralph requires a fresh provider"
        )));
    }
    let workflow = engine.start(WorkflowRequest {
        script: RALPH_SCRIPT.to_owned(),
        meta: json!({
            "name": "ralph-loop",
            "description": "Fresh-agent rounds toward one immutable objective.",
            "phases": [{"title": "Fresh-agent rounds", "detail": "One new worker per round; only a bounded report crosses rounds."}]
        }),
        args: Some(json!({
            "objective": objective,
            "maxRounds": max_rounds,
            "maxHandoffChars": config.max_handoff_chars,
        })),
        subagent_provider: Some(name.clone()),
        max_total_agents: Some(max_rounds),
        parent,
        signal: Some(run.signal().clone()),
    })?;
    let result = workflow.result().await;
    workflow.dispose().await;
    match result.stop_reason {
        WorkflowStop::Completed => match render(&result.value) {
            Ok(_) => Ok(json!({
                "runId": workflow.id,
                "agentsStarted": result.agents_started,
                "result": result.value,
            })),
            Err(error) => Err(ToolError::new(truncate_chars(
                &error.to_string(),
                config.max_result_chars as usize,
                |_| "\n… [truncated]".to_owned(),
            ))),
        },
        WorkflowStop::Cancelled => Err(ToolError::new(match &result.error {
            Some(error) => format!("Ralph workflow was cancelled ({error})"),
            None => "Ralph workflow was cancelled".to_owned(),
        })),
        WorkflowStop::Error => Err(ToolError::new(format!(
            "Ralph workflow failed: {}",
            result.error.as_deref().unwrap_or("unknown error")
        ))),
    }
}
