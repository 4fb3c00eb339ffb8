//! SIGINT, SIGTERM and SIGHUP in the front-ends without a terminal UI (`dsh exec`, `dsh acp`).
//! The first one kills every tool process dsh started (foreground calls and background jobs,
//! confined or not) and is handed to the caller, which cancels the turn, closes the logs and
//! exits with 128 + the signal number. A second one exits at once, whatever the rest of the
//! process is doing.

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

/// Installs the handlers. They run on a thread of their own with its own small runtime, so a
/// second signal exits even when the main runtime is gone or every worker of it is stuck (a
/// tool's blocked file read, the runtime's shutdown, a long drop): the person at the terminal
/// can always stop dsh.
pub fn listen() -> std::io::Result<Stops> {
    let (tx, rx) = watch::channel(None);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<std::io::Result<()>>();
    std::thread::Builder::new()
        .name("dsh-signals".to_owned())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
            {
                Ok(runtime) => runtime,
                Err(err) => {
                    let _ = ready_tx.send(Err(err));
                    return;
                }
            };
            runtime.block_on(async move {
                let registered = (|| {
                    Ok::<_, std::io::Error>((
                        signal(SignalKind::interrupt())?,
                        signal(SignalKind::terminate())?,
                        signal(SignalKind::hangup())?,
                    ))
                })();
                let (mut interrupt, mut terminate, mut hangup) = match registered {
                    Ok(streams) => {
                        let _ = ready_tx.send(Ok(()));
                        streams
                    }
                    Err(err) => {
                        let _ = ready_tx.send(Err(err));
                        return;
                    }
                };
                loop {
                    let stop = tokio::select! {
                        Some(()) = interrupt.recv() => Stop::Interrupt,
                        Some(()) = terminate.recv() => Stop::Terminate,
                        Some(()) = hangup.recv() => Stop::Hangup,
                        else => return,
                    };
                    let killed = dsh_process::kill_all();
                    tracing::info!(?stop, killed, "stop signal: tool processes killed");
                    if tx.borrow().is_some() {
                        std::process::exit(i32::from(128 + stop.number()));
                    }
                    // Sent even when no one listens any more: the next signal still exits.
                    tx.send_replace(Some(stop));
                }
            });
        })?;
    ready_rx
        .recv()
        .map_err(|_| std::io::Error::other("the signal thread ended before it was ready"))??;
    Ok(Stops { rx })
}
