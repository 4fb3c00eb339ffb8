//! One ACP session: the owned agent, its prompt slot, and the ordered delivery of its committed
//! events to the client.
//!
//! Delivery is a synchronous log listener: it runs on the appending thread in commit order and
//! only enqueues frames, so every update of a turn is queued before the agent can go idle, and
//! a prompt response sent after `when_idle` always follows its updates.

use dsh_sync::lock;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::AvailableCommand;
use agent_client_protocol::v1::schema::AvailableCommandInput;
use agent_client_protocol::v1::schema::AvailableCommandsUpdate;
use agent_client_protocol::v1::schema::CurrentModeUpdate;
use agent_client_protocol::v1::schema::SessionNotification;
use agent_client_protocol::v1::schema::SessionUpdate;
use agent_client_protocol::v1::schema::ToolCallStatus;
use agent_client_protocol::v1::schema::UnstructuredCommandInput;
use agent_client_protocol::v1::schema::UsageUpdate;
use dsh_agent::AgentEvent;
use dsh_agent::AgentHandle;
use dsh_kernel::Disposer;
use dsh_session::Subscription;
use dsh_tools::ApprovalService;
use dsh_tools::ToolOutputSink;
use tokio_util::sync::CancellationToken;
use tokio_util::sync::DropGuard;

use crate::approval::ClientApproval;
use crate::approval::ShownCalls;
use crate::cards::RenderContext;
use crate::cards::live_console_update;
use crate::cards::live_terminal_update;
use crate::host::ModeState;
use crate::host::SessionParts;
use crate::live::FlushTarget;
use crate::live::LiveOutput;
use crate::mapping::Presenter;

/// What the client offered at `initialize` that changes how a session is wired.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ClientView {
    /// `clientCapabilities._meta.terminal_output === true`.
    pub(crate) terminal_output: bool,
    pub(crate) fs: crate::client_fs::FsCapabilities,
    /// `clientCapabilities.terminal`. Foreground commands run in client terminals unless the
    /// client also takes `terminal_output` (then dsh runs them and streams their output).
    pub(crate) terminal: bool,
    /// `clientCapabilities._meta.dsh.cursor === true`: each update of a logged event carries
    /// its log seq (`_meta.dsh.seq`), the cursor a reconnecting viewer resumes from.
    pub(crate) cursor: bool,
}

/// The connections that watch one session, newest last: the agent's requests (approvals,
/// questions) go to the newest one still attached. With one connection (stdio), that one.
#[derive(Clone, Default)]
pub(crate) struct Clients(Arc<Mutex<Vec<Viewer>>>);

/// A viewer's id and connection.
type Viewer = (u64, ConnectionTo<Client>);

impl Clients {
    /// The clients of a new session: its owner, with a fresh viewer id.
    pub(crate) fn new(connection: ConnectionTo<Client>) -> Self {
        Self(Arc::new(Mutex::new(vec![(next_viewer_id(), connection)])))
    }

    /// The owner's viewer id and connection.
    fn owner(&self) -> Option<Viewer> {
        lock(&self.0).first().cloned()
    }

    /// The connection that answers the agent's requests now.
    pub(crate) fn current(&self) -> Option<ConnectionTo<Client>> {
        lock(&self.0)
            .last()
            .map(|(_, connection)| connection.clone())
    }

    fn add(&self, viewer: u64, connection: ConnectionTo<Client>) {
        lock(&self.0).push((viewer, connection));
    }

    fn remove(&self, viewer: u64) {
        lock(&self.0).retain(|(id, _)| *id != viewer);
    }
}

/// A viewer's id, unique in this process.
pub(crate) fn next_viewer_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The session's `model` config option.
pub(crate) struct ModelChoice {
    pub(crate) current: String,
}

/// The one in-flight prompt of a session.
#[derive(Debug, Clone)]
pub(crate) struct PromptSlot {
    /// Fired by `session/cancel` or teardown: the prompt settles `cancelled`.
    pub(crate) cancelled: CancellationToken,
}

