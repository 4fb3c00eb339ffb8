//! Live tool output as progress `tool_call_update`s: the [`ToolOutputSink`] the bridge provides
//! on each agent it owns, and the buffer its per-session flusher drains.
//!
//! Tools call the sink on their read loops, so it only copies into bounded per-call buffers
//! and wakes the flusher; it never touches the connection. The flusher sends through the
//! session's ordered delivery (the same lock committed events go through), and the completing
//! update settles the call's buffer under that lock, so no progress update can follow it.
//!
//! Wire shapes (§1B has no live output; this follows its final-update vocabulary):
//! - With the terminal capability, each flush sends
//!   `{toolCallId, _meta: {terminal_output: {terminal_id, data}}}` where `data` is the output
//!   since the previous flush (the client appends it to the terminal). Once any of it went out,
//!   the rest is flushed before the completing update, and that update keeps `terminal_exit`
//!   but drops its `terminal_output` (the full output again would print twice). A call that
//!   finished before anything was streamed completes exactly as without live output.
//! - Without it, at most every [`THROTTLE`] a call's `content` is replaced by the fenced
//!   console text of its output so far (bounded tail); the completing update replaces it with
//!   the result as before, so nothing is duplicated.
//!
//! Nested calls (Code Mode) have no card of their own and are not shown.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::Weak;
use std::time::Duration;

use dsh_tools::OutputStream;
use dsh_tools::ToolOutputSink;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use dsh_sync::lock;

/// Per call: the most output held for the client (the bash tool's own in-memory tail).
pub(crate) const LIVE_TAIL_BYTES: usize = 64_000;
/// Calls with buffered output at once; the oldest is forgotten beyond this.
const MAX_CALLS: usize = 16;
/// Minimum spacing of console-text progress updates (clients without terminals).
pub(crate) const THROTTLE: Duration = Duration::from_millis(100);

#[derive(Debug, Default)]
struct CallOutput {
    /// Output not yet sent to a terminal client.
    unsent: String,
    /// Bytes that left `unsent` unsent because the client fell behind.
    skipped: usize,
    /// The output so far, bounded (console text for clients without terminals).
    tail: String,
    dirty: bool,
    /// Some output already reached the client as terminal data.
    streamed: bool,
}

/// One flushable piece of a call's output.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Flush {
    pub(crate) call_id: String,
    /// Terminal data since the previous flush (with a skip notice when some was dropped).
    pub(crate) data: String,
    /// The bounded output so far.
    pub(crate) tail: String,
}

/// The live output of one session's running calls.
#[derive(Debug, Default)]
pub(crate) struct LiveOutput {
    calls: Mutex<VecDeque<(String, CallOutput)>>,
    wake: Notify,
}

/// Appends `text` to `buffer`, keeping its last `max` bytes; returns how many were dropped.
fn push_bounded(buffer: &mut String, text: &str, max: usize) -> usize {
    buffer.push_str(text);
    if buffer.len() <= max {
        return 0;
    }
    let mut cut = buffer.len() - max;
    while !buffer.is_char_boundary(cut) {
        cut += 1;
    }
    buffer.drain(..cut);
    cut
}

impl LiveOutput {
    /// Takes what changed for the calls `shown` accepts (`Some(terminal)` for a call the
    /// client shows). Calls it does not accept yet stay buffered.
    pub(crate) fn drain(&self, shown: impl Fn(&str) -> Option<bool>) -> Vec<(Flush, bool)> {
        let mut calls = lock(&self.calls);
        let mut out = Vec::new();
        for (call_id, call) in calls.iter_mut().filter(|(_, call)| call.dirty) {
            let Some(terminal) = shown(call_id) else {
                continue;
            };
            call.dirty = false;
            let data = take_data(call);
            call.streamed |= terminal && !data.is_empty();
            out.push((
                Flush {
                    call_id: call_id.clone(),
                    data,
                    tail: call.tail.clone(),
                },
                terminal,
            ));
        }
        out
    }

    /// Forgets a finished call. Returns its unsent terminal data when some of its output was
    /// already streamed (so the completing update must not repeat the whole output), `None`
    /// when nothing was.
    pub(crate) fn settle(&self, call_id: &str) -> Option<String> {
        let mut calls = lock(&self.calls);
        let index = calls.iter().position(|(id, _)| id == call_id)?;
        let (_, mut call) = calls.remove(index)?;
        call.streamed.then(|| take_data(&mut call))
    }

    fn wait(&self) -> tokio::sync::futures::Notified<'_> {
        self.wake.notified()
    }
}

