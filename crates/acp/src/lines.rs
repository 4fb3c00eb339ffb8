//! The wire under the protocol: newline-delimited JSON-RPC read from raw bytes, so that bad
//! input costs one error answer instead of the whole connection.
//!
//! - A line that is not valid UTF-8 is answered with a JSON-RPC parse error (`-32700`,
//!   `id: null`) and skipped; the next line is served.
//! - A line longer than [`MAX_LINE_BYTES`] is not buffered: its bytes are discarded up to the
//!   next newline as they arrive, and it is answered with a parse error that says so. Memory
//!   stays bounded by the cap, whatever the peer sends.
//! - Every frame, ours and the protocol crate's, goes through one writer, so an error answer
//!   never interleaves with a protocol frame.

use std::io;

use futures::SinkExt;
use futures::StreamExt;
use futures::channel::mpsc;
use serde_json::json;
use tokio::io::AsyncBufReadExt;
use tokio::io::AsyncRead;
use tokio::io::AsyncWrite;
use tokio::io::AsyncWriteExt;
use tokio::io::BufReader;

/// The largest JSON-RPC line accepted: prompts with several images fit, a runaway peer does
/// not.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// The writer stops adding queued frames to one write past this many bytes.
const BATCH_BYTES: usize = 256 * 1024;

/// One incoming line, or why it was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Incoming {
    Line(String),
    NotUtf8,
    TooLong { bytes: usize },
}

/// Reads lines of at most `max` bytes (without the newline); a final unterminated line counts.
pub(crate) struct LineReader<R> {
    reader: BufReader<R>,
    max: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub(crate) fn new(reader: R, max: usize) -> Self {
        Self {
            reader: BufReader::with_capacity(64 * 1024, reader),
            max,
        }
    }

    /// The next line; `None` at end of input.
    pub(crate) async fn next(&mut self) -> io::Result<Option<Incoming>> {
        let mut line: Vec<u8> = Vec::new();
        let mut dropped = 0usize;
        loop {
            let buf = self.reader.fill_buf().await?;
            if buf.is_empty() {
                if line.is_empty() && dropped == 0 {
                    return Ok(None);
                }
                return Ok(Some(finish(line, dropped)));
            }
            let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
                Some(end) => (&buf[..end], Some(end + 1)),
                None => (buf, None),
            };
            if dropped == 0 && line.len() + chunk.len() <= self.max {
                line.extend_from_slice(chunk);
            } else {
                dropped += line.len() + chunk.len();
                line = Vec::new();
            }
            let used = done.unwrap_or(buf.len());
            self.reader.consume(used);
            if done.is_some() {
                return Ok(Some(finish(line, dropped)));
            }
        }
    }
}

fn finish(mut line: Vec<u8>, dropped: usize) -> Incoming {
    if dropped > 0 {
        return Incoming::TooLong { bytes: dropped };
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    match String::from_utf8(line) {
        Ok(text) => Incoming::Line(text),
        Err(_) => Incoming::NotUtf8,
    }
}

/// The parse-error answer to a refused line.
pub(crate) fn refusal(incoming: &Incoming) -> Option<String> {
    let detail = match incoming {
        Incoming::Line(_) => return None,
        Incoming::NotUtf8 => "the line is not valid UTF-8".to_owned(),
        Incoming::TooLong { bytes } => format!(
            "the line has {bytes} bytes, over the {MAX_LINE_BYTES}-byte limit of one message"
        ),
    };
    Some(
        json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {"code": -32700, "message": "Parse error", "data": {"reason": detail}},
        })
        .to_string(),
    )
}

