//! Work a plugin starts in `apply` that the host waits for before the first session is used
//! (MCP servers connecting). `apply` itself stays synchronous.

use std::sync::Arc;
use std::sync::Mutex;

use tokio::sync::watch;

/// A task's failure, kept whole until the host reports it.
type Failure = Arc<dyn std::error::Error + Send + Sync>;

struct Task {
    plugin: String,
    done: watch::Receiver<Option<Result<(), Failure>>>,
}

/// The host's start-up tasks.
#[derive(Default)]
pub struct Startup {
    tasks: Mutex<Vec<Task>>,
}

impl std::fmt::Debug for Startup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Startup").finish_non_exhaustive()
    }
}

/// The completing side of one task.
#[derive(Debug)]
pub struct StartupTask(watch::Sender<Option<Result<(), Failure>>>);

impl StartupTask {
    /// Reports the task's outcome (an error fails the host's start, naming the plugin, with
    /// the error's text).
    pub fn finish<E: std::error::Error + Send + Sync + 'static>(self, outcome: Result<(), E>) {
        self.0
            .send_replace(Some(outcome.map_err(|error| Arc::new(error) as Failure)));
    }
}

impl Drop for StartupTask {
    fn drop(&mut self) {
        // A task dropped unfinished (its plugin was disposed, its future cancelled) is done.
        self.0.send_if_modified(|state| {
            if state.is_none() {
                *state = Some(Ok(()));
                true
            } else {
                false
            }
        });
    }
}

impl Startup {
    /// Registers a task of `plugin`; the host waits until it finishes.
    pub fn begin(&self, plugin: &str) -> StartupTask {
        let (tx, rx) = watch::channel(None);
        dsh_sync::lock(&self.tasks).push(Task {
            plugin: plugin.to_owned(),
            done: rx,
        });
        StartupTask(tx)
    }

    /// Waits for every task begun so far; the first failure is returned as
    /// `(plugin, message)`. Finished tasks are forgotten.
    pub async fn wait(&self) -> Result<(), (String, String)> {
        let tasks = std::mem::take(&mut *dsh_sync::lock(&self.tasks));
        let mut failure = None;
        for mut task in tasks {
            let outcome = match task.done.wait_for(Option::is_some).await {
                Ok(outcome) => outcome.clone().unwrap_or(Ok(())),
                Err(_) => Ok(()),
            };
            if let Err(error) = outcome {
                failure.get_or_insert((task.plugin, error.to_string()));
            }
        }
        match failure {
            Some(failure) => Err(failure),
            None => Ok(()),
        }
    }
}
