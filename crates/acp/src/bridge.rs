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
use agent_client_protocol::v1::schema::AgentAuthCapabilities;
use agent_client_protocol::v1::schema::AgentCapabilities;
use agent_client_protocol::v1::schema::AuthMethod;
use agent_client_protocol::v1::schema::AuthMethodAgent;
use agent_client_protocol::v1::schema::AuthenticateRequest;
use agent_client_protocol::v1::schema::AuthenticateResponse;
use agent_client_protocol::v1::schema::CancelNotification;
use agent_client_protocol::v1::schema::CloseSessionRequest;
use agent_client_protocol::v1::schema::CloseSessionResponse;
use agent_client_protocol::v1::schema::ConfigOptionUpdate;
use agent_client_protocol::v1::schema::CurrentModeUpdate;
use agent_client_protocol::v1::schema::DeleteSessionRequest;
use agent_client_protocol::v1::schema::DeleteSessionResponse;
use agent_client_protocol::v1::schema::Implementation;
use agent_client_protocol::v1::schema::InitializeRequest;
use agent_client_protocol::v1::schema::InitializeResponse;
use agent_client_protocol::v1::schema::ListSessionsRequest;
use agent_client_protocol::v1::schema::ListSessionsResponse;
use agent_client_protocol::v1::schema::LoadSessionRequest;
use agent_client_protocol::v1::schema::LoadSessionResponse;
use agent_client_protocol::v1::schema::LogoutCapabilities;
use agent_client_protocol::v1::schema::LogoutRequest;
use agent_client_protocol::v1::schema::LogoutResponse;
use agent_client_protocol::v1::schema::McpCapabilities;
use agent_client_protocol::v1::schema::NewSessionRequest;
use agent_client_protocol::v1::schema::NewSessionResponse;
use agent_client_protocol::v1::schema::PromptCapabilities;
use agent_client_protocol::v1::schema::PromptRequest;
use agent_client_protocol::v1::schema::PromptResponse;
use agent_client_protocol::v1::schema::ResumeSessionRequest;
use agent_client_protocol::v1::schema::ResumeSessionResponse;
use agent_client_protocol::v1::schema::SessionCapabilities;
use agent_client_protocol::v1::schema::SessionCloseCapabilities;
use agent_client_protocol::v1::schema::SessionConfigOption;
use agent_client_protocol::v1::schema::SessionConfigOptionCategory;
use agent_client_protocol::v1::schema::SessionConfigOptionValue;
use agent_client_protocol::v1::schema::SessionConfigSelectOption;
use agent_client_protocol::v1::schema::SessionDeleteCapabilities;
use agent_client_protocol::v1::schema::SessionInfo;
use agent_client_protocol::v1::schema::SessionListCapabilities;
use agent_client_protocol::v1::schema::SessionMode;
use agent_client_protocol::v1::schema::SessionModeState;
use agent_client_protocol::v1::schema::SessionResumeCapabilities;
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
    /// `logout` was called and no `authenticate` since: sessions are neither opened nor
    /// prompted on this connection.
    logged_out: bool,
    terminal_output: bool,
    /// `clientCapabilities.elicitation.form` at `initialize`: questions go out as forms.
    elicitation_form: bool,
    /// `clientCapabilities.fs`: the file tools read and write through the client.
    fs: crate::client_fs::FsCapabilities,
    /// `clientCapabilities.terminal`: the client runs terminals.
    terminal: bool,
    /// `clientCapabilities.session.configOptions.boolean`: boolean options may be offered.
    boolean_options: bool,
    /// Whether `initialize` advertised image prompts on this connection.
    images_advertised: bool,
    sessions: HashMap<String, Arc<Session>>,
    loading: HashSet<String>,
    /// `clientCapabilities._meta.dsh.cursor`: updates carry their log seq.
    cursor: bool,
    /// With a shared registry: this connection's viewer id in each session it watches.
    viewing: HashMap<String, u64>,
}

pub(crate) struct Bridge {
    host: AcpHost,
    config: BridgeConfig,
    state: Mutex<State>,
    /// Settling prompts; teardown waits for them so every prompt gets its answer.
    tasks: TaskTracker,
    /// The server's live sessions, when several connections share them (`dsh web`).
    shared: Option<crate::LiveSessions>,
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
/// The boolean option of a session's mode axis (plan mode: `+plan` → `plan_mode`), offered
/// to clients that take boolean options.
fn axis_option_id(axis: &dyn dsh_plugin::ModeAxis) -> String {
    format!("{}_mode", axis.suffix().trim_start_matches('+'))
}

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
    pub(crate) fn new(
        sessions: dsh_host::SessionHost,
        config: BridgeConfig,
        shared: Option<crate::LiveSessions>,
    ) -> Self {
        Self {
            host: AcpHost::new(sessions),
            config,
            state: Mutex::new(State::default()),
            tasks: TaskTracker::new(),
            shared,
        }
    }

