//! `dsh-tool-todo`: the `todo_write` tool and its plugin.
//!
//! Owns: the tool's schema, validation rules, result text and card, the `todo/write` event
//! payload ([`TodoWrite`], the one [`Todo`] type front-ends decode), and [`TodoPlugin`]
//! (`[plugins.todo]`). The list itself lives only in the session log: the tool records the
//! validated list through the session's [`SessionContext`]. There is no other state, so
//! replaying a log restores the plan.
//! Must not depend on: other capability crates, the host, a front-end.

use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_plugin::DurableEvent;
use dsh_plugin::HostPlugin;
use dsh_plugin::HostServices;
use dsh_plugin::Plugin;
use dsh_plugin::PluginError;
use dsh_plugin::SessionContext;
use dsh_plugin::transcript::Item;
use dsh_plugin::transcript::PlanEntry;
use dsh_plugin::transcript::PlanStatus;
use dsh_protocol::ContentBlock;
use dsh_tools::DefineError;
use dsh_tools::Tool;
use dsh_tools::ToolCallKind;
use dsh_tools::ToolCallView;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolRun;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;
use serde_json::json;

/// The tool's name, as the model calls it.
pub const NAME: &str = "todo_write";

/// `todo/write {todos}`: the whole list, last write wins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoWrite {
    pub todos: Vec<Todo>,
}

impl DurableEvent for TodoWrite {
    const KIND: &'static str = "todo/write";
}

/// One task of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todo {
    pub content: String,
    pub status: TodoStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

#[derive(Debug, Clone, Deserialize)]
struct TodoArgs {
    todos: Vec<Todo>,
}

/// `[plugins.todo]` (upstream `allowParallelInProgress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TodoConfig {
    /// Whether several tasks may be `in_progress` at once.
    #[serde(default = "yes")]
    pub allow_parallel_in_progress: bool,
}

fn yes() -> bool {
    true
}

impl Default for TodoConfig {
    fn default() -> Self {
        Self {
            allow_parallel_in_progress: true,
        }
    }
}

const DESCRIPTION_PARALLEL: &str = "Maintain a structured task list for the current work. Each call must carry the full list, which replaces the one recorded before; single items cannot be added or changed on their own. Before starting multi-step work, add one todo per concrete step, then keep the statuses current as you go. Mark every task you are actively working on `in_progress`: several at once when work really runs concurrently (background commands or subagents running side by side), one at a time when you work step by step. While any work remains, at least one task should be `in_progress`. Mark each task `completed` as soon as it is finished instead of saving completions up, and leave nothing `in_progress` only once all work is done. Trivial single-step work needs no list. Statuses: `pending` (not started yet), `in_progress` (being worked on now), `completed` (finished).";

const DESCRIPTION_SINGLE: &str = "Maintain a structured task list for the current work. Each call must carry the full list, which replaces the one recorded before; single items cannot be added or changed on their own. Before starting multi-step work, add one todo per concrete step, then keep the statuses current as you go. While any work remains, exactly one task is `in_progress` (more than one is rejected); finish it before moving to the next. Mark each task `completed` as soon as it is finished instead of saving completions up. Trivial single-step work needs no list. Statuses: `pending` (not started yet), `in_progress` (being worked on now), `completed` (finished).";

fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "description": "The full task list; it replaces whatever list was recorded before.",
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "content": {"type": "string", "description": "The task itself, as one short imperative sentence."},
                        "status": {
                            "type": "string",
                            "description": "pending = not started, in_progress = being worked on now, completed = finished.",
                            "enum": ["pending", "in_progress", "completed"]
                        }
                    },
                    "required": ["content", "status"]
                }
            }
        },
        "required": ["todos"]
    })
}

fn output_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "todos": {"type": "array"},
            "counts": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "pending": {"type": "integer"},
                    "inProgress": {"type": "integer"},
                    "completed": {"type": "integer"}
                },
                "required": ["pending", "inProgress", "completed"]
            }
        },
        "required": ["todos", "counts"]
    })
}

/// Trims and checks a list in the order upstream does: empty content, duplicates, then the
/// single-`in_progress` rule.
pub fn validate(todos: Vec<Todo>, config: TodoConfig) -> Result<Vec<Todo>, String> {
    let mut cleaned: Vec<Todo> = Vec::with_capacity(todos.len());
    for todo in todos {
        let content = todo.content.trim().to_owned();
        if content.is_empty() {
            return Err("invalid todo: `content` must be a non-empty string".to_owned());
        }
        if cleaned.iter().any(|seen| seen.content == content) {
            let quoted = serde_json::to_string(&content).unwrap_or_default();
            return Err(format!("invalid todos: duplicate content {quoted}"));
        }
        cleaned.push(Todo {
            content,
            status: todo.status,
        });
    }
    let in_progress = cleaned
        .iter()
        .filter(|t| t.status == TodoStatus::InProgress)
        .count();
    if !config.allow_parallel_in_progress && in_progress > 1 {
        return Err(format!(
            "invalid todos: at most one task may be in_progress (got {in_progress})"
        ));
    }
    Ok(cleaned)
}

