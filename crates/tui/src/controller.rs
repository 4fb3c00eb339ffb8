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
use dsh_host::ReloadReport;
use dsh_host::SessionHost;
use dsh_kernel::Disposer;
use dsh_protocol::Message;
use dsh_session::Event;
use dsh_tools::ApprovalService;
use dsh_tools::ToolOutputSink;
use dsh_tools::ToolRegistry;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::TryRecvError;
use tokio::sync::mpsc;

use crate::app::HostNotice;
use crate::approval::Answer;
use crate::approval::PendingApproval;
use crate::approval::TuiApproval;
use crate::live::LiveOutput;
use crate::model::NoticeLevel;
use crate::model::Presenters;
use crate::model::Transcript;
use crate::questions::PendingQuestions;
use crate::questions::Step;
use crate::questions::TuiQuestions;
use crate::state::Completion;
use crate::state::UiState;

const QUIT_WINDOW: Duration = Duration::from_secs(2);
const QUESTION_FIRST: &str = "answer the question first: ↑↓ choose · enter answers · esc dismisses";
const APPROVAL_FIRST: &str =
    "answer the approval first: y allow once · n reject · esc cancels the turn";
/// The same note when the prompt offers "allow for this session" too.
const APPROVAL_FIRST_SESSION: &str = "answer the approval first: y allow once · a allow for this session · n reject · esc cancels the turn";
const COMPLETION_ITEMS: usize = 20;

/// The UI's own commands: name, argument hint, description.
pub(crate) const BUILTINS: &[(&str, &str, &str)] = &[
    ("help", "", "this help"),
    ("new", "", "new session in this folder"),
    ("resume", "[ID]", "reopen a stored session"),
    ("model", "[NAME]", "switch this session's model"),
    ("mode", "native|code|both", "how tools are offered"),
    ("approval", "[ask|auto]", "prompt, or allow all"),
    ("jobs", "", "background jobs"),
    ("quit", "", "leave (or ctrl-c twice)"),
];

pub(crate) const KEYS: &[&str] = &[
    "Keys",
    "  enter send · alt-enter/ctrl-j newline",
    "  ↑↓ history · pgup/pgdn scroll",
    "  esc cancel the running turn",
    "  ctrl-o tool output, child agents · ctrl-t reasoning",
    "  / commands (tab completes) · @path files",
    "  approvals: y once · a session · n reject",
];

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Whether a mention is exactly what is typed (a quoted file mention closes its quote).
fn mention_is(mention: &str, token: &str) -> bool {
    mention == token || mention.strip_suffix('"') == Some(token)
}

