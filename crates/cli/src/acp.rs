//! `dsh acp`: serve the Agent Client Protocol on stdio (for Zed and other ACP editors).

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
use dsh_host::SessionHost;
use dsh_kernel::BoxFuture;
use dsh_plan_mode::PlanMode;
use dsh_plan_mode::modes;
use dsh_session::data::RequestHeader;

pub fn run() -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let code = runtime.block_on(async move {
        let host = crate::host::start(&cwd, crate::host::overrides()).await?;
        let _watch = crate::host::watch_and_log(&host);
        let factory = Arc::new(Factory {
            key_env: api_key_env(&host),
            sessions: host.sessions(),
            models: crate::host::models(&host),
        });
        let identity = BridgeConfig {
            agent_version: env!("CARGO_PKG_VERSION").to_owned(),
            ..BridgeConfig::default()
        };
        // A stop signal tears the bridge down like end of input: prompts are cancelled and
        // answered, agents disposed (logs closed); tool processes die at the signal itself.
        let mut stops = crate::signals::listen()?;
        let (stopped_tx, stopped_rx) = tokio::sync::oneshot::channel();
        let stop = async move {
            let stop = stops.first().await;
            let _ = stopped_tx.send(stop);
        };
        let served = dsh_acp::serve_stdio_until(factory, identity, stop).await;
        host.shutdown();
        served?;
        Ok(match stopped_rx.await {
            Ok(stop) => stop.exit_code(),
            Err(_) => ExitCode::SUCCESS,
        })
    });
    // Stopped by a signal, stdin is still open and a blocking read of it still pending: do
    // not wait for it.
    runtime.shutdown_background();
    code
}

struct Factory {
    sessions: SessionHost,
    /// The environment variable the configured provider reads its key from.
    key_env: String,
    models: Vec<String>,
}

/// `[model] api_key_env`, else the provider's own variable.
fn api_key_env(host: &dsh_host::Host) -> String {
    if let Some(name) = host.config().get_str("model.api_key_env") {
        return name.to_owned();
    }
    let (provider, _) = host.sessions().route();
    if provider == dsh_llm::openai::PROVIDER {
        dsh_llm::openai::DEFAULT_API_KEY_ENV.to_owned()
    } else {
        "DEEPSEEK_API_KEY".to_owned()
    }
}

/// The one authentication method: the key in the agent's environment.
const API_KEY_METHOD: &str = "api-key-env";

/// The session's modes: every approval preset, and with plan mode composed each preset again
/// with plan mode on (`<preset>+plan`, docs/steering.md): the two axes as combined modes.
fn parts(sessions: &SessionHost, agent: AgentHandle) -> SessionParts {
    let plan = agent.scope().service::<PlanMode>();
    let preset = sessions
        .current_preset(&agent)
        .map_or("custom", |preset| preset.name);
    let current = modes::mode_id(preset, plan.as_ref().is_some_and(|p| p.current(&agent)));
    let mut available = Vec::new();
    for preset in sessions.presets() {
        available.push(ModeInfo {
            id: preset.name.to_owned(),
            name: preset.name.to_owned(),
            description: Some(preset.description.to_owned()),
        });
        if plan.is_some() {
            available.push(ModeInfo {
                id: modes::mode_id(preset.name, true),
                name: modes::plan_mode_name(preset.name),
                description: Some(modes::plan_mode_description(Some(preset.description))),
            });
        }
    }
    let mode_watch: Option<dsh_acp::ModeWatch> = plan.is_some().then(|| {
        let watch: dsh_acp::ModeWatch = Arc::new(modes::follow);
        watch
    });
    SessionParts {
        agent,
        tools: Some(sessions.registry()),
        modes: Some(ModeState { current, available }),
        mode_watch,
    }
}

/// `session/set_mode` with a combined id: the preset part switches the approval preset (only
/// when it changes), the `+plan` part turns plan mode on or off.
fn set_combined_mode(
    sessions: &SessionHost,
    agent: &AgentHandle,
    mode_id: &str,
) -> Result<(), FactoryError> {
    let (preset, plan_on) = modes::split_mode_id(mode_id);
    let plan = agent.scope().service::<PlanMode>();
    if plan_on && plan.is_none() {
        return Err(FactoryError::invalid(format!("unknown mode: {mode_id}")));
    }
    if sessions.current_preset(agent).map(|p| p.name) != Some(preset) {
        sessions
            .set_preset(agent, preset)
            .map_err(|error| FactoryError::invalid(format!("{error:#}")))?;
    }
    if let Some(plan) = plan {
        plan.set(agent, plan_on);
    }
    Ok(())
}

