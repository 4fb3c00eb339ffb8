//! What the CLI calls: [`TuiApp`] + [`run`]. The event loop multiplexes terminal input, agent
//! events, approval prompts, a tick and SIGTERM, and redraws after each.
//!
//! The CLI wires it as (`dsh` → `Start::New`, `dsh resume [ID]` → `Start::Resume`):
//!
//! ```text
//! let host = Host::build(options)?;  host.start().await?;
//! dsh_tui::run(TuiApp { sessions: host.sessions(), cwd, start, prompt }).await
//! ```
//!
//! Sessions, models, jobs, image attachments and reload reports all come from
//! [`dsh_host::SessionHost`], the session API `dsh exec` and `dsh acp` use too.

use std::io;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use crossterm::event::EventStream;
use dsh_host::NewSession;
use dsh_host::SessionHost;
use futures::StreamExt;
use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui::backend::CrosstermBackend;

use crate::controller::Controller;
use crate::terminal::TerminalGuard;
use crate::view::render;

/// Printed instead of drawing when stdin or stdout is not a terminal.
pub const NOT_A_TERMINAL: &str = "dsh: the interactive UI needs a terminal (stdin and stdout must be a TTY).\n\
Run a task headless instead:  dsh exec \"your task\"   (add --output stream-json for JSON lines)";

/// `true` when both stdin and stdout are terminals.
pub fn is_interactive() -> bool {
    io::stdin().is_terminal() && io::stdout().is_terminal()
}

/// Something the host reports while the UI runs (a configuration reload, a refused edit):
/// shown as a notice in the transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostNotice {
    pub level: crate::model::NoticeLevel,
    pub text: String,
}

/// How the UI starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// `dsh`: a new session in `cwd`.
    New,
    /// `dsh resume [ID]`: the given session, or the newest one whose cwd is `cwd`.
    Resume(Option<String>),
}

/// Everything the CLI hands the UI.
pub struct TuiApp {
    /// The host's sessions (the tool registry, the configured model and everything else the
    /// UI asks for come from it).
    pub sessions: SessionHost,
    pub cwd: PathBuf,
    pub start: Start,
    /// `dsh "prompt"`: sent as soon as the UI is up.
    pub prompt: Option<String>,
}

impl std::fmt::Debug for TuiApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TuiApp")
            .field("cwd", &self.cwd)
            .field("start", &self.start)
            .finish_non_exhaustive()
    }
}

impl TuiApp {
    /// Creates or resumes the first agent and wraps it in a [`Controller`] (no terminal needed).
    pub fn controller(&self) -> anyhow::Result<Controller> {
        let agent = match &self.start {
            Start::New => self.sessions.create(NewSession {
                id: None,
                cwd: self.cwd.clone(),
            })?,
            Start::Resume(Some(id)) => self.sessions.load(id)?,
            Start::Resume(None) => {
                let cwd = self.cwd.to_string_lossy();
                let newest = self
                    .sessions
                    .list()?
                    .into_iter()
                    .find(|s| s.cwd.as_deref() == Some(&*cwd))
                    .with_context(|| {
                        format!("no stored session for {cwd}; start one with `dsh`")
                    })?;
                self.sessions.load(&newest.id)?
            }
        };
        // A resumed session keeps the model it was switched to (`model/selected`).
        let model = self.sessions.current_model(&agent);
        let mut controller = Controller::new(self.sessions.clone(), model, self.cwd.clone(), agent);
        if let Some(prompt) = self.prompt.as_deref().filter(|p| !p.trim().is_empty()) {
            controller.send(prompt);
        }
        Ok(controller)
    }
}

/// Runs the interactive UI until the person quits (or SIGTERM). Refuses without a terminal,
/// with [`NOT_A_TERMINAL`] as the error.
pub async fn run(app: TuiApp) -> anyhow::Result<()> {
    if !is_interactive() {
        anyhow::bail!(NOT_A_TERMINAL);
    }
    let mut controller = app.controller()?;
    let guard = TerminalGuard::enter().context("cannot set up the terminal")?;
    let mut terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    let result = event_loop(&mut terminal, &mut controller, EventStream::new()).await;
    controller.shutdown().await;
    drop(terminal);
    drop(guard);
    // Back on the normal screen: the conversation goes to the scrollback, then how to return.
    let width = crossterm::terminal::size().map_or(100, |(w, _)| w as usize);
    let mut stdout = io::stdout().lock();
    let _ = crate::scrollback::print(&mut stdout, &controller, width);
    result
}

/// Draws and dispatches until the controller wants to quit or the input ends.
pub async fn event_loop<B>(
    terminal: &mut Terminal<B>,
    controller: &mut Controller,
    mut input: impl futures::Stream<Item = io::Result<crossterm::event::Event>> + Unpin,
) -> anyhow::Result<()>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
{
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch SIGTERM")?;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut ticks: u64 = 0;
    controller.refresh_jobs();
    controller.mark_dirty();
    loop {
        controller.pump();
        // Only changes (and the spinner or a running card's clock) redraw: an idle tick
        // draws nothing.
        if controller.take_dirty() {
            terminal.draw(|frame| {
                controller.page = frame.area().height.saturating_sub(5) as usize;
                render(&controller.state, frame);
            })?;
        }
        if controller.should_quit() {
            return Ok(());
        }
        tokio::select! {
            event = input.next() => match event {
                Some(Ok(event)) => controller.handle(event),
                Some(Err(error)) => return Err(error.into()),
                None => return Ok(()),
            },
            () = controller.changed() => {}
            _ = tick.tick() => {
                ticks += 1;
                if ticks.is_multiple_of(10) {
                    controller.refresh_jobs();
                }
            }
            _ = sigterm.recv() => {
                controller.request_quit();
            }
        }
    }
}
