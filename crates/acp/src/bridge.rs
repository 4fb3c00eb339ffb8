//! The bridge state and one method per ACP request: lifecycle (§1A) with the editor mapping
//! (§1B). Handlers run inside the SDK's dispatch loop, so none of them waits on the client:
//! long work (a prompt) is spawned and answers through its responder.

use std::collections::HashMap;
use std::collections::HashSet;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;

use agent_client_protocol::Client;
use agent_client_protocol::Error as RpcError;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::AgentCapabilities;
use agent_client_protocol::v1::schema::AuthMethod;
use agent_client_protocol::v1::schema::AuthMethodAgent;
use agent_client_protocol::v1::schema::AuthenticateRequest;
use agent_client_protocol::v1::schema::AuthenticateResponse;
use agent_client_protocol::v1::schema::CancelNotification;
use agent_client_protocol::v1::schema::CurrentModeUpdate;
use agent_client_protocol::v1::schema::Implementation;
use agent_client_protocol::v1::schema::InitializeRequest;
use agent_client_protocol::v1::schema::InitializeResponse;
use agent_client_protocol::v1::schema::ListSessionsRequest;
use agent_client_protocol::v1::schema::ListSessionsResponse;
use agent_client_protocol::v1::schema::LoadSessionRequest;
use agent_client_protocol::v1::schema::LoadSessionResponse;
use agent_client_protocol::v1::schema::McpCapabilities;
use agent_client_protocol::v1::schema::NewSessionRequest;
use agent_client_protocol::v1::schema::NewSessionResponse;
use agent_client_protocol::v1::schema::PromptCapabilities;
use agent_client_protocol::v1::schema::PromptRequest;
use agent_client_protocol::v1::schema::PromptResponse;
use agent_client_protocol::v1::schema::SessionCapabilities;
use agent_client_protocol::v1::schema::SessionConfigOption;
use agent_client_protocol::v1::schema::SessionConfigOptionCategory;
use agent_client_protocol::v1::schema::SessionConfigOptionValue;
use agent_client_protocol::v1::schema::SessionConfigSelectOption;
use agent_client_protocol::v1::schema::SessionInfo;
use agent_client_protocol::v1::schema::SessionListCapabilities;
use agent_client_protocol::v1::schema::SessionMode;
use agent_client_protocol::v1::schema::SessionModeState;
use agent_client_protocol::v1::schema::SessionUpdate;
use agent_client_protocol::v1::schema::SetSessionConfigOptionRequest;
use agent_client_protocol::v1::schema::SetSessionConfigOptionResponse;
use agent_client_protocol::v1::schema::SetSessionModeRequest;
use agent_client_protocol::v1::schema::SetSessionModeResponse;
use agent_client_protocol::v1::schema::StopReason;
use dsh_agent::AbortReason;
use dsh_agent::AgentError;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::AcpError;
use crate::error::internal_error;
use crate::error::invalid_params;
use crate::error::texts;
use crate::host::AcpHost;
use crate::host::ModeState;
use crate::prompt;
use crate::session::PromptSlot;
use crate::session::Session;
use crate::time::iso_millis;
use dsh_sync::lock;

/// How the bridge introduces itself at `initialize`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeConfig {
    pub agent_name: String,
    pub agent_version: String,
}

