//! The durable sub-call events (`tool/code-dispatch-start`, `tool/code-dispatch`), recorded
//! through the calling session's `SessionContext`.

use dsh_kernel::Waterfall;
use dsh_protocol::ContentBlock;
use dsh_tools::ToolError;
use serde_json::Map;
use serde_json::Value;

/// Event type of a started sub-call.
pub const CODE_DISPATCH_START: &str = "tool/code-dispatch-start";
/// Event type of a settled sub-call.
pub const CODE_DISPATCH: &str = "tool/code-dispatch";

/// One log-only sub-call event. Never derives a model message.
#[derive(Debug, Clone, PartialEq)]
pub enum CodeDispatchEvent {
    Start {
        root_call_id: String,
        parent_call_id: String,
        sub_call_id: String,
        name: String,
        arguments: Value,
    },
    Settle {
        root_call_id: String,
        parent_call_id: String,
        sub_call_id: String,
        name: String,
        arguments: Value,
        is_error: bool,
        content: Vec<ContentBlock>,
    },
}

impl CodeDispatchEvent {
    /// The session-log `type`.
    pub fn event_type(&self) -> &'static str {
        match self {
            Self::Start { .. } => CODE_DISPATCH_START,
            Self::Settle { .. } => CODE_DISPATCH,
        }
    }

    pub fn sub_call_id(&self) -> &str {
        match self {
            Self::Start { sub_call_id, .. } | Self::Settle { sub_call_id, .. } => sub_call_id,
        }
    }

    /// The event's `data` with upstream's exact keys.
    pub fn data(&self) -> Value {
        let (root, parent, sub, name, arguments) = match self {
            Self::Start {
                root_call_id,
                parent_call_id,
                sub_call_id,
                name,
                arguments,
            }
            | Self::Settle {
                root_call_id,
                parent_call_id,
                sub_call_id,
                name,
                arguments,
                ..
            } => (root_call_id, parent_call_id, sub_call_id, name, arguments),
        };
        let mut data = Map::new();
        data.insert("rootCallId".into(), Value::String(root.clone()));
        data.insert("parentCallId".into(), Value::String(parent.clone()));
        data.insert("subCallId".into(), Value::String(sub.clone()));
        data.insert("name".into(), Value::String(name.clone()));
        data.insert("arguments".into(), dsh_schema::clone_deep(arguments));
        if let Self::Settle {
            is_error, content, ..
        } = self
        {
            data.insert("isError".into(), Value::Bool(*is_error));
            data.insert(
                "content".into(),
                Value::Array(content.iter().map(ContentBlock::to_value).collect()),
            );
        }
        Value::Object(data)
    }
}

impl Drop for CodeDispatchEvent {
    fn drop(&mut self) {
        let arguments = match self {
            Self::Start { arguments, .. } | Self::Settle { arguments, .. } => arguments,
        };
        dsh_schema::drop_deep(std::mem::take(arguments));
    }
}

/// Where a run's sub-call events go: the calling agent's session, when it has one.
#[derive(Clone)]
pub(crate) struct DispatchLog(pub(crate) std::sync::Arc<dsh_plugin::SessionContext>);

impl DispatchLog {
    pub(crate) async fn append(&self, event: CodeDispatchEvent) {
        if let Err(error) = self.0.record_raw(event.event_type(), event.data()) {
            tracing::warn!(%error, "cannot log a Code Mode sub-call event");
        }
    }
}

/// Input of the `tools/code-dispatch-log` waterfall: the content about to be logged.
#[derive(Debug, Clone)]
pub struct DispatchLogInput {
    pub name: String,
    pub sub_call_id: String,
    pub is_error: bool,
    pub content: Vec<ContentBlock>,
}

/// `tools/code-dispatch-log`: may replace the *logged copy* of a sub-call's content (e.g. a
/// spill preview). The base returns the content unchanged; a failing listener is contained.
pub type DispatchLogHook = Waterfall<DispatchLogInput, Result<Vec<ContentBlock>, ToolError>>;