/// The writer: one frame per line, in order. Every frame already queued when it wakes goes
/// out in one write and one flush (a `session/load` replay queues thousands at once), up to
/// [`BATCH_BYTES`]; a lone frame is still written and flushed at once. Ends when the queue
/// closes and is drained, or at the first write error.
fn spawn_writer<W>(
    mut queued: mpsc::UnboundedReceiver<String>,
    mut outgoing: W,
) -> tokio::task::JoinHandle<()>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut batch: Vec<u8> = Vec::new();
        while let Some(frame) = queued.next().await {
            batch.clear();
            batch.extend_from_slice(frame.as_bytes());
            batch.push(b'\n');
            while batch.len() < BATCH_BYTES {
                match queued.try_recv() {
                    Ok(frame) => {
                        batch.extend_from_slice(frame.as_bytes());
                        batch.push(b'\n');
                    }
                    // Nothing queued right now, or closed: write what we have.
                    Err(_) => break,
                }
            }
            if outgoing.write_all(&batch).await.is_err() || outgoing.flush().await.is_err() {
                break;
            }
            if batch.capacity() > BATCH_BYTES * 2 {
                batch = Vec::new();
            }
        }
    })
}

/// The protocol crate's `Lines` transport over `incoming`/`outgoing` byte streams with the
/// rules above, and the writer task: it ends once every frame queued before the transport was
/// dropped is written and flushed, so awaiting it before exit loses no answer.
pub(crate) fn transport<R, W>(
    incoming: R,
    outgoing: W,
) -> (
    agent_client_protocol::Lines<
        impl futures::Sink<String, Error = io::Error> + Send + 'static,
        impl futures::Stream<Item = io::Result<String>> + Send + 'static,
    >,
    tokio::task::JoinHandle<()>,
)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (frames, queued) = mpsc::unbounded::<String>();
    let writer = spawn_writer(queued, outgoing);
    let refusals = frames.clone();
    let lines = futures::stream::unfold(
        (LineReader::new(incoming, MAX_LINE_BYTES), refusals),
        |(mut reader, refusals)| async move {
            loop {
                match reader.next().await {
                    Ok(None) => return None,
                    Err(error) => return Some((Err(error), (reader, refusals))),
                    Ok(Some(Incoming::Line(line))) => return Some((Ok(line), (reader, refusals))),
                    Ok(Some(refused)) => {
                        if let Some(answer) = refusal(&refused) {
                            tracing::warn!(?refused, "refused an incoming ACP line");
                            let _ = refusals.unbounded_send(answer);
                        }
                    }
                }
            }
        },
    );
    let sink = frames.sink_map_err(|error| io::Error::new(io::ErrorKind::BrokenPipe, error));
    (
        agent_client_protocol::Lines::new(sink, Box::pin(lines)),
        writer,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all(input: &[u8], max: usize) -> Vec<Incoming> {
        let mut reader = LineReader::new(input, max);
        let mut out = Vec::new();
        while let Some(line) = reader.next().await.unwrap() {
            out.push(line);
        }
        out
    }

    #[tokio::test]
    async fn queued_frames_go_out_in_order_each_on_its_own_line() {
        let (ours, mut theirs) = tokio::io::duplex(1 << 20);
        let (frames, queued) = mpsc::unbounded::<String>();
        // Queued before the writer runs: they leave in batches, over BATCH_BYTES in total.
        for i in 0..50_000 {
            frames.unbounded_send(format!("{{\"n\":{i}}}")).unwrap();
        }
        drop(frames);
        let writer = spawn_writer(queued, ours);
        let mut out = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut theirs, &mut out)
            .await
            .unwrap();
        writer.await.unwrap();
        let expected: String = (0..50_000).map(|i| format!("{{\"n\":{i}}}\n")).collect();
        assert!(expected.len() > BATCH_BYTES);
        assert_eq!(out, expected);
    }

    #[tokio::test]
    async fn bad_lines_are_refused_one_by_one() {
        let input = b"{\"a\":1}\n\xff\xfe\n0123456789abcdef\n{\"b\":2}\r\nlast";
        assert_eq!(
            read_all(input, 10).await,
            [
                Incoming::Line("{\"a\":1}".into()),
                Incoming::NotUtf8,
                Incoming::TooLong { bytes: 16 },
                Incoming::Line("{\"b\":2}".into()),
                Incoming::Line("last".into()),
            ]
        );
        assert!(refusal(&Incoming::NotUtf8).unwrap().contains("-32700"));
    }
}
