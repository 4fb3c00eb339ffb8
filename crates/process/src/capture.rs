//! Bounded stream capture: keeps the last `max_tail` bytes of a pipe in memory and writes the
//! full stream to a spill file, so any amount of output costs O(max_tail) memory.
//!
//! The spill file is created lazily, the moment the stream first outgrows the in-memory tail:
//! until then the ring holds the whole stream, which is flushed to the file before anything is
//! dropped. Streams that fit never leave a file behind.

use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;

use dsh_tools::OutputStream;
use dsh_tools::ToolOutputSink;
use tokio::io::AsyncRead;
use tokio::io::AsyncReadExt;

use dsh_spill::SpillStore;

/// Limits and destination of one captured stream.
#[derive(Debug, Clone)]
pub struct CaptureConfig {
    pub max_tail: usize,
    pub max_spill: u64,
    pub spill: Option<Arc<SpillStore>>,
    pub session_id: String,
    pub spill_name: String,
}

#[derive(Debug)]
enum SpillState {
    NotNeeded,
    Writing(PathBuf),
    /// Creating or writing failed, or the stream outgrew `max_spill`: why.
    Unavailable(String),
}

#[derive(Debug)]
struct Buffer {
    ring: VecDeque<u8>,
    total: u64,
    /// Absolute offset of the next consuming read.
    cursor: u64,
    spill: SpillState,
    eof: bool,
}

/// Where a foreground call's chunks are mirrored live (a front-end's sink and the call it
/// belongs to). Display only: the capture, result and spill never depend on it.
#[derive(Clone)]
pub struct OutputTap {
    pub sink: Arc<dyn ToolOutputSink>,
    pub call_id: Arc<str>,
}

impl std::fmt::Debug for OutputTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputTap")
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

/// Forwards chunks cut on UTF-8 character boundaries, so a sink may decode each one alone.
struct Mirror<'a> {
    tap: &'a OutputTap,
    stream: OutputStream,
    /// An incomplete trailing character (at most 3 bytes) waiting for its rest.
    carry: Vec<u8>,
}

impl Mirror<'_> {
    fn forward(&mut self, chunk: &[u8]) {
        let bytes: &[u8] = if self.carry.is_empty() {
            chunk
        } else {
            self.carry.extend_from_slice(chunk);
            &self.carry
        };
        let cut = complete_prefix_len(bytes);
        if cut > 0 {
            self.tap
                .sink
                .output(&self.tap.call_id, self.stream, &bytes[..cut]);
        }
        let rest = bytes[cut..].to_vec();
        self.carry = rest;
    }

    fn finish(&mut self) {
        if !self.carry.is_empty() {
            self.tap
                .sink
                .output(&self.tap.call_id, self.stream, &self.carry);
            self.carry.clear();
        }
    }
}

/// Shared view of one stream, readable while the capture task runs.
#[derive(Debug, Clone)]
pub struct Capture {
    inner: Arc<Mutex<Buffer>>,
}

/// The final state of a stream, as the bash tool reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamSnapshot {
    pub text: String,
    pub truncated: bool,
    pub spill_path: Option<String>,
    /// Why there is no spill file although the stream was truncated.
    pub spill_missing: Option<String>,
}

/// One consuming read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta {
    pub text: String,
    /// Some unread bytes had already left the in-memory tail.
    pub lossy: bool,
}

impl Default for Capture {
    fn default() -> Self {
        Self::new()
    }
}

