//! The UI's behaviour without a terminal: keys, slash commands, agent events and approvals
//! change [`UiState`]; drawing is left to the caller. Tests drive it with synthetic keys.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use crossterm::event::Event as TermEvent;
use crossterm::event::KeyCode;
use crossterm::event::KeyEvent;
use crossterm::event::KeyEventKind;
use crossterm::event::KeyModifiers;
use dsh_agent::AgentHandle;
use dsh_agent::AgentStatus;
use dsh_agent::CancelCause;
use dsh_kernel::Disposer;
use dsh_protocol::Message;
use dsh_session::Event;
use dsh_tools::ApprovalService;
use dsh_tools::ToolOutputSink;
use dsh_tools::ToolRegistry;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::TryRecvError;
use tokio::sync::mpsc;

use crate::app::SessionFactory;
use crate::approval::Answer;
use crate::approval::PendingApproval;
use crate::approval::TuiApproval;
use crate::input;
use crate::live::LiveOutput;
use crate::model::NoticeLevel;
use crate::model::Presenters;
use crate::model::Transcript;
use crate::state::Completion;
use crate::state::UiState;

const QUIT_WINDOW: Duration = Duration::from_secs(2);
const COMPLETION_ITEMS: usize = 6;
const MAX_COMPLETION_FILES: usize = 20_000;

pub(crate) const HELP: &[&str] = &[
    "Commands",
    "  /help                   this help",
    "  /new                    new session in this folder",
    "  /resume [ID]            list or reopen sessions",
    "  /model [NAME]           show or set the model",
    "  /mode native|code|both  how tools are offered",
    "  /approval [ask|auto]    prompt, or allow all",
    "  /jobs                   background jobs",
    "  /quit                   leave (or ctrl-c twice)",
    "",
    "Keys",
    "  enter send · alt-enter/ctrl-j newline",
    "  ↑↓ history · pgup/pgdn scroll",
    "  esc cancel the running turn",
    "  ctrl-o tool output · ctrl-t reasoning",
    "  @path then tab: complete a file",
    "  approvals: y once · a session · n reject",
];

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One attached agent: its event feed, presenters and what the UI registered on its scope.
struct Session {
    agent: AgentHandle,
    events: broadcast::Receiver<Arc<Event>>,
    /// The log's sender is gone: stop polling it (a closed receiver is always ready).
    closed: bool,
    presenters: Presenters,
    mode: Option<Disposer>,
    _approval: Option<Disposer>,
    _output: Option<Disposer>,
}

/// Drives one UI: owns the state, the current agent and the approval channel.
pub struct Controller {
    pub state: UiState,
    factory: Arc<dyn SessionFactory>,
    registry: Arc<ToolRegistry>,
    cwd: PathBuf,
    session: Session,
    approval: TuiApproval,
    approvals: mpsc::UnboundedReceiver<PendingApproval>,
    files: Option<Vec<String>>,
    output_tx: LiveOutput,
    output_rx: mpsc::Receiver<(String, String)>,
    last_ctrl_c: Option<Instant>,
    quit: bool,
    /// Body height of the last frame (for page scrolling).
    pub page: usize,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller").finish_non_exhaustive()
    }
}

impl Controller {
    /// Attaches the UI to `agent` (new or resumed): the log so far is folded, live events follow.
    pub fn new(
        factory: Arc<dyn SessionFactory>,
        registry: Arc<ToolRegistry>,
        model: String,
        cwd: PathBuf,
        agent: AgentHandle,
    ) -> Self {
        let (approval, approvals) = TuiApproval::channel();
        let (output_tx, output_rx) = LiveOutput::channel();
        let session = attach(&registry, &approval, &output_tx, agent);
        let mut state = UiState::new(model, cwd.to_string_lossy(), session.agent.id());
        state.transcript = replay(&session);
        if !state.transcript.entries.is_empty() {
            state
                .transcript
                .notice(NoticeLevel::Info, "session resumed from its log");
        }
        state.now_ms = now_ms();
        Self {
            output_tx,
            output_rx,
            state,
            factory,
            registry,
            cwd,
            session,
            approval,
            approvals,
            files: None,
            last_ctrl_c: None,
            quit: false,
            page: 20,
        }
    }