/// Sends updates of one session in commit order; remembers the first transport failure.
struct Delivery {
    session_id: String,
    connection: ConnectionTo<Client>,
    presenter: Presenter,
    /// Events below this seq were already rendered (by replay).
    next_seq: u64,
    failure: Option<String>,
    /// Running calls' output not yet shown (see `live`).
    live: Arc<LiveOutput>,
    terminal_output: bool,
    /// Tag updates of logged events with their seq (see [`ClientView::cursor`]).
    cursor: bool,
    /// The viewer left: nothing more is sent, and no failure is recorded.
    detached: bool,
    /// For a viewer attached to a running session: the log, to fill a gap (an event committed
    /// while the viewer subscribed, published before it was listening).
    log: Option<dsh_session::WeakSessionLog>,
    /// Live user messages are all sent: clients that render the log by cursor show what
    /// they typed from the log, not from a local echo.
    echo_user: bool,
    /// This delivery's viewer id, and who typed each prompt still settling: a live user
    /// message typed by another viewer is sent (the typer already shows it).
    viewer: u64,
    typed_by: TypedBy,
}

/// Prompt message id → the viewer that sent it, while the prompt settles.
pub(crate) type TypedBy = Arc<Mutex<HashMap<String, u64>>>;

/// Whether `event` is a user message another viewer than `viewer` typed.
fn typed_by_other(typed_by: &TypedBy, viewer: u64, event: &dsh_session::Event) -> bool {
    if event.kind != dsh_session::kind::USER_MESSAGE {
        return false;
    }
    let typed = lock(typed_by);
    if typed.is_empty() {
        return false;
    }
    event
        .decode::<dsh_session::data::UserMessage>()
        .and_then(Result::ok)
        .and_then(|message| typed.get(&message.0.id).copied())
        .is_some_and(|typer| typer != viewer)
}

impl Delivery {
    fn send(&mut self, update: SessionUpdate) {
        self.send_at(update, None);
    }

    /// Sends an update; `seq` is the log event it renders, if any.
    fn send_at(&mut self, update: SessionUpdate, seq: Option<u64>) {
        if self.detached {
            return;
        }
        let mut notification = SessionNotification::new(self.session_id.clone(), update);
        if self.cursor
            && let Some(seq) = seq
        {
            let mut meta = serde_json::Map::new();
            meta.insert("dsh".to_owned(), serde_json::json!({ "seq": seq }));
            notification = notification.meta(meta);
        }
        if let Err(error) = self.connection.send_notification(notification) {
            tracing::warn!(session = %self.session_id, %error, "session/update could not be sent");
            if self.failure.is_none() {
                self.failure = Some(error.to_string());
            }
        }
    }

    fn deliver(&mut self, event: &dsh_session::Event, replay: bool) {
        if event.seq < self.next_seq {
            return;
        }
        if event.seq > self.next_seq
            && let Some(log) = self
                .log
                .as_ref()
                .and_then(dsh_session::WeakSessionLog::upgrade)
        {
            match log.events_since(self.next_seq) {
                Ok(missed) => {
                    for missed in missed.iter().filter(|missed| missed.seq < event.seq) {
                        self.deliver_one(missed, replay);
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "a viewer missed events it could not read back")
                }
            }
        }
        self.deliver_one(event, replay);
    }

    fn deliver_one(&mut self, event: &dsh_session::Event, replay: bool) {
        if event.seq < self.next_seq {
            return;
        }
        self.next_seq = event.seq + 1;
        let echo = replay || self.echo_user || typed_by_other(&self.typed_by, self.viewer, event);
        for update in self.presenter.map(event, echo) {
            let update = self.settle_live(update);
            self.send_at(update, Some(event.seq));
        }
    }

    /// Renders a stored log: consecutive text chunks of one kind (the streamed deltas of a
    /// message or of its reasoning) go out as one update, so a long log is a few updates per
    /// message rather than one per delta (the client shows the same text either way). Only
    /// what renders events from `send_from` on is sent (a reconnecting viewer's cursor);
    /// earlier events are still folded, so later cards find their calls.
    fn replay_from(&mut self, events: &[Arc<dsh_session::Event>], send_from: u64) {
        // A merged chunk carries the seq of its last event: a viewer that saw it has seen all.
        let mut pending: Option<(SessionUpdate, u64)> = None;
        for event in events {
            if event.seq < self.next_seq {
                continue;
            }
            self.next_seq = event.seq + 1;
            let updates = self.presenter.map(event, true);
            if event.seq < send_from {
                continue;
            }
            for update in updates {
                if let Some((held, seq)) = pending.as_mut()
                    && crate::mapping::extend_text_chunk(held, &update)
                {
                    *seq = event.seq;
                    continue;
                }
                if let Some((held, seq)) = pending.take() {
                    self.send_at(held, Some(seq));
                }
                if crate::mapping::is_text_chunk(&update) {
                    pending = Some((update, event.seq));
                } else {
                    let update = self.settle_live(update);
                    self.send_at(update, Some(event.seq));
                }
            }
        }
        if let Some((held, seq)) = pending {
            self.send_at(held, Some(seq));
        }
    }

