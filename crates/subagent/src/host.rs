//! The seam to the composition: how a child session and its agent are built (`ChildHost`),
//! and [`BasicChildHost`], a complete implementation over a session store, one model adapter,
//! the shared tool registry and a prompt template (what tests, benchmarks and simple hosts use).

use std::path::PathBuf;
use std::sync::Arc;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHandle;
use dsh_agent::PromptConfig;
use dsh_kernel::BoxFuture;
use dsh_kernel::Scope;
use dsh_llm::ModelAdapter;
use dsh_session::CreateOptions;
use dsh_session::Event;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use dsh_session::SessionStore;
use dsh_tools::ApprovalOutcome;
use dsh_tools::ApprovalRequest;
use dsh_tools::ApprovalService;
use dsh_tools::ToolRegistry;
use serde_json::Value;

use crate::error::SubagentError;
use crate::provider::AgentOptions;

/// Header facts of a fresh child (§1.3.1). `origin` is always `"subagent"`.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildMeta {
    pub cwd: Option<String>,
    pub agent_preset: Option<Value>,
    pub parent_session: String,
    pub delegation_depth: u64,
    /// Length of the fork prefix copied from the parent (header `seedLength`).
    pub seed_length: Option<u64>,
}

/// The permission state a delegated child starts with (§1.4): the parent's explicit sandbox
/// override (never the deployment default) and approval pinned to `never`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DelegatedPolicy {
    /// The parent's explicit sandbox mode (`read-only`, `workspace-write`, …), if it switched.
    pub sandbox: Option<String>,
    /// Approval pinned to `never` (whenever the approval service is composed).
    pub approval_never: bool,
}

/// Which session the child runs on.
#[derive(Debug, Clone)]
pub enum ChildSession {
    /// A new session `id`. With `seed`, the log starts with it and `session/end-seed` follows.
    Fresh {
        id: String,
        meta: ChildMeta,
        seed: Option<Vec<Event>>,
    },
    /// The stored session `id`, crash-repaired (cold resume).
    Resume { id: String },
}

impl ChildSession {
    pub fn id(&self) -> &str {
        match self {
            Self::Fresh { id, .. } | Self::Resume { id } => id,
        }
    }
}

/// Everything the host needs to build one child.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    pub session: ChildSession,
    /// The resolved route; `None` fields mean the host's defaults.
    pub options: AgentOptions,
    pub policy: DelegatedPolicy,
    /// The scope the child's own agent scope is created under. The subagent service passes its
    /// own (flat) scope, so the child sees the global layers and nothing scoped to its parent.
    pub owner: Scope,
}

/// Runs on the built, still unpublished agent (no prompt yet). An `Err` rolls the child back.
pub type ChildSetup = Box<dyn FnOnce(&AgentHandle) -> Result<(), SubagentError> + Send>;

/// How children are built. The composition implements it over its session API, so a child
/// gets the same tools, prompt sections and session services as any session.
pub trait ChildHost: Send + Sync + 'static {
    /// The session store children persist in; `None` = in-memory children and no continuable
    /// mode.
    fn persistence(&self) -> Option<Arc<dyn SessionStore>>;

    /// Builds the child's log and agent, runs `setup`, and returns the agent idle.
    fn build(
        &self,
        spec: ChildSpec,
        setup: ChildSetup,
    ) -> BoxFuture<'static, Result<AgentHandle, SubagentError>>;

    /// Removes every trace of a child that was rolled back before publication.
    fn discard(&self, handle: AgentHandle) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let path = handle.log().path();
            handle.dispose().await;
            drop(handle);
            if let Some(dir) = path.as_ref().and_then(|p| p.parent()) {
                let _ = std::fs::remove_dir_all(dir);
            }
        })
    }
}

/// What a [`BasicChildHost`] prompt template is given.
pub struct PromptInput<'a> {
    pub session_id: &'a str,
    pub cwd: Option<&'a str>,
    pub policy: &'a DelegatedPolicy,
}