    pub fn agent(&self) -> &AgentHandle {
        &self.session.agent
    }

    pub fn approval(&self) -> &TuiApproval {
        &self.approval
    }

    /// Where live tool output `(call_id, chunk)` for running cards goes. The same sink is
    /// provided on the attached agent's scope, so its tools stream here on their own.
    pub fn output_sink(&self) -> LiveOutput {
        self.output_tx.clone()
    }

    pub fn should_quit(&self) -> bool {
        self.quit
    }

    pub fn request_quit(&mut self) {
        self.quit = true;
    }

    /// Waits until an agent event or an approval prompt arrives (for the event loop).
    pub async fn changed(&mut self) {
        tokio::select! {
            event = self.session.events.recv(), if !self.session.closed => self.on_event(event),
            pending = self.approvals.recv() => {
                if let Some(pending) = pending {
                    self.state.approvals.push_back(pending);
                }
            }
            output = self.output_rx.recv() => {
                if let Some((call_id, chunk)) = output {
                    self.state.transcript.append_output(&call_id, &chunk);
                }
            }
        }
        self.pump();
    }

    /// Applies every agent event and prompt already queued, and refreshes clocks and flags.
    pub fn pump(&mut self) {
        loop {
            match self.session.events.try_recv() {
                Ok(event) => self.on_event(Ok(event)),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Closed) => {
                    self.session.closed = true;
                    break;
                }
                Err(TryRecvError::Lagged(n)) => {
                    self.on_event(Err(broadcast::error::RecvError::Lagged(n)))
                }
            }
        }
        while let Ok(pending) = self.approvals.try_recv() {
            self.state.approvals.push_back(pending);
        }
        while let Ok((call_id, chunk)) = self.output_rx.try_recv() {
            self.state.transcript.append_output(&call_id, &chunk);
        }
        self.tick();
    }

    /// Time-driven updates: running durations, stale prompts, the quit hint.
    pub fn tick(&mut self) {
        self.state.now_ms = now_ms();
        self.state.busy = self.session.agent.status() == AgentStatus::Running;
        self.state.queued = self
            .session
            .agent
            .pending()
            .0
            .iter()
            .map(|message| dsh_protocol::text_of(&message.content))
            .collect();
        self.state
            .approvals
            .retain(|pending| !pending.signal.is_cancelled());
        if self
            .last_ctrl_c
            .is_some_and(|at| at.elapsed() > QUIT_WINDOW)
        {
            self.last_ctrl_c = None;
            self.state.hint = None;
        }
    }

    /// Refreshes the job list from the factory (cheap, but not every frame).
    pub fn refresh_jobs(&mut self) {
        self.state.jobs = self.factory.jobs(&self.session.agent);
    }

    fn on_event(&mut self, event: Result<Arc<Event>, broadcast::error::RecvError>) {
        match event {
            Ok(event) => self
                .state
                .transcript
                .apply(&event, &self.session.presenters),
            Err(broadcast::error::RecvError::Lagged(_)) => {
                // Missed events: the log is the truth, fold it again.
                self.state.transcript = replay(&self.session);
            }
            Err(broadcast::error::RecvError::Closed) => self.session.closed = true,
        }
    }

    pub fn handle(&mut self, event: TermEvent) {
        match event {
            TermEvent::Key(key) if key.kind != KeyEventKind::Release => self.on_key(key),
            TermEvent::Paste(text)
                if self.state.approvals.is_empty() && self.state.overlay.is_none() =>
            {
                self.state.editor.paste(&text);
            }
            _ => {}
        }
    }

    pub fn on_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            self.ctrl_c();
            return;
        }
        if self.state.overlay.is_some() {
            if matches!(key.code, KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q')) {
                self.state.overlay = None;
            }
            return;
        }
        match key.code {
            KeyCode::PageUp => {
                self.state.scroll += self.page.max(2) / 2;
                return;
            }
            KeyCode::PageDown => {
                self.state.scroll = self.state.scroll.saturating_sub(self.page.max(2) / 2);
                return;
            }
            KeyCode::Char('o') if ctrl => {
                self.state.expand_tools = !self.state.expand_tools;
                return;
            }
            KeyCode::Char('t') if ctrl => {
                self.state.show_reasoning = !self.state.show_reasoning;
                return;
            }
            _ => {}
        }
        if !self.state.approvals.is_empty() {
            self.approval_key(key);
            return;
        }
        if self.state.completion.is_some() && self.completion_key(key) {
            return;
        }
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        let editor = &mut self.state.editor;
        match key.code {
            KeyCode::Esc
                if self.state.busy || self.session.agent.status() == AgentStatus::Running =>
            {
                self.session.agent.cancel(CancelCause::User, false);
            }
            KeyCode::Esc => {}
            KeyCode::Enter if alt || shift => editor.newline(),
            KeyCode::Char('j') if ctrl => editor.newline(),
            KeyCode::Enter => self.submit(),
            KeyCode::Char('a') if ctrl => editor.home(),
            KeyCode::Char('e') if ctrl => editor.end(),
            KeyCode::Char('u') if ctrl => editor.clear(),
            KeyCode::Char('w') if ctrl => editor.delete_word(),
            KeyCode::Char(c) if !ctrl => editor.insert_char(c),
            KeyCode::Backspace => editor.backspace(),
            KeyCode::Delete => editor.delete(),
            KeyCode::Left => editor.left(),
            KeyCode::Right => editor.right(),
            KeyCode::Home => editor.home(),
            KeyCode::End => editor.end(),
            KeyCode::Up => editor.up(),
            KeyCode::Down => editor.down(),
            KeyCode::Tab => {
                self.update_completion(true);
                return;
            }
            _ => {}
        }
        self.update_completion(false);
    }

    fn ctrl_c(&mut self) {
        if self
            .last_ctrl_c
            .is_some_and(|at| at.elapsed() <= QUIT_WINDOW)
        {
            self.quit = true;
            return;
        }
        self.last_ctrl_c = Some(Instant::now());
        self.state.hint = Some("press ctrl-c again to quit".to_owned());
        if !self.state.editor.is_empty() {
            self.state.editor.clear();
            self.state.completion = None;
        } else if self.session.agent.status() == AgentStatus::Running {
            self.session.agent.cancel(CancelCause::User, false);
        }
    }

    fn approval_key(&mut self, key: KeyEvent) {
        let Some(front) = self.state.approvals.front_mut() else {
            return;
        };
        let answer = match key.code {
            KeyCode::Char('y') | KeyCode::Char('1') => Some(Answer::Once),
            KeyCode::Char('a') | KeyCode::Char('2') => Some(Answer::Session),
            KeyCode::Char('n') | KeyCode::Char('3') => Some(Answer::Reject),
            KeyCode::Enter => Answer::ALL.get(front.selected).copied(),
            KeyCode::Left | KeyCode::Up | KeyCode::BackTab => {
                front.selected = (front.selected + Answer::ALL.len() - 1) % Answer::ALL.len();
                None
            }
            KeyCode::Right | KeyCode::Down | KeyCode::Tab => {
                front.selected = (front.selected + 1) % Answer::ALL.len();
                None
            }
            KeyCode::Esc => {
                self.session.agent.cancel(CancelCause::User, false);
                None
            }
            _ => None,
        };
        if let Some(answer) = answer
            && let Some(pending) = self.state.approvals.pop_front()
        {
            pending.answer(answer);
        }
    }

    /// Keys the completion list consumes; `false` passes the key on to the editor.
    fn completion_key(&mut self, key: KeyEvent) -> bool {
        let Some(completion) = &mut self.state.completion else {
            return false;
        };
        match key.code {
            KeyCode::Up => {
                completion.selected = completion.selected.saturating_sub(1);
                true
            }
            KeyCode::Down => {
                completion.selected =
                    (completion.selected + 1).min(completion.items.len().saturating_sub(1));
                true
            }
            KeyCode::Tab | KeyCode::Enter => {
                if let Some(item) = completion.items.get(completion.selected).cloned() {
                    self.state.editor.complete_at(&item);
                }
                self.state.completion = None;
                true
            }
            KeyCode::Esc => {
                self.state.completion = None;
                true
            }
            _ => false,
        }
    }

    fn update_completion(&mut self, explicit: bool) {
        let Some(prefix) = self.state.editor.at_token() else {
            self.state.completion = None;
            return;
        };
        let cwd = self.cwd.clone();
        let files = self
            .files
            .get_or_insert_with(|| input::workspace_files(&cwd, MAX_COMPLETION_FILES));
        let items = input::complete(files, &prefix, COMPLETION_ITEMS);
        if explicit && items.len() == 1 {
            self.state.editor.complete_at(&items[0]);
            self.state.completion = None;
            return;
        }
        self.state.completion = (!items.is_empty()).then_some(Completion { items, selected: 0 });
    }

    fn submit(&mut self) {
        let text = self.state.editor.submit();
        self.state.completion = None;
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return;
        }
        self.state.scroll = 0;
        if let Some(command) = trimmed.strip_prefix('/') {
            self.command(command);
            return;
        }
        if let Err(error) = self.session.agent.followup(Message::user_text(text)) {
            self.state
                .transcript
                .notice(NoticeLevel::Error, format!("could not send: {error}"));
        }
    }

    fn info(&mut self, text: impl Into<String>) {
        self.state.transcript.notice(NoticeLevel::Info, text);
    }

    fn error(&mut self, text: impl Into<String>) {
        self.state.transcript.notice(NoticeLevel::Error, text);
    }

    /// Replaces the attached agent; the old one is disposed in the background.
    fn switch(&mut self, agent: AgentHandle) {
        for pending in self.state.approvals.drain(..) {
            pending.answer(Answer::Reject);
        }
        self.approval.reset();
        let session = attach(&self.registry, &self.approval, &self.output_tx, agent);
        let old = std::mem::replace(&mut self.session, session);
        tokio::spawn(async move { old.agent.dispose().await });
        self.state.transcript = replay(&self.session);
        if !self.state.transcript.entries.is_empty() {
            self.info("session resumed from its log");
        }
        self.state.session_id = self.session.agent.id().to_owned();
        self.state.scroll = 0;
        self.state.overlay = None;
    }

    /// Cancels the running turn, then disposes the agent so its log is complete on exit.
    pub async fn shutdown(&self) {
        let agent = self.session.agent.clone();
        let _ = tokio::time::timeout(Duration::from_secs(3), agent.dispose()).await;
        if let Err(error) = agent.log().flush() {
            tracing::warn!(%error, "could not flush the session log");
        }
    }
}

