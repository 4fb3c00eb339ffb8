//! The delegation tools (§2): `subagent` instances, `send_message`, `interrupt_agent`,
//! `list_agents` and the continuable child's `report`.

use std::sync::Arc;
use std::sync::Weak;

use dsh_agent::AgentHandle;
use dsh_agent::prompt::Section;
use dsh_agent::prompt::Slot;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_tools::Tool;
use dsh_tools::ToolError;
use dsh_tools::ToolRun;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use crate::continuation::InterruptAuthority;
use crate::continuation::ReportDelivery;
use crate::error::SubagentError;
use crate::error::code;
use crate::listing::ListRow;
use crate::listing::ListScope;
use crate::listing::SessionProjections;
use crate::notice::coordinator_source;
use crate::service::Subagents;

pub mod subagent;

pub use subagent::BackgroundMode;
pub use subagent::JOBS_UNAVAILABLE;
pub use subagent::RUN_IN_BACKGROUND_DISABLED;
pub use subagent::SubagentToolConfig;
pub use subagent::failure_text;

/// The live agent a call runs for (the exact agent, looked up in the directory).
pub(crate) fn caller(subagents: &Subagents, run: &ToolRun) -> Option<AgentHandle> {
    let agent = run.agent()?;
    let handle = subagents.runtime().directory.get(agent.id())?;
    (handle.scope() == agent.scope()).then_some(handle)
}

/// The live service and the registered agent calling `tool`, or the tool error upstream gives
/// when either is missing.
fn service_and_caller(
    service: &Weak<Subagents>,
    run: &ToolRun,
    tool: &str,
) -> Result<(Arc<Subagents>, AgentHandle), ToolError> {
    let subagents = service
        .upgrade()
        .ok_or_else(|| ToolError::new("the subagent service is gone"))?;
    let caller = caller(&subagents, run).ok_or_else(|| {
        ToolError::new(format!(
            "{tool} requires a calling agent (exec.agent was undefined)"
        ))
    })?;
    Ok((subagents, caller))
}

fn define_err(error: dsh_tools::DefineError) -> SubagentError {
    SubagentError::plain(error.to_string())
}

fn register_err(error: dsh_tools::RegisterError) -> SubagentError {
    SubagentError::plain(error.to_string())
}

fn message_id_output() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {"messageId": {"type": "string"}},
        "required": ["messageId"]
    })
}

#[derive(Deserialize)]
struct SendArgs {
    subagent_id: String,
    message: String,
}

#[derive(Deserialize)]
struct InterruptArgs {
    agent_id: String,
}

/// `tool-subagent-control`: `send_message` and `interrupt_agent`, global (children see them).
pub fn install_control(subagents: &Arc<Subagents>, scope: &Scope) -> Result<(), SubagentError> {
    let tools = subagents.runtime().tools.clone();
    let service = Arc::downgrade(subagents);
    let send = Tool::builder("send_message")
        .description("Send a background subagent its next turn: the message continues the same child conversation once its current turn (if any) ends; it cannot redirect a running turn. Returns only a delivery confirmation; an error means the message was not delivered.")
        .author_parameters(&json!({
            "subagent_id": {"type": "string", "required": true, "description": "The id returned when the background subagent was started."},
            "message": {"type": "string", "required": true, "description": "The message to deliver."}
        }))
        .raw_output(message_id_output(), |args, _| {
            let id = args.get("subagent_id").and_then(Value::as_str).unwrap_or_default();
            Ok(vec![ContentBlock::text(format!(
                "message queued as the next turn for subagent {id}"
            ))])
        })
        .run(move |args: Value, run: ToolRun| {
            let service = service.clone();
            async move {
                let args: SendArgs =
                    serde_json::from_value(args).map_err(|e| ToolError::new(e.to_string()))?;
                let (subagents, parent) = service_and_caller(&service, &run, "send_message")?;
                let id = subagents
                    .followup(
                        &parent,
                        &args.subagent_id,
                        vec![ContentBlock::text(args.message)],
                        coordinator_source(parent.id()),
                        run.signal().clone(),
                    )
                    .await?;
                Ok(json!({"messageId": id}))
            }
        })
        .build()
        .map_err(define_err)?;
    tools.register(scope, send).map_err(register_err)?;
    let service = Arc::downgrade(subagents);
    let interrupt = Tool::builder("interrupt_agent")
        .description("Ask a background agent (a direct child or a deeper descendant) to stop its current turn. Messages queued for it stay parked until a later send_message; its own children keep running. Returns once the request is accepted; interrupting an agent that already finished does nothing.")
        .author_parameters(&json!({
            "agent_id": {"type": "string", "required": true, "description": "The id of the agent to interrupt."}
        }))
        .raw_output(
            json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {"accepted": {"type": "boolean"}},
                "required": ["accepted"]
            }),
            |args, _| {
                let id = args.get("agent_id").and_then(Value::as_str).unwrap_or_default();
                Ok(vec![ContentBlock::text(format!(
                    "interrupt requested for agent {id}"
                ))])
            },
        )
        .run(move |args: Value, run: ToolRun| {
            let service = service.clone();
            async move {
                let args: InterruptArgs =
                    serde_json::from_value(args).map_err(|e| ToolError::new(e.to_string()))?;
                let (subagents, caller) = service_and_caller(&service, &run, "interrupt_agent")?;
                subagents.interrupt(&args.agent_id, &InterruptAuthority::Ancestor(caller))?;
                Ok(json!({"accepted": true}))
            }
        })
        .build()
        .map_err(define_err)?;
    tools.register(scope, interrupt).map_err(register_err)?;
    Ok(())
}

