//! One shell on a real PTY (the `terminal-bash` backend): spawning (optionally under the
//! sandbox wrapper), the reader thread and scrollback, readiness detection for sends, reads,
//! foreground signals and closing the whole owned process tree.

use dsh_sync::lock;
use std::ffi::OsString;
use std::io::Read;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

use portable_pty::ChildKiller;
use portable_pty::CommandBuilder;
use portable_pty::MasterPty;
use portable_pty::PtySize;
use serde::Serialize;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::config::BashBackendConfig;
use crate::error::TerminalError;
use crate::procfs;
use crate::sanitize::Sanitizer;

/// How a shell is launched: where, with what environment, under which wrapper.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    pub cwd: PathBuf,
    /// The complete child environment (already scrubbed by the caller).
    pub env: Vec<(String, String)>,
    /// The sandbox wrapper (program and arguments placed before the shell), if confined.
    pub wrapper: Option<(PathBuf, Vec<OsString>)>,
}

/// Why a send stopped waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitReason {
    StdinRead,
    InferredIdle,
    Timeout,
    SessionExit,
}

impl WaitReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::StdinRead => "stdin_read",
            Self::InferredIdle => "inferred_idle",
            Self::Timeout => "timeout",
            Self::SessionExit => "session_exit",
        }
    }
}

/// `running`, or how the shell ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum SessionStatus {
    Running,
    Exited {
        code: Option<u32>,
        signal: Option<String>,
    },
}

impl SessionStatus {
    /// `running` or `exited code=<n|null> signal=<s|null>`.
    pub fn render(&self) -> String {
        match self {
            Self::Running => "running".to_owned(),
            Self::Exited { code, signal } => format!(
                "exited code={} signal={}",
                code.map_or_else(|| "null".to_owned(), |c| c.to_string()),
                signal.as_deref().unwrap_or("null")
            ),
        }
    }
}

/// What a foreground send saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendOutcome {
    pub viewport: String,
    pub wait_reason: WaitReason,
    pub status: SessionStatus,
    pub truncated: bool,
}

/// A page of retained output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadPage {
    pub text: String,
    pub total_lines: u64,
    pub line_begin: u64,
    pub line_end: u64,
    pub truncated: bool,
}

/// Sanitized output: a bounded tail of the stream plus absolute offsets into it.
struct Output {
    buffer: Vec<u8>,
    /// Bytes ever appended (absolute end offset).
    total: u64,
    /// Bytes dropped from the front (absolute offset of `buffer[0]`).
    dropped: u64,
    /// Prompt markers seen so far.
    prompts: u64,
    /// Absolute offset of the first prompt marker (the end of the start-up output).
    first_prompt_at: Option<u64>,
    last_output: Instant,
    eof: bool,
    exit: Option<SessionStatus>,
}

impl Output {
    fn push(&mut self, bytes: &[u8], max_bytes: usize, max_lines: usize) {
        if bytes.is_empty() {
            return;
        }
        self.buffer.extend_from_slice(bytes);
        self.total += bytes.len() as u64;
        self.last_output = Instant::now();
        let lines = bytecount(&self.buffer);
        let mut cut = 0;
        if lines > max_lines {
            cut = nth_newline_end(&self.buffer, lines - max_lines);
        }
        if self.buffer.len() - cut > max_bytes {
            // Drop whole lines when possible so the retained head starts clean.
            let over = self.buffer.len() - max_bytes;
            cut = match self.buffer[over..].iter().position(|&b| b == b'\n') {
                Some(i) if over + i + 1 < self.buffer.len() => over + i + 1,
                _ => over,
            };
        }
        if cut > 0 {
            self.buffer.drain(..cut);
            self.dropped += cut as u64;
        }
    }

    /// Bytes from absolute offset `from` on; `true` when part of them was already dropped.
    fn since(&self, from: u64) -> (&[u8], bool) {
        if from < self.dropped {
            (&self.buffer, true)
        } else {
            let start = usize::try_from(from - self.dropped).unwrap_or(usize::MAX);
            (self.buffer.get(start..).unwrap_or_default(), false)
        }
    }
}

