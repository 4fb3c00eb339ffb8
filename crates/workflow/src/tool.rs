//! The `workflow` tool (§4.3) and its durable `tool-workflow/*` records in the parent log.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use dsh_agent::AgentHandle;
use dsh_agent::PromptRegistry;
use dsh_agent::prompt::Section;
use dsh_agent::prompt::Slot;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_session::SessionLog;
use dsh_tools::Tool;
use dsh_tools::ToolCallKind;
use dsh_tools::ToolCallView;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolRun;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use crate::engine::WorkflowEngine;
use crate::engine::WorkflowEvent;
use crate::engine::WorkflowRequest;
use crate::engine::WorkflowStop;

/// `tool-workflow` config.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkflowToolConfig {
    #[serde(default = "default_name")]
    pub tool_name: String,
    #[serde(default = "default_max_result")]
    pub max_result_chars: usize,
}

fn default_name() -> String {
    "workflow".to_owned()
}
fn default_max_result() -> usize {
    50_000
}

impl Default for WorkflowToolConfig {
    fn default() -> Self {
        Self {
            tool_name: default_name(),
            max_result_chars: default_max_result(),
        }
    }
}

/// The live agent a call runs for.
pub(crate) fn caller(engine: &WorkflowEngine, run: &ToolRun) -> Option<AgentHandle> {
    let agent = run.agent()?;
    let handle = engine.subagents().runtime().directory.get(agent.id())?;
    (handle.scope() == agent.scope()).then_some(handle)
}

/// `text` cut at `max` characters with the given suffix format.
pub(crate) fn truncate_chars(text: &str, max: usize, suffix: impl Fn(usize) -> String) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_owned();
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept}{}", suffix(total - max))
}

/// `workflow "<name>" completed (<n> agent[s]).\nReturn value:\n<pretty JSON, bounded>`.
pub fn render_completion(name: &str, agents: u64, result: &Value, max_chars: usize) -> String {
    let noun = if agents == 1 { "agent" } else { "agents" };
    let pretty = dsh_code::pretty_json(result);
    let bounded = truncate_chars(&pretty, max_chars, |k| {
        format!("\n… [truncated: {k} more characters]")
    });
    format!("workflow \"{name}\" completed ({agents} {noun}).\nReturn value:\n{bounded}")
}

const DESCRIPTION: &str = "Run a JavaScript orchestration script that fans out subagents for a large workload of independent pieces. `meta` names the workflow (name, description, optional whenToUse and phases); `script` is a plain JavaScript function body with top-level await that ends with `return <json>`; `args` is exposed to it as `args`. Hooks: `await agent(prompt, {label, phase, schema, provider, model})` runs one fresh child and resolves to its final text (or, with a JSON `schema` of type/properties/required/additionalProperties/items/enum/const/oneOf, its structured result), or null when the child fails; `await parallel([() => …, …])` runs thunks together (a throwing item becomes null); `await pipeline(items, stage1, stage2, …)` runs each item through the stages as `stage(previous, item, index)`; `phase(title)` and `log(message)` report progress. Misusing a hook always kills the script. A run has caps on concurrent and total agents and on items per call. The call runs in the foreground until the script returns.";
const SECTION: &str = "Use the `workflow` tool only when the user explicitly asks for a workflow or for large multi-agent orchestration; for one or two delegations, call a subagent tool directly.";

/// Durable records of one top-level run; the first failed append disables the rest.
struct Records {
    log: SessionLog,
    enabled: AtomicBool,
}

impl Records {
    fn append(&self, kind: &str, data: Value) {
        if !self.enabled.load(Ordering::Acquire) {
            return;
        }
        if let Err(error) = self.log.append(kind, data, None) {
            self.enabled.store(false, Ordering::Release);
            tracing::warn!(
                "tool-workflow: disabled durable record after {kind} append failed: {error}"
            );
        }
    }
}

#[derive(Deserialize)]
struct Args {
    script: String,
    meta: Value,
    #[serde(default)]
    args: Option<Value>,
}