impl Capture {
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Mutex::new(Buffer {
                ring: VecDeque::new(),
                total: 0,
                cursor: 0,
                spill: SpillState::NotNeeded,
                eof: false,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Buffer> {
        // A poisoned lock only means a reader panicked mid-update; the bytes are still usable.
        dsh_sync::lock(&self.inner)
    }

    /// Drains `reader` to EOF (or error), updating the shared buffer and the spill file.
    pub async fn pump<R: AsyncRead + Unpin>(&self, reader: R, config: &CaptureConfig) {
        self.pump_mirrored(reader, config, None).await;
    }

    /// [`Capture::pump`], also handing each chunk to `tap` as it is read (best-effort: the
    /// sink copies and returns, so the capture never waits on a front-end).
    pub async fn pump_mirrored<R: AsyncRead + Unpin>(
        &self,
        mut reader: R,
        config: &CaptureConfig,
        tap: Option<(&OutputTap, OutputStream)>,
    ) {
        let mut mirror = tap.map(|(tap, stream)| Mirror {
            tap,
            stream,
            carry: Vec::new(),
        });
        let mut buf = vec![0u8; 64 * 1024];
        let mut file: Option<std::fs::File> = None;
        let mut written: u64 = 0;
        loop {
            let n = match reader.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => n,
                Err(err) => {
                    tracing::debug!(%err, "stream read failed; treating as EOF");
                    break;
                }
            };
            let chunk = &buf[..n];
            if let Some(mirror) = mirror.as_mut() {
                mirror.forward(chunk);
            }
            let mut start_spill: Option<Vec<u8>> = None;
            {
                let mut state = self.lock();
                state.total += n as u64;
                if matches!(state.spill, SpillState::NotNeeded)
                    && state.total > config.max_tail as u64
                {
                    start_spill = Some(state.ring.iter().copied().collect());
                }
                state.ring.extend(chunk);
                let excess = state.ring.len().saturating_sub(config.max_tail);
                state.ring.drain(..excess);
            }
            if let Some(prefix) = start_spill {
                file = self.open_spill(config);
                if let Some(f) = file.as_mut() {
                    if let Err(err) = f.write_all(&prefix) {
                        file = self.give_up_spill(format!("writing the spill file failed: {err}"));
                    } else {
                        written = prefix.len() as u64;
                    }
                }
            }
            if let Some(f) = file.as_mut() {
                written += n as u64;
                if written > config.max_spill {
                    file = self.give_up_spill(format!(
                        "the stream exceeded the {} spill limit",
                        byte_size(config.max_spill)
                    ));
                } else if let Err(err) = f.write_all(chunk) {
                    file = self.give_up_spill(format!("writing the spill file failed: {err}"));
                }
            }
        }
        if let Some(mirror) = mirror.as_mut() {
            mirror.finish();
        }
        if let Some(mut f) = file {
            let _ = f.flush();
        }
        self.lock().eof = true;
    }

    fn open_spill(&self, config: &CaptureConfig) -> Option<std::fs::File> {
        let created = config
            .spill
            .as_ref()
            .map(|store| store.create(&config.session_id, &config.spill_name));
        let mut state = self.lock();
        match created {
            Some(Ok((path, file))) => {
                state.spill = SpillState::Writing(path);
                Some(file)
            }
            Some(Err(err)) => {
                tracing::warn!(%err, "could not create a stream spill file");
                state.spill =
                    SpillState::Unavailable(format!("the spill file could not be created: {err}"));
                None
            }
            None => {
                state.spill = SpillState::Unavailable("no spill store is configured".to_owned());
                None
            }
        }
    }

    /// Drops the spill (a partial file is worse than none: it would claim to be the full output).
    fn give_up_spill(&self, reason: String) -> Option<std::fs::File> {
        let mut state = self.lock();
        if let SpillState::Writing(path) = &state.spill {
            let _ = std::fs::remove_file(path);
        }
        state.spill = SpillState::Unavailable(reason);
        None
    }

    /// Why the full stream is not kept in a file, when a spill was needed and failed.
    pub fn spill_missing(&self) -> Option<String> {
        match &self.lock().spill {
            SpillState::Unavailable(reason) => Some(reason.clone()),
            SpillState::NotNeeded | SpillState::Writing(_) => None,
        }
    }

    /// Total bytes seen so far.
    pub fn total(&self) -> u64 {
        self.lock().total
    }

    pub fn is_eof(&self) -> bool {
        self.lock().eof
    }

    /// The path of the full-stream spill file, if one exists.
    pub fn spill_path(&self) -> Option<String> {
        match &self.lock().spill {
            SpillState::Writing(path) => Some(path.to_string_lossy().into_owned()),
            SpillState::NotNeeded | SpillState::Unavailable(_) => None,
        }
    }

    /// The retained tail and whether anything was dropped.
    pub fn snapshot(&self) -> StreamSnapshot {
        let state = self.lock();
        let truncated = state.total > state.ring.len() as u64;
        let bytes: Vec<u8> = state.ring.iter().copied().collect();
        let (spill_path, spill_missing) = match &state.spill {
            SpillState::Writing(path) => (Some(path.to_string_lossy().into_owned()), None),
            SpillState::Unavailable(reason) => (None, Some(reason.clone())),
            SpillState::NotNeeded => (None, None),
        };
        let bytes = if truncated {
            skip_partial_char(&bytes)
        } else {
            &bytes[..]
        };
        let text = if is_binary(bytes) {
            binary_notice(state.total, spill_path.as_deref())
        } else {
            String::from_utf8_lossy(bytes).into_owned()
        };
        StreamSnapshot {
            text,
            truncated,
            spill_path,
            spill_missing,
        }
    }

    /// Consumes everything written since the previous read. A multi-byte character split at the
    /// end of the available bytes is held back until it completes (or the stream ends).
    pub fn read_delta(&self) -> Delta {
        let mut state = self.lock();
        let first_kept = state.total - state.ring.len() as u64;
        let lossy = state.cursor < first_kept;
        if lossy {
            state.cursor = first_kept;
        }
        let offset = usize::try_from(state.cursor - first_kept).unwrap_or(usize::MAX);
        let bytes: Vec<u8> = state.ring.iter().skip(offset).copied().collect();
        let bytes = if lossy {
            skip_partial_char(&bytes).to_vec()
        } else {
            bytes
        };
        let skipped = state.ring.len().saturating_sub(offset) - bytes.len();
        let usable = if state.eof {
            bytes.len()
        } else {
            complete_prefix_len(&bytes)
        };
        state.cursor += (skipped + usable) as u64;
        let bytes = &bytes[..usable];
        let text = if is_binary(bytes) {
            format!("[{} bytes of binary output not shown]\n", bytes.len())
        } else {
            String::from_utf8_lossy(bytes).into_owned()
        };
        Delta { text, lossy }
    }
}

/// Output is binary when it holds a NUL byte, or when more than one byte in eight is another
/// control character (tab, newline, carriage return and escape excepted): shown as text, each
/// such byte would cost six in the JSON of the result and the log (`\u0000`), so a command
/// printing NULs would multiply the log by six per call.
pub(crate) fn is_binary(bytes: &[u8]) -> bool {
    if bytes.contains(&0) {
        return true;
    }
    let controls = bytes
        .iter()
        .filter(|&&b| (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x1b)) || b == 0x7f)
        .count();
    controls > bytes.len() / 8
}