/// The `@path` / `@"path"` mentions of a prompt, in order.
pub(crate) fn mentioned_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    let mut at_start = true;
    while let Some(at) = rest.find('@') {
        let before_ok = if at == 0 {
            at_start
        } else {
            rest[..at].chars().last().is_some_and(char::is_whitespace)
        };
        let after = &rest[at + 1..];
        at_start = false;
        if !before_ok {
            rest = after;
            continue;
        }
        let (path, next) = match after.strip_prefix('"') {
            Some(quoted) => match quoted.find('"') {
                Some(end) => (&quoted[..end], &quoted[end + 1..]),
                None => (quoted, ""),
            },
            None => {
                let end = after.find(char::is_whitespace).unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        if !path.is_empty() {
            out.push(path.to_owned());
        }
        rest = next;
    }
    out
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
    /// This UI as the user-questions provider (freed before the next session registers).
    questions: Option<Disposer>,
}

/// Drives one UI: owns the state, the current agent and the approval channel.
pub struct Controller {
    pub state: UiState,
    sessions: SessionHost,
    registry: Arc<ToolRegistry>,
    cwd: PathBuf,
    session: Session,
    approval: TuiApproval,
    approvals: mpsc::UnboundedReceiver<PendingApproval>,
    ask: TuiQuestions,
    asked: mpsc::UnboundedReceiver<PendingQuestions>,
    /// `@path` candidates (the composed service if the host provides one).
    references: Arc<dsh_references::FileReferences>,
    output_tx: LiveOutput,
    output_rx: mpsc::Receiver<(String, String)>,
    last_ctrl_c: Option<Instant>,
    quit: bool,
    /// Body height of the last frame (for page scrolling).
    pub page: usize,
    /// Something changed since the last frame.
    dirty: bool,
    /// The context-fill projection (a composed meter if the host provides one).
    meter: Arc<dsh_token_meter::TokenMeter>,
    /// Finished registry commands: the line and how it ended.
    command_tx: mpsc::UnboundedSender<(String, CommandOutcome)>,
    command_rx: mpsc::UnboundedReceiver<(String, CommandOutcome)>,
    /// Models `/model` offers.
    models: Vec<String>,
    /// The host's reports (reload outcomes), shown as notices.
    notices: Option<broadcast::Receiver<ReloadReport>>,
}

/// The next host notice; pending forever when there is no stream (or it ended).
/// Reload outcomes become notices: a refused or partly applied configuration is an error (with
/// its file:line), an applied one is information; "nothing changed" is not shown.
async fn next_notice(notices: &mut Option<broadcast::Receiver<ReloadReport>>) -> HostNotice {
    loop {
        let Some(rx) = notices.as_mut() else {
            return std::future::pending().await;
        };
        match rx.recv().await {
            Ok(report) => {
                let level = match report {
                    ReloadReport::Unchanged => continue,
                    ReloadReport::Applied { .. } => NoticeLevel::Info,
                    ReloadReport::Rejected { .. } | ReloadReport::Partial { .. } => {
                        NoticeLevel::Error
                    }
                };
                return HostNotice {
                    level,
                    text: report.to_string(),
                };
            }
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                return HostNotice {
                    level: NoticeLevel::Warning,
                    text: format!("{missed} host notices were missed"),
                };
            }
            Err(broadcast::error::RecvError::Closed) => *notices = None,
        }
    }
}

type CommandOutcome = Result<Option<dsh_commands::Executed>, dsh_commands::CommandError>;

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller").finish_non_exhaustive()
    }
}

impl Controller {
    /// Attaches the UI to `agent` (new or resumed): the log so far is folded, live events follow.
    pub fn new(sessions: SessionHost, model: String, cwd: PathBuf, agent: AgentHandle) -> Self {
        let registry = sessions.registry();
        let (approval, approvals) = TuiApproval::channel();
        let (ask, asked) = TuiQuestions::channel();
        let (output_tx, output_rx) = LiveOutput::channel();
        let session = attach(&registry, &approval, &ask, &output_tx, agent);
        let mut state = UiState::new(model, cwd.to_string_lossy(), session.agent.id());
        state.transcript = replay(&session);
        if !state.transcript.entries.is_empty() {
            state
                .transcript
                .notice(NoticeLevel::Info, "session resumed from its log");
        }
        state.now_ms = now_ms();
        let meter = session
            .agent
            .scope()
            .service::<dsh_token_meter::TokenMeter>()
            .unwrap_or_default();
        let (command_tx, command_rx) = mpsc::unbounded_channel();
        let references = session
            .agent
            .scope()
            .service::<dsh_references::FileReferences>()
            .unwrap_or_default();
        let models = sessions.models();
        let notices = Some(sessions.reports());
        let mut controller = Self {
            notices,
            dirty: true,
            meter,
            command_tx,
            command_rx,
            models,
            output_tx,
            output_rx,
            state,
            sessions,
            registry,
            cwd,
            session,
            approval,
            approvals,
            ask,
            asked,
            references,
            last_ctrl_c: None,
            quit: false,
            page: 20,
        };
        controller.update_context();
        controller
    }

    /// Whether the screen must be drawn again; clears the flag. Idle frames are never redrawn.
    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// Marks the screen stale (a resize, a test).
    pub fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    /// Something on screen moves with the clock: the spinner, a running card's duration.
    fn animating(&self) -> bool {
        self.state.busy || self.state.transcript.running_calls().next().is_some()
    }