#[path = "commands.rs"]
mod commands;

fn attach(
    registry: &Arc<ToolRegistry>,
    approval: &TuiApproval,
    output: &LiveOutput,
    agent: AgentHandle,
) -> Session {
    let events = agent.subscribe();
    let provided =
        agent
            .scope()
            .provide::<dyn ApprovalService>(Arc::new(dsh_approval::UserApproval::new(
                Some(Arc::new(approval.clone())),
                agent.scope().service::<dyn dsh_approval::PolicySource>(),
            )));
    let provided = match provided {
        Ok(disposer) => Some(disposer),
        Err(error) => {
            tracing::warn!(%error, "could not install the approval prompt");
            None
        }
    };
    let live = match agent
        .scope()
        .provide::<dyn ToolOutputSink>(Arc::new(output.clone()))
    {
        Ok(disposer) => Some(disposer),
        Err(error) => {
            tracing::warn!(%error, "could not install the live output view");
            None
        }
    };
    Session {
        presenters: Presenters::new(registry.clone(), agent.scope().clone()),
        agent,
        events,
        closed: false,
        mode: None,
        _approval: provided,
        _output: live,
    }
}

/// The log so far, folded (the subscription opened before it fills in what follows; the fold
/// skips the overlap by seq).
fn replay(session: &Session) -> Transcript {
    Transcript::from_events(session.agent.log().events().iter(), &session.presenters)
}
