//! Write-through JSONL persistence for one session file.
//!
//! Every append is written (one `write` of whole lines) before it is committed in memory, so an
//! I/O error leaves both the file and the log as they were: a failed or partial write is
//! truncated back to the last good length. `step/end` and `turn/end` also `fdatasync`.
//! The file is materialized lazily: header plus the first lines go to a temp file that is
//! fsynced and hard-linked into place, so a reader never sees a header-only or torn-header file.

use std::fs::File;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::SessionError;
use crate::event::Event;

#[derive(Debug)]
pub(crate) struct FileSink {
    path: PathBuf,
    id: String,
    header_line: String,
    /// `None` until the first append materializes the file.
    file: Option<File>,
    /// File length after the last successful write.
    len: u64,
    /// Whether bytes may have been written since the last `fdatasync`. Lets `flush` skip the
    /// syscall when a `turn/end` was just synced (closing a session used to sync twice).
    unsynced: bool,
    /// Set when a failed write could not be rolled back; the file's tail is then unknown and
    /// every later append is refused rather than risking a corrupt log.
    broken: Option<String>,
}

impl FileSink {
    /// A sink for a file that does not exist yet.
    pub(crate) fn lazy(path: PathBuf, id: String, header_line: String) -> Self {
        Self {
            path,
            id,
            header_line,
            file: None,
            len: 0,
            unsynced: false,
            broken: None,
        }
    }

    /// A sink appending to an existing, already validated file of `len` bytes.
    pub(crate) fn existing(path: PathBuf, id: String, len: u64) -> Result<Self, SessionError> {
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|e| SessionError::io(&path, e))?;
        Ok(Self {
            path,
            id,
            header_line: String::new(),
            file: Some(file),
            len,
            // Another process wrote this file; its tail may still sit in the page cache.
            unsynced: true,
            broken: None,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `pending` (committed but not yet stored: seeds of a fresh file) and then `event`.
    pub(crate) fn write(
        &mut self,
        pending: &[Arc<Event>],
        event: &Event,
        durable: bool,
    ) -> Result<(), SessionError> {
        if let Some(reason) = &self.broken {
            return Err(SessionError::io(
                &self.path,
                std::io::Error::other(reason.clone()),
            ));
        }
        let mut buf = Vec::with_capacity(256);
        for e in pending
            .iter()
            .map(Arc::as_ref)
            .chain(std::iter::once(event))
        {
            serde_json::to_writer(&mut buf, e)
                .map_err(|err| SessionError::io(&self.path, err.into()))?;
            buf.push(b'\n');
        }
        match &mut self.file {
            None => self.materialize(&buf),
            Some(file) => {
                let result = file
                    .write_all(&buf)
                    .and_then(|()| if durable { file.sync_data() } else { Ok(()) });
                match result {
                    Ok(()) => {
                        self.len += buf.len() as u64;
                        self.unsynced = !durable;
                        Ok(())
                    }
                    Err(err) => {
                        self.unsynced = true;
                        if let Err(rollback) = file.set_len(self.len) {
                            tracing::error!(path = %self.path.display(), error = %rollback, "cannot roll back a failed session write; log writer disabled");
                            self.broken = Some(format!(
                                "log writer disabled after an unrecoverable write failure: {err}"
                            ));
                        }
                        Err(SessionError::io(&self.path, err))
                    }
                }
            }
        }
    }

    /// Writes the file now if it does not exist yet: the header plus `pending` (committed but
    /// not yet stored). A no-op once materialized.
    pub(crate) fn materialize_now(&mut self, pending: &[Arc<Event>]) -> Result<(), SessionError> {
        if self.file.is_some() {
            return Ok(());
        }
        let mut buf = Vec::new();
        for event in pending {
            serde_json::to_writer(&mut buf, event.as_ref())
                .map_err(|err| SessionError::io(&self.path, err.into()))?;
            buf.push(b'\n');
        }
        self.materialize(&buf)
    }

    /// `fdatasync` the file (no-op before materialization or when nothing was written since the
    /// last sync: nothing to lose).
    pub(crate) fn flush(&mut self) -> Result<(), SessionError> {
        match &self.file {
            Some(file) if self.unsynced => {
                file.sync_data()
                    .map_err(|e| SessionError::io(&self.path, e))?;
                self.unsynced = false;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn materialize(&mut self, lines: &[u8]) -> Result<(), SessionError> {
        let dir = self
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        crate::store::create_private_dir(&dir)?;
        let tmp = dir.join(format!(
            ".session.jsonl.{}.{}.tmp",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let result = self.write_and_link(&tmp, lines);
        // The temp name is unique to this attempt; remove it whether or not the link succeeded.
        let _ = std::fs::remove_file(&tmp);
        let len = result?;
        let file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(|e| SessionError::io(&self.path, e))?;
        // Make the new directory entry itself durable.
        if let Ok(d) = File::open(&dir) {
            let _ = d.sync_all();
        }
        self.file = Some(file);
        self.len = len;
        self.unsynced = false;
        Ok(())
    }

    fn write_and_link(&self, tmp: &Path, lines: &[u8]) -> Result<u64, SessionError> {
        // A log holds the whole conversation: readable by its owner only.
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(tmp)
            .map_err(|e| SessionError::io(tmp, e))?;
        let mut all = Vec::with_capacity(self.header_line.len() + 1 + lines.len());
        all.extend_from_slice(self.header_line.as_bytes());
        all.push(b'\n');
        all.extend_from_slice(lines);
        file.write_all(&all)
            .and_then(|()| file.sync_all())
            .map_err(|e| SessionError::io(tmp, e))?;
        match std::fs::hard_link(tmp, &self.path) {
            Ok(()) => Ok(all.len() as u64),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(SessionError::AlreadyExists {
                    id: self.id.clone(),
                })
            }
            Err(e) => Err(SessionError::io(&self.path, e)),
        }
    }
}