    /// A completing update ends the call's live output: what is still buffered goes out first,
    /// and a terminal that already received output is not sent all of it again.
    fn settle_live(&mut self, mut update: SessionUpdate) -> SessionUpdate {
        let SessionUpdate::ToolCallUpdate(completing) = &mut update else {
            return update;
        };
        if !matches!(
            completing.fields.status,
            Some(ToolCallStatus::Completed | ToolCallStatus::Failed)
        ) {
            return update;
        }
        let call_id = completing.tool_call_id.0.clone();
        let Some(rest) = self.live.settle(&call_id) else {
            return update;
        };
        let Some(meta) = completing
            .meta
            .as_mut()
            .filter(|meta| meta.contains_key("terminal_output"))
        else {
            return update;
        };
        meta.remove("terminal_output");
        if !rest.is_empty() {
            self.send(SessionUpdate::ToolCallUpdate(live_terminal_update(
                &call_id, &rest,
            )));
        }
        update
    }
}

impl FlushTarget for Delivery {
    fn flush_live(&mut self) {
        let presenter = &self.presenter;
        let terminal_output = self.terminal_output;
        // Only calls the client shows: with terminals, only terminal cards take data.
        let flushed = self.live.drain(|call_id| {
            let terminal = presenter.pending_terminal(call_id)?;
            match (terminal_output, terminal) {
                (true, true) => Some(true),
                (true, false) => None,
                (false, _) => Some(false),
            }
        });
        for (flush, terminal) in flushed {
            let update = if terminal {
                if flush.data.is_empty() {
                    continue;
                }
                live_terminal_update(&flush.call_id, &flush.data)
            } else {
                live_console_update(&flush.call_id, &flush.tail)
            };
            self.send(SessionUpdate::ToolCallUpdate(update));
        }
    }
}

/// Every delivery of one session: the owner's first, then each attached viewer's.
type DeliveryList = Vec<(u64, Arc<Mutex<Delivery>>)>;
type Deliveries = Arc<Mutex<DeliveryList>>;

fn each_delivery(deliveries: &Deliveries) -> Vec<Arc<Mutex<Delivery>>> {
    lock(deliveries).iter().map(|(_, d)| d.clone()).collect()
}

/// The approval channel's view of the deliveries (weak: the session owns them).
struct DeliveryCalls(std::sync::Weak<Mutex<DeliveryList>>);

impl DeliveryCalls {
    fn deliveries(&self) -> Vec<Arc<Mutex<Delivery>>> {
        self.0
            .upgrade()
            .map(|all| each_delivery(&all))
            .unwrap_or_default()
    }
}

impl crate::client_terminal::TerminalCards for DeliveryCalls {
    fn show_terminal(&self, call_id: &str, terminal_id: &str) {
        for delivery in self.deliveries() {
            let mut delivery = lock(&delivery);
            if let Some(update) = delivery.presenter.attach_terminal(call_id, terminal_id) {
                delivery.send(SessionUpdate::ToolCallUpdate(update));
            }
        }
    }
}

impl ShownCalls for DeliveryCalls {
    fn permission_call(
        &self,
        request: &dsh_tools::ApprovalRequest,
    ) -> (agent_client_protocol::v1::schema::ToolCallUpdate, bool) {
        // Every viewer folds the same log; the first that shows the call describes it.
        for delivery in self.deliveries() {
            let guard = lock(&delivery);
            if guard.detached {
                continue;
            }
            if let Some(shown) = guard.presenter.shown_call(&request.call_id) {
                let call = crate::cards::permission_call(
                    &request.call_id,
                    Some(shown),
                    &request.tool_name,
                    request.reason.as_deref(),
                );
                return (call, true);
            }
        }
        let call = crate::cards::permission_call(
            &request.call_id,
            None,
            &request.tool_name,
            request.reason.as_deref(),
        );
        (call, false)
    }

    fn set_status(&self, call_id: &str, status: ToolCallStatus) {
        for delivery in self.deliveries() {
            let mut delivery = lock(&delivery);
            // A call whose result went out already keeps its final status.
            if delivery.presenter.shown_call(call_id).is_some() {
                delivery.send(SessionUpdate::ToolCallUpdate(crate::cards::status_update(
                    call_id, status,
                )));
            }
        }
    }
}