    /// The context fill from the token meter: the newest prompt size (plus what was added since)
    /// over the context window of the route's model.
    fn update_context(&mut self) {
        let pressure = self.meter.pressure(self.session.agent.log());
        let window = pressure.context_window.or_else(|| {
            let agent = &self.session.agent;
            agent
                .adapter()
                .model_info(&self.state.model)
                .map(|info| info.context_window)
        });
        self.state.context = match (pressure.projected_tokens, window) {
            (Some(used), Some(window)) if window > 0 => Some(crate::state::ContextFill {
                used_tokens: used,
                window_tokens: window,
            }),
            _ => None,
        };
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

    /// Waits until an agent event, an approval prompt, live output, a command result or a host
    /// notice arrives (for the event loop).
    pub async fn changed(&mut self) {
        tokio::select! {
            event = self.session.events.recv(), if !self.session.closed => self.on_event(event),
            pending = self.approvals.recv() => {
                if let Some(pending) = pending {
                    self.state.approvals.push_back(pending);
                }
            }
            asked = self.asked.recv() => {
                if let Some(asked) = asked {
                    self.state.questions.push_back(asked);
                }
            }
            output = self.output_rx.recv() => {
                if let Some((call_id, chunk)) = output {
                    self.state.transcript.append_output(&call_id, &chunk);
                }
            }
            done = self.command_rx.recv() => {
                if let Some((line, outcome)) = done {
                    self.command_done(&line, outcome);
                }
            }
            notice = next_notice(&mut self.notices) => {
                self.state.transcript.notice(notice.level, notice.text);
            }
        }
        self.dirty = true;
        self.pump();
    }

    /// Applies every agent event and prompt already queued, and refreshes clocks and flags.
    pub fn pump(&mut self) {
        let mut events = false;
        loop {
            match self.session.events.try_recv() {
                Ok(event) => {
                    events = true;
                    self.on_event(Ok(event));
                }
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
            self.dirty = true;
            self.state.approvals.push_back(pending);
        }
        while let Ok(asked) = self.asked.try_recv() {
            self.dirty = true;
            self.state.questions.push_back(asked);
        }
        // A question whose call was cancelled is stale: its asker already gave up.
        let before = self.state.questions.len();
        self.state.questions.retain(|q| !q.signal.is_cancelled());
        if self.state.questions.len() != before {
            self.dirty = true;
        }
        while let Ok((call_id, chunk)) = self.output_rx.try_recv() {
            self.dirty = true;
            self.state.transcript.append_output(&call_id, &chunk);
        }
        while let Ok((line, outcome)) = self.command_rx.try_recv() {
            self.command_done(&line, outcome);
        }
        if events {
            self.dirty = true;
            self.update_context();
        }
        self.tick();
    }

    /// Time-driven updates: running durations, stale prompts, the quit hint.
    pub fn tick(&mut self) {
        self.state.now_ms = now_ms();
        let busy = self.session.agent.status() == AgentStatus::Running;
        if busy != self.state.busy {
            self.dirty = true;
            self.state.busy_since_ms = busy.then_some(self.state.now_ms);
        }
        self.state.busy = busy;
        if self.animating() {
            self.dirty = true;
        }
        let queued: Vec<String> = self
            .session
            .agent
            .pending()
            .0
            .iter()
            .map(|message| dsh_protocol::text_of(&message.content))
            .collect();
        if queued != self.state.queued {
            self.dirty = true;
            self.state.queued = queued;
        }
        let before = self.state.approvals.len();
        self.state
            .approvals
            .retain(|pending| !pending.signal.is_cancelled());
        if self.state.approvals.len() != before {
            self.dirty = true;
            self.clear_approval_hint();
        }
        if self
            .last_ctrl_c
            .is_some_and(|at| at.elapsed() > QUIT_WINDOW)
        {
            self.last_ctrl_c = None;
            self.state.hint = None;
            self.dirty = true;
        }
    }

    /// Refreshes the job list from the factory (cheap, but not every frame).
    pub fn refresh_jobs(&mut self) {
        let jobs = self.sessions.job_lines(&self.session.agent);
        if jobs != self.state.jobs {
            self.dirty = true;
            self.state.jobs = jobs;
        }
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
            TermEvent::Paste(text) => {
                self.dirty = true;
                if !self.state.approvals.is_empty() {
                    self.state.hint = Some(self.approval_first().to_owned());
                    return;
                }
                // A paste closes what covers the input; it is never dropped.
                self.state.overlay = None;
                self.state.picker = None;
                self.state.choices = None;
                self.state.editor.paste(&text);
                self.after_edit(false);
            }
            TermEvent::Resize(..) => self.dirty = true,
            _ => {}
        }
    }

    pub fn on_key(&mut self, key: KeyEvent) {
        self.dirty = true;
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            self.ctrl_c();
            return;
        }
        if self.state.picker.is_some() {
            self.picker_key(key);
            return;
        }
        if self.state.choices.is_some() {
            self.choice_key(key);
            return;
        }
        if self.state.overlay.is_some() {
            match key.code {
                KeyCode::Esc | KeyCode::Enter => {
                    self.state.overlay = None;
                    return;
                }
                // Anything else closes the panel and goes on to the input: typing is never
                // swallowed.
                _ => self.state.overlay = None,
            }
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
        if !self.state.questions.is_empty() && self.question_key(key) {
            return;
        }
        if self.state.palette.is_some() && self.palette_key(key) {
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
                self.after_edit(true);
                return;
            }
            _ => {}
        }
        self.after_edit(false);
    }

