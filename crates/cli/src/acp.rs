//! `dsh acp`: serve the Agent Client Protocol on stdio (for Zed and other ACP editors).
//!
//! The bridge (crate `dsh-acp`) owns the protocol; this module only tells it how to make,
//! resume and list sessions with the composed harness, and maps ACP session modes onto the
//! permission presets.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use dsh_acp::AuthMethodInfo;
use dsh_acp::BridgeConfig;
use dsh_acp::FactoryError;
use dsh_acp::ImageInput;
use dsh_acp::ModeInfo;
use dsh_acp::ModeState;
use dsh_acp::NewSession;
use dsh_acp::PromptImageStore;
use dsh_acp::SessionFactory;
use dsh_acp::SessionParts;
use dsh_acp::StoredSession;
use dsh_agent::AgentHandle;
use dsh_kernel::BoxFuture;
use dsh_session::data::RequestHeader;

use crate::compose::Harness;
use crate::compose::PRESETS;
use crate::compose::SessionState;
use crate::config::Config;
use crate::config::Overrides;

pub fn run() -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir()?;
    let config = Config::load(&cwd, &Overrides::default())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let harness = Arc::new(Harness::build(config)?);
        harness.start_mcp().await?;
        let factory = Arc::new(Factory {
            harness: harness.clone(),
        });
        let identity = BridgeConfig {
            agent_version: env!("CARGO_PKG_VERSION").to_owned(),
            ..BridgeConfig::default()
        };
        let served = dsh_acp::serve_stdio(factory, identity).await;
        harness.shutdown();
        served?;
        Ok(ExitCode::SUCCESS)
    })
}

struct Factory {
    harness: Arc<Harness>,
}

/// The one credential the DeepSeek route reads, and the method that names it.
const API_KEY_ENV: &str = "DEEPSEEK_API_KEY";
const API_KEY_METHOD: &str = "deepseek-api-key";

fn parts(harness: &Harness, agent: AgentHandle) -> SessionParts {
    let current = agent
        .scope()
        .service::<SessionState>()
        .and_then(|state| state.preset())
        .map_or("custom", |preset| preset.name);
    let available = PRESETS
        .iter()
        .map(|preset| ModeInfo {
            id: preset.name.to_owned(),
            name: preset.name.to_owned(),
            description: Some(preset.description.to_owned()),
        })
        .collect();
    SessionParts {
        agent,
        tools: Some(harness.registry.clone()),
        modes: Some(ModeState {
            current: current.to_owned(),
            available,
        }),
    }
}

impl SessionFactory for Factory {
    fn create(
        &self,
        request: NewSession,
    ) -> BoxFuture<'static, Result<SessionParts, FactoryError>> {
        let harness = self.harness.clone();
        Box::pin(async move {
            let agent = harness
                .new_agent(&request.cwd, Some(request.session_id))
                .map_err(|error| FactoryError::internal(format!("{error:#}")))?;
            if let Err(error) = harness
                .start_session_mcp(&agent, &request.mcp_servers)
                .await
            {
                agent.dispose().await;
                return Err(FactoryError::invalid(format!("{error:#}")));
            }
            Ok(parts(&harness, agent))
        })
    }

    fn supports_mcp_servers(&self) -> bool {
        true
    }

    fn mcp_transports(&self) -> dsh_acp::McpTransports {
        // `dsh-mcp` takes streamable-HTTP servers from `session/new`; SSE ones it refuses.
        dsh_acp::McpTransports {
            http: true,
            sse: false,
        }
    }

    fn load(
        &self,
        session_id: String,
        _cwd: PathBuf,
    ) -> BoxFuture<'static, Result<SessionParts, FactoryError>> {
        let result = self
            .harness
            .resume_agent(&session_id)
            .map(|agent| parts(&self.harness, agent))
            .map_err(|error| FactoryError::invalid(format!("{error:#}")));
        Box::pin(async move { result })
    }

    fn list(
        &self,
        cwd: Option<PathBuf>,
    ) -> BoxFuture<'static, Result<Vec<StoredSession>, FactoryError>> {
        let result = dsh_acp::stored_sessions(&self.harness.store, cwd.as_deref());
        Box::pin(async move { result })
    }

    fn prompt_images(&self) -> Option<Arc<dyn PromptImageStore>> {
        self.harness
            .attachments
            .as_ref()
            .map(crate::images::Attachments::prompt_store)
    }

    /// The agent's current route is its latest request header, else the configured one.
    fn image_input(&self, agent: Option<&AgentHandle>) -> Result<ImageInput, FactoryError> {
        let settings = &self.harness.settings;
        let header = agent
            .and_then(|agent| agent.log().request_header())
            .and_then(|event| event.decode::<RequestHeader>())
            .transpose()
            .map_err(|error| FactoryError::internal(format!("unreadable request header: {error}")))?
            .map(|header| header.header.config);
        let (provider, model) = match &header {
            Some(config) => (config.provider.as_str(), config.model.as_str()),
            None => (settings.provider.as_str(), settings.model.as_str()),
        };
        Ok(match self.harness.accepts_images(provider, model) {
            None => ImageInput::Unresolved,
            Some(accepts_images) => ImageInput::Model {
                model: model.to_owned(),
                accepts_images,
            },
        })
    }

    fn auth_methods(&self) -> Vec<AuthMethodInfo> {
        vec![AuthMethodInfo {
            id: API_KEY_METHOD.to_owned(),
            name: "DeepSeek API key".to_owned(),
            description: Some(format!(
                "Set {API_KEY_ENV} in the environment your editor starts `dsh acp` with (the agent server's `env` setting), then restart the agent."
            )),
        }]
    }

    fn check_credentials(&self) -> Result<(), FactoryError> {
        let key = std::env::var(API_KEY_ENV).unwrap_or_default();
        if key.trim().is_empty() {
            return Err(FactoryError::auth_required(format!(
                "no DeepSeek API key: set {API_KEY_ENV} in the environment your editor starts `dsh acp` with"
            )));
        }
        Ok(())
    }

    fn set_mode(&self, agent: &AgentHandle, mode_id: &str) -> Result<(), FactoryError> {
        let preset = PRESETS
            .iter()
            .find(|preset| preset.name == mode_id)
            .ok_or_else(|| FactoryError::invalid(format!("unknown mode: {mode_id}")))?;
        self.harness
            .set_preset(agent, preset)
            .map_err(|error| FactoryError::internal(format!("{error:#}")))
    }
}