fn take_data(call: &mut CallOutput) -> String {
    let mut data = std::mem::take(&mut call.unsent);
    if call.skipped > 0 {
        data.insert_str(
            0,
            &format!("[… {} bytes of output skipped …]\n", call.skipped),
        );
        call.skipped = 0;
    }
    data
}

impl ToolOutputSink for LiveOutput {
    fn output(&self, call_id: &str, _stream: OutputStream, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        // stdout and stderr share the terminal, as they would in a real one.
        let text = String::from_utf8_lossy(chunk);
        {
            let mut calls = lock(&self.calls);
            let index = match calls.iter().position(|(id, _)| id == call_id) {
                Some(index) => index,
                None => {
                    if calls.len() >= MAX_CALLS {
                        calls.pop_front();
                    }
                    calls.push_back((call_id.to_owned(), CallOutput::default()));
                    calls.len() - 1
                }
            };
            if let Some((_, call)) = calls.get_mut(index) {
                call.skipped += push_bounded(&mut call.unsent, &text, LIVE_TAIL_BYTES);
                push_bounded(&mut call.tail, &text, LIVE_TAIL_BYTES);
                call.dirty = true;
            }
        }
        self.wake.notify_one();
    }
}

/// Where the flusher sends: the session's delivery, still alive.
pub(crate) trait FlushTarget: Send + 'static {
    fn flush_live(&mut self);
}

/// Runs the session's flusher until `stop` fires or the delivery is gone. Console text is
/// throttled to one update per call per [`THROTTLE`]; terminal data goes out as it comes.
pub(crate) fn spawn_flusher<T: FlushTarget>(
    live: Arc<LiveOutput>,
    delivery: Weak<Mutex<T>>,
    terminal_output: bool,
    stop: CancellationToken,
) -> bool {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return false;
    };
    runtime.spawn(async move {
        loop {
            tokio::select! {
                () = live.wait() => {}
                () = stop.cancelled() => break,
            }
            if !terminal_output {
                tokio::select! {
                    () = tokio::time::sleep(THROTTLE) => {}
                    () = stop.cancelled() => break,
                }
            }
            let Some(delivery) = delivery.upgrade() else {
                break;
            };
            lock(&delivery).flush_live();
        }
    });
    true
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn shown(id: &str) -> Option<bool> {
        (id == "c1").then_some(true)
    }

    #[test]
    fn drains_only_shown_calls_and_settles_the_rest_of_a_streamed_one() {
        let live = LiveOutput::default();
        live.output("c1", OutputStream::Stdout, b"a\n");
        live.output("nested", OutputStream::Stdout, b"x");
        live.output("c1", OutputStream::Stderr, b"b\n");
        let flushed = live.drain(shown);
        assert_eq!(
            flushed,
            vec![(
                Flush {
                    call_id: "c1".into(),
                    data: "a\nb\n".into(),
                    tail: "a\nb\n".into()
                },
                true
            )]
        );
        assert!(live.drain(shown).is_empty());
        live.output("c1", OutputStream::Stdout, b"c\n");
        assert_eq!(live.settle("c1"), Some("c\n".to_owned()));
        assert_eq!(live.settle("c1"), None);
    }

    #[test]
    fn an_unstreamed_call_settles_to_nothing() {
        let live = LiveOutput::default();
        live.output("c1", OutputStream::Stdout, b"fast\n");
        assert_eq!(live.settle("c1"), None);
        // Console mode never streams terminal data.
        live.output("c2", OutputStream::Stdout, b"text\n");
        let flushed = live.drain(|_| Some(false));
        assert_eq!(flushed[0].0.tail, "text\n");
        assert_eq!(live.settle("c2"), None);
    }

    #[test]
    fn buffers_stay_bounded_and_say_what_was_skipped() {
        let live = LiveOutput::default();
        let block = "é".repeat(10_000);
        for _ in 0..4 {
            live.output("c1", OutputStream::Stdout, block.as_bytes());
        }
        for i in 0..(MAX_CALLS + 3) {
            live.output(&format!("other{i}"), OutputStream::Stdout, b"x");
        }
        assert_eq!(lock(&live.calls).len(), MAX_CALLS);
        let live = LiveOutput::default();
        for _ in 0..4 {
            live.output("c1", OutputStream::Stdout, block.as_bytes());
        }
        let (flush, _) = live.drain(shown).pop().unwrap();
        assert_eq!(flush.tail.len(), LIVE_TAIL_BYTES);
        assert!(
            flush
                .data
                .starts_with("[… 16000 bytes of output skipped …]\n"),
            "{}",
            &flush.data[..60]
        );
        assert!(flush.data.len() < LIVE_TAIL_BYTES + 64);
    }
}
