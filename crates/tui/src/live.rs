//! Live tool output into running cards: the [`ToolOutputSink`] the UI provides on each
//! attached agent's scope.
//!
//! The tool calls the sink on its read loop, so it only copies the chunk into a bounded
//! channel and drops it when the UI falls behind; the card then shows a shorter live tail,
//! and the finished card is rendered from the result anyway.

use dsh_tools::OutputStream;
use dsh_tools::ToolOutputSink;
use tokio::sync::mpsc;

/// Chunks in flight between a tool and the UI loop before new ones are dropped.
pub(crate) const LIVE_CHUNKS: usize = 256;

/// The chunk was dropped: the UI is behind or gone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("live output dropped")]
pub struct OutputDropped;

/// Where live output `(call_id, text)` for running cards goes. Never blocks.
#[derive(Debug, Clone)]
pub struct LiveOutput {
    tx: mpsc::Sender<(String, String)>,
}

impl LiveOutput {
    pub(crate) fn channel() -> (Self, mpsc::Receiver<(String, String)>) {
        let (tx, rx) = mpsc::channel(LIVE_CHUNKS);
        (Self { tx }, rx)
    }

    /// Queues one chunk for the call's card, or drops it when the queue is full.
    pub fn send(&self, (call_id, chunk): (String, String)) -> Result<(), OutputDropped> {
        self.tx
            .try_send((call_id, chunk))
            .map_err(|_| OutputDropped)
    }
}

impl ToolOutputSink for LiveOutput {
    fn output(&self, call_id: &str, _stream: OutputStream, chunk: &[u8]) {
        // stdout and stderr share the card, as in a terminal.
        let text = String::from_utf8_lossy(chunk).into_owned();
        if self.send((call_id.to_owned(), text)).is_err() {
            tracing::trace!(call_id, "live output dropped; the UI is behind");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_instead_of_blocking() {
        let (live, mut rx) = LiveOutput::channel();
        for i in 0..LIVE_CHUNKS {
            live.output("c1", OutputStream::Stdout, format!("{i}\n").as_bytes());
        }
        assert_eq!(live.send(("c1".into(), "x".into())), Err(OutputDropped));
        assert_eq!(
            rx.try_recv().ok(),
            Some(("c1".to_owned(), "0\n".to_owned()))
        );
    }
}