/// What a result says instead of binary output.
fn binary_notice(total: u64, spill_path: Option<&str>) -> String {
    let kept = match spill_path {
        Some(path) => format!("; the whole stream is in {path}"),
        None => String::new(),
    };
    format!(
        "[binary output ({total} bytes) not shown{kept}. Redirect it to a file and inspect it with `od -c` or `xxd | head`]"
    )
}

/// Skips UTF-8 continuation bytes at the start of a cut buffer.
/// `64 MiB`, `512 KiB`, `100 bytes`.
fn byte_size(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes}-byte")
    }
}

fn skip_partial_char(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|b| (**b & 0xC0) == 0x80)
        .count();
    &bytes[skip..]
}

/// Length of `bytes` without a trailing incomplete UTF-8 sequence.
fn complete_prefix_len(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(err) if err.error_len().is_none() => err.valid_up_to(),
        Err(_) => {
            // Invalid bytes mid-stream are passed through lossily; only an incomplete tail is held.
            let tail_start = bytes.len().saturating_sub(3);
            (tail_start..bytes.len())
                .find(|&i| {
                    std::str::from_utf8(&bytes[i..])
                        .is_err_and(|e| e.error_len().is_none() && e.valid_up_to() == 0)
                })
                .unwrap_or(bytes.len())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(store: Option<Arc<SpillStore>>, max_tail: usize, max_spill: u64) -> CaptureConfig {
        CaptureConfig {
            max_tail,
            max_spill,
            spill: store,
            session_id: "s".into(),
            spill_name: "out.txt".into(),
        }
    }

    #[tokio::test]
    async fn nul_output_is_binary_output_and_costs_no_escaped_flood() {
        let cap = Capture::new();
        let nuls = vec![0u8; 50_000];
        cap.pump(&nuls[..], &config(None, 64_000, 1 << 20)).await;
        let snap = cap.snapshot();
        assert_eq!(
            snap.text,
            "[binary output (50000 bytes) not shown. Redirect it to a file and inspect it with `od -c` or `xxd | head`]"
        );
        let json = serde_json::to_string(&snap.text).unwrap();
        assert!(json.len() < 200, "{json}");
        // Other control bytes in bulk are binary too; text with colours and tabs is not.
        assert!(is_binary(&[1u8; 100]));
        assert!(!is_binary(b"\x1b[31mred\x1b[0m\tcol\r\n"));
        let delta = Capture::new();
        delta
            .pump(&nuls[..10], &config(None, 64_000, 1 << 20))
            .await;
        assert_eq!(
            delta.read_delta().text,
            "[10 bytes of binary output not shown]\n"
        );
    }

    #[tokio::test]
    async fn small_stream_is_kept_whole_without_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SpillStore::new(dir.path()));
        let cap = Capture::new();
        cap.pump(&b"hello\n"[..], &config(Some(store), 10, 100))
            .await;
        assert_eq!(
            cap.snapshot(),
            StreamSnapshot {
                text: "hello\n".into(),
                truncated: false,
                spill_path: None,
                spill_missing: None,
            }
        );
    }

    #[tokio::test]
    async fn large_stream_keeps_tail_and_spills_everything() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SpillStore::new(dir.path()));
        let data: Vec<u8> = (0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let cap = Capture::new();
        cap.pump(&data[..], &config(Some(store), 1000, 1 << 20))
            .await;
        let snap = cap.snapshot();
        assert!(snap.truncated);
        assert_eq!(snap.text.as_bytes(), &data[data.len() - 1000..]);
        let spilled = std::fs::read(snap.spill_path.unwrap()).unwrap();
        assert_eq!(spilled, data);
    }

    #[tokio::test]
    async fn oversized_spill_is_discarded() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SpillStore::new(dir.path()));
        let data = vec![b'z'; 10_000];
        let cap = Capture::new();
        cap.pump(&data[..], &config(Some(store.clone()), 100, 5_000))
            .await;
        let snap = cap.snapshot();
        assert!(snap.truncated);
        assert_eq!(snap.spill_path, None);
        // The result says why the full output is not kept.
        assert_eq!(
            snap.spill_missing.as_deref(),
            Some("the stream exceeded the 5000-byte spill limit")
        );
        let session = store.session_dir("s").unwrap();
        assert_eq!(std::fs::read_dir(session).unwrap().count(), 0);
        let cap = Capture::new();
        cap.pump(&data[..], &config(None, 100, 5_000)).await;
        assert_eq!(
            cap.snapshot().spill_missing.as_deref(),
            Some("no spill store is configured")
        );
        assert_eq!(byte_size(64 * 1024 * 1024), "64 MiB");
    }

    #[derive(Default)]
    struct Chunks(Mutex<Vec<Vec<u8>>>);

    impl ToolOutputSink for Chunks {
        fn output(&self, _call_id: &str, _stream: OutputStream, chunk: &[u8]) {
            self.0.lock().unwrap().push(chunk.to_vec());
        }
    }

    #[tokio::test]
    async fn mirrored_chunks_are_cut_on_character_boundaries() {
        let sink = Arc::new(Chunks::default());
        let tap = OutputTap {
            sink: sink.clone(),
            call_id: Arc::from("c1"),
        };
        // The two reads split `é` (c3 a9); a stray incomplete byte at EOF is still delivered.
        let reader = (&b"a\xc3"[..]).chain(&b"\xa9b\xe2"[..]);
        let cap = Capture::new();
        cap.pump_mirrored(
            reader,
            &config(None, 100, 0),
            Some((&tap, OutputStream::Stdout)),
        )
        .await;
        let seen = sink.0.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![b"a".to_vec(), "\u{e9}b".as_bytes().to_vec(), vec![0xe2]]
        );
        assert_eq!(cap.total(), 5);
    }

    #[tokio::test]
    async fn deltas_consume_and_report_loss() {
        let cap = Capture::new();
        cap.pump(&b"abcdef"[..], &config(None, 4, 0)).await;
        assert_eq!(
            cap.read_delta(),
            Delta {
                text: "cdef".into(),
                lossy: true
            }
        );
        assert_eq!(
            cap.read_delta(),
            Delta {
                text: String::new(),
                lossy: false
            }
        );
    }

    #[test]
    fn incomplete_utf8_tail_is_held_back() {
        let bytes = "aé".as_bytes();
        assert_eq!(complete_prefix_len(&bytes[..2]), 1);
        assert_eq!(complete_prefix_len(bytes), 3);
    }
}
