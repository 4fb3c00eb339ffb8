//! Hot reload: watches `$DSH_HOME/config.toml` and `<cwd>/.dsh/config.toml` (through their
//! directories, so editors that replace the file by renaming are seen, and a file created
//! later is picked up) and re-applies the configuration after edits settle.

use std::path::PathBuf;
use std::time::Duration;

use notify::RecursiveMode;
use notify::Watcher;

use crate::config::config_files;
use crate::host::Host;

/// Edits closer together than this are one reload.
const SETTLE: Duration = Duration::from_millis(150);

/// Keeps the file watch alive; dropping it stops watching.
pub struct ConfigWatch {
    /// Owns the watcher: aborting it stops the watch.
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for ConfigWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigWatch").finish_non_exhaustive()
    }
}

impl Drop for ConfigWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Why watching could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch the configuration files: {0}")]
pub struct WatchError(#[from] notify::Error);

/// The nearest existing directory on the way to `file`.
fn nearest_dir(file: &std::path::Path) -> Option<PathBuf> {
    let mut dir = file.parent().map(PathBuf::from);
    while let Some(candidate) = dir {
        if candidate.is_dir() {
            return Some(candidate);
        }
        dir = candidate.parent().map(PathBuf::from);
    }
    None
}

impl Host {
    /// Starts watching the configuration files; every reload outcome goes to
    /// [`Host::reports`]. Must be called inside a tokio runtime.
    pub fn watch(&self) -> Result<ConfigWatch, WatchError> {
        let config = self.config();
        let files: Vec<PathBuf> = config_files(&config.home, &config.cwd)
            .into_iter()
            .map(|(_, path)| path)
            .collect();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<PathBuf>>();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if let Ok(event) = event {
                    let _ = tx.send(event.paths);
                }
            })?;
        // Each file's nearest existing directory, non-recursively: a missing `.dsh/` is seen
        // being created in its parent, and then watched itself.
        let mut watched: Vec<PathBuf> = Vec::new();
        for file in &files {
            if let Some(dir) = nearest_dir(file)
                && !watched.contains(&dir)
            {
                watcher.watch(&dir, RecursiveMode::NonRecursive)?;
                watched.push(dir);
            }
        }
        let host = self.clone();
        let task = tokio::spawn(async move {
            let mut watcher = watcher;
            let relevant = |paths: &[PathBuf],
                            watcher: &mut notify::RecommendedWatcher,
                            watched: &mut Vec<PathBuf>| {
                let mut hit = false;
                for file in &files {
                    if paths.iter().any(|p| p == file) {
                        hit = true;
                    }
                    if let Some(dir) = nearest_dir(file)
                        && !watched.contains(&dir)
                        && watcher.watch(&dir, RecursiveMode::NonRecursive).is_ok()
                    {
                        watched.push(dir);
                        hit = true;
                    }
                }
                hit
            };
            while let Some(paths) = rx.recv().await {
                if !relevant(&paths, &mut watcher, &mut watched) {
                    continue;
                }
                // Let the edit finish (editors write, rename, touch) before reading.
                loop {
                    match tokio::time::timeout(SETTLE, rx.recv()).await {
                        Ok(Some(paths)) => {
                            relevant(&paths, &mut watcher, &mut watched);
                        }
                        Ok(None) => return,
                        Err(_) => break,
                    }
                }
                let report = host.reload_from_disk().await;
                tracing::info!(%report, "configuration file changed");
            }
        });
        Ok(ConfigWatch { task })
    }

    /// [`Host::watch`] for the life of the returned guard, with each reload outcome logged (a
    /// refused or partial reload as a warning): the editor's ACP log and the TUI's log file
    /// show it. A watch that cannot start is logged: changes then need a restart.
    pub fn watch_and_log(&self) -> Option<ConfigWatch> {
        let mut reports = self.reports();
        tokio::spawn(async move {
            while let Ok(report) = reports.recv().await {
                match report {
                    crate::ReloadReport::Rejected { .. } | crate::ReloadReport::Partial { .. } => {
                        tracing::warn!("{report}")
                    }
                    _ => tracing::info!("{report}"),
                }
            }
        });
        match self.watch() {
            Ok(watch) => Some(watch),
            Err(error) => {
                tracing::warn!(%error, "configuration changes will need a restart");
                None
            }
        }
    }
}
