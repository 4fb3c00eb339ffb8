//! `/acp`: one ACP connection per WebSocket, following the ACP remote-transport draft: each
//! text frame carries one JSON-RPC message, in both directions.
//!
//! The socket is joined to `dsh_acp::serve_shared` through two in-memory pipes, so the
//! connection is served by the same code as `dsh acp` on stdio (same methods, results, errors
//! and line rules), sharing the server's live sessions with the other connections. Frames to
//! the browser go through a bounded queue: a viewer that stops reading never blocks the agent
//! nor grows the server's memory; once the queue is over its budget the viewer is dropped
//! (its socket closed; its sessions run on), and a client reconnects and catches up from its
//! cursor.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;

use axum::extract::ws::CloseFrame;
use axum::extract::ws::Message;
use axum::extract::ws::WebSocket;
use futures::SinkExt;
use futures::StreamExt;
use tokio::io::AsyncBufReadExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The most frame bytes held for one viewer that is not reading (the default).
pub const VIEWER_QUEUE_BYTES: usize = 8 * 1024 * 1024;
/// The largest frame accepted from a client (as `dsh acp`'s largest line).
pub(crate) const MAX_FRAME_BYTES: usize = dsh_acp::lines::MAX_LINE_BYTES;
/// The close code sent to a viewer dropped for falling behind (RFC 6455 "try again later").
const CLOSE_TOO_SLOW: u16 = 1013;
/// The close code sent at server shutdown ("going away").
const CLOSE_GOING_AWAY: u16 = 1001;

/// Frames waiting for one viewer, with their total size.
#[derive(Default)]
struct Outbox {
    frames: VecDeque<String>,
    bytes: usize,
    /// Over budget once: the viewer is being dropped, nothing more is queued.
    overflowed: bool,
    /// The agent side has ended: send what is queued, then close.
    finished: bool,
}

struct Queue {
    outbox: Mutex<Outbox>,
    wake: Notify,
    budget: usize,
}

impl Queue {
    fn new(budget: usize) -> Self {
        Self {
            outbox: Mutex::default(),
            wake: Notify::new(),
            budget,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Outbox> {
        self.outbox
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues a frame; false once the viewer is over budget.
    fn push(&self, frame: String) -> bool {
        let mut outbox = self.lock();
        if outbox.overflowed {
            return false;
        }
        if outbox.bytes + frame.len() > self.budget {
            outbox.overflowed = true;
            outbox.frames.clear();
            outbox.bytes = 0;
            drop(outbox);
            self.wake.notify_one();
            return false;
        }
        outbox.bytes += frame.len();
        outbox.frames.push_back(frame);
        drop(outbox);
        self.wake.notify_one();
        true
    }

    fn finish(&self) {
        self.lock().finished = true;
        self.wake.notify_one();
    }
}

enum Next {
    Frame(String),
    Overflowed,
    Finished,
}

impl Queue {
    async fn next(&self) -> Next {
        loop {
            let notified = self.wake.notified();
            {
                let mut outbox = self.lock();
                if outbox.overflowed {
                    return Next::Overflowed;
                }
                if let Some(frame) = outbox.frames.pop_front() {
                    outbox.bytes -= frame.len();
                    return Next::Frame(frame);
                }
                if outbox.finished {
                    return Next::Finished;
                }
            }
            notified.await;
        }
    }
}

/// A client frame as one line for the line transport: JSON's insignificant whitespace may
/// contain newlines, which would split the message; inside strings they cannot occur raw.
fn as_line(text: &str) -> Vec<u8> {
    let mut line: Vec<u8> = text
        .bytes()
        .map(|b| if b == b'\n' || b == b'\r' { b' ' } else { b })
        .collect();
    line.push(b'\n');
    line
}

/// Serves one ACP connection over `socket` until the client leaves or `stop` fires; then the
/// connection's sessions are torn down as `dsh acp` does at end of input.
pub(crate) async fn serve_socket(
    socket: WebSocket,
    sessions: dsh_host::SessionHost,
    live: dsh_acp::LiveSessions,
    bridge: dsh_acp::BridgeConfig,
    queue_bytes: usize,
    stop: CancellationToken,
) {
    let (mut sink, mut stream) = socket.split();
    let (mut to_agent, agent_in) = tokio::io::duplex(256 * 1024);
    let (agent_out, from_agent) = tokio::io::duplex(256 * 1024);
    let agent = tokio::spawn(dsh_acp::serve_shared(
        sessions, bridge, live, agent_in, agent_out,
    ));
    let queue = Arc::new(Queue::new(queue_bytes));

    // Agent → queue: never waits on the viewer, so the agent never does either.
    let pump = {
        let queue = queue.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(from_agent).lines();
            // Once the viewer is dropped, keep draining so the agent is not held.
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = queue.push(line);
            }
            queue.finish();
        })
    };

    // Queue → socket.
    let viewer_gone = CancellationToken::new();
    let sender = {
        let queue = queue.clone();
        let viewer_gone = viewer_gone.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            loop {
                // At a stop the agent side ends after the last answers; they go out first.
                match queue.next().await {
                    Next::Frame(frame) => {
                        if sink.send(Message::Text(frame.into())).await.is_err() {
                            break;
                        }
                    }
                    Next::Overflowed => {
                        tracing::warn!("a viewer fell too far behind and was dropped");
                        let _ = sink
                            .send(Message::Close(Some(CloseFrame {
                                code: CLOSE_TOO_SLOW,
                                reason: "too far behind: reconnect".into(),
                            })))
                            .await;
                        break;
                    }
                    Next::Finished => {
                        let code = if stop.is_cancelled() {
                            CLOSE_GOING_AWAY
                        } else {
                            1000
                        };
                        let _ = sink
                            .send(Message::Close(Some(CloseFrame {
                                code,
                                reason: "".into(),
                            })))
                            .await;
                        break;
                    }
                }
            }
            viewer_gone.cancel();
        })
    };

    // Socket → agent.
    loop {
        let message = tokio::select! {
            message = stream.next() => message,
            () = stop.cancelled() => break,
            () = viewer_gone.cancelled() => break,
        };
        let text = match message {
            Some(Ok(Message::Text(text))) => text.to_string(),
            // The draft carries JSON-RPC in text frames; a binary frame that is UTF-8 is
            // taken the same way, anything else is answered by the line rules (a parse error).
            Some(Ok(Message::Binary(bytes))) => String::from_utf8_lossy(&bytes).into_owned(),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(Message::Close(_)) | Err(_)) | None => break,
        };
        if to_agent.write_all(&as_line(&text)).await.is_err() {
            break;
        }
    }
    // End of input: the bridge cancels and answers open prompts, then disposes its agents.
    drop(to_agent);
    match agent.await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(%error, "an ACP connection ended with an error"),
        Err(error) => tracing::warn!(%error, "an ACP connection task failed"),
    }
    let _ = pump.await;
    let _ = sender.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_become_single_lines() {
        assert_eq!(as_line("{\n \"a\": 1\r\n}"), b"{  \"a\": 1  }\n".to_vec());
    }

    #[test]
    fn the_queue_is_bounded_and_says_so_once() {
        let queue = Queue::new(VIEWER_QUEUE_BYTES);
        let frame = "x".repeat(1024 * 1024);
        for _ in 0..8 {
            assert!(queue.push(frame.clone()));
        }
        assert!(!queue.push(frame.clone()));
        assert_eq!(queue.lock().bytes, 0);
        assert!(!queue.push("small".into()));
    }
}