pub(crate) struct Session {
    /// The slash commands this session offers (`None`: the host composed no registry).
    pub(crate) commands: Option<dsh_commands::CommandRegistry>,
    pub(crate) id: String,
    pub(crate) cwd: PathBuf,
    pub(crate) agent: AgentHandle,
    pub(crate) modes: Arc<Mutex<Option<ModeState>>>,
    /// The model the session's requests use (`session/set_config_option` switches it through
    /// the host, which logs it so `session/load` keeps it).
    pub(crate) model: Mutex<ModelChoice>,
    pub(crate) slot: Mutex<Option<PromptSlot>>,
    /// Message id → turn that claimed it (from `agent/inbox/claimed`).
    pub(crate) claimed: Arc<Mutex<HashMap<String, u64>>>,
    /// The delivery of the connection that opened the session (live output goes here).
    delivery: Arc<Mutex<Delivery>>,
    /// The owner's id among the viewers.
    pub(crate) owner: u64,
    /// Every delivery, the owner's first.
    deliveries: Deliveries,
    /// The attached viewers' log listeners.
    viewer_listeners: Mutex<HashMap<u64, Subscription>>,
    /// Who answers the agent's requests.
    pub(crate) clients: Clients,
    /// Who typed each prompt still settling.
    pub(crate) typed_by: TypedBy,
    /// What a new viewer's presenter renders with.
    presentation: dsh_transcript::Presentation,
    images: Option<Arc<dyn crate::images::PromptImageStore>>,
    /// The last `usage_update` sent as `(used, size)` (an unchanged fill is not re-sent).
    usage: Mutex<Option<(u64, u64)>>,
    /// The config options the client was last told (an unchanged set is not re-sent).
    pub(crate) offered: Mutex<Option<Vec<agent_client_protocol::v1::schema::SessionConfigOption>>>,
    _listener: Subscription,
    /// Follows mode changes the log records (see [`crate::ModeWatch`]).
    _mode_listener: Option<Subscription>,
    _registrations: Vec<Disposer>,
    /// Stops the live-output flusher with the session.
    _flusher: DropGuard,
}