/// `Updated todo list: <p> pending, <i> in progress, <c> completed.`
pub fn summary(todos: &[Todo]) -> String {
    let count = |status| todos.iter().filter(|t| t.status == status).count();
    format!(
        "Updated todo list: {} pending, {} in progress, {} completed.",
        count(TodoStatus::Pending),
        count(TodoStatus::InProgress),
        count(TodoStatus::Completed)
    )
}

/// The `todo_write` definition.
pub fn definition(config: TodoConfig) -> Result<ToolDefinition, DefineError> {
    let description = if config.allow_parallel_in_progress {
        DESCRIPTION_PARALLEL
    } else {
        DESCRIPTION_SINGLE
    };
    Tool::builder(NAME)
        .description(description)
        .validated_parameters(parameters())
        .raw_output(output_schema(), |_args, value| {
            let todos: Vec<Todo> = value
                .get("todos")
                .cloned()
                .map(serde_json::from_value)
                .transpose()
                .map_err(|e| ToolError::new(e.to_string()))?
                .unwrap_or_default();
            Ok(vec![ContentBlock::text(summary(&todos))])
        })
        .present_call(|args: &Value| {
            Some(ToolCallView::Generic {
                title: "Update todo list".to_owned(),
                kind: Some(ToolCallKind::Other),
                raw_input: args.get("todos").cloned(),
                content: None,
                locations: None,
            })
        })
        .run(move |args: Value, run: ToolRun| async move {
            let args: TodoArgs =
                serde_json::from_value(args).map_err(|e| ToolError::new(e.to_string()))?;
            let todos = validate(args.todos, config).map_err(ToolError::new)?;
            let session = SessionContext::for_run(&run, NAME)?;
            session
                .record(&TodoWrite {
                    todos: todos.clone(),
                })
                .map_err(|e| ToolError::new(e.to_string()))?;
            let count = |status| todos.iter().filter(|t| t.status == status).count();
            let counts = json!({
                "pending": count(TodoStatus::Pending),
                "inProgress": count(TodoStatus::InProgress),
                "completed": count(TodoStatus::Completed),
            });
            Ok(json!({ "todos": todos, "counts": counts }))
        })
        .build()
}

/// Why the tools could not be set up (kept as a name for callers).
pub type TodoRegisterError = dsh_tools::SetupError;

/// Registers `todo_write` in `scope`'s layer.
pub fn register(
    registry: &ToolRegistry,
    scope: &Scope,
    config: TodoConfig,
) -> Result<Disposer, TodoRegisterError> {
    Ok(registry.register(scope, definition(config)?)?)
}

/// `[plugins.todo]`: `todo_write` for every session.
#[derive(Debug, Default)]
pub struct TodoPlugin;

impl Plugin for TodoPlugin {
    type Config = TodoConfig;

    fn name(&self) -> &str {
        Self::NAME
    }

    fn apply(&self, ctx: &Scope, config: TodoConfig) -> Result<(), PluginError> {
        let host = HostServices::of(ctx)?;
        register(&host.tools, ctx, config).map_err(PluginError::other)?;
        host.presenters
            .register(ctx, TodoWrite::KIND, present)
            .map_err(PluginError::other)?;
        Ok(())
    }
}

/// `todo/write` as every front-end shows it: the whole list as the plan.
pub fn present(event: &dsh_plugin::transcript::Event) -> Vec<Item> {
    let Some(Ok(write)) = event.decode::<TodoWrite>() else {
        return Vec::new();
    };
    let entries = write
        .todos
        .into_iter()
        .map(|todo| PlanEntry {
            content: todo.content,
            status: match todo.status {
                TodoStatus::Pending => PlanStatus::Pending,
                TodoStatus::InProgress => PlanStatus::InProgress,
                TodoStatus::Completed => PlanStatus::Completed,
            },
        })
        .collect();
    vec![Item::Plan(entries)]
}

impl HostPlugin for TodoPlugin {
    const NAME: &'static str = "todo";
    const EVENT_KINDS: &'static [&'static str] = &[<TodoWrite as DurableEvent>::KIND];
}

#[cfg(test)]
mod tests;
