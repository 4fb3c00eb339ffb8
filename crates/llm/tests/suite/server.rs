//! A scripted HTTP/1.1 server on 127.0.0.1 with byte-level control over the response body
//! (split frames, stalls, abrupt closes), recording every request it receives.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::net::TcpStream;

#[derive(Clone, Debug)]
pub enum Step {
    /// One chunked-encoding frame, flushed on its own.
    Send(Vec<u8>),
    Sleep(Duration),
    /// Keep the connection open, sending nothing, until the client goes away.
    Hang,
    /// Drop the connection without finishing the body.
    Reset,
}

#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub steps: Vec<Step>,
}

impl Reply {
    pub fn sse(steps: Vec<Step>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            steps,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Recorded {
    pub request_line: String,
    /// Header lines in wire order, names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

pub struct Server {
    pub base_url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl Server {
    pub async fn start(replies: Vec<Reply>) -> Self {
        Self::start_with_prefix(replies, "").await
    }

    pub async fn start_with_prefix(replies: Vec<Reply>, prefix: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}{prefix}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let queue = Arc::new(Mutex::new(VecDeque::from(replies)));
        let recorded = requests.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let recorded = recorded.clone();
                let queue = queue.clone();
                tokio::spawn(async move { serve(socket, recorded, queue).await });
            }
        });
        Self { base_url, requests }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

async fn serve(
    mut socket: TcpStream,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    queue: Arc<Mutex<VecDeque<Reply>>>,
) {
    let mut buffer = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return;
        }
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    recorded.lock().unwrap().push(Recorded {
        request_line,
        headers,
        body,
    });
    let Some(reply) = queue.lock().unwrap().pop_front() else {
        let _ = socket.write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
        return;
    };
    let mut head = format!(
        "HTTP/1.1 {} X\r\ntransfer-encoding: chunked\r\nconnection: close\r\n",
        reply.status
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    if socket.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    for step in reply.steps {
        match step {
            Step::Send(bytes) => {
                let frame = [
                    format!("{:x}\r\n", bytes.len()).into_bytes(),
                    bytes,
                    b"\r\n".to_vec(),
                ]
                .concat();
                if socket.write_all(&frame).await.is_err() || socket.flush().await.is_err() {
                    return;
                }
            }
            Step::Sleep(duration) => tokio::time::sleep(duration).await,
            Step::Hang => {
                let mut sink = [0u8; 64];
                while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
                return;
            }
            Step::Reset => return,
        }
    }
    let _ = socket.write_all(b"0\r\n\r\n").await;
    let _ = socket.flush().await;
}

/// `data: <payload>\n\n` for each payload.
pub fn events(payloads: &[Value]) -> Vec<u8> {
    payloads
        .iter()
        .map(|p| format!("data: {p}\n\n"))
        .collect::<String>()
        .into_bytes()
}

pub fn done() -> Vec<u8> {
    b"data: [DONE]\n\n".to_vec()
}

/// One `chat.completion.chunk` with a single choice.
pub fn delta(delta: Value, finish_reason: Option<&str>) -> Value {
    serde_json::json!({"id":"replay-1","object":"chat.completion.chunk","created":0,"model":"deepseek-v4-flash",
                       "choices":[{"index":0,"delta":delta,"finish_reason":finish_reason}]})
}

/// The final chunk: empty delta, finish reason, usage at top level.
pub fn last(finish_reason: &str, usage: Value) -> Value {
    let mut chunk = delta(serde_json::json!({}), Some(finish_reason));
    chunk["usage"] = usage;
    chunk
}

/// Splits `bytes` into frames of `size` bytes (the last may be shorter).
pub fn frames(bytes: &[u8], size: usize) -> Vec<Step> {
    bytes.chunks(size).map(|c| Step::Send(c.to_vec())).collect()
}