/// Registers `workflow` (and its prompt section) under `scope`.
pub fn install(
    engine: &Arc<WorkflowEngine>,
    tools: &Arc<ToolRegistry>,
    prompts: Option<&Arc<PromptRegistry>>,
    scope: &Scope,
    config: WorkflowToolConfig,
) -> Result<(), ToolError> {
    if config.max_result_chars == 0 {
        return Err(ToolError::new(
            "tool-workflow: maxResultChars must be at least 1",
        ));
    }
    // Strong: the registration owns the engine; unregistering (scope disposal) releases it.
    let held = engine.clone();
    let max_chars = config.max_result_chars;
    let definition = Tool::builder(config.tool_name.clone())
        .description(DESCRIPTION)
        .author_parameters(&json!({
            "script": {"type": "string", "required": true, "description": "Plain JavaScript function body; ends with `return <json>`."},
            "meta": {
                "type": "object",
                "required": true,
                "additionalProperties": true,
                "description": "The workflow's identity.",
                "properties": {
                    "name": {"type": "string", "required": true},
                    "description": {"type": "string", "required": true},
                    "whenToUse": {"type": "string"},
                    "phases": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "additionalProperties": true,
                            "properties": {
                                "title": {"type": "string", "required": true},
                                "detail": {"type": "string"},
                                "provider": {"type": "string"},
                                "model": {"type": "string"}
                            }
                        }
                    }
                }
            },
            "args": {"type": "object", "additionalProperties": true, "description": "Exposed to the script as `args`."}
        }))
        .raw_output(
            json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "runId": {"type": "string"},
                    "agentsStarted": {"type": "integer"},
                    "result": {}
                },
                "required": ["runId", "agentsStarted", "result"]
            }),
            move |args, value| {
                let name = args.pointer("/meta/name").and_then(Value::as_str).unwrap_or_default();
                let agents = value.get("agentsStarted").and_then(Value::as_u64).unwrap_or(0);
                let result = value.get("result").cloned().unwrap_or(Value::Null);
                Ok(vec![ContentBlock::text(render_completion(
                    name, agents, &result, max_chars,
                ))])
            },
        )
        .present_call(|args: &Value| {
            let name = args.pointer("/meta/name").and_then(Value::as_str).unwrap_or_default();
            Some(ToolCallView::Generic {
                title: format!("workflow: {name}"),
                kind: Some(ToolCallKind::Other),
                raw_input: args.get("script").cloned(),
                content: None,
                locations: None,
            })
        })
        .run(move |args: Value, run: ToolRun| {
            let held = held.clone();
            async move {
                let engine = held;
                execute(&engine, args, run).await
            }
        })
        .build()
        .map_err(|e| ToolError::new(e.to_string()))?;
    tools
        .register(scope, definition)
        .map_err(|e| ToolError::new(e.to_string()))?;
    if let Some(prompts) = prompts {
        prompts.register_section(
            scope,
            Section::new(format!("tool:{}", config.tool_name), Slot::Tools, SECTION),
        );
    }
    Ok(())
}

async fn execute(
    engine: &Arc<WorkflowEngine>,
    args: Value,
    run: ToolRun,
) -> Result<Value, ToolError> {
    let args: Args = serde_json::from_value(args).map_err(|e| ToolError::new(e.to_string()))?;
    let Some(parent) = caller(engine, &run) else {
        return Err(ToolError::new(
            "workflow tool requires a calling agent (exec.agent was undefined)",
        ));
    };
    let workflow = engine.start(WorkflowRequest {
        script: args.script,
        meta: args.meta,
        args: args.args,
        subagent_provider: None,
        max_total_agents: None,
        parent: parent.clone(),
        signal: Some(run.signal().clone()),
    })?;
    // Records only for top-level calls (a Code Mode dispatch has a parent execution).
    let records = run.parent().is_none().then(|| {
        Arc::new(Records {
            log: parent.log().clone(),
            enabled: AtomicBool::new(true),
        })
    });
    let subscription = records.as_ref().map(|records| {
        records.append(
            "tool-workflow/run-start",
            json!({"runId": workflow.id, "name": workflow.meta.name}),
        );
        let records = records.clone();
        let run_id = workflow.id.clone();
        engine.events().register(parent.scope(), move |event| {
            if event.info().id != run_id {
                return Ok(());
            }
            match event {
                WorkflowEvent::AgentStart(_, agent) => {
                    let mut data = json!({"runId": run_id, "seq": agent.seq, "label": agent.label});
                    if let (Some(phase), Some(map)) = (&agent.phase, data.as_object_mut()) {
                        map.insert("phase".into(), phase.clone().into());
                    }
                    if let Some(map) = data.as_object_mut() {
                        map.insert("childId".into(), agent.child_id.clone().into());
                    }
                    records.append("tool-workflow/agent-start", data);
                }
                WorkflowEvent::AgentEnd(_, agent, outcome) => records.append(
                    "tool-workflow/agent-end",
                    json!({"runId": run_id, "seq": agent.seq, "outcome": outcome.as_str()}),
                ),
                _ => {}
            }
            Ok(())
        })
    });
    let result = workflow.result().await;
    workflow.dispose().await;
    if let Some(subscription) = subscription {
        subscription.dispose();
    }
    if let Some(records) = &records {
        records.append(
            "tool-workflow/run-end",
            json!({"runId": workflow.id, "stopReason": result.stop_reason.as_str()}),
        );
    }
    match result.stop_reason {
        WorkflowStop::Completed => Ok(json!({
            "runId": workflow.id,
            "agentsStarted": result.agents_started,
            "result": result.value,
        })),
        WorkflowStop::Cancelled => Err(ToolError::new(match &result.error {
            Some(error) => format!("workflow run was cancelled ({error})"),
            None => "workflow run was cancelled".to_owned(),
        })),
        WorkflowStop::Error => Err(ToolError::new(format!(
            "workflow run failed: {}",
            result.error.as_deref().unwrap_or("unknown error")
        ))),
    }
}