    /// After the input changed: refresh the `@path` completion and the command palette.
    fn after_edit(&mut self, explicit: bool) {
        self.update_completion(explicit);
        self.update_palette();
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
            KeyCode::Char('a') | KeyCode::Char('2')
                if front.answers().contains(&Answer::Session) =>
            {
                Some(Answer::Session)
            }
            KeyCode::Char('n') | KeyCode::Char('3') => Some(Answer::Reject),
            KeyCode::Enter => front.answers().get(front.selected).copied(),
            KeyCode::Left | KeyCode::Up | KeyCode::BackTab => {
                let n = front.answers().len();
                front.selected = (front.selected + n - 1) % n;
                None
            }
            KeyCode::Right | KeyCode::Down | KeyCode::Tab => {
                front.selected = (front.selected + 1) % front.answers().len();
                None
            }
            KeyCode::Esc => {
                self.session.agent.cancel(CancelCause::User, false);
                None
            }
            _ => {
                // Not an answer: say so instead of dropping the key.
                let offers_session = front.answers().contains(&Answer::Session);
                self.state.hint = Some(
                    if offers_session {
                        APPROVAL_FIRST_SESSION
                    } else {
                        APPROVAL_FIRST
                    }
                    .to_owned(),
                );
                None
            }
        };
        if let Some(answer) = answer
            && let Some(pending) = self.state.approvals.pop_front()
        {
            pending.answer(answer);
            self.clear_approval_hint();
        }
    }

    /// The "answer the approval first" note for the front prompt.
    fn approval_first(&self) -> &'static str {
        match self.state.approvals.front() {
            Some(front) if front.answers().contains(&Answer::Session) => APPROVAL_FIRST_SESSION,
            _ => APPROVAL_FIRST,
        }
    }

    /// The note is about a prompt: once none is waiting it would be stale on every later turn.
    fn clear_approval_hint(&mut self) {
        if self.state.approvals.is_empty()
            && self
                .state
                .hint
                .as_deref()
                .is_some_and(|hint| hint.starts_with("answer the approval first"))
        {
            self.state.hint = None;
            self.dirty = true;
        }
    }

    /// Keys the front question consumes; `false` passes the key on to the editor (typing a
    /// free-text answer).
    fn question_key(&mut self, key: KeyEvent) -> bool {
        let Some(front) = self.state.questions.front_mut() else {
            return false;
        };
        let free_text = front.on_free_text();
        let step = match key.code {
            KeyCode::Up | KeyCode::BackTab => {
                front.move_by(-1);
                Step::Pending
            }
            KeyCode::Down | KeyCode::Tab => {
                front.move_by(1);
                Step::Pending
            }
            KeyCode::Esc => {
                if let Some(front) = self.state.questions.pop_front() {
                    front.dismiss();
                }
                return true;
            }
            KeyCode::Enter if !key.modifiers.contains(KeyModifiers::SHIFT) => {
                let typed = self.state.editor.text();
                match front.confirm(&typed) {
                    Some(step) => {
                        if free_text {
                            self.state.editor.clear();
                        }
                        step
                    }
                    None => {
                        self.state.hint = Some(QUESTION_FIRST.to_owned());
                        Step::Pending
                    }
                }
            }
            _ if free_text => return false,
            KeyCode::Char(' ') => front.toggle(),
            KeyCode::Char(c @ '1'..='9') => front.pick(c as usize - '0' as usize),
            _ => Step::Ignored,
        };
        match step {
            Step::Answered => {
                self.state.questions.pop_front();
            }
            Step::Ignored => self.state.hint = Some(QUESTION_FIRST.to_owned()),
            Step::Pending => {}
        }
        true
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
                let token = completion.token.clone();
                let Some(item) = completion.items.get(completion.selected).cloned() else {
                    self.state.completion = None;
                    return false;
                };
                self.state.completion = None;
                if key.code == KeyCode::Enter && mention_is(&item, &token) {
                    // The token is already complete: Enter sends.
                    return false;
                }
                self.apply_mention(&token, &item);
                true
            }
            KeyCode::Esc => {
                self.state.completion = None;
                true
            }
            _ => false,
        }
    }

    /// `@path` candidates for the token before the cursor (context-spec §3: the session cwd is
    /// the root, listing or fuzzy ranking, symlinks never followed). Tab with one candidate
    /// takes it.
    fn update_completion(&mut self, explicit: bool) {
        let editor = &self.state.editor;
        let Some(token) = dsh_references::active_at_token(editor.current_line(), editor.cursor().1)
        else {
            self.state.completion = None;
            return;
        };
        let candidates = self
            .references
            .list(self.session.agent.log(), &self.cwd, &token.query);
        let items: Vec<String> = candidates
            .iter()
            .filter_map(|candidate| dsh_references::format_file_mention(candidate, token.quoted))
            .take(COMPLETION_ITEMS)
            .collect();
        if explicit && items.len() == 1 {
            self.apply_mention(&token.prefix, &items[0]);
            return;
        }
        self.state.completion = (!items.is_empty()).then_some(Completion {
            items,
            selected: 0,
            token: token.prefix,
        });
    }

    /// Puts a chosen mention in place of the token. A file mention ends with a space (it is
    /// complete); a folder keeps completing inside it.
    fn apply_mention(&mut self, token: &str, mention: &str) {
        let folder = mention.ends_with('/');
        let text = if folder {
            mention.to_owned()
        } else {
            format!("{mention} ")
        };
        self.state
            .editor
            .replace_before_cursor(token.chars().count(), &text);
        self.state.completion = None;
        if folder {
            self.update_completion(false);
        }
    }

    /// Sends `text` as a prompt (as if typed and entered).
    pub fn send(&mut self, text: &str) {
        self.state.editor.set_text(text);
        self.submit();
    }

    /// The id a person uses to come back to the attached session (`dsh resume <id>`), once
    /// it exists on disk.
    pub fn resumable_id(&self) -> Option<String> {
        let log = self.session.agent.log();
        (!log.is_empty() && log.path().is_some_and(|p| p.exists()))
            .then(|| self.session.agent.id().to_owned())
    }

    pub(crate) fn submit(&mut self) {
        self.dirty = true;
        let text = self.state.editor.submit();
        self.state.completion = None;
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return;
        }
        self.state.scroll = 0;
        if let Some(command) = trimmed.strip_prefix('/') {
            let name = command.split_whitespace().next().unwrap_or_default();
            if !BUILTINS.iter().any(|(n, ..)| *n == name)
                && !["?", "clear", "approvals", "exit", "q"].contains(&name)
                && (self.open_choices(trimmed) || self.run_registry_command(trimmed))
            {
                return;
            }
            self.command(command);
            return;
        }
        let images = self.mentioned_images(trimmed);
        let mut content = vec![dsh_protocol::ContentBlock::text(text)];
        content.extend(images);
        let message = Message::user(content, dsh_protocol::MessageSource::user());
        if let Err(error) = self.session.agent.followup(message) {
            self.state
                .transcript
                .notice(NoticeLevel::Error, format!("could not send: {error}"));
        }
    }

    /// Runs a command of the shared registry in the background; `false` when the line names
    /// none (then it is the UI's own or unknown).
    fn run_registry_command(&mut self, line: &str) -> bool {
        let Some(registry) = dsh_commands::CommandRegistry::of(self.session.agent.scope()) else {
            return false;
        };
        let Some(parsed) = dsh_commands::parse_command(line) else {
            return false;
        };
        if registry
            .find(self.session.agent.scope(), parsed.name)
            .is_none()
        {
            return false;
        }
        let agent = self.session.agent.clone();
        let tx = self.command_tx.clone();
        let line = line.to_owned();
        self.state.hint = Some(format!("running /{}…", parsed.name));
        tokio::spawn(async move {
            let outcome = registry
                .execute(
                    &agent,
                    &line,
                    Vec::new(),
                    tokio_util::sync::CancellationToken::new(),
                )
                .await;
            let _ = tx.send((line, outcome));
        });
        true
    }

    /// A shared command named alone whose argument has choices opens their picker (`/rewind`:
    /// the session's prompts); `false` when it has none to offer.
    fn open_choices(&mut self, line: &str) -> bool {
        let Some(parsed) = dsh_commands::parse_command(line) else {
            return false;
        };
        if !parsed.argument().is_empty() {
            return false;
        }
        let Some(registry) = dsh_commands::CommandRegistry::of(self.session.agent.scope()) else {
            return false;
        };
        match registry.choices(&self.session.agent, parsed.name, "") {
            Some(items) if !items.is_empty() => {
                self.state.choices = Some(crate::state::ChoicePicker {
                    command: parsed.name.to_owned(),
                    items,
                    selected: 0,
                });
                true
            }
            _ => false,
        }
    }

    fn choice_key(&mut self, key: KeyEvent) {
        let Some(picker) = &mut self.state.choices else {
            return;
        };
        let count = picker.items.len();
        match key.code {
            KeyCode::Esc => self.state.choices = None,
            KeyCode::Up => picker.selected = picker.selected.saturating_sub(1),
            KeyCode::Down => picker.selected = (picker.selected + 1).min(count.saturating_sub(1)),
            KeyCode::Enter => {
                let command = picker.command.clone();
                let chosen = picker.items.get(picker.selected).map(|c| c.value.clone());
                self.state.choices = None;
                let Some(value) = chosen else { return };
                let next = dsh_commands::CommandRegistry::of(self.session.agent.scope())
                    .and_then(|r| r.choices(&self.session.agent, &command, &value))
                    .unwrap_or_default();
                if next.is_empty() {
                    self.run_registry_command(&format!("/{command} {value}"));
                } else {
                    self.state.choices = Some(crate::state::ChoicePicker {
                        command,
                        items: next,
                        selected: 0,
                    });
                }
            }
            _ => {}
        }
    }

    fn command_done(&mut self, line: &str, outcome: CommandOutcome) {
        self.dirty = true;
        self.state.hint = None;
        match outcome {
            Ok(Some(executed)) => match executed.result {
                dsh_commands::CommandResult::Success { text, .. } => {
                    let text = text
                        .filter(|t| !t.is_empty())
                        .unwrap_or_else(|| format!("{line}: done"));
                    self.info(text);
                }
                // The command made a session to continue in (`/rewind N conversation`):
                // the view moves there, and says why.
                dsh_commands::CommandResult::Switch { text, session } => {
                    match self.sessions.load(&session) {
                        Ok(agent) => {
                            self.switch(agent);
                            self.info(text.unwrap_or_else(|| format!("continuing in {session}")));
                        }
                        Err(error) => {
                            if let Some(text) = text {
                                self.info(text);
                            }
                            self.error(format!(
                                "cannot open {session}: {error:#} (resume it with /resume {session})"
                            ));
                        }
                    }
                }
                dsh_commands::CommandResult::Error { text } => self.error(text),
            },
            Ok(None) => self.error(format!("unknown command: {line}")),
            Err(error) => self.error(format!("command failed: {error}")),
        }
    }

    /// Images the prompt mentions by path, attached when the session's model takes images (the
    /// path stays in the text either way).
    fn mentioned_images(&mut self, text: &str) -> Vec<dsh_protocol::ContentBlock> {
        let mut blocks = Vec::new();
        for mention in mentioned_paths(text) {
            let path = self.cwd.join(&mention);
            let is_image = path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
                ["png", "jpg", "jpeg", "webp", "gif"].contains(&e.to_lowercase().as_str())
            });
            if !is_image || !path.is_file() {
                continue;
            }
            match self
                .sessions
                .image_block(&self.session.agent, &self.state.model, &path)
            {
                Ok(Some(block)) => blocks.push(block),
                Ok(None) => {}
                Err(error) => self.error(format!("cannot attach {mention}: {error:#}")),
            }
        }
        blocks
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
        for pending in self.state.questions.drain(..) {
            pending.dismiss();
        }
        self.approval.reset();
        // One provider at a time: the old session's goes before the new one registers.
        if let Some(questions) = self.session.questions.take() {
            questions.dispose();
        }
        let session = attach(
            &self.registry,
            &self.approval,
            &self.ask,
            &self.output_tx,
            agent,
        );
        let old = std::mem::replace(&mut self.session, session);
        tokio::spawn(async move { old.agent.dispose().await });
        self.state.transcript = replay(&self.session);
        if !self.state.transcript.entries.is_empty() {
            self.info("session resumed from its log");
        }
        self.state.session_id = self.session.agent.id().to_owned();
        self.state.model = self.sessions.current_model(&self.session.agent);
        self.state.scroll = 0;
        self.state.overlay = None;
        self.state.picker = None;
        self.state.choices = None;
        self.dirty = true;
        self.update_context();
    }

    /// Cancels the running turn, then disposes the agent so its log is complete on exit.
    pub async fn shutdown(&self) {
        let agent = self.session.agent.clone();
        let _ = tokio::time::timeout(Duration::from_secs(3), agent.dispose()).await;
        if let Err(error) = agent.log().sync().await {
            tracing::warn!(%error, "could not flush the session log");
        }
    }
}

