//! `dsh-user-questions`: the user-questions seam (upstream `ctx.userQuestions`).
//!
//! Owns: the question/answer vocabulary, the admission checks every ask goes through (abort,
//! empty request, caller standing, intent sanity, provider presence — in upstream's order and
//! with its exact messages), the single provider slot, and the answer validation a provider
//! that receives free-form replies (a wire client) should apply.
//! Does not own: who answers. A front-end (TUI, ACP bridge) registers the one
//! [`UserQuestionProvider`]; tools (`ask_user_question`, `exit_plan_mode`, MCP elicitation) and
//! agents call [`UserQuestions::ask`]. Whether a caller is a delegated child is answered by an
//! [`AgentDirectory`] kernel service that the subagent runtime provides.
//! Must not depend on: the tool runtime, the agent loop, any front-end.

mod answers;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use dsh_kernel::BoxFuture;
use dsh_kernel::Disposer;
use dsh_kernel::KernelError;
use dsh_kernel::Scope;
use serde::Deserialize;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

pub use answers::AnswersError;
pub use answers::validate_answers;

/// One choice of a question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionOption {
    pub label: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub description: Option<String>,
}

impl QuestionOption {
    pub fn new(label: impl Into<String>, description: Option<&str>) -> Self {
        Self {
            label: label.into(),
            description: description.map(str::to_owned),
        }
    }
}

/// How a question should be presented; internal callers only (the model cannot set it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum QuestionIntent {
    /// `exit_plan_mode`'s review: `detail` is the plan, `approve` names the approving option.
    PlanReview { approve: String },
}

impl QuestionIntent {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::PlanReview { .. } => "plan-review",
        }
    }

    fn approve_label(&self) -> &str {
        match self {
            Self::PlanReview { approve } => approve,
        }
    }
}

/// One question. Field names follow upstream's provider-facing shape (`multiSelect`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    pub id: String,
    pub question: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub header: Option<String>,
    /// Longer material the question is about (the plan of a plan review).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub detail: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub options: Option<Vec<QuestionOption>>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub multi_select: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub intent: Option<QuestionIntent>,
}

impl Question {
    pub fn new(id: impl Into<String>, question: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            question: question.into(),
            header: None,
            detail: None,
            options: None,
            multi_select: None,
            intent: None,
        }
    }

    /// The labels of the options, in order.
    pub fn labels(&self) -> impl Iterator<Item = &str> {
        self.options.iter().flatten().map(|o| o.label.as_str())
    }

    pub fn is_multi_select(&self) -> bool {
        self.multi_select == Some(true)
    }
}

/// The answer to one question: chosen labels and/or a free-text reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub id: String,
    pub selected: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub custom: Option<String>,
}

impl Answer {
    pub fn selected(id: impl Into<String>, labels: Vec<String>) -> Self {
        Self {
            id: id.into(),
            selected: labels,
            custom: None,
        }
    }

    pub fn custom(id: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            selected: Vec::new(),
            custom: Some(text.into()),
        }
    }
}

/// What a provider returns: one answer per question, in question order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Answers {
    pub answers: Vec<Answer>,
}

impl Answers {
    /// Compact JSON in upstream's key order: `{"answers":[{"id","selected","custom"?}]}`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{\"answers\":[]}".to_owned())
    }
}

/// The agent asking, when there is one.
#[derive(Clone)]
pub struct Caller {
    /// The agent id (equals its session id).
    pub agent_id: String,
    /// The agent's own scope (where the [`AgentDirectory`] is looked up).
    pub scope: Scope,
}

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller")
            .field("agent_id", &self.agent_id)
            .finish_non_exhaustive()
    }
}

/// Where a calling agent stands in the live agent tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallerStanding {
    /// A live top-level agent: a human may answer it.
    Root,
    /// A live child owned by another agent: questions go back through its parent's result.
    Delegated,
    /// Not the live agent registered under that id.
    NotLive,
}

/// Answers "is this caller a live root?". Provided as a kernel service (`dyn AgentDirectory`)
/// by whatever owns child agents. Without one every caller is a live root: a composition with
/// no subagent runtime has only top-level agents.
pub trait AgentDirectory: Send + Sync {
    fn standing(&self, caller: &Caller) -> CallerStanding;
}

/// One ask as callers submit it.
#[derive(Debug, Clone)]
pub struct QuestionRequest {
    pub questions: Vec<Question>,
    pub caller: Option<Caller>,
    pub signal: CancellationToken,
}

/// Answers questions: the TUI, an ACP bridge, a test.
pub trait UserQuestionProvider: Send + Sync {
    /// Resolves when the user answered (or the provider gave up with an error). The service
    /// has already checked the request; `request.signal` firing is handled by the service too.
    fn ask(
        &self,
        request: QuestionRequest,
    ) -> BoxFuture<'static, Result<Answers, UserQuestionError>>;
}

/// Upstream's `UserQuestionError` codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuestionErrorCode {
    AskAborted,
    EmptyQuestions,
    CallerNotLive,
    DelegatedCaller,
    BadIntent,
    NoProvider,
    DuplicateProvider,
    AskCancelled,
    AskMissingAgent,
    /// A provider's own failure (e.g. a wire error talking to its client).
    ProviderFailed,
}

impl QuestionErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AskAborted => "ASK_ABORTED",
            Self::EmptyQuestions => "EMPTY_QUESTIONS",
            Self::CallerNotLive => "CALLER_NOT_LIVE",
            Self::DelegatedCaller => "DELEGATED_CALLER",
            Self::BadIntent => "BAD_INTENT",
            Self::NoProvider => "NO_PROVIDER",
            Self::DuplicateProvider => "DUPLICATE_PROVIDER",
            Self::AskCancelled => "ASK_CANCELLED",
            Self::AskMissingAgent => "ASK_MISSING_AGENT",
            Self::ProviderFailed => "ASK_PROVIDER_FAILED",
        }
    }
}

