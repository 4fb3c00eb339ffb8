//! JSONL persistence for one session file: the file operations the log writer thread
//! (`writer.rs`) performs.
//!
//! Each batch of events is one `write` of whole lines; a failed or partial write is truncated
//! back to the last good length, so the file never ends in half a line written by this process.
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
    /// every later write is refused (with the first error's kind) rather than risking a
    /// corrupt log.
    broken: Option<(std::io::ErrorKind, String)>,
    /// Serialisation buffer, reused between batches.
    buf: Vec<u8>,
}

/// Capacity above which the serialisation buffer is released after a batch.
const MAX_KEPT_BUFFER: usize = 1 << 20;

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
            buf: Vec::new(),
        }
    }

    /// A sink appending to an existing, already validated file of `len` bytes.
    pub(crate) fn existing(path: PathBuf, id: String, len: u64) -> Result<Self, SessionError> {
        let file = OpenOptions::new()
            .read(true)
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
            buf: Vec::new(),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file exists (this sink created it, or it was opened).
    pub(crate) fn is_materialized(&self) -> bool {
        self.file.is_some()
    }

    /// File length after the last successful write: where the next line starts.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// A second handle on the open file, for reading back what was written. It is the same
    /// open file, not the path: reads keep working if the session directory is removed.
    pub(crate) fn reader(&self) -> Option<Result<File, SessionError>> {
        let file = self.file.as_ref()?;
        Some(
            file.try_clone()
                .map_err(|e| SessionError::io(&self.path, e)),
        )
    }

    /// Writes `events` (whole lines, in order) with one `write`, materializing the file first
    /// if it does not exist yet (then even an empty batch creates it: header only).
    ///
    /// A failed or short write is truncated back to the last good length, so the file only
    /// ever ends in a complete line and a retry of the same batch appends it exactly once.
    /// On success, where each event's line starts is pushed onto `starts`.
    pub(crate) fn write_batch(
        &mut self,
        events: &[Arc<Event>],
        starts: &mut Vec<u64>,
    ) -> Result<(), SessionError> {
        if let Some((kind, reason)) = &self.broken {
            return Err(SessionError::io(
                &self.path,
                std::io::Error::new(*kind, reason.clone()),
            ));
        }
        // The batch lands at the end of the file, or after the header of a new one.
        let base = match self.file {
            Some(_) => self.len,
            None => self.header_line.len() as u64 + 1,
        };
        let first = starts.len();
        self.buf.clear();
        for event in events {
            starts.push(base + self.buf.len() as u64);
            if let Err(err) = serde_json::to_writer(&mut self.buf, event.as_ref()) {
                starts.truncate(first);
                return Err(SessionError::io(&self.path, err.into()));
            }
            self.buf.push(b'\n');
        }
        let buf = std::mem::take(&mut self.buf);
        let result = self.write_bytes(&buf);
        self.buf = buf;
        if result.is_err() {
            starts.truncate(first);
        }
        // One very large batch (a resumed log's repair, a burst behind a slow disk) must not pin
        // its buffer for the rest of the session.
        if self.buf.capacity() > MAX_KEPT_BUFFER {
            self.buf = Vec::new();
        }
        result
    }

    fn write_bytes(&mut self, buf: &[u8]) -> Result<(), SessionError> {
        let Some(file) = &mut self.file else {
            return self.materialize(buf);
        };
        if buf.is_empty() {
            return Ok(());
        }
        self.unsynced = true;
        match file.write_all(buf) {
            Ok(()) => {
                self.len += buf.len() as u64;
                Ok(())
            }
            Err(err) => {
                if let Err(rollback) = file.set_len(self.len) {
                    tracing::error!(path = %self.path.display(), error = %rollback, "cannot roll back a failed session write; log writer disabled");
                    self.broken = Some((
                        err.kind(),
                        format!("log writer disabled after an unrecoverable write failure: {err}"),
                    ));
                }
                Err(SessionError::io(&self.path, err))
            }
        }
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
            .read(true)
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
