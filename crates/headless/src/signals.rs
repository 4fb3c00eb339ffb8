//! SIGINT, SIGTERM and SIGHUP in the front-ends without a terminal UI (`dsh exec`, `dsh acp`).
//! The first one kills every tool process dsh started (foreground calls and background jobs,
//! confined or not) and is handed to the caller, which cancels the turn, closes the logs and
//! exits with 128 + the signal number. A second one exits at once.

use std::process::ExitCode;

use tokio::signal::unix::SignalKind;
use tokio::signal::unix::signal;
use tokio::sync::watch;

/// Why the process is asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Interrupt,
    Terminate,
    Hangup,
}

impl Stop {
    fn number(self) -> u8 {
        match self {
            Self::Hangup => 1,
            Self::Interrupt => 2,
            Self::Terminate => 15,
        }
    }

    /// `128 + n`, as a shell reports a process ended by signal `n`.
    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(128 + self.number())
    }
}

/// The stop signals of this process, from the moment [`listen`] returns.
pub struct Stops {
    rx: watch::Receiver<Option<Stop>>,
}

impl Stops {
    /// Waits for the first stop signal.
    pub async fn first(&mut self) -> Stop {
        loop {
            if let Some(stop) = *self.rx.borrow_and_update() {
                return stop;
            }
            if self.rx.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }
}

/// Installs the handlers (inside a tokio runtime).
pub fn listen() -> std::io::Result<Stops> {
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        loop {
            let stop = tokio::select! {
                Some(()) = interrupt.recv() => Stop::Interrupt,
                Some(()) = terminate.recv() => Stop::Terminate,
                Some(()) = hangup.recv() => Stop::Hangup,
                else => return,
            };
            let killed = dsh_tool_shell::kill_all();
            tracing::info!(?stop, killed, "stop signal: tool processes killed");
            if tx.borrow().is_some() {
                std::process::exit(i32::from(128 + stop.number()));
            }
            let _ = tx.send(Some(stop));
        }
    });
    Ok(Stops { rx })
}
