//! `structured_output` (§2.6): the child-scoped tool of a one-shot child started with an
//! output schema, its commit observer, its guard and its prompt section.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::AgentHandle;
use dsh_agent::prompt::Section;
use dsh_agent::prompt::Slot;
use dsh_protocol::ContentBlock;
use dsh_tools::ExecutionToken;
use dsh_tools::RUN_CODE;
use dsh_tools::Tool;
use dsh_tools::ToolError;
use dsh_tools::ToolRun;
use serde_json::Value;
use serde_json::json;

use crate::error::SubagentError;
use crate::runtime::ChildRuntime;

pub const STRUCTURED_OUTPUT: &str = "structured_output";
pub const RECORDED_TEXT: &str = "Structured output recorded.";
const SECTION_NAME: &str = "tool:structured_output";
const DESCRIPTION: &str = "Record the final structured result of this task. Call it exactly once, when the work is complete; the arguments must match the schema.";
const SECTION_TEXT: &str = "When you have the final answer, you must call `structured_output` with arguments that match its schema. A plain text answer does not count as the result.";

/// The refusal every later call gets once a value is recorded.
pub fn already_recorded(tool: &str) -> String {
    format!("structured output already recorded: the run is complete, so `{tool}` is not executed")
}

#[derive(Default)]
struct State {
    /// Values staged by a body, keyed by that execution.
    staged: HashMap<ExecutionToken, Value>,
    /// Values a nested (Code Mode) call recorded, keyed by the enclosing `run_code` execution.
    nested: HashMap<ExecutionToken, Value>,
    committed: Option<Value>,
}

/// The captured value of one child; shared by the tool, the observer, the guard and the driver.
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<State>>);

impl Capture {
    pub fn committed(&self) -> Option<Value> {
        dsh_sync::lock(&self.0).committed.clone()
    }

    fn closed(&self) -> bool {
        let state = dsh_sync::lock(&self.0);
        state.committed.is_some() || !state.nested.is_empty()
    }
}

/// Installs the tool, observer, guard and section on the child's scope.
pub fn install(
    runtime: &ChildRuntime,
    child: &AgentHandle,
    schema: &Value,
) -> Result<Capture, SubagentError> {
    let capture = Capture::default();
    let scope = child.scope();
    let staging = capture.clone();
    let definition = Tool::builder(STRUCTURED_OUTPUT)
        .description(DESCRIPTION)
        .validated_parameters(schema.clone())
        .raw_output(
            json!({
                "type": "object",
                "properties": {"recorded": {"type": "boolean", "const": true}},
                "required": ["recorded"],
                "additionalProperties": false
            }),
            |_, _| Ok(vec![ContentBlock::text(RECORDED_TEXT)]),
        )
        .run(move |args: Value, run: ToolRun| {
            let staging = staging.clone();
            async move {
                dsh_sync::lock(&staging.0).staged.insert(run.token(), args);
                run.conclude_turn();
                Ok::<_, ToolError>(json!({"recorded": true}))
            }
        })
        .build()
        .map_err(|e| SubagentError::plain(e.to_string()))?;
    runtime
        .tools
        .register(scope, definition)
        .map_err(|e| SubagentError::plain(e.to_string()))?;
    let committing = capture.clone();
    runtime.tools.results().register(scope, move |event| {
        let mut state = dsh_sync::lock(&committing.0);
        let token = event.exec.token();
        let ok = !event.result.is_error;
        if event.exec.name() == STRUCTURED_OUTPUT {
            if let Some(value) = state.staged.remove(&token)
                && ok
            {
                match event.exec.parent() {
                    None => state.committed = Some(value),
                    Some(parent) => {
                        state.nested.insert(parent, value);
                    }
                }
            }
        } else if event.exec.name() == RUN_CODE
            && let Some(value) = state.nested.remove(&token)
            && ok
        {
            state.committed = Some(value);
        }
        Ok(())
    });
    let guarding = capture.clone();
    runtime.tools.guard(scope, move |exec| {
        guarding.closed().then(|| already_recorded(exec.name()))
    });
    if let Some(prompts) = &runtime.prompts {
        prompts.register_section(scope, Section::new(SECTION_NAME, Slot::Tools, SECTION_TEXT));
    }
    Ok(capture)
}