/// A failed ask; tools render it `Error: <message>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct UserQuestionError {
    pub code: QuestionErrorCode,
    pub message: String,
}

impl UserQuestionError {
    pub fn new(code: QuestionErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn aborted() -> Self {
        Self::new(QuestionErrorCode::AskAborted, ABORTED)
    }

    /// The user dismissed the question (a client `cancelled` answer).
    pub fn cancelled() -> Self {
        Self::new(QuestionErrorCode::AskCancelled, CANCELLED)
    }
}

pub const ABORTED: &str = "ask_user_question was aborted before the user answered";
pub const EMPTY: &str = "ask_user_question requires at least one question";
pub const NOT_LIVE: &str =
    "human interaction requires the exact live calling agent when an agent is supplied";
pub const DELEGATED: &str = "human interaction is unavailable while the calling agent is owned by another live agent; include the unresolved question or decision in the child agent's final result";
pub const NO_PROVIDER: &str = "no user-questions provider is registered";
pub const DUPLICATE: &str = "a user-questions provider is already registered";
pub const CANCELLED: &str = "the user cancelled ask_user_question";

struct Slot {
    id: u64,
    provider: Arc<dyn UserQuestionProvider>,
}

/// The service: one per composition, a kernel service on the root scope.
#[derive(Default)]
pub struct UserQuestions {
    slot: Mutex<Option<Slot>>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for UserQuestions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserQuestions")
            .field("provider", &self.has_provider())
            .finish()
    }
}

impl UserQuestions {
    /// Provides a fresh service on `scope`.
    pub fn install(scope: &Scope) -> Result<Arc<Self>, KernelError> {
        let service = Arc::new(Self::default());
        scope.provide(service.clone())?;
        Ok(service)
    }

    /// The service visible from `scope`, if one is installed.
    pub fn for_scope(scope: &Scope) -> Option<Arc<Self>> {
        scope.service::<Self>()
    }

    /// Registers the one provider, owned by `owner` (disposing `owner` unregisters it).
    pub fn register_provider(
        self: &Arc<Self>,
        owner: &Scope,
        provider: Arc<dyn UserQuestionProvider>,
    ) -> Result<Disposer, UserQuestionError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        {
            let mut slot = dsh_sync::lock(&self.slot);
            if slot.is_some() {
                return Err(UserQuestionError::new(
                    QuestionErrorCode::DuplicateProvider,
                    DUPLICATE,
                ));
            }
            *slot = Some(Slot { id, provider });
        }
        let me = Arc::downgrade(self);
        Ok(owner.defer(move || {
            if let Some(me) = me.upgrade() {
                let mut slot = dsh_sync::lock(&me.slot);
                if slot.as_ref().is_some_and(|s| s.id == id) {
                    *slot = None;
                }
            }
        }))
    }

    pub fn has_provider(&self) -> bool {
        dsh_sync::lock(&self.slot).is_some()
    }

    /// Checks `request` in upstream's order, then asks the provider. The answer is raced
    /// against `request.signal`.
    pub fn ask(
        &self,
        request: QuestionRequest,
    ) -> BoxFuture<'static, Result<Answers, UserQuestionError>> {
        let checked = self.admit(&request);
        Box::pin(async move {
            let provider = checked?;
            let signal = request.signal.clone();
            signal
                .run_until_cancelled_owned(provider.ask(request))
                .await
                .unwrap_or_else(|| Err(UserQuestionError::aborted()))
        })
    }

    fn admit(
        &self,
        request: &QuestionRequest,
    ) -> Result<Arc<dyn UserQuestionProvider>, UserQuestionError> {
        use QuestionErrorCode as Code;
        if request.signal.is_cancelled() {
            return Err(UserQuestionError::aborted());
        }
        if request.questions.is_empty() {
            return Err(UserQuestionError::new(Code::EmptyQuestions, EMPTY));
        }
        if let Some(caller) = &request.caller {
            let standing = caller
                .scope
                .service::<dyn AgentDirectory>()
                .map_or(CallerStanding::Root, |dir| dir.standing(caller));
            match standing {
                CallerStanding::Root => {}
                CallerStanding::NotLive => {
                    return Err(UserQuestionError::new(Code::CallerNotLive, NOT_LIVE));
                }
                CallerStanding::Delegated => {
                    return Err(UserQuestionError::new(Code::DelegatedCaller, DELEGATED));
                }
            }
        }
        for question in &request.questions {
            let Some(intent) = &question.intent else {
                continue;
            };
            let approve = intent.approve_label();
            if !question.labels().any(|label| label == approve) {
                let label = serde_json::to_string(approve).unwrap_or_default();
                return Err(UserQuestionError::new(
                    Code::BadIntent,
                    format!(
                        "question {} declares intent {} whose approve label {label} names none of its options",
                        question.id,
                        intent.kind()
                    ),
                ));
            }
            if question.detail.is_none() {
                return Err(UserQuestionError::new(
                    Code::BadIntent,
                    format!(
                        "question {} declares intent {} without the detail it reviews",
                        question.id,
                        intent.kind()
                    ),
                ));
            }
        }
        dsh_sync::lock(&self.slot)
            .as_ref()
            .map(|slot| slot.provider.clone())
            .ok_or_else(|| UserQuestionError::new(Code::NoProvider, NO_PROVIDER))
    }
}

#[cfg(test)]
mod tests;