    /// What this connection's client offered at `initialize`.
    fn client_view(&self) -> crate::session::ClientView {
        let state = lock(&self.state);
        crate::session::ClientView {
            terminal_output: state.terminal_output,
            fs: state.fs,
            terminal: state.terminal,
            cursor: state.cursor,
        }
    }

    fn ensure_open(&self) -> Result<(), RpcError> {
        if lock(&self.state).closed {
            Err(internal_error(texts::DISPOSED))
        } else {
            Ok(())
        }
    }

    /// After `logout`, nothing opens or runs a session until the client authenticates again.
    fn ensure_authenticated(&self) -> Result<(), RpcError> {
        if lock(&self.state).logged_out {
            return Err(crate::error::auth_required(texts::LOGGED_OUT));
        }
        Ok(())
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
        // Advertised when the configured model or one a session may switch to takes images;
        // each prompt is still checked against its session's model (naming it when it does
        // not, with the advice to switch).
        let store = self.host.prompt_images();
        let images = crate::images::advertised(store.as_deref(), self.host.image_input(None))
            || (crate::images::stores_prompt_formats(store.as_deref())
                && self.host.any_model_takes_images());
        let cursor = request
            .client_capabilities
            .meta
            .as_ref()
            .and_then(|meta| meta.get("dsh"))
            .and_then(|dsh| dsh.get("cursor"))
            .and_then(serde_json::Value::as_bool)
            == Some(true);
        let elicitation_form = request
            .client_capabilities
            .elicitation
            .as_ref()
            .is_some_and(|e| e.form.is_some());
        {
            let mut state = lock(&self.state);
            state.terminal_output = terminal;
            state.cursor = cursor;
            state.elicitation_form = elicitation_form;
            state.images_advertised = images;
            state.terminal = request.client_capabilities.terminal;
            state.boolean_options = request
                .client_capabilities
                .session
                .as_ref()
                .and_then(|session| session.config_options.as_ref())
                .is_some_and(|options| options.boolean.is_some());
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
                    .embedded_context(true),
            )
            .session_capabilities(
                SessionCapabilities::new()
                    .list(SessionListCapabilities::new())
                    .resume(SessionResumeCapabilities::new())
                    .close(SessionCloseCapabilities::new())
                    .delete(SessionDeleteCapabilities::new()),
            )
            .auth(AgentAuthCapabilities::new().logout(LogoutCapabilities::new()))
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
        lock(&self.state).logged_out = false;
        Ok(AuthenticateResponse::new())
    }

    /// `logout`: dsh keeps no login of its own (the key comes from the environment the
    /// editor starts it with), so logging out ends this connection's authentication: open
    /// sessions stay, but nothing opens or prompts one until `authenticate` succeeds again.
    pub(crate) fn logout(&self, _request: &LogoutRequest) -> Result<LogoutResponse, RpcError> {
        self.ensure_open()?;
        lock(&self.state).logged_out = true;
        Ok(LogoutResponse::new())
    }

