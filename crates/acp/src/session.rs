//! One ACP session: the owned agent, its prompt slot, and the ordered delivery of its committed
//! events to the client.
//!
//! Delivery is a synchronous log listener: it runs on the appending thread in commit order and
//! only enqueues frames, so every update of a turn is queued before the agent can go idle, and
//! a prompt response sent after `when_idle` always follows its updates.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::PoisonError;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::SessionNotification;
use agent_client_protocol::v1::schema::SessionUpdate;
use dsh_agent::AgentEvent;
use dsh_agent::AgentHandle;
use dsh_kernel::Disposer;
use dsh_session::Subscription;
use dsh_tools::ApprovalService;
use tokio_util::sync::CancellationToken;

use crate::approval::ClientApproval;
use crate::cards::RenderContext;
use crate::factory::ModeState;
use crate::factory::SessionParts;
use crate::mapping::Presenter;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves its data consistent, so a poisoned lock is still usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
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
            self.send(update);
        }
    }
}

pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) cwd: PathBuf,
    pub(crate) agent: AgentHandle,
    pub(crate) modes: Mutex<Option<ModeState>>,
    pub(crate) slot: Mutex<Option<PromptSlot>>,
    /// Message id → turn that claimed it (from `agent/inbox/claimed`).
    pub(crate) claimed: Arc<Mutex<HashMap<String, u64>>>,
    delivery: Arc<Mutex<Delivery>>,
    _listener: Subscription,
    _registrations: Vec<Disposer>,
}

impl Session {
    /// Wires an agent into the bridge: delivery listener, approval service, claim tracking.
    /// With `replay`, the whole existing log is first rendered (user messages included).
    pub(crate) fn attach(
        id: String,
        cwd: PathBuf,
        parts: SessionParts,
        connection: ConnectionTo<Client>,
        terminal_output: bool,
        replay: bool,
        images: Option<Arc<dyn crate::images::PromptImageStore>>,
    ) -> Result<Arc<Self>, String> {
        let SessionParts {
            agent,
            tools,
            modes,
        } = parts;
        let ctx = RenderContext {
            cwd: cwd.clone(),
            terminal_output,
        };
        let presenter = Presenter::new(ctx, tools, Some(agent.scope().clone())).with_images(images);
        let delivery = Arc::new(Mutex::new(Delivery {
            session_id: id.clone(),
            connection: connection.clone(),
            presenter,
            next_seq: 0,
            failure: None,
        }));
        let listener = {
            // Held across replay and registration so a concurrent append cannot jump the queue;
            // the seq guard drops what replay already rendered.
            let mut guard = lock(&delivery);
            let events = agent.log().events();
            if replay {
                for event in events.iter() {
                    guard.deliver(event, true);
                }
            } else {
                guard.next_seq = agent.log().len();
            }
            let sink = delivery.clone();
            agent
                .log()
                .on_event(move |event| lock(&sink).deliver(event, false))
        };
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
        let approval: Arc<dyn ApprovalService> = Arc::new(ClientApproval::new(
            id.clone(),
            agent.scope().id(),
            connection,
        ));
        registrations.push(
            agent
                .scope()
                .provide::<dyn ApprovalService>(approval)
                .map_err(|e| e.to_string())?,
        );
        Ok(Arc::new(Self {
            id,
            cwd,
            agent,
            modes: Mutex::new(modes),
            slot: Mutex::new(None),
            claimed,
            delivery,
            _listener: listener,
            _registrations: registrations,
        }))
    }

    /// Sends an update outside the event mapping (mode changes).
    pub(crate) fn send(&self, update: SessionUpdate) {
        lock(&self.delivery).send(update);
    }

    /// The first delivery failure, if any (taken: reported to one prompt only).
    pub(crate) fn take_delivery_failure(&self) -> Option<String> {
        lock(&self.delivery).failure.take()
    }
}
