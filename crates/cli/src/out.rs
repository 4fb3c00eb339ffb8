//! Writing to stdout and stderr without ever panicking or blocking on a closed pipe
//! (`dsh exec … | head -1`): a failed write is dropped, and a closed stream stays closed for
//! the rest of the run. `println!`/`eprintln!` would panic there, and a panic inside a log call
//! can leave a lock held and the process hung.
//!
//! Everything written here passes [`dsh_secrets::terminal_safe`]: what dsh prints came, in
//! part, from a model, a tool, a file or a log, and a terminal would obey an escape sequence in
//! it (OSC 52 sets the clipboard). It is applied whether the stream is a terminal or a pipe (a
//! pipe usually ends in one: `| less -R`, `| tee`); JSON lines stay valid JSON with the same
//! values, so a program that needs the exact text reads `--output json` or `stream-json`.

use std::io::IsTerminal;
use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

static STDERR_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` to stderr, ignoring a closed stream.
pub fn stderr(text: std::fmt::Arguments<'_>) {
    if STDERR_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let text = text.to_string();
    let safe = dsh_secrets::terminal_safe(&text);
    let mut err = std::io::stderr().lock();
    if err
        .write_all(safe.as_bytes())
        .and_then(|()| err.flush())
        .is_err()
    {
        STDERR_CLOSED.store(true, Ordering::Relaxed);
    }
}

/// Writes `text` to stdout; `Err` only for a failure other than a closed reader.
pub fn stdout(text: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    let text = text.to_string();
    let safe = dsh_secrets::terminal_safe(&text);
    let mut out = std::io::stdout().lock();
    match out.write_all(safe.as_bytes()).and_then(|()| out.flush()) {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Whether stderr is a terminal (colours, progress notes).
pub fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// The tracing writer for stderr: drops everything once stderr is closed.
pub struct QuietStderr;

impl Write for QuietStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if STDERR_CLOSED.load(Ordering::Relaxed) {
            return Ok(buf.len());
        }
        match std::io::stderr().write_all(buf) {
            Ok(()) => Ok(buf.len()),
            Err(_) => {
                STDERR_CLOSED.store(true, Ordering::Relaxed);
                Ok(buf.len())
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

/// The headless front-ends' streams: stdout lines written and flushed as they come (a closed
/// reader is reported, so a stream stops), stderr lines through [`stderr`].
pub fn io() -> dsh_headless::Io {
    dsh_headless::Io {
        stdout: std::sync::Arc::new(|line: &str| {
            let safe = dsh_secrets::terminal_safe(line);
            let mut out = std::io::stdout().lock();
            writeln!(out, "{safe}").and_then(|()| out.flush())
        }),
        stderr: std::sync::Arc::new(|line: &str| stderr(format_args!("{line}\n"))),
    }
}