    pub(crate) async fn new_session(
        &self,
        request: NewSessionRequest,
        connection: ConnectionTo<Client>,
    ) -> Result<(NewSessionResponse, Arc<Session>), RpcError> {
        self.ensure_open()?;
        self.ensure_authenticated()?;
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
        let clients = crate::session::Clients::new(connection.clone());
        crate::questions::offer(&agent, clients.clone(), elicitation);
        let session = Session::attach(
            session_id.clone(),
            request.cwd,
            parts,
            client,
            None,
            self.host.prompt_images(),
            clients,
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
        if let Some(shared) = &self.shared {
            if !shared.insert(session.clone()) {
                drop(state);
                let agent = session.agent.clone();
                tokio::spawn(async move { agent.dispose().await });
                return Err(internal_error(texts::DISPOSED));
            }
            state.viewing.insert(session.id.clone(), session.owner);
        }
        state.sessions.insert(session.id.clone(), session);
        Ok(())
    }

    pub(crate) async fn load_session(
        &self,
        request: LoadSessionRequest,
        connection: ConnectionTo<Client>,
    ) -> Result<(LoadSessionResponse, Arc<Session>), RpcError> {
        self.ensure_authenticated()?;
        check_session_folder(&request.cwd)?;
        if !request.additional_directories.is_empty() {
            return Err(invalid_params(texts::ADDITIONAL_DIRECTORIES));
        }
        if !request.mcp_servers.is_empty() && !self.host.supports_mcp_servers() {
            return Err(invalid_params(texts::MCP_SERVERS));
        }
        let id = request.session_id.0.to_string();
        let cursor = request
            .meta
            .as_ref()
            .and_then(|meta| meta.get("dsh"))
            .and_then(|dsh| dsh.get("cursor"))
            .and_then(serde_json::Value::as_u64);
        {
            let mut state = lock(&self.state);
            if state.closed {
                return Err(internal_error(texts::DISPOSED));
            }
            if state.sessions.contains_key(&id) || !state.loading.insert(id.clone()) {
                return Err(invalid_params(format!("session is already loaded: {id}")));
            }
        }
        // Shared: attach to the session if it is live here; open it otherwise, one
        // connection at a time, so a log never gets two writers.
        let _opening = match &self.shared {
            Some(shared) => Some(shared.loading.clone().lock_owned().await),
            None => None,
        };
        let live = self.shared.as_ref().and_then(|shared| shared.get(&id));
        let result = match live {
            Some(live) => self.attach_live(live, request.cwd, connection, cursor),
            None => self
                .open_stored(
                    id.clone(),
                    request.cwd,
                    connection,
                    Some(cursor.unwrap_or(0)),
                )
                .await
                .map(|(modes, options, session)| {
                    (
                        LoadSessionResponse::new()
                            .modes(modes)
                            .config_options(options),
                        session,
                    )
                }),
        };
        if result.is_err() {
            lock(&self.state).loading.remove(&id);
        }
        result
    }

    /// `session/resume`: the stored session is reattached without replaying its conversation
    /// (the client still shows it); its commands and usage follow the answer. A session this
    /// connection already has open is simply answered again; one another connection of this
    /// server runs is joined as one more viewer, with nothing replayed.
    pub(crate) async fn resume_session(
        &self,
        request: ResumeSessionRequest,
        connection: ConnectionTo<Client>,
    ) -> Result<(ResumeSessionResponse, Arc<Session>), RpcError> {
        self.ensure_authenticated()?;
        check_session_folder(&request.cwd)?;
        if !request.additional_directories.is_empty() {
            return Err(invalid_params(texts::ADDITIONAL_DIRECTORIES));
        }
        if !request.mcp_servers.is_empty() && !self.host.supports_mcp_servers() {
            return Err(invalid_params(texts::MCP_SERVERS));
        }
        let id = request.session_id.0.to_string();
        let open = {
            let mut state = lock(&self.state);
            if state.closed {
                return Err(internal_error(texts::DISPOSED));
            }
            if let Some(session) = state.sessions.get(&id) {
                Some(session.clone())
            } else if state.loading.insert(id.clone()) {
                None
            } else {
                return Err(invalid_params(format!("session is already loading: {id}")));
            }
        };
        let (modes, options, session) = match open {
            Some(session) => {
                if session.cwd != request.cwd {
                    return Err(invalid_params(format!(
                        "session {id} belongs to cwd {}, not {}",
                        session.cwd.to_string_lossy(),
                        request.cwd.to_string_lossy()
                    )));
                }
                let modes = lock(&session.modes).as_ref().map(modes_wire);
                (modes, self.config_options(&session), session)
            }
            None => {
                let _opening = match &self.shared {
                    Some(shared) => Some(shared.loading.clone().lock_owned().await),
                    None => None,
                };
                let live = self.shared.as_ref().and_then(|shared| shared.get(&id));
                let result = match live {
                    Some(live) => self
                        .attach_live(live, request.cwd, connection, Some(u64::MAX))
                        .map(|(response, session)| {
                            (response.modes, response.config_options, session)
                        }),
                    None => {
                        self.open_stored(id.clone(), request.cwd, connection, None)
                            .await
                    }
                };
                if result.is_err() {
                    lock(&self.state).loading.remove(&id);
                }
                result?
            }
        };
        Ok((
            ResumeSessionResponse::new()
                .modes(modes)
                .config_options(options),
            session,
        ))
    }

    /// `session/load` of a session another connection of this server runs: this connection
    /// becomes one more viewer of it.
    fn attach_live(
        &self,
        session: Arc<Session>,
        cwd: PathBuf,
        connection: ConnectionTo<Client>,
        cursor: Option<u64>,
    ) -> Result<(LoadSessionResponse, Arc<Session>), RpcError> {
        if session.cwd != cwd {
            return Err(invalid_params(format!(
                "session {} belongs to cwd {}, not {}",
                session.id,
                session.cwd.to_string_lossy(),
                cwd.to_string_lossy()
            )));
        }
        let viewer = session
            .attach_viewer(connection, self.client_view(), cursor)
            .map_err(internal_error)?;
        let mut state = lock(&self.state);
        state.loading.remove(&session.id);
        if state.closed {
            drop(state);
            session.detach(viewer);
            return Err(internal_error(texts::DISPOSED));
        }
        state.viewing.insert(session.id.clone(), viewer);
        state.sessions.insert(session.id.clone(), session.clone());
        drop(state);
        let modes = lock(&session.modes).as_ref().map(modes_wire);
        let options = self.config_options(&session);
        Ok((
            LoadSessionResponse::new()
                .modes(modes)
                .config_options(options),
            session,
        ))
    }

    /// Opens a stored session in this connection (`replay: Some(from)`: its conversation from
    /// that seq is rendered first, as `session/load` does; `None`: nothing is replayed, as
    /// `session/resume` does), answering what the load or resume answer carries.
    async fn open_stored(
        &self,
        id: String,
        cwd: PathBuf,
        connection: ConnectionTo<Client>,
        replay: Option<u64>,
    ) -> Result<
        (
            Option<SessionModeState>,
            Option<Vec<SessionConfigOption>>,
            Arc<Session>,
        ),
        RpcError,
    > {
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
        let clients = crate::session::Clients::new(connection.clone());
        crate::questions::offer(&agent, clients.clone(), elicitation);
        let images = self.host.prompt_images();
        let session = Session::attach(id, cwd, parts, client, replay, images, clients)
            .map_err(|error| abandon(agent, &error))?;
        let modes = lock(&session.modes).as_ref().map(modes_wire);
        let options = self.config_options(&session);
        self.register(session.clone())?;
        Ok((modes, options, session))
    }

    /// `session/close`: the session's prompt is cancelled (it answers `cancelled`), its agent
    /// settles and is disposed, and the id is free to load again; the stored log stays.
    /// Answered from a task: settling may wait on the client, whose answers this handler's
    /// loop must keep reading.
    pub(crate) fn close_session(
        self: &Arc<Self>,
        request: &CloseSessionRequest,
        respond: impl FnOnce(Result<CloseSessionResponse, RpcError>) + Send + 'static,
    ) {
        let id = request.session_id.0.to_string();
        let session = {
            let mut state = lock(&self.state);
            if state.closed {
                return respond(Err(internal_error(texts::DISPOSED)));
            }
            match state.sessions.remove(&id) {
                Some(session) => session,
                None => return respond(Err(crate::error::session_not_found(&id))),
            }
        };
        self.tasks.spawn(async move {
            retire(&session).await;
            respond(Ok(CloseSessionResponse::new()));
        });
    }

    /// `session/delete`: a session open on this connection is closed first (its prompt
    /// answers `cancelled`), then its stored log is removed; it no longer lists or loads.
    pub(crate) fn delete_session(
        self: &Arc<Self>,
        request: &DeleteSessionRequest,
        respond: impl FnOnce(Result<DeleteSessionResponse, RpcError>) + Send + 'static,
    ) {
        let id = request.session_id.0.to_string();
        let open = {
            let mut state = lock(&self.state);
            if state.closed {
                return respond(Err(internal_error(texts::DISPOSED)));
            }
            if state.loading.contains(&id) {
                return respond(Err(invalid_params(format!(
                    "session is loading: {id}; delete it once the load has answered"
                ))));
            }
            state.sessions.remove(&id)
        };
        let bridge = self.clone();
        self.tasks.spawn(async move {
            if let Some(session) = open {
                retire(&session).await;
                // The log is released with the last handle of its agent.
                drop(session);
            }
            let outcome = bridge
                .remove_released(&id)
                .await
                .map(|()| DeleteSessionResponse::new())
                .map_err(crate::error::Failure::into_rpc);
            respond(outcome);
        });
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

    /// Removes a stored session, giving a just-retired agent's log writer a moment to let go
    /// of it (its last write finishes on the writer's own thread).
    async fn remove_released(&self, id: &str) -> Result<(), crate::error::Failure> {
        const ATTEMPTS: u32 = 40;
        let mut attempt = 0;
        loop {
            match self.host.remove(id) {
                Err(crate::error::Failure::Busy(_)) if attempt < ATTEMPTS => {
                    attempt += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                Err(crate::error::Failure::Busy(detail)) => {
                    return Err(crate::error::Failure::invalid(detail));
                }
                other => return other,
            }
        }
    }

    /// After a mode change answered: the commands (plan mode changes what runs) and the
    /// options (the `plan_mode` switch) as they are now.
    pub(crate) fn after_mode_change(&self, session_id: &str) {
        let Ok(session) = self.session(session_id) else {
            return;
        };
        session.push_commands();
        if let Some(options) = self.config_options(&session) {
            session.send(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
                options,
            )));
        }
    }

    /// The session's config options as the client is told them now (remembered, so a change
    /// the session makes itself is sent later: see [`Bridge::refresh_options`]).
    fn config_options(&self, session: &Session) -> Option<Vec<SessionConfigOption>> {
        let options = self.current_options(session);
        lock(&session.offered).clone_from(&options);
        options
    }

    /// After a prompt: when the options changed under the session (`/plan`, an approved
    /// `exit_plan_mode`), a `config_option_update` with them as they are now.
    fn refresh_options(&self, session: &Session) {
        let Some(options) = self.current_options(session) else {
            return;
        };
        {
            let mut offered = lock(&session.offered);
            if offered.as_ref() == Some(&options) {
                return;
            }
            *offered = Some(options.clone());
        }
        session.send(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
            options,
        )));
    }

    /// The session's config options: a `model` select over the host's models (the current one
    /// listed even when the catalog lacks it), and `plan_mode` for clients that take booleans.
    /// `None` when the host offers no models.
    fn current_options(&self, session: &Session) -> Option<Vec<SessionConfigOption>> {
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
            .map(|model| {
                let images = self.host.model_takes_images(&model);
                SessionConfigSelectOption::new(model.clone(), model)
                    .description(images.then(|| "accepts images".to_owned()))
            })
            .collect();
        let mut offered = vec![
            SessionConfigOption::select(MODEL_OPTION, "Model", current, options)
                .category(SessionConfigOptionCategory::Model)
                .description(
                    "The model this session's requests use from the next one on".to_owned(),
                ),
        ];
        // Only a client that says it shows boolean options is offered one.
        let booleans = lock(&self.state).boolean_options;
        if booleans && let Some(axis) = session.agent.scope().service::<dyn dsh_plugin::ModeAxis>()
        {
            let id = axis_option_id(axis.as_ref());
            let mut name = id.replace('_', " ");
            if let Some(first) = name.get(..1) {
                name = format!("{}{}", first.to_uppercase(), &name[1..]);
            }
            offered.push(
                SessionConfigOption::boolean(id, name, axis.is_on(&session.agent))
                    .category(SessionConfigOptionCategory::Mode)
                    .description(axis.variant_description(None)),
            );
        }
        Some(offered)
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
        let axis = session.agent.scope().service::<dyn dsh_plugin::ModeAxis>();
        if let Some(axis) = axis.filter(|axis| axis_option_id(axis.as_ref()) == id) {
            let SessionConfigOptionValue::Boolean { value } = &request.value else {
                return Err(invalid_params(format!(
                    "config option {id} takes a boolean value (\"type\": \"boolean\")"
                )));
            };
            self.set_axis(&session, axis.as_ref(), *value)?;
            return Ok(SetSessionConfigOptionResponse::new(
                self.config_options(&session).unwrap_or_default(),
            ));
        }
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

    /// Turns the mode axis (plan mode) on or off through the session's mode (the same path as
    /// `session/set_mode`: the log records it and the client hears `current_mode_update`).
    fn set_axis(
        &self,
        session: &Session,
        axis: &(dyn dsh_plugin::ModeAxis + 'static),
        on: bool,
    ) -> Result<(), RpcError> {
        let current = lock(&session.modes)
            .as_ref()
            .map(|modes| modes.current.clone())
            .ok_or_else(|| invalid_params("this session has no modes"))?;
        let (preset, _) = axis.split_mode_id(&current);
        let target = axis.mode_id(preset, on);
        if target == current {
            return Ok(());
        }
        self.set_mode(SetSessionModeRequest::new(session.id.clone(), target))
            .map(|_| ())
    }

    /// Admission runs here, synchronously (no await before the slot is reserved and the message
    /// queued); settlement is spawned and answers through `respond`.
    /// `cancel_request` completes when the client withdraws this request (`$/cancel_request`):
    /// the prompt is then cancelled as by `session/cancel`.
    pub(crate) fn prompt(
        self: &Arc<Self>,
        request: PromptRequest,
        cancel_request: impl Future<Output = ()> + Send + 'static,
        respond: impl FnOnce(Result<PromptResponse, RpcError>) + Send + 'static,
    ) {
        if let Err(error) = self.ensure_authenticated() {
            return respond(Err(error));
        }
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
        // Settled (or refused) prompts stop watching for `$/cancel_request`: the guard goes
        // with whichever path answers.
        let answered = CancellationToken::new();
        let watching = answered.clone().drop_guard();
        {
            let session = session.clone();
            let cancelled = cancelled.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = cancel_request => {
                        cancelled.cancel();
                        session.agent.cancel(AbortReason::User, false);
                    }
                    () = answered.cancelled() => {}
                }
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
                let _watching = watching;
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
                // `/compact` changes the fill; `/plan` the options.
                session.push_usage();
                bridge.refresh_options(&session);
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
        let viewer = lock(&self.state)
            .viewing
            .get(&session.id)
            .copied()
            .unwrap_or(session.owner);
        let admitted = Ok(content).and_then(|content| {
            let message = Message::user(content, MessageSource::user());
            let id = message.id.clone();
            // Before it is queued: the viewers decide whether to show it from this.
            lock(&session.typed_by).insert(id.clone(), viewer);
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
                lock(&session.typed_by).retain(|_, typer| *typer != viewer);
                *lock(&session.slot) = None;
                return respond(Err(error));
            }
        };
        let bridge = self.clone();
        self.tasks.spawn(async move {
            let _watching = watching;
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
            lock(&session.typed_by).remove(&message_id);
            let failure = session.take_delivery_failure();
            let outcome = match read {
                Ok(()) => prompt::settle(cancelled.is_cancelled(), failure, &ends, turn),
                Err(error) => Err(crate::error::internal_error(error.to_string())),
            };
            session.push_usage();
            bridge.refresh_options(&session);
            *lock(&session.slot) = None;
            respond(outcome.map(PromptResponse::new));
        });
    }

    /// Puts the stored session `fork` behind the wire session `session` (a command's
    /// [`dsh_commands::CommandResult::Switch`]): later prompts on the same `sessionId` go to
    /// the fork; the agent it replaces is disposed, its log kept as it is. The client's view
    /// is not replayed: the command's text says where the conversation went.
    // String: the reason is only shown to the person as the command's error text.
    async fn switch(&self, session: &Arc<Session>, fork: &str) -> Result<(), String> {
        let parts = self.host.load(fork).map_err(|error| error.to_string())?;
        let connection = session.connection();
        let agent = parts.agent.clone();
        let elicitation = lock(&self.state).elicitation_form;
        // The fork answers to the connection that ran the command (other viewers of a shared
        // session reload it to follow).
        let clients = crate::session::Clients::new(connection);
        crate::questions::offer(&agent, clients.clone(), elicitation);
        let next = Session::attach(
            session.id.clone(),
            session.cwd.clone(),
            parts,
            self.client_view(),
            None,
            self.host.prompt_images(),
            clients,
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
        let (sessions, viewing) = {
            let mut state = lock(&self.state);
            if state.closed {
                return Ok(());
            }
            state.closed = true;
            let sessions: Vec<Arc<Session>> = state.sessions.drain().map(|(_, s)| s).collect();
            (sessions, std::mem::take(&mut state.viewing))
        };
        if self.shared.is_some() {
            // The sessions belong to the server: this connection only stops watching, and the
            // turns run on. Its open prompts are answered when they settle (when the server
            // stops, it ends the sessions first, so they settle at once).
            for session in &sessions {
                if let Some(viewer) = viewing.get(&session.id) {
                    session.detach(*viewer);
                }
            }
            self.tasks.close();
            self.tasks.wait().await;
            return Ok(());
        }
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
pub(crate) async fn drain_children(sessions: &[Arc<Session>]) {
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

/// Ends one session's work and its agent: its prompt is cancelled, the agent settles, its
/// continuable children are drained and it is disposed (freeing its log for a later load).
async fn retire(session: &Arc<Session>) {
    if let Some(slot) = lock(&session.slot).as_ref() {
        slot.cancelled.cancel();
    }
    session.agent.cancel(AbortReason::User, false);
    session.agent.when_idle().await;
    drain_children(std::slice::from_ref(session)).await;
    session.agent.dispose().await;
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