#[path = "commands.rs"]
mod commands;

fn attach(
    registry: &Arc<ToolRegistry>,
    approval: &TuiApproval,
    ask: &TuiQuestions,
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
    let questions =
        dsh_user_questions::UserQuestions::for_scope(agent.scope()).and_then(|service| {
            service
                .register_provider(agent.scope(), Arc::new(ask.clone()))
                .inspect_err(|error| tracing::warn!(%error, "could not offer the question prompt"))
                .ok()
        });
    Session {
        presenters: Presenters::new(
            registry.clone(),
            agent.scope().clone(),
            agent.scope().service::<dsh_transcript::EventPresenters>(),
        ),
        questions,
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
    let events = session.agent.log().events().unwrap_or_else(|error| {
        tracing::warn!(%error, "cannot read the session's history; the transcript starts now");
        Arc::from(Vec::new())
    });
    Transcript::from_events(events.iter(), &session.presenters)
}

#[cfg(test)]
mod mention_tests {
    use super::mentioned_paths;

    #[test]
    fn mentions_are_found_plain_and_quoted_but_not_inside_words() {
        assert_eq!(
            mentioned_paths("see @a.png and @\"my dir/b c.png\" but not me@x.com @"),
            ["a.png", "my dir/b c.png"]
        );
        assert_eq!(mentioned_paths("@first then\n@second"), ["first", "second"]);
    }
}