pub type PromptTemplate = Arc<dyn Fn(&PromptInput<'_>) -> PromptConfig + Send + Sync>;
pub type AdapterFor = Arc<dyn Fn(&str) -> Option<Arc<dyn ModelAdapter>> + Send + Sync>;

/// Rejects every approval request: the pinned `never` policy of a delegated child. Provided
/// on the child's own scope so no ask ever reaches an answerer.
pub struct NeverApprove;

impl ApprovalService for NeverApprove {
    fn request(&self, _request: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome> {
        Box::pin(async { ApprovalOutcome::RefusedByPolicy(dsh_tools::NeverBy::Delegation) })
    }
}

/// A complete [`ChildHost`]: the store (or none), one adapter per provider name, the shared
/// registry and a prompt template.
pub struct BasicChildHost {
    pub store: Option<Arc<dyn SessionStore>>,
    pub adapters: AdapterFor,
    pub default_provider: String,
    pub default_model: String,
    pub tools: Arc<ToolRegistry>,
    pub prompt: PromptTemplate,
    pub max_parallel_tool_calls: usize,
}

impl BasicChildHost {
    fn open_log(&self, session: &ChildSession) -> Result<SessionLog, SubagentError> {
        let failure = |e: dsh_session::SessionError| SubagentError::plain(e.to_string());
        match session {
            ChildSession::Fresh { id, meta, seed } => match &self.store {
                Some(store) => store
                    .create(CreateOptions {
                        id: Some(id.clone()),
                        cwd: meta.cwd.as_ref().map(PathBuf::from),
                        parent_session: Some(meta.parent_session.clone()),
                        seed_length: meta.seed_length,
                        origin: Some("subagent".to_owned()),
                        delegation_depth: meta.delegation_depth,
                        agent_preset: meta.agent_preset.clone(),
                        seed: seed.clone(),
                    })
                    .map_err(failure),
                None => {
                    let mut header = SessionHeader::new(id.clone(), meta.cwd.clone());
                    header.parent_session = Some(meta.parent_session.clone());
                    header.seed_length = meta.seed_length;
                    header.origin = Some("subagent".to_owned());
                    header.delegation_depth = meta.delegation_depth;
                    header.agent_preset = meta.agent_preset.clone();
                    match seed {
                        Some(seed) => SessionLog::from_seed(header, seed.clone()).map_err(failure),
                        None => Ok(SessionLog::in_memory(header)),
                    }
                }
            },
            ChildSession::Resume { id } => match &self.store {
                Some(store) => store.resume(id).map_err(failure),
                None => Err(SubagentError::plain(format!(
                    "session {id} cannot be resumed without persistence"
                ))),
            },
        }
    }

    fn make(&self, spec: &ChildSpec) -> Result<AgentHandle, SubagentError> {
        let log = self.open_log(&spec.session)?;
        let path = log.path();
        let fresh = matches!(spec.session, ChildSession::Fresh { .. });
        let built = self.agent(spec, log);
        if built.is_err()
            && fresh
            && let Some(dir) = path.as_ref().and_then(|p| p.parent())
        {
            let _ = std::fs::remove_dir_all(dir);
        }
        built
    }

    fn agent(&self, spec: &ChildSpec, log: SessionLog) -> Result<AgentHandle, SubagentError> {
        let provider = spec
            .options
            .provider
            .clone()
            .unwrap_or_else(|| self.default_provider.clone());
        let model = spec
            .options
            .model
            .clone()
            .unwrap_or_else(|| self.default_model.clone());
        let adapter = (self.adapters)(&provider).ok_or_else(|| {
            SubagentError::plain(format!("no model adapter for provider \"{provider}\""))
        })?;
        let cwd = log.header().cwd.clone();
        let prompt = (self.prompt)(&PromptInput {
            session_id: log.id(),
            cwd: cwd.as_deref(),
            policy: &spec.policy,
        });
        let config = AgentConfig {
            id: log.id().to_owned(),
            cwd,
            provider,
            model,
            max_tokens: spec.options.max_tokens,
            adapter,
            tools: self.tools.clone(),
            scope: spec.owner.clone(),
            log,
            prompt,
            max_parallel_tool_calls: self.max_parallel_tool_calls,
        };
        let handle = match spec.session {
            ChildSession::Resume { .. } => Agent::resume(config),
            ChildSession::Fresh { .. } => Agent::create(config),
        }
        .map_err(|e| SubagentError::plain(dsh_agent::error_chain(&e)))?;
        if spec.policy.approval_never {
            handle
                .scope()
                .provide::<dyn ApprovalService>(Arc::new(NeverApprove))
                .map_err(|e| SubagentError::plain(e.to_string()))?;
        }
        Ok(handle)
    }
}

impl ChildHost for BasicChildHost {
    fn persistence(&self) -> Option<Arc<dyn SessionStore>> {
        self.store.clone()
    }

    fn build(
        &self,
        spec: ChildSpec,
        setup: ChildSetup,
    ) -> BoxFuture<'static, Result<AgentHandle, SubagentError>> {
        let fresh = matches!(spec.session, ChildSession::Fresh { .. });
        let handle = match self.make(&spec) {
            Ok(handle) => handle,
            Err(error) => return Box::pin(async move { Err(error) }),
        };
        match setup(&handle) {
            Ok(()) => Box::pin(async move { Ok(handle) }),
            Err(error) => {
                let discard = if fresh {
                    self.discard(handle)
                } else {
                    Box::pin(async move { handle.dispose().await })
                };
                Box::pin(async move {
                    discard.await;
                    Err(error)
                })
            }
        }
    }
}