impl Session {
    /// Wires an agent into the bridge: delivery listener, approval service, claim tracking.
    /// With `replay: Some(from)`, the existing log is first rendered (user messages included),
    /// sending what renders events from seq `from` on (0: all of it).
    pub(crate) fn attach(
        id: String,
        cwd: PathBuf,
        parts: SessionParts,
        client: ClientView,
        replay: Option<u64>,
        images: Option<Arc<dyn crate::images::PromptImageStore>>,
        clients: Clients,
    ) -> Result<Arc<Self>, String> {
        let (owner, connection) = clients
            .owner()
            .ok_or_else(|| "a session needs a client".to_owned())?;
        let SessionParts {
            agent,
            presentation,
            modes,
            mode_watch,
        } = parts;
        let modes = Arc::new(Mutex::new(modes));
        let terminal_output = client.terminal_output;
        let ctx = RenderContext {
            cwd: cwd.clone(),
            terminal_output,
        };
        let presenter = Presenter::new(ctx, presentation.clone()).with_images(images.clone());
        let typed_by = TypedBy::default();
        let live = Arc::new(LiveOutput::default());
        let delivery = Arc::new(Mutex::new(Delivery {
            session_id: id.clone(),
            connection: connection.clone(),
            presenter,
            next_seq: 0,
            failure: None,
            live: live.clone(),
            terminal_output,
            cursor: client.cursor,
            detached: false,
            log: None,
            echo_user: client.cursor,
            viewer: owner,
            typed_by: typed_by.clone(),
        }));
        let deliveries: Deliveries = Arc::new(Mutex::new(vec![(owner, delivery.clone())]));
        let stop = CancellationToken::new();
        let flushing = crate::live::spawn_flusher(
            live.clone(),
            Arc::downgrade(&delivery),
            terminal_output,
            stop.clone(),
        );
        let listener = {
            // Held across replay and registration so a concurrent append cannot jump the queue;
            // the seq guard drops what replay already rendered.
            let mut guard = lock(&delivery);
            if let Some(from) = replay {
                // A resumed log is still whole in memory here; a failure is the file changed
                // under it.
                let events = agent.log().events().map_err(|e| e.to_string())?;
                guard.replay_from(&events, from);
            } else {
                guard.next_seq = agent.log().len();
            }
            let sink = delivery.clone();
            agent
                .log()
                .on_event(move |event| lock(&sink).deliver(event, false))
        };
        let mode_listener = mode_watch.map(|watch| {
            let (modes, deliveries) = (modes.clone(), deliveries.clone());
            agent.log().on_event(move |event| {
                let moved = {
                    let mut modes = lock(&modes);
                    let Some(modes) = modes.as_mut() else {
                        return;
                    };
                    match watch(&modes.current, event) {
                        Some(id)
                            if id != modes.current
                                && modes.available.iter().any(|m| m.id == id) =>
                        {
                            modes.current = id.clone();
                            id
                        }
                        _ => return,
                    }
                };
                for delivery in each_delivery(&deliveries) {
                    lock(&delivery).send(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
                        moved.clone(),
                    )));
                }
            })
        });
        let claimed: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
        let mut registrations = Vec::new();
        {
            let claimed = claimed.clone();
            registrations.push(agent.hooks().events.register(agent.scope(), move |event| {
                if let AgentEvent::InboxClaimed { message, turn, .. } = event {
                    lock(&claimed).insert(message.id.clone(), *turn);
                }
                Ok(())
            }));
        }
        if client.fs.any() {
            let files: Arc<dyn dsh_tools::EditorFiles> = Arc::new(crate::client_fs::ClientFiles {
                session_id: id.clone(),
                connection: connection.clone(),
                capabilities: client.fs,
            });
            registrations.push(
                agent
                    .scope()
                    .provide::<dyn dsh_tools::EditorFiles>(files)
                    .map_err(|e| e.to_string())?,
            );
        }
        if client.terminal && !client.terminal_output {
            let runner: Arc<dyn dsh_tools::ClientTerminals> =
                Arc::new(crate::client_terminal::ClientTerminalRunner {
                    session_id: id.clone(),
                    connection: connection.clone(),
                    cards: Arc::new(DeliveryCalls(Arc::downgrade(&deliveries))),
                });
            registrations.push(
                agent
                    .scope()
                    .provide::<dyn dsh_tools::ClientTerminals>(runner)
                    .map_err(|e| e.to_string())?,
            );
        }
        let answerer: Arc<dyn ApprovalService> = Arc::new(ClientApproval::new(
            id.clone(),
            agent.scope().id(),
            clients.clone(),
            Arc::new(DeliveryCalls(Arc::downgrade(&deliveries))),
        ));
        // The client answers; the approval service audits and applies the policy first, so
        // under `never` the client is never asked.
        let approval: Arc<dyn ApprovalService> = Arc::new(dsh_approval::UserApproval::new(
            Some(answerer),
            agent.scope().service::<dyn dsh_approval::PolicySource>(),
        ));
        registrations.push(
            agent
                .scope()
                .provide::<dyn ApprovalService>(approval)
                .map_err(|e| e.to_string())?,
        );
        if flushing {
            registrations.push(
                agent
                    .scope()
                    .provide::<dyn ToolOutputSink>(live)
                    .map_err(|e| e.to_string())?,
            );
        }
        let commands = dsh_commands::CommandRegistry::of(agent.scope());
        let current_model = dsh_host::model_choice::current(&agent);
        Ok(Arc::new_cyclic(|me: &std::sync::Weak<Self>| {
            if let Some(registry) = &commands {
                // `commands/change`: every live session re-announces what it offers.
                let me = me.clone();
                registrations.push(registry.on_change(agent.scope(), move || {
                    if let Some(session) = me.upgrade() {
                        session.push_commands();
                    }
                }));
            }
            Self {
                commands,
                id,
                cwd,
                agent,
                model: Mutex::new(ModelChoice {
                    current: current_model,
                }),
                modes,
                slot: Mutex::new(None),
                claimed,
                delivery,
                owner,
                deliveries,
                viewer_listeners: Mutex::new(HashMap::new()),
                clients,
                typed_by,
                presentation,
                images,
                usage: Mutex::new(None),
                offered: Mutex::new(None),
                _listener: listener,
                _mode_listener: mode_listener,
                _registrations: registrations,
                _flusher: stop.drop_guard(),
            }
        }))
    }

    /// `available_commands_update` with what the registry offers this session now.
    pub(crate) fn push_commands(&self) {
        let Some(registry) = &self.commands else {
            return;
        };
        let available = registry
            .list(self.agent.scope())
            .into_iter()
            .map(|command| {
                let input = command.input.map(|input| {
                    AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(input.hint))
                });
                AvailableCommand::new(command.name, command.description).input(input)
            })
            .collect();
        self.send(SessionUpdate::AvailableCommandsUpdate(
            AvailableCommandsUpdate::new(available),
        ));
    }

    /// `usage_update {used, size}`: the context fill from the composition's token meter
    /// (projected prompt tokens of the next request, and the route's context window). Sent
    /// after `session/new` / `session/load` and before each prompt response, when both are
    /// known and the figure changed; the meter never gates anything here.
    pub(crate) fn push_usage(&self) {
        let Some(meter) = self.agent.scope().service::<dsh_token_meter::TokenMeter>() else {
            return;
        };
        let pressure = meter.pressure(self.agent.log());
        let (Some(used), Some(size)) = (
            pressure.projected_tokens.or(pressure.pressure_tokens),
            pressure.context_window,
        ) else {
            return;
        };
        if lock(&self.usage).replace((used, size)) == Some((used, size)) {
            return;
        }
        self.send(SessionUpdate::UsageUpdate(UsageUpdate::new(used, size)));
    }

    /// Sends an update outside the event mapping (mode changes) to every viewer.
    pub(crate) fn send(&self, update: SessionUpdate) {
        for delivery in each_delivery(&self.deliveries) {
            lock(&delivery).send(update.clone());
        }
    }

    /// Attaches another connection to this live session: it is sent the log's updates from
    /// `cursor` (all of them without one; see [`ClientView::cursor`]), then every new one, and
    /// it may answer the agent's requests. Returns the viewer's id for [`Session::detach`].
    // String: the reason only becomes the message of an ACP internal error.
    pub(crate) fn attach_viewer(
        &self,
        connection: ConnectionTo<Client>,
        client: ClientView,
        cursor: Option<u64>,
    ) -> Result<u64, String> {
        let ctx = RenderContext {
            cwd: self.cwd.clone(),
            terminal_output: client.terminal_output,
        };
        let presenter =
            Presenter::new(ctx, self.presentation.clone()).with_images(self.images.clone());
        let viewer = next_viewer_id();
        let delivery = Arc::new(Mutex::new(Delivery {
            session_id: self.id.clone(),
            connection: connection.clone(),
            presenter,
            next_seq: 0,
            failure: None,
            // A viewer is not fed live output (the owner's delivery drains it).
            live: Arc::new(LiveOutput::default()),
            terminal_output: client.terminal_output,
            cursor: client.cursor,
            detached: false,
            log: Some(self.agent.log().downgrade()),
            echo_user: client.cursor,
            viewer,
            typed_by: self.typed_by.clone(),
        }));
        let listener = {
            // The session runs: listen first, then replay under the delivery's lock. An event
            // published meanwhile waits for the lock and is dropped by the seq guard if the
            // replay had it; one committed before the listener counted is filled in by `deliver`.
            let mut guard = lock(&delivery);
            let sink = delivery.clone();
            let listener = self
                .agent
                .log()
                .on_event(move |event| lock(&sink).deliver(event, false));
            let events = self.agent.log().events().map_err(|e| e.to_string())?;
            guard.replay_from(&events, cursor.unwrap_or(0));
            listener
        };
        lock(&self.viewer_listeners).insert(viewer, listener);
        lock(&self.deliveries).push((viewer, delivery));
        self.clients.add(viewer, connection);
        Ok(viewer)
    }

    /// A viewer (or the owner) leaves: nothing more is sent to it, and the agent's requests go
    /// to the newest viewer still attached. The session itself keeps running.
    pub(crate) fn detach(&self, viewer: u64) {
        self.clients.remove(viewer);
        lock(&self.viewer_listeners).remove(&viewer);
        let mut deliveries = lock(&self.deliveries);
        if let Some(index) = deliveries.iter().position(|(id, _)| *id == viewer) {
            let (_, delivery) = deliveries.remove(index);
            let mut delivery = lock(&delivery);
            delivery.detached = true;
            delivery.failure = None;
        }
    }

    /// How many connections watch this session.
    pub(crate) fn viewer_count(&self) -> usize {
        lock(&self.deliveries).len()
    }

    /// The connection this session's updates go out on.
    pub(crate) fn connection(&self) -> ConnectionTo<Client> {
        lock(&self.delivery).connection.clone()
    }

    /// The first delivery failure, if any (taken: reported to one prompt only).
    pub(crate) fn take_delivery_failure(&self) -> Option<String> {
        lock(&self.delivery).failure.take()
    }
}