#[derive(Deserialize)]
struct ListArgs {
    #[serde(default)]
    scope: Option<ListScope>,
}

pub const PROJECTIONS_REQUIRED: &str = "listing subagents requires the sessionProjections registry (load @deepseek-ai/dsh-session-projection)";

/// Renders list rows the way the model sees them.
pub fn render_rows(rows: &Value, scope: ListScope) -> String {
    let Some(rows) = rows.as_array().filter(|r| !r.is_empty()) else {
        return "(no subagents)".to_owned();
    };
    let lines: Vec<String> = rows
        .iter()
        .map(|row| {
            let text = |key: &str| row.get(key).and_then(Value::as_str).unwrap_or_default();
            let at = if scope == ListScope::Descendants {
                format!(
                    " parent={} depth={}",
                    text("parent"),
                    row.get("depth").and_then(Value::as_u64).unwrap_or_default()
                )
            } else {
                String::new()
            };
            if text("kind") == "diagnostic" {
                format!("{} [diagnostic: {}]{at}", text("id"), text("reason"))
            } else {
                format!(
                    "{} [{}]{at} — {}",
                    text("id"),
                    text("status"),
                    text("label")
                )
            }
        })
        .collect();
    lines.join("\n")
}

fn list_output_schema() -> Value {
    json!({
        "type": "array",
        "items": {
            "oneOf": [
                {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "kind": {"type": "string", "enum": ["child"]},
                        "id": {"type": "string"},
                        "label": {"type": "string"},
                        "status": {"type": "string", "enum": ["running", "idle", "ready"]},
                        "parent": {"type": "string"},
                        "depth": {"type": "number"}
                    },
                    "required": ["kind", "id", "label", "status"]
                },
                {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "kind": {"type": "string", "enum": ["diagnostic"]},
                        "id": {"type": "string"},
                        "reason": {"type": "string", "enum": ["corrupt", "unsupported", "unavailable"]},
                        "parent": {"type": "string"},
                        "depth": {"type": "number"}
                    },
                    "required": ["kind", "id", "reason"]
                }
            ]
        }
    })
}

/// `tool-subagent-list-agents`: `list_agents` (needs the projection registry on the scope).
pub fn install_list_agents(subagents: &Arc<Subagents>, scope: &Scope) -> Result<(), SubagentError> {
    let tools = subagents.runtime().tools.clone();
    let service = Arc::downgrade(subagents);
    let definition = Tool::builder("list_agents")
        .description("List your continuable background subagents by durable id and label, for recall rather than polling (you are notified when one finishes). Status running = working now, idle = live and waiting, ready = stored only and resumable with send_message (not a terminal state). A listing is not a delivery promise; children whose logs cannot be read appear as diagnostics. scope \"descendants\" walks the whole tree in stable pre-order with parent id and depth; send_message works only on depth-1 entries, deeper ones accept only interrupt_agent.")
        .author_parameters(&json!({
            "scope": {"type": "string", "enum": ["children", "descendants"], "description": "children (default) or descendants."}
        }))
        .raw_output(list_output_schema(), |args, value| {
            let scope = match args.get("scope").and_then(Value::as_str) {
                Some("descendants") => ListScope::Descendants,
                _ => ListScope::Children,
            };
            Ok(vec![ContentBlock::text(render_rows(value, scope))])
        })
        .run(move |args: Value, run: ToolRun| {
            let service = service.clone();
            async move {
                let args: ListArgs =
                    serde_json::from_value(args).map_err(|e| ToolError::new(e.to_string()))?;
                let (subagents, parent) = service_and_caller(&service, &run, "list_agents")?;
                if parent.scope().service::<SessionProjections>().is_none() {
                    return Err(SubagentError::coded(
                        code::PROJECTIONS_UNAVAILABLE,
                        PROJECTIONS_REQUIRED,
                    )
                    .into());
                }
                let scope = args.scope.unwrap_or_default();
                let rows = match scope {
                    ListScope::Children => subagents.list_children(parent.id(), run.signal()).await?,
                    ListScope::Descendants => {
                        subagents.list_descendants(parent.id(), run.signal()).await?
                    }
                };
                Ok(Value::Array(project_rows(&subagents, rows, scope)))
            }
        })
        .build()
        .map_err(define_err)?;
    tools.register(scope, definition).map_err(register_err)?;
    Ok(())
}