fn bytecount(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}

/// The index just past the `n`-th newline.
fn nth_newline_end(bytes: &[u8], n: usize) -> usize {
    let mut seen = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\n' {
            seen += 1;
            if seen == n {
                return i + 1;
            }
        }
    }
    bytes.len()
}

/// The tail of `bytes` that fits in `max` bytes, cut on a UTF-8 boundary.
pub fn utf8_tail(bytes: &[u8], max: usize) -> (&[u8], bool) {
    if bytes.len() <= max {
        return (bytes, false);
    }
    let mut start = bytes.len() - max;
    while start < bytes.len() && (bytes[start] & 0xC0) == 0x80 {
        start += 1;
    }
    (&bytes[start..], true)
}

/// The head of `text` that fits in `max` bytes, cut on a char boundary.
pub fn utf8_head(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

struct Shared {
    output: Mutex<Output>,
    changed: Notify,
}

/// A live shell on a PTY.
pub struct PtySession {
    shared: Arc<Shared>,
    master: Mutex<Box<dyn MasterPty + Send>>,
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    killer: Mutex<Box<dyn ChildKiller + Send + Sync>>,
    pid: Option<u32>,
    tty: Option<PathBuf>,
    /// The shell's own process group, as the terminal saw it at first readiness.
    shell_pgid: Mutex<Option<i32>>,
    config: Arc<BashBackendConfig>,
    closing: AtomicBool,
}

impl std::fmt::Debug for PtySession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PtySession")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

fn pty_error(context: &str, error: impl std::fmt::Display) -> TerminalError {
    TerminalError::new("PTY_SPAWN_FAILED", format!("{context}: {error}"))
}

impl PtySession {
    /// Starts the shell and waits for its first prompt; returns the session and its MOTD (the
    /// output before that prompt).
    pub async fn spawn(
        config: Arc<BashBackendConfig>,
        spec: SpawnSpec,
    ) -> Result<(Arc<Self>, String), TerminalError> {
        let system = portable_pty::native_pty_system();
        let pair = system
            .openpty(PtySize {
                rows: config.rows,
                cols: config.cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .map_err(|e| pty_error("cannot open a PTY", e))?;
        let mut argv: Vec<OsString> = Vec::new();
        if let Some((program, args)) = &spec.wrapper {
            argv.push(program.clone().into_os_string());
            argv.extend(args.iter().cloned());
        }
        argv.extend(config.shell.iter().map(OsString::from));
        let mut cmd = CommandBuilder::from_argv(argv);
        cmd.env_clear();
        for (name, value) in &spec.env {
            cmd.env(name, value);
        }
        cmd.cwd(&spec.cwd);
        let mut child = pair
            .slave
            .spawn_command(cmd)
            .map_err(|e| pty_error("cannot start the terminal shell", e))?;
        drop(pair.slave);
        let master = pair.master;
        let reader = master
            .try_clone_reader()
            .map_err(|e| pty_error("cannot read the PTY", e))?;
        let writer = master
            .take_writer()
            .map_err(|e| pty_error("cannot write the PTY", e))?;
        let tty = master.tty_name();
        let pid = child.process_id();
        let killer = child.clone_killer();
        let shared = Arc::new(Shared {
            output: Mutex::new(Output {
                buffer: Vec::new(),
                total: 0,
                dropped: 0,
                prompts: 0,
                first_prompt_at: None,
                last_output: Instant::now(),
                eof: false,
                exit: None,
            }),
            changed: Notify::new(),
        });
        spawn_reader(shared.clone(), reader, &config);
        {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("dsh-pty-wait".into())
                .spawn(move || {
                    let status = match child.wait() {
                        Ok(status) => exit_status(&status),
                        Err(_) => SessionStatus::Exited {
                            code: None,
                            signal: None,
                        },
                    };
                    lock(&shared.output).exit = Some(status);
                    shared.changed.notify_waiters();
                })
                .map_err(|e| pty_error("cannot watch the terminal shell", e))?;
        }
        let session = Arc::new(Self {
            shared,
            master: Mutex::new(master),
            writer: Arc::new(Mutex::new(writer)),
            killer: Mutex::new(killer),
            pid,
            tty,
            shell_pgid: Mutex::new(None),
            config: config.clone(),
            closing: AtomicBool::new(false),
        });
        let motd = match session.await_startup().await {
            Ok(motd) => motd,
            Err(error) => {
                session.close().await;
                return Err(error);
            }
        };
        Ok((session, motd))
    }

    async fn await_startup(&self) -> Result<String, TerminalError> {
        let deadline = Instant::now() + Duration::from_millis(self.config.timeout_ms);
        loop {
            let notified = self.shared.changed.notified();
            {
                let out = lock(&self.shared.output);
                if out.exit.is_some() {
                    return Err(TerminalError::new(
                        "PTY_STARTUP_EXIT",
                        "PTY shell exited during startup",
                    ));
                }
                let shown = out.buffer.ends_with(crate::backend::PROMPT.as_bytes())
                    || out.last_output.elapsed()
                        >= Duration::from_millis(self.config.handoff_grace_ms);
                if out.prompts > 0 && shown {
                    let end = out.first_prompt_at.unwrap_or(out.total);
                    let (bytes, _) = out.since(0);
                    let keep = usize::try_from(end.saturating_sub(out.dropped))
                        .unwrap_or(usize::MAX)
                        .min(bytes.len());
                    let motd = String::from_utf8_lossy(&bytes[..keep]).into_owned();
                    drop(out);
                    *lock(&self.shell_pgid) = self.foreground_pgid().or_else(|| self.pid_i32());
                    return Ok(motd);
                }
            }
            if Instant::now() >= deadline {
                return Err(TerminalError::new(
                    "PTY_STARTUP_TIMEOUT",
                    "PTY shell did not reach readiness before startup timeout",
                ));
            }
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep(Duration::from_millis(self.config.poll_interval_ms)) => {}
            }
        }
    }

    fn pid_i32(&self) -> Option<i32> {
        self.pid.and_then(|p| i32::try_from(p).ok())
    }

    /// The terminal device the shell reads.
    pub fn tty(&self) -> Option<&std::path::Path> {
        self.tty.as_deref()
    }

    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The terminal's foreground process group now.
    pub fn foreground_pgid(&self) -> Option<i32> {
        lock(&self.master).process_group_leader()
    }

    pub fn status(&self) -> SessionStatus {
        lock(&self.shared.output)
            .exit
            .clone()
            .unwrap_or(SessionStatus::Running)
    }

    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }

    /// Prompt markers seen so far (a later count proves the shell prompted again).
    pub fn prompt_count(&self) -> u64 {
        lock(&self.shared.output).prompts
    }

    /// Absolute offset of the end of the output so far.
    pub fn output_end(&self) -> u64 {
        lock(&self.shared.output).total
    }

    /// Sanitized output from absolute offset `from` on, tail-bounded to `max` bytes.
    pub fn output_since(&self, from: u64, max: usize) -> (String, bool) {
        let out = lock(&self.shared.output);
        let (bytes, dropped) = out.since(from);
        let (tail, cut) = utf8_tail(bytes, max);
        (String::from_utf8_lossy(tail).into_owned(), dropped || cut)
    }

    /// Whether the retained output currently ends with `suffix`.
    pub fn output_ends_with(&self, suffix: &str) -> bool {
        lock(&self.shared.output)
            .buffer
            .ends_with(suffix.as_bytes())
    }

    /// Whether output from `from` on is still fully retained.
    pub fn retains(&self, from: u64) -> bool {
        lock(&self.shared.output).dropped <= from
    }

    /// Writes raw bytes to the terminal (off the async threads: a full PTY buffer blocks).
    pub async fn write(&self, bytes: Vec<u8>) -> Result<(), TerminalError> {
        let writer = self.writer.clone();
        let written = tokio::task::spawn_blocking(move || {
            let mut writer = lock(&writer);
            writer.write_all(&bytes)?;
            writer.flush()
        })
        .await;
        match written {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(TerminalError::new(
                "PTY_WRITE_FAILED",
                format!("cannot write to the terminal: {e}"),
            )),
            Err(e) => Err(TerminalError::new(
                "PTY_WRITE_FAILED",
                format!("cannot write to the terminal: {e}"),
            )),
        }
    }

    /// Sends `text` (plus Enter when `submit`) and waits for a readiness signal. On
    /// cancellation the foreground group gets a real SIGINT and the error is returned.
    pub async fn send(
        &self,
        text: &str,
        submit: bool,
        signal: &CancellationToken,
    ) -> Result<SendOutcome, TerminalError> {
        if self.is_closing() {
            return Err(TerminalError::new("PTY_CLOSING", "PTY session is closing"));
        }
        if self.status() != SessionStatus::Running {
            return Err(TerminalError::new("PTY_EXITED", "PTY session has exited"));
        }
        if signal.is_cancelled() {
            return Err(TerminalError::new(
                "PTY_ABORTED",
                "PTY send aborted before write",
            ));
        }
        let (start, prompts_before) = {
            let out = lock(&self.shared.output);
            (out.total, out.prompts)
        };
        let mut bytes = text.as_bytes().to_vec();
        if submit {
            bytes.push(b'\r');
        }
        let written_at = Instant::now();
        self.write(bytes).await?;
        let reason = self
            .wait_ready(written_at, prompts_before, signal)
            .await
            .inspect_err(|_| {
                // A cancelled send interrupts what it started (a real SIGINT, never `\x03`).
                if let Some(pgid) = self.foreground_pgid() {
                    procfs::kill_group(pgid, rustix::process::Signal::INT);
                }
            })?;
        let (viewport, truncated) = self.output_since(start, self.config.max_read_bytes);
        Ok(SendOutcome {
            viewport,
            wait_reason: reason,
            status: self.status(),
            truncated,
        })
    }

    /// Polls until the shell is back at its prompt, a foreground program waits on the
    /// terminal, output has been silent long enough, the deadline passed, or the shell exited.
    pub async fn wait_ready(
        &self,
        written_at: Instant,
        prompts_before: u64,
        signal: &CancellationToken,
    ) -> Result<WaitReason, TerminalError> {
        let poll = Duration::from_millis(self.config.poll_interval_ms);
        let probe_after = Duration::from_millis(self.config.exact_probe_after_ms);
        let idle = Duration::from_millis(self.config.idle_silence_ms);
        let deadline = written_at + Duration::from_millis(self.config.timeout_ms);
        let shell = *lock(&self.shell_pgid);
        let mut exited_at: Option<Instant> = None;
        loop {
            let notified = self.shared.changed.notified();
            let now = Instant::now();
            let (prompted, silent, exited, eof) = {
                let out = lock(&self.shared.output);
                let since = now.duration_since(out.last_output.max(written_at));
                (
                    out.prompts > prompts_before,
                    since,
                    out.exit.is_some(),
                    out.eof,
                )
            };
            if exited {
                // Let the reader drain what the shell printed last.
                let first = *exited_at.get_or_insert(now);
                if eof || now.duration_since(first) >= Duration::from_millis(200) {
                    return Ok(WaitReason::SessionExit);
                }
            } else {
                let foreground = self.foreground_pgid();
                let at_prompt = prompted && (shell.is_none() || foreground == shell);
                // The marker precedes the prompt text: wait for the prompt itself (or the
                // hand-off grace) so it is not left over for the next send.
                let prompt_shown = self.output_ends_with(crate::backend::PROMPT)
                    || silent >= Duration::from_millis(self.config.handoff_grace_ms);
                if at_prompt && silent >= poll && prompt_shown {
                    return Ok(WaitReason::StdinRead);
                }
                // Any foreground reader proves a stdin wait, the shell's own `read` included.
                if silent >= probe_after
                    && foreground
                        .is_some_and(|pgid| procfs::reads_terminal(pgid, self.tty.as_deref()))
                {
                    return Ok(WaitReason::StdinRead);
                }
                if silent >= idle {
                    return Ok(WaitReason::InferredIdle);
                }
                if now >= deadline {
                    return Ok(WaitReason::Timeout);
                }
            }
            tokio::select! {
                () = signal.cancelled() => {
                    return Err(TerminalError::new("PTY_ABORTED", "terminal send aborted"));
                }
                () = notified => {}
                () = tokio::time::sleep(poll) => {}
            }
        }
    }

    /// A page of retained lines counted back from the newest (`offset`), `count` long.
    pub fn read(&self, offset: u64, count: u64) -> ReadPage {
        let out = lock(&self.shared.output);
        let text = String::from_utf8_lossy(&out.buffer);
        let mut lines: Vec<&str> = text.split('\n').collect();
        // A trailing newline ends the last line; it does not start an empty one.
        if lines.len() > 1 && lines.last() == Some(&"") {
            lines.pop();
        }
        if text.is_empty() {
            lines.clear();
        }
        let total = lines.len() as u64;
        if offset >= total {
            return ReadPage {
                text: String::new(),
                total_lines: total,
                line_begin: offset,
                line_end: offset,
                truncated: false,
            };
        }
        let end = total - offset;
        let begin = end.saturating_sub(count);
        let page = lines[usize::try_from(begin).unwrap_or(0)..usize::try_from(end).unwrap_or(0)]
            .join("\n");
        let (tail, truncated) = utf8_tail(page.as_bytes(), self.config.max_read_bytes);
        let tail = String::from_utf8_lossy(tail).into_owned();
        let returned = if truncated {
            tail.split('\n').count() as u64
        } else {
            end - begin
        };
        ReadPage {
            text: tail,
            total_lines: total,
            line_begin: offset,
            line_end: offset + returned,
            truncated,
        }
    }

    /// Sends `signal` to the foreground process group; returns that group.
    pub fn signal(&self, signal: rustix::process::Signal) -> Result<i32, TerminalError> {
        if self.is_closing() {
            return Err(TerminalError::new("PTY_CLOSING", "PTY session is closing"));
        }
        if self.status() != SessionStatus::Running {
            return Err(TerminalError::new("PTY_EXITED", "PTY session has exited"));
        }
        let shell = *lock(&self.shell_pgid);
        let foreground = self.foreground_pgid().or(shell).ok_or_else(|| {
            TerminalError::new(
                "PTY_NO_FOREGROUND",
                "the terminal has no foreground process group",
            )
        })?;
        if signal == rustix::process::Signal::KILL && Some(foreground) == shell {
            return Err(TerminalError::new(
                "PTY_REFUSED",
                "refusing to SIGKILL the terminal shell; terminate the terminal session instead",
            ));
        }
        procfs::kill_group(foreground, signal);
        Ok(foreground)
    }

    /// Marks the session closing (idempotent); `false` when it already was.
    pub fn begin_close(&self) -> bool {
        !self.closing.swap(true, Ordering::SeqCst)
    }

    /// Hangs up the shell, then kills whatever of its session is left after the grace, and
    /// waits until the shell has exited and no process of its session remains.
    pub async fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        let sid = self.pid_i32();
        let grace = Duration::from_millis(self.config.dispose_grace_ms);
        if self.status() == SessionStatus::Running {
            if let Some(pgid) = *lock(&self.shell_pgid) {
                procfs::kill_group(pgid, rustix::process::Signal::HUP);
            }
            if let Some(pgid) = self.foreground_pgid() {
                procfs::kill_group(pgid, rustix::process::Signal::HUP);
            }
            if let Some(sid) = sid {
                procfs::kill_group(sid, rustix::process::Signal::HUP);
            }
            let deadline = Instant::now() + grace;
            while self.status() == SessionStatus::Running && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        if self.status() == SessionStatus::Running {
            let _ = lock(&self.killer).kill();
        }
        if let Some(sid) = sid {
            let deadline = Instant::now() + grace;
            loop {
                let members = procfs::session_members(sid);
                if members.is_empty() || Instant::now() >= deadline {
                    break;
                }
                for pid in members {
                    procfs::kill_pid(pid, rustix::process::Signal::KILL);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let deadline = Instant::now() + grace;
        while self.status() == SessionStatus::Running && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for PtySession {
    fn drop(&mut self) {
        if self.status() == SessionStatus::Running {
            if let Some(sid) = self.pid_i32() {
                for pid in procfs::session_members(sid) {
                    procfs::kill_pid(pid, rustix::process::Signal::KILL);
                }
            }
            let _ = lock(&self.killer).kill();
        }
    }
}

fn spawn_reader(shared: Arc<Shared>, mut reader: Box<dyn Read + Send>, config: &BashBackendConfig) {
    let max_bytes = config.scrollback_max_bytes;
    let max_lines = config.scrollback_lines;
    let spawned = std::thread::Builder::new()
        .name("dsh-pty-read".into())
        .spawn(move || {
            let mut sanitizer = Sanitizer::new();
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let clean = sanitizer.feed(&buf[..n]);
                        {
                            let mut out = lock(&shared.output);
                            if out.first_prompt_at.is_none()
                                && let Some((at, _)) = clean.prompts.first()
                            {
                                out.first_prompt_at = Some(out.total + *at as u64);
                            }
                            out.push(&clean.text, max_bytes, max_lines);
                            out.prompts += clean.prompts.len() as u64;
                            out.last_output = Instant::now();
                        }
                        shared.changed.notify_waiters();
                    }
                }
            }
            lock(&shared.output).eof = true;
            shared.changed.notify_waiters();
        });
    if let Err(error) = spawned {
        tracing::error!(%error, "cannot start the PTY reader thread");
    }
}

fn exit_status(status: &portable_pty::ExitStatus) -> SessionStatus {
    match status.signal() {
        Some(signal) => SessionStatus::Exited {
            code: None,
            signal: Some(signal_name(signal)),
        },
        None => SessionStatus::Exited {
            code: Some(status.exit_code()),
            signal: None,
        },
    }
}

/// portable-pty reports signals by their description ("Hangup"); map the common ones back.
fn signal_name(description: &str) -> String {
    let known = [
        ("Hangup", "SIGHUP"),
        ("Interrupt", "SIGINT"),
        ("Killed", "SIGKILL"),
        ("Terminated", "SIGTERM"),
        ("Quit", "SIGQUIT"),
        ("Aborted", "SIGABRT"),
        ("Segmentation fault", "SIGSEGV"),
        ("Stopped", "SIGTSTP"),
    ];
    known
        .iter()
        .find(|(text, _)| description.starts_with(text))
        .map_or_else(|| description.to_owned(), |(_, name)| (*name).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output() -> Output {
        Output {
            buffer: Vec::new(),
            total: 0,
            dropped: 0,
            prompts: 0,
            first_prompt_at: None,
            last_output: Instant::now(),
            eof: false,
            exit: None,
        }
    }

    #[test]
    fn scrollback_keeps_the_newest_lines_and_absolute_offsets() {
        let mut out = output();
        out.push(b"a\nb\nc\n", 1000, 2);
        assert_eq!(out.buffer, b"b\nc\n");
        assert_eq!((out.total, out.dropped), (6, 2));
        assert_eq!(out.since(4), (&b"c\n"[..], false));
        assert!(out.since(0).1);
        out.push(b"0123456789\n", 8, 100);
        assert!(out.buffer.len() <= 8);
    }

    #[test]
    fn utf8_cuts_never_split_a_character() {
        let text = "a\u{e9}\u{e9}";
        assert_eq!(utf8_tail(text.as_bytes(), 3), ("\u{e9}".as_bytes(), true));
        assert_eq!(utf8_head(text, 2), "a");
    }

    #[test]
    fn exit_status_names_signals() {
        assert_eq!(signal_name("Hangup"), "SIGHUP");
        assert_eq!(
            SessionStatus::Exited {
                code: Some(3),
                signal: None
            }
            .render(),
            "exited code=3 signal=null"
        );
    }
}