impl SessionFactory for Factory {
    fn create(
        &self,
        request: NewSession,
    ) -> BoxFuture<'static, Result<SessionParts, FactoryError>> {
        let sessions = self.sessions.clone();
        Box::pin(async move {
            let agent = sessions
                .create(dsh_host::NewSession {
                    id: Some(request.session_id),
                    cwd: request.cwd,
                })
                .map_err(|error| FactoryError::internal(format!("{error:#}")))?;
            if let Err(error) = sessions
                .start_session_mcp(&agent, &request.mcp_servers)
                .await
            {
                agent.dispose().await;
                return Err(FactoryError::invalid(format!("{error:#}")));
            }
            Ok(parts(&sessions, agent))
        })
    }

    fn supports_mcp_servers(&self) -> bool {
        true
    }

    fn mcp_transports(&self) -> dsh_acp::McpTransports {
        // `dsh-mcp` takes streamable-HTTP and legacy HTTP+SSE servers from `session/new`.
        dsh_acp::McpTransports {
            http: true,
            sse: true,
        }
    }

    fn auth_methods(&self) -> Vec<AuthMethodInfo> {
        vec![AuthMethodInfo {
            id: API_KEY_METHOD.to_owned(),
            name: "API key in the environment".to_owned(),
            description: Some(format!(
                "Set {} in the environment your editor starts `dsh acp` with (the agent server's `env` setting), then restart the agent.",
                self.key_env
            )),
        }]
    }

    fn check_credentials(&self) -> Result<(), FactoryError> {
        let key = std::env::var(&self.key_env).unwrap_or_default();
        if key.trim().is_empty() {
            return Err(FactoryError::auth_required(format!(
                "no API key: set {} in the environment your editor starts `dsh acp` with",
                self.key_env
            )));
        }
        Ok(())
    }

    fn load(
        &self,
        session_id: String,
        _cwd: PathBuf,
    ) -> BoxFuture<'static, Result<SessionParts, FactoryError>> {
        let result = self
            .sessions
            .load(&session_id)
            .map(|agent| parts(&self.sessions, agent))
            .map_err(|error| {
                FactoryError::invalid(format!("cannot resume session {session_id}: {error:#}"))
            });
        Box::pin(async move { result })
    }

    fn list(
        &self,
        cwd: Option<PathBuf>,
    ) -> BoxFuture<'static, Result<Vec<StoredSession>, FactoryError>> {
        let result = dsh_acp::stored_sessions(self.sessions.store().as_ref(), cwd.as_deref());
        Box::pin(async move { result })
    }

    fn prompt_images(&self) -> Option<Arc<dyn PromptImageStore>> {
        self.sessions
            .attachments()
            .map(crate::prompt_images::prompt_store)
    }

    /// The agent's current route is its latest request header, else the configured one.
    fn image_input(&self, agent: Option<&AgentHandle>) -> Result<ImageInput, FactoryError> {
        let header = agent
            .and_then(|agent| agent.log().request_header())
            .and_then(|event| event.decode::<RequestHeader>())
            .transpose()
            .map_err(|error| FactoryError::internal(format!("unreadable request header: {error}")))?
            .map(|header| header.header.config);
        let (provider, model) = match header {
            Some(config) => (config.provider, config.model),
            None => self.sessions.route(),
        };
        Ok(match self.sessions.accepts_images(&provider, &model) {
            None => ImageInput::Unresolved,
            Some(accepts_images) => ImageInput::Model {
                model,
                accepts_images,
            },
        })
    }

    fn models(&self) -> Vec<String> {
        self.models.clone()
    }

    fn set_mode(&self, agent: &AgentHandle, mode_id: &str) -> Result<(), FactoryError> {
        set_combined_mode(&self.sessions, agent, mode_id)
    }
}