impl Default for BridgeConfig {
    /// The reference bridge's name, with this build's version.
    fn default() -> Self {
        Self {
            agent_name: "deepseek-harness-acp".into(),
            agent_version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

#[derive(Default)]
struct State {
    closed: bool,
    terminal_output: bool,
    /// `clientCapabilities.elicitation.form` at `initialize`: questions go out as forms.
    elicitation_form: bool,
    /// `clientCapabilities.fs`: the file tools read and write through the client.
    fs: crate::client_fs::FsCapabilities,
    /// `clientCapabilities.terminal`: the client runs terminals.
    terminal: bool,
    /// Whether `initialize` advertised image prompts on this connection.
    images_advertised: bool,
    sessions: HashMap<String, Arc<Session>>,
    loading: HashSet<String>,
}

pub(crate) struct Bridge {
    host: AcpHost,
    config: BridgeConfig,
    state: Mutex<State>,
    /// Settling prompts; teardown waits for them so every prompt gets its answer.
    tasks: TaskTracker,
}

fn modes_wire(modes: &ModeState) -> SessionModeState {
    let available = modes
        .available
        .iter()
        .map(|mode| {
            SessionMode::new(mode.id.clone(), mode.name.clone())
                .description(mode.description.clone())
        })
        .collect();
    SessionModeState::new(modes.current.clone(), available)
}

/// The id of the session's model select.
const MODEL_OPTION: &str = "model";

fn check_cwd(cwd: &Path) -> Result<(), RpcError> {
    if cwd.is_absolute() {
        Ok(())
    } else {
        Err(invalid_params(texts::cwd_not_absolute(
            &cwd.to_string_lossy(),
        )))
    }
}

/// A session's folder must exist and be a folder: `write` would otherwise create it (and the
/// session would work in a folder the editor never opened), as `dsh exec -C` refuses too.
fn check_session_folder(cwd: &Path) -> Result<(), RpcError> {
    check_cwd(cwd)?;
    let problem = match std::fs::metadata(cwd) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => "not a directory".to_owned(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            "no such directory".to_owned()
        }
        Err(error) => error.to_string(),
    };
    Err(invalid_params(texts::cwd_not_a_folder(
        &cwd.to_string_lossy(),
        &problem,
    )))
}

impl Bridge {
    pub(crate) fn new(sessions: dsh_host::SessionHost, config: BridgeConfig) -> Self {
        Self {
            host: AcpHost::new(sessions),
            config,
            state: Mutex::new(State::default()),
            tasks: TaskTracker::new(),
        }
    }

    /// What this connection's client offered at `initialize`.
    fn client_view(&self) -> crate::session::ClientView {
        let state = lock(&self.state);
        crate::session::ClientView {
            terminal_output: state.terminal_output,
            fs: state.fs,
            terminal: state.terminal,
        }
    }

    fn ensure_open(&self) -> Result<(), RpcError> {
        if lock(&self.state).closed {
            Err(internal_error(texts::DISPOSED))
        } else {
            Ok(())
        }
    }

    fn session(&self, id: &str) -> Result<Arc<Session>, RpcError> {
        let state = lock(&self.state);
        if state.closed {
            return Err(internal_error(texts::DISPOSED));
        }
        state
            .sessions
            .get(id)
            .cloned()
            .ok_or_else(|| invalid_params(texts::unknown_session(id)))
    }

    pub(crate) fn initialize(&self, request: &InitializeRequest) -> InitializeResponse {
        let terminal = request
            .client_capabilities
            .meta
            .as_ref()
            .and_then(|meta| meta.get("terminal_output"))
            .and_then(serde_json::Value::as_bool)
            == Some(true);
        let images = crate::images::advertised(
            self.host.prompt_images().as_deref(),
            self.host.image_input(None),
        );
        let elicitation_form = request
            .client_capabilities
            .elicitation
            .as_ref()
            .is_some_and(|e| e.form.is_some());
        {
            let mut state = lock(&self.state);
            state.terminal_output = terminal;
            state.elicitation_form = elicitation_form;
            state.images_advertised = images;
            state.terminal = request.client_capabilities.terminal;
            state.fs = crate::client_fs::FsCapabilities {
                read: request.client_capabilities.fs.read_text_file,
                write: request.client_capabilities.fs.write_text_file,
            };
        }
        let capabilities = AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(
                PromptCapabilities::new()
                    .image(images)
                    .audio(false)
                    .embedded_context(false),
            )
            .session_capabilities(SessionCapabilities::new().list(SessionListCapabilities::new()))
            .mcp_capabilities({
                let transports = self.host.mcp_transports();
                McpCapabilities::new()
                    .http(transports.http)
                    .sse(transports.sse)
            });
        let auth_methods = self
            .host
            .auth_methods()
            .into_iter()
            .map(|method| {
                AuthMethod::Agent(
                    AuthMethodAgent::new(method.id, method.name).description(method.description),
                )
            })
            .collect();
        InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(capabilities)
            .auth_methods(auth_methods)
            .agent_info(Implementation::new(
                self.config.agent_name.clone(),
                self.config.agent_version.clone(),
            ))
    }

    /// `authenticate`: the advertised methods all come down to credentials the host reads, so
    /// this succeeds exactly when they are usable now.
    pub(crate) fn authenticate(
        &self,
        request: &AuthenticateRequest,
    ) -> Result<AuthenticateResponse, RpcError> {
        let id = request.method_id.0.to_string();
        if !self.host.auth_methods().iter().any(|m| m.id == id) {
            return Err(invalid_params(format!(
                "unknown authentication method: {id}"
            )));
        }
        self.host
            .check_credentials()
            .map_err(crate::error::Failure::into_rpc)?;
        Ok(AuthenticateResponse::new())
    }

    pub(crate) async fn new_session(
        &self,
        request: NewSessionRequest,
        connection: ConnectionTo<Client>,
    ) -> Result<(NewSessionResponse, Arc<Session>), RpcError> {
        self.ensure_open()?;
        check_session_folder(&request.cwd)?;
        self.host
            .check_credentials()
            .map_err(crate::error::Failure::into_rpc)?;
        if !request.additional_directories.is_empty() {
            return Err(invalid_params(texts::ADDITIONAL_DIRECTORIES));
        }
        if !request.mcp_servers.is_empty() && !self.host.supports_mcp_servers() {
            return Err(invalid_params(texts::MCP_SERVERS));
        }
        let mcp_servers = request
            .mcp_servers
            .iter()
            .map(|server| serde_json::to_value(server).map_err(|e| internal_error(e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        let session_id = uuid::Uuid::new_v4().to_string();
        let parts = self
            .host
            .create(session_id.clone(), request.cwd.clone(), mcp_servers)
            .await
            .map_err(crate::error::Failure::into_rpc)?;
        let elicitation = lock(&self.state).elicitation_form;
        // Persisted now, not at the first prompt: another process may load or list it.
        if let Err(error) = parts.agent.log().persist() {
            return Err(abandon(
                parts.agent,
                &format!("cannot persist the session: {error}"),
            ));
        }
        let client = self.client_view();
        let agent = parts.agent.clone();
        crate::questions::offer(&agent, connection.clone(), elicitation);
        let session = Session::attach(
            session_id.clone(),
            request.cwd,
            parts,
            connection,
            client,
            false,
            self.host.prompt_images(),
        )
        .map_err(|error| abandon(agent, &error))?;
        let modes = lock(&session.modes).as_ref().map(modes_wire);
        let options = self.config_options(&session);
        self.register(session.clone())?;
        Ok((
            NewSessionResponse::new(session_id)
                .modes(modes)
                .config_options(options),
            session,
        ))
    }

    /// Adds a session unless the bridge closed meanwhile (then its agent is disposed).
    fn register(&self, session: Arc<Session>) -> Result<(), RpcError> {
        let mut state = lock(&self.state);
        state.loading.remove(&session.id);
        if state.closed {
            drop(state);
            let agent = session.agent.clone();
            tokio::spawn(async move { agent.dispose().await });
            return Err(internal_error(texts::DISPOSED));
        }
        state.sessions.insert(session.id.clone(), session);
        Ok(())
    }

    pub(crate) async fn load_session(
        &self,
        request: LoadSessionRequest,
        connection: ConnectionTo<Client>,
    ) -> Result<(LoadSessionResponse, Arc<Session>), RpcError> {
        check_session_folder(&request.cwd)?;
        if !request.additional_directories.is_empty() {
            return Err(invalid_params(texts::ADDITIONAL_DIRECTORIES));
        }
        if !request.mcp_servers.is_empty() && !self.host.supports_mcp_servers() {
            return Err(invalid_params(texts::MCP_SERVERS));
        }
        let id = request.session_id.0.to_string();
        {
            let mut state = lock(&self.state);
            if state.closed {
                return Err(internal_error(texts::DISPOSED));
            }
            if state.sessions.contains_key(&id) || !state.loading.insert(id.clone()) {
                return Err(invalid_params(format!("session is already loaded: {id}")));
            }
        }
        let result = self.load_inner(id.clone(), request.cwd, connection).await;
        if result.is_err() {
            lock(&self.state).loading.remove(&id);
        }
        result
    }

    async fn load_inner(
        &self,
        id: String,
        cwd: PathBuf,
        connection: ConnectionTo<Client>,
    ) -> Result<(LoadSessionResponse, Arc<Session>), RpcError> {
        let parts = self
            .host
            .load(&id)
            .map_err(crate::error::Failure::into_rpc)?;
        let stored = parts.agent.log().header().cwd.clone();
        if stored.as_deref().map(Path::new) != Some(cwd.as_path()) {
            parts.agent.dispose().await;
            let stored = stored.unwrap_or_default();
            return Err(invalid_params(format!(
                "session {id} belongs to cwd {stored}, not {}",
                cwd.to_string_lossy()
            )));
        }
        let elicitation = lock(&self.state).elicitation_form;
        let client = self.client_view();
        let agent = parts.agent.clone();
        crate::questions::offer(&agent, connection.clone(), elicitation);
        let images = self.host.prompt_images();
        let session = Session::attach(id, cwd, parts, connection, client, true, images)
            .map_err(|error| abandon(agent, &error))?;
        let modes = lock(&session.modes).as_ref().map(modes_wire);
        let options = self.config_options(&session);
        self.register(session.clone())?;
        Ok((
            LoadSessionResponse::new()
                .modes(modes)
                .config_options(options),
            session,
        ))
    }

    pub(crate) async fn list_sessions(
        &self,
        request: ListSessionsRequest,
    ) -> Result<ListSessionsResponse, RpcError> {
        self.ensure_open()?;
        if request.cursor.is_some() {
            return Err(invalid_params(texts::CURSOR));
        }
        if let Some(cwd) = &request.cwd {
            check_cwd(cwd)?;
        }
        let live: Vec<Arc<Session>> = lock(&self.state).sessions.values().cloned().collect();
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        // Live sessions first, newest (latest log activity) first.
        let mut live: Vec<(u64, Arc<Session>)> = live
            .into_iter()
            .map(|s| (s.agent.log().last().map_or(0, |e| e.time), s))
            .collect();
        live.sort_by_key(|entry| std::cmp::Reverse(entry.0));
        for (time, session) in live {
            if request.cwd.as_ref().is_some_and(|cwd| cwd != &session.cwd) {
                continue;
            }
            seen.insert(session.id.clone());
            let title = latest_title(&session);
            out.push(
                SessionInfo::new(session.id.clone(), session.cwd.clone())
                    .title(title)
                    .updated_at(iso_millis(time)),
            );
        }
        let mut stored = self
            .host
            .list(request.cwd.as_deref())
            .map_err(crate::error::Failure::into_rpc)?;
        stored.sort_by_key(|entry| std::cmp::Reverse(entry.updated_at_ms));
        for entry in stored {
            if seen.contains(&entry.session_id)
                || request.cwd.as_ref().is_some_and(|cwd| cwd != &entry.cwd)
            {
                continue;
            }
            out.push(
                SessionInfo::new(entry.session_id, entry.cwd)
                    .title(entry.title)
                    .updated_at(entry.updated_at_ms.map(iso_millis)),
            );
        }
        Ok(ListSessionsResponse::new(out))
    }

    pub(crate) fn set_mode(
        &self,
        request: SetSessionModeRequest,
    ) -> Result<SetSessionModeResponse, RpcError> {
        let session = self.session(&request.session_id.0)?;
        let mode = request.mode_id.0.to_string();
        let before = {
            let modes = lock(&session.modes);
            let known = modes
                .as_ref()
                .filter(|m| m.available.iter().any(|a| a.id == mode));
            match known {
                Some(modes) => modes.current.clone(),
                None => return Err(invalid_params(format!("unknown mode: {mode}"))),
            }
        };
        self.host
            .set_mode(&session.agent, &mode)
            .map_err(crate::error::Failure::into_rpc)?;
        if let Some(modes) = lock(&session.modes).as_mut() {
            // The session's mode watch already moved it here (and said so) while the host
            // applied it: one `current_mode_update`, not two.
            if modes.current == mode && before != mode {
                return Ok(SetSessionModeResponse::new());
            }
            modes.current = mode.clone();
        }
        session.send(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
            mode,
        )));
        Ok(SetSessionModeResponse::new())
    }

    /// The session's config options: a `model` select over the host's models (the current one
    /// listed even when the catalog lacks it). `None` when the host offers no models.
    fn config_options(&self, session: &Session) -> Option<Vec<SessionConfigOption>> {
        let mut models = self.host.models();
        if models.is_empty() {
            return None;
        }
        let current = lock(&session.model).current.clone();
        if !models.contains(&current) {
            models.insert(0, current.clone());
        }
        let options: Vec<SessionConfigSelectOption> = models
            .into_iter()
            .map(|model| SessionConfigSelectOption::new(model.clone(), model))
            .collect();
        Some(vec![
            SessionConfigOption::select(MODEL_OPTION, "Model", current, options)
                .category(SessionConfigOptionCategory::Model)
                .description(
                    "The model this session's requests use from the next one on".to_owned(),
                ),
        ])
    }

    /// `session/set_config_option`: `model` switches the session's model from its next request.
    pub(crate) fn set_config_option(
        &self,
        request: SetSessionConfigOptionRequest,
    ) -> Result<SetSessionConfigOptionResponse, RpcError> {
        let session = self.session(&request.session_id.0)?;
        let id = request.config_id.0.to_string();
        let offered = self.config_options(&session).unwrap_or_default();
        let Some(option) = offered.iter().find(|o| o.id.0.as_ref() == id) else {
            return Err(invalid_params(format!("unknown config option: {id}")));
        };
        let SessionConfigOptionValue::ValueId { value } = &request.value else {
            return Err(invalid_params(format!(
                "config option {id} takes a value id"
            )));
        };
        let value = value.0.to_string();
        let known = match &option.kind {
            agent_client_protocol::v1::schema::SessionConfigKind::Select(select) => {
                match &select.options {
                    agent_client_protocol::v1::schema::SessionConfigSelectOptions::Ungrouped(
                        options,
                    ) => options.iter().any(|o| o.value.0.as_ref() == value),
                    _ => false,
                }
            }
            _ => false,
        };
        if !known {
            return Err(invalid_params(format!("unknown value for {id}: {value}")));
        }
        {
            // Logged (`model/selected`), so `session/load` and resume keep it.
            let mut choice = lock(&session.model);
            self.host
                .set_model(&session.agent, &value)
                .map_err(crate::error::Failure::into_rpc)?;
            choice.current = value;
        }
        Ok(SetSessionConfigOptionResponse::new(
            self.config_options(&session).unwrap_or_default(),
        ))
    }

    /// Admission runs here, synchronously (no await before the slot is reserved and the message
    /// queued); settlement is spawned and answers through `respond`.
    pub(crate) fn prompt(
        self: &Arc<Self>,
        request: PromptRequest,
        respond: impl FnOnce(Result<PromptResponse, RpcError>) + Send + 'static,
    ) {
        let session = match self.session(&request.session_id.0) {
            Ok(session) => session,
            Err(error) => return respond(Err(error)),
        };
        let cancelled = CancellationToken::new();
        {
            let mut slot = lock(&session.slot);
            if slot.is_some() {
                return respond(Err(invalid_params(texts::IN_FLIGHT)));
            }
            *slot = Some(PromptSlot {
                cancelled: cancelled.clone(),
            });
        }
        // Output failures before this prompt belong to earlier work, not to this answer.
        let _ = session.take_delivery_failure();
        let store = self.host.prompt_images();
        let route = || self.host.image_input(Some(&session.agent));
        let images = prompt::ImageAdmission {
            advertised: lock(&self.state).images_advertised,
            store: store.as_deref(),
            route: &route,
        };
        let content = match prompt::admit(&request.prompt, &images) {
            Ok(content) => content,
            Err(error) => {
                *lock(&session.slot) = None;
                return respond(Err(error));
            }
        };
        if let Some(registry) = session.commands.clone()
            && let Some(line) = prompt::command_line(&content)
        {
            // §12.3: a slash command runs instead of a model request.
            let images = content
                .into_iter()
                .filter(|block| matches!(block, ContentBlock::Image { .. }))
                .collect();
            let bridge = self.clone();
            self.tasks.spawn(async move {
                let outcome = registry
                    .execute(&session.agent, &line, images, cancelled.clone())
                    .await;
                // `/rewind N conversation`: this ACP session goes on in the fork.
                let switched = match &outcome {
                    Ok(Some(executed)) => match executed.result.switch_to() {
                        Some(fork) => Some(bridge.switch(&session, fork).await),
                        None => None,
                    },
                    _ => None,
                };
                let text = match outcome {
                    Ok(Some(executed)) => match switched {
                        Some(Err(error)) => Some(format!(
                            "{}\nError: {error}",
                            executed.result.display_text().unwrap_or_default()
                        )),
                        _ => executed.result.display_text(),
                    },
                    Ok(None) => Some(format!("Error: unknown command: {line}")),
                    Err(dsh_commands::CommandError::Cancelled) => None,
                    Err(error) => Some(format!("Error: command failed: {error}")),
                };
                if let Some(text) = text {
                    session.send(crate::mapping::message_chunk(text));
                }
                // `/compact` changes the fill.
                session.push_usage();
                *lock(&session.slot) = None;
                let stop = if cancelled.is_cancelled() {
                    StopReason::Cancelled
                } else {
                    StopReason::EndTurn
                };
                respond(Ok(PromptResponse::new(stop)));
            });
            return;
        }
        let admitted = Ok(content).and_then(|content| {
            let message = Message::user(content, MessageSource::user());
            let id = message.id.clone();
            let start = session.agent.log().len();
            match session.agent.followup(message) {
                Ok(()) => Ok((id, start)),
                Err(AgentError::Disposed(_)) => Err(internal_error(texts::AGENT_DISPOSED)),
                Err(error) => Err(internal_error(texts::not_queued(&error.to_string()))),
            }
        });
        let (message_id, start) = match admitted {
            Ok(admitted) => admitted,
            Err(error) => {
                *lock(&session.slot) = None;
                return respond(Err(error));
            }
        };
        self.tasks.spawn(async move {
            session.agent.when_idle().await;
            // Only the endings of the turns since the prompt decide its answer; a long turn is
            // read back a window at a time, never held whole.
            let mut ends = Vec::new();
            let read = session.agent.log().visit_since(start, |event| {
                if event.kind == dsh_session::kind::TURN_END {
                    ends.push(event.clone());
                }
            });
            let turn = lock(&session.claimed).remove(&message_id);
            let failure = session.take_delivery_failure();
            let outcome = match read {
                Ok(()) => prompt::settle(cancelled.is_cancelled(), failure, &ends, turn),
                Err(error) => Err(crate::error::internal_error(error.to_string())),
            };
            session.push_usage();
            *lock(&session.slot) = None;
            respond(outcome.map(PromptResponse::new));
        });
    }

    /// Puts the stored session `fork` behind the wire session `session` (a command's
    /// [`dsh_commands::CommandResult::Switch`]): later prompts on the same `sessionId` go to
    /// the fork; the agent it replaces is disposed, its log kept as it is. The client's view
    /// is not replayed: the command's text says where the conversation went.
    async fn switch(&self, session: &Arc<Session>, fork: &str) -> Result<(), String> {
        let parts = self.host.load(fork).map_err(|error| error.to_string())?;
        let connection = session.connection();
        let agent = parts.agent.clone();
        let elicitation = lock(&self.state).elicitation_form;
        crate::questions::offer(&agent, connection.clone(), elicitation);
        let next = Session::attach(
            session.id.clone(),
            session.cwd.clone(),
            parts,
            connection,
            self.client_view(),
            false,
            self.host.prompt_images(),
        );
        let next = match next {
            Ok(next) => next,
            Err(error) => {
                agent.dispose().await;
                return Err(format!("cannot open the fork {fork}: {error}"));
            }
        };
        // `None`: the bridge closed meanwhile; `Some(None)`: the wire session was gone.
        let replaced = {
            let mut state = lock(&self.state);
            (!state.closed).then(|| state.sessions.insert(session.id.clone(), next.clone()))
        };
        match replaced {
            Some(old) => {
                if let Some(old) = old {
                    old.agent.dispose().await;
                }
                Ok(())
            }
            None => {
                next.agent.dispose().await;
                Err(texts::DISPOSED.to_owned())
            }
        }
    }

    pub(crate) fn cancel(&self, notification: &CancelNotification) {
        let Ok(session) = self.session(&notification.session_id.0) else {
            return;
        };
        if let Some(slot) = lock(&session.slot).as_ref() {
            slot.cancelled.cancel();
        }
        // Admission is synchronous, so an in-flight prompt is always queued by now; without one
        // this stops autonomous work.
        session.agent.cancel(AbortReason::User, false);
    }

    /// Teardown (memoized by `closed`): refuse new work, cancel every prompt and agent, wait for
    /// idle and for every prompt answer, then dispose all owned agents.
    pub(crate) async fn shutdown(&self) -> Result<(), AcpError> {
        let sessions: Vec<Arc<Session>> = {
            let mut state = lock(&self.state);
            if state.closed {
                return Ok(());
            }
            state.closed = true;
            state.sessions.drain().map(|(_, s)| s).collect()
        };
        for session in &sessions {
            if let Some(slot) = lock(&session.slot).as_ref() {
                slot.cancelled.cancel();
            }
            session.agent.cancel(AbortReason::User, false);
        }
        for session in &sessions {
            session.agent.when_idle().await;
        }
        self.tasks.close();
        self.tasks.wait().await;
        drain_children(&sessions).await;
        let disposals = sessions.iter().map(|session| session.agent.dispose());
        futures::future::join_all(disposals).await;
        Ok(())
    }
}

/// Settles the continuable children the bridge's agents own (and theirs) before the agents
/// go, so each child closes its own turn and its parent is still there to hear about it.
async fn drain_children(sessions: &[Arc<Session>]) {
    let Some(first) = sessions.first() else {
        return;
    };
    let Some(children) = first
        .agent
        .scope()
        .service::<dyn dsh_plugin::DelegatedChildren>()
    else {
        return;
    };
    let agents: Vec<dsh_agent::AgentHandle> = sessions.iter().map(|s| s.agent.clone()).collect();
    if let Err(error) = children.drain(&agents).await {
        tracing::warn!("acp: continuable subagent teardown failed: {error}");
    }
}

/// An agent the bridge could not wire up is disposed, never left running unowned.
fn abandon(agent: dsh_agent::AgentHandle, error: &str) -> RpcError {
    tokio::spawn(async move { agent.dispose().await });
    internal_error(error)
}

/// The latest readable `session/title` (O(1): the latest one, unless it does not decode).
fn latest_title(session: &Session) -> Option<String> {
    let title = |event: &dsh_session::Event| {
        event
            .decode::<dsh_session::data::SessionTitle>()
            .and_then(Result::ok)
            .map(|title| title.title)
    };
    let log = session.agent.log();
    let latest = log.last_of_kind(dsh_session::kind::SESSION_TITLE)?;
    title(&latest).or_else(|| {
        // An unreadable latest title: an earlier one stands (never written by dsh itself).
        log.events()
            .ok()?
            .iter()
            .rev()
            .find_map(|event| title(event))
    })
}
