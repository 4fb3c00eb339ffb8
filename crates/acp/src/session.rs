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
}

impl Delivery {
    fn send(&mut self, update: SessionUpdate) {
        let notification = SessionNotification::new(self.session_id.clone(), update);
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
        self.next_seq = event.seq + 1;
        for update in self.presenter.map(event, replay) {
            let update = self.settle_live(update);
            self.send(update);
        }
    }

    /// Renders a stored log: consecutive text chunks of one kind (the streamed deltas of a
    /// message or of its reasoning) go out as one update, so a long log is a few updates per
    /// message rather than one per delta (the client shows the same text either way).
    fn replay(&mut self, events: &[Arc<dsh_session::Event>]) {
        let mut pending: Option<SessionUpdate> = None;
        for event in events {
            if event.seq < self.next_seq {
                continue;
            }
            self.next_seq = event.seq + 1;
            for update in self.presenter.map(event, true) {
                if let Some(held) = pending.as_mut()
                    && crate::mapping::extend_text_chunk(held, &update)
                {
                    continue;
                }
                if let Some(held) = pending.take() {
                    self.send(held);
                }
                if crate::mapping::is_text_chunk(&update) {
                    pending = Some(update);
                } else {
                    let update = self.settle_live(update);
                    self.send(update);
                }
            }
        }
        if let Some(held) = pending {
            self.send(held);
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

/// The approval channel's view of the delivery (weak: the session owns the delivery).
struct DeliveryCalls(std::sync::Weak<Mutex<Delivery>>);

impl crate::client_terminal::TerminalCards for DeliveryCalls {
    fn show_terminal(&self, call_id: &str, terminal_id: &str) {
        let Some(delivery) = self.0.upgrade() else {
            return;
        };
        let mut delivery = lock(&delivery);
        if let Some(update) = delivery.presenter.attach_terminal(call_id, terminal_id) {
            delivery.send(SessionUpdate::ToolCallUpdate(update));
        }
    }
}

impl ShownCalls for DeliveryCalls {
    fn permission_call(
        &self,
        request: &dsh_tools::ApprovalRequest,
    ) -> (agent_client_protocol::v1::schema::ToolCallUpdate, bool) {
        let delivery = self.0.upgrade();
        let guard = delivery.as_ref().map(|d| lock(d));
        let shown = guard
            .as_ref()
            .and_then(|d| d.presenter.shown_call(&request.call_id));
        let call = crate::cards::permission_call(
            &request.call_id,
            shown,
            &request.tool_name,
            request.reason.as_deref(),
        );
        (call, shown.is_some())
    }

    fn set_status(&self, call_id: &str, status: ToolCallStatus) {
        let Some(delivery) = self.0.upgrade() else {
            return;
        };
        let mut delivery = lock(&delivery);
        // A call whose result went out already keeps its final status.
        if delivery.presenter.shown_call(call_id).is_some() {
            delivery.send(SessionUpdate::ToolCallUpdate(crate::cards::status_update(
                call_id, status,
            )));
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
    delivery: Arc<Mutex<Delivery>>,
    /// The last `usage_update` sent as `(used, size)` (an unchanged fill is not re-sent).
    usage: Mutex<Option<(u64, u64)>>,
    _listener: Subscription,
    /// Follows mode changes the log records (see [`crate::ModeWatch`]).
    _mode_listener: Option<Subscription>,
    _registrations: Vec<Disposer>,
    /// Stops the live-output flusher with the session.
    _flusher: DropGuard,
}

impl Session {
    /// Wires an agent into the bridge: delivery listener, approval service, claim tracking.
    /// With `replay`, the whole existing log is first rendered (user messages included).
    pub(crate) fn attach(
        id: String,
        cwd: PathBuf,
        parts: SessionParts,
        connection: ConnectionTo<Client>,
        client: ClientView,
        replay: bool,
        images: Option<Arc<dyn crate::images::PromptImageStore>>,
    ) -> Result<Arc<Self>, String> {
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
        let presenter = Presenter::new(ctx, presentation).with_images(images);
        let live = Arc::new(LiveOutput::default());
        let delivery = Arc::new(Mutex::new(Delivery {
            session_id: id.clone(),
            connection: connection.clone(),
            presenter,
            next_seq: 0,
            failure: None,
            live: live.clone(),
            terminal_output,
        }));
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
            if replay {
                // A resumed log is still whole in memory here; a failure is the file changed
                // under it.
                let events = agent.log().events().map_err(|e| e.to_string())?;
                guard.replay(&events);
            } else {
                guard.next_seq = agent.log().len();
            }
            let sink = delivery.clone();
            agent
                .log()
                .on_event(move |event| lock(&sink).deliver(event, false))
        };
        let mode_listener = mode_watch.map(|watch| {
            let (modes, delivery) = (modes.clone(), delivery.clone());
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
                lock(&delivery).send(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
                    moved,
                )));
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
                    cards: Arc::new(DeliveryCalls(Arc::downgrade(&delivery))),
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
            connection,
            Arc::new(DeliveryCalls(Arc::downgrade(&delivery))),
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
                usage: Mutex::new(None),
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

    /// Sends an update outside the event mapping (mode changes).
    pub(crate) fn send(&self, update: SessionUpdate) {
        lock(&self.delivery).send(update);
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
