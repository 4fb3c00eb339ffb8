//! The pipeline's extension points: decisions, hook payloads, approval and the Code Mode seam.

use std::sync::Arc;

use dsh_kernel::BoxFuture;
use dsh_kernel::Observe;
use dsh_kernel::Waterfall;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::definition::ToolDefinition;
use crate::error::ToolError;
use crate::execution::AgentHandle;
use crate::execution::Dispatch;
use crate::execution::Execution;
use crate::result::ToolResult;

/// `tools/pre-execute` verdict. The base of the waterfall is `Allow`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreDecision {
    Allow,
    Deny {
        reason: String,
    },
    /// Routed to the [`ApprovalService`] of the calling agent's scope.
    Ask {
        reason: Option<String>,
    },
}

impl PreDecision {
    pub fn deny(reason: impl Into<String>) -> Self {
        Self::Deny {
            reason: reason.into(),
        }
    }
    pub fn ask(reason: Option<String>) -> Self {
        Self::Ask { reason }
    }
}

/// `tools/post-execute` verdict. The base of the waterfall is a plain accept.
#[derive(Debug, Clone, PartialEq)]
pub enum PostDecision {
    /// Keep the result; optionally replace its content (not a redaction: value, meta and error
    /// stay) or its value (success only: revalidated, re-rendered, meta recomputed). Setting
    /// both is an error.
    Accept {
        content: Option<Vec<ContentBlock>>,
        value: Option<Value>,
        additional_contexts: Vec<Message>,
    },
    /// Turn the result into a valueless failure whose content is `feedback`; every earlier
    /// context is discarded, only these survive.
    Block {
        feedback: Vec<ContentBlock>,
        additional_contexts: Vec<Message>,
    },
}

impl PostDecision {
    pub fn accept() -> Self {
        Self::Accept {
            content: None,
            value: None,
            additional_contexts: Vec::new(),
        }
    }
    pub fn replace_content(content: Vec<ContentBlock>) -> Self {
        Self::Accept {
            content: Some(content),
            value: None,
            additional_contexts: Vec::new(),
        }
    }
    pub fn replace_value(value: Value) -> Self {
        Self::Accept {
            content: None,
            value: Some(value),
            additional_contexts: Vec::new(),
        }
    }
    pub fn block(feedback: Vec<ContentBlock>) -> Self {
        Self::Block {
            feedback,
            additional_contexts: Vec::new(),
        }
    }
    /// Attaches contexts to either kind of decision.
    pub fn with_contexts(mut self, contexts: Vec<Message>) -> Self {
        match &mut self {
            Self::Accept {
                additional_contexts,
                ..
            }
            | Self::Block {
                additional_contexts,
                ..
            } => {
                *additional_contexts = contexts;
            }
        }
        self
    }
}

/// The `tools/post-execute` payload: the shared execution and the (immutable) result so far.
#[derive(Clone)]
pub struct PostInput {
    pub exec: Arc<Execution>,
    pub result: Arc<ToolResult>,
}

/// The `tools/result` notification: the same objects `execute` returns.
pub struct ResultEvent {
    pub exec: Arc<Execution>,
    pub result: Arc<ToolResult>,
}

/// `tools/pre-execute`: an `Err` (or a panic) ends the call with that error, skipping post.
pub type PreExecuteHook = Waterfall<Arc<Execution>, Result<PreDecision, ToolError>>;
/// `tools/execute`: around-dispatch wrappers; the base runs the body. A wrapper may only swap
/// the signal ([`Dispatch::set_signal`]) or return a result of its own.
pub type ExecuteHook = Waterfall<Dispatch, Result<Arc<ToolResult>, ToolError>>;
/// `tools/post-execute`.
pub type PostExecuteHook = Waterfall<PostInput, Result<PostDecision, ToolError>>;
/// `tools/result`: observe-only.
pub type ResultHook = Observe<ResultEvent>;

/// A monotonic deny: `Some(reason)` denies, `None` abstains. Cannot allow.
pub type GuardFn = Arc<dyn Fn(&Execution) -> Option<String> + Send + Sync>;

/// A `tools/change` listener. An `Err` during `register` rolls the registration back.
pub type ChangeFn = Arc<dyn Fn() -> Result<(), ToolError> + Send + Sync>;

/// What an `ask` is routed to. Looked up at call time as a kernel service
/// (`Scope::service::<dyn ApprovalService>()`) from the calling agent's scope.
pub trait ApprovalService: Send + Sync {
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome>;
}

/// One approval request. `signal` is the caller's own token.
#[derive(Clone)]
pub struct ApprovalRequest {
    pub agent: Arc<dyn AgentHandle>,
    pub tool_name: String,
    pub call_id: String,
    pub reason: Option<String>,
    pub signal: CancellationToken,
}

/// How an approval request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalOutcome {
    AllowedOnce,
    /// A person said no.
    Rejected,
    Cancelled,
    Unavailable,
    /// The approval policy is `never`: no one was asked (upstream logs it as `rejected`, and
    /// so does the audit pair; the model is told the truth, and which setting refused).
    RefusedByPolicy(NeverBy),
}

/// Which setting made a session's approval policy `never`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeverBy {
    /// The configuration: `[plugins.approval] policy` (`-a never`), which defaults to `never`
    /// under sandbox mode `danger-full-access`.
    Config { danger_full_access: bool },
    /// A permission mode a client chose for the session (ACP session mode, the TUI's
    /// `/approval`).
    Preset,
    /// The session is a delegated agent: children never ask.
    Delegation,
}

impl NeverBy {
    /// The setting, as the model and the user read it.
    pub fn setting(self) -> &'static str {
        match self {
            Self::Config {
                danger_full_access: false,
            } => "set by `-a never` / `[plugins.approval] policy = \"never\"`",
            Self::Config {
                danger_full_access: true,
            } => {
                "set by `-a never` / `[plugins.approval] policy`, whose default under sandbox mode \"danger-full-access\" is \"never\""
            }
            Self::Preset => "set by the permission mode chosen for this session",
            Self::Delegation => "a delegated agent never asks for approval",
        }
    }
}

/// The refusal the model reads when the approval policy `never` refused `subject` (`tool
/// "bash"`, `sandbox escalation to "danger-full-access"`) without asking anyone.
pub fn refused_by_policy(subject: &str, by: NeverBy) -> String {
    format!(
        "{subject} was refused by policy: it needs approval, and the approval policy is \"never\" ({}), so no one was asked",
        by.setting()
    )
}

/// How the model reaches tools in a scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PresentationMode {
    #[default]
    Native,
    Code,
    Both,
}

impl PresentationMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Code => "code",
            Self::Both => "both",
        }
    }
}

/// The Code Mode seam: provides the reserved `run_code` definition (built by the code-mode
/// crate). Without a transport, non-native scopes simply list no `run_code`.
pub trait CodeModeTransport: Send + Sync {
    fn definition(&self) -> Arc<ToolDefinition>;
}

/// Scheduling class of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutionMode {
    Parallel,
    Exclusive,
}