/// The tool's projection: diagnostics pass through, non-continuable rows are dropped, the
/// status comes from the live registry.
fn project_rows(subagents: &Subagents, rows: Vec<ListRow>, scope: ListScope) -> Vec<Value> {
    let located = scope == ListScope::Descendants;
    rows.into_iter()
        .filter_map(|row| {
            let mut value = match &row {
                ListRow::Diagnostic { id, reason, .. } => {
                    json!({"kind": "diagnostic", "id": id, "reason": reason.as_str()})
                }
                ListRow::Child {
                    id, mode, label, ..
                } => {
                    if *mode != "continuable" {
                        return None;
                    }
                    let status = match subagents.runtime().directory.get(id) {
                        None => "ready",
                        Some(agent) if agent.status() == dsh_agent::AgentStatus::Running => {
                            "running"
                        }
                        Some(_) => "idle",
                    };
                    json!({"kind": "child", "id": id, "label": label.clone().unwrap_or_default(), "status": status})
                }
            };
            if located && let Some(map) = value.as_object_mut() {
                let (parent, depth) = match &row {
                    ListRow::Child { parent, depth, .. } | ListRow::Diagnostic { parent, depth, .. } => {
                        (parent.clone(), *depth)
                    }
                };
                map.insert("parent".into(), parent.into());
                map.insert("depth".into(), depth.into());
            }
            Some(value)
        })
        .collect()
}

/// `tool-subagent-report` config.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReportConfig {
    #[serde(default)]
    pub report_delivery: ReportDelivery,
}

#[derive(Deserialize)]
struct ReportArgs {
    output: String,
}

const REPORT_SECTION: &str = "Before you finish, call `report` once with a self-contained answer for the agent that started you: it shares your workspace but not this transcript, and closing remarks such as \"done\" tell it nothing. Report earlier too when a partial finding should change what it does next. Reporting never ends your turn.";

/// `tool-subagent-report`: `report` in every continuable in-process child (and nowhere else).
pub fn install_report(
    subagents: &Arc<Subagents>,
    scope: &Scope,
    config: ReportConfig,
) -> dsh_kernel::Disposer {
    let service = Arc::downgrade(subagents);
    let delivery = config.report_delivery;
    subagents.register_continuable_setup(
        scope,
        Arc::new(move |child: &AgentHandle, child_scope: &Scope| {
            let Some(subagents) = service.upgrade() else {
                return Ok(());
            };
            let weak = Arc::downgrade(&subagents);
            let reporter = child.clone();
            let definition = Tool::builder("report")
                .description("Report selected content to the agent that started you. Call it once before finishing with a self-contained result, and earlier for findings that change what that agent does next. It shares your workspace but not your transcript, so summarize and reference shared paths. Reporting does not end your turn; only your direct parent receives it; a failed call may still have arrived.")
                .author_parameters(&json!({
                    "output": {"type": "string", "required": true, "description": "Actionable content for the agent that started you."}
                }))
                .raw_output(message_id_output(), |_, value| {
                    let id = value.get("messageId").and_then(Value::as_str).unwrap_or_default();
                    Ok(vec![ContentBlock::text(format!(
                        "report accepted by the agent that started you as message {id}"
                    ))])
                })
                .run(move |args: Value, run: ToolRun| {
                    let weak = weak.clone();
                    let reporter = reporter.clone();
                    async move {
                        let args: ReportArgs = serde_json::from_value(args)
                            .map_err(|e| ToolError::new(e.to_string()))?;
                        let subagents = weak
                            .upgrade()
                            .ok_or_else(|| ToolError::new("the subagent service is gone"))?;
                        let id = subagents.report_from(
                            &reporter,
                            vec![ContentBlock::text(args.output)],
                            delivery,
                            run.signal(),
                        )?;
                        Ok(json!({"messageId": id}))
                    }
                })
                .build()
                .map_err(define_err)?;
            subagents
                .runtime()
                .tools
                .register(child_scope, definition)
                .map_err(register_err)?;
            if let Some(prompts) = &subagents.runtime().prompts {
                prompts.register_section(child_scope, Section::new("tool:report", Slot::Tools, REPORT_SECTION));
            }
            Ok(())
        }),
    )
}
