//! The services every plugin reaches from its scope, provided once on the host's root.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_agent::AgentHooks;
use dsh_agent::prompt::PromptRegistry;
use dsh_kernel::PluginError;
use dsh_kernel::Scope;
use dsh_llm::ModelAdapter;
use dsh_tools::ToolRegistry;

use crate::sessions::Sessions;

/// Facts about the running host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostInfo {
    /// `$DSH_HOME` (sessions, attachments, skills, logs live under it).
    pub home: PathBuf,
    /// The directory the process was started in (hook files resolve against it).
    pub launch_cwd: PathBuf,
    /// The configured provider and model of new sessions.
    pub provider: String,
    pub model: String,
}

/// Everything a plugin registers into, in one service: `HostServices::of(ctx)?` from `apply`.
pub struct HostServices {
    /// Tools, pre/post-execute listeners, guards, execute wrappers.
    pub tools: Arc<ToolRegistry>,
    /// The agent loop's hooks: pre-step, request, request-error, turn-stopping, events.
    pub hooks: Arc<AgentHooks>,
    /// System prompt sections, runtime contexts and the wire tool-list provider.
    pub prompts: Arc<PromptRegistry>,
    /// Per-session attachments and the live sessions.
    pub sessions: Arc<Sessions>,
    /// The host's model adapter (it routes to the configured provider).
    pub adapter: Arc<dyn ModelAdapter>,
    /// `event kind → display items` for the events plugins own (`dsh_transcript`): register
    /// the presenters of your plugin's durable events here, so every front-end shows them.
    pub presenters: Arc<dsh_transcript::EventPresenters>,
    /// Start-up work the host waits for before the first session runs.
    pub startup: Arc<crate::Startup>,
    pub info: HostInfo,
}

impl std::fmt::Debug for HostServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostServices")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl HostServices {
    /// The host's services as seen from `scope` (a plugin's `ctx`).
    pub fn of(scope: &Scope) -> Result<Arc<Self>, PluginError> {
        scope
            .service::<Self>()
            .ok_or_else(|| PluginError::msg("no dsh host is installed above this scope"))
    }

    /// Whether `model` on the host's provider declares image input; `None` when the host's
    /// adapter knows nothing of `provider` or of the model.
    pub fn accepts_images(&self, provider: &str, model: &str) -> Option<bool> {
        if provider != self.adapter.provider() {
            return None;
        }
        let info = self.adapter.model_info(model)?;
        Some(info.input_modalities.iter().any(|m| m == "image"))
    }
}
