//! Load test of `dsh web` (run by `scripts/bench-web.sh`): N sessions at once, each running
//! one turn of S steps against a replayed model (a no-op tool call per step, then an answer),
//! each watched by V WebSocket viewers (the first one prompts), optionally plus one viewer per
//! session that never reads. Prints the server process's peak and final RSS, CPU per event
//! and the latency from an event's commit to its arrival at a viewer (p50/p99).
//!
//! The server, the model and the clients share this process: CPU counts the clients' JSON
//! parsing too, so per-event CPU is an upper bound of the server's.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Instant;

use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_host::Config;
use dsh_host::Host;
use dsh_host::HostOptions;
use dsh_host::Layer;
use dsh_llm::ChunkStream;
use dsh_llm::ModelAdapter;
use dsh_llm::ModelRequest;
use dsh_protocol::ContentBlock;
use dsh_tools::Tool;
use futures::SinkExt;
use futures::StreamExt;
use serde_json::Value;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

/// Each session's request count, by session id: step `S` answers, the others call the tool.
struct Steps {
    steps: u64,
    seen: Mutex<HashMap<String, u64>>,
}

impl ModelAdapter for Steps {
    fn provider(&self) -> &str {
        "bench"
    }

    fn stream(&self, request: ModelRequest, _cancel: CancellationToken) -> ChunkStream {
        let id = request.session_id.clone().unwrap_or_default();
        let step = {
            let mut seen = self.seen.lock().unwrap();
            let step = seen.entry(id).or_insert(0);
            *step += 1;
            *step
        };
        let chunks = if step < self.steps {
            tool_call_response(
                &format!("call-{step}"),
                "noop",
                "{}",
                Some("Working on it. "),
            )
        } else {
            text_response("All steps done.")
        };
        futures::stream::iter(chunks).boxed()
    }
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn proc_status(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU seconds of this process.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields 14 and 15 (utime, stime) are at 11 and 12 after the command name.
    (ticks(11) + ticks(12)) / 100.0
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn send<S>(socket: &mut S, id: u64, method: &str, params: Value)
where
    S: futures::Sink<Message> + Unpin,
    S::Error: std::fmt::Debug,
{
    let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    socket
        .send(Message::Text(frame.to_string().into()))
        .await
        .unwrap();
}

async fn answer(socket: &mut Socket, id: u64) -> Value {
    loop {
        let Some(Ok(Message::Text(text))) = socket.next().await else {
            panic!("connection closed")
        };
        let frame: Value = serde_json::from_str(&text).unwrap();
        if frame["id"] == json!(id) && frame.get("method").is_none() {
            return frame;
        }
    }
}

type Commits = Arc<Mutex<HashMap<(String, u64), Instant>>>;

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let sessions = arg("--sessions", 50) as usize;
    let steps = arg("--steps", 200);
    let viewers = arg("--viewers", 4) as usize;
    let stalled = arg("--stalled", 0) as usize;
    let home = tempfile::tempdir().unwrap();
    let mut config = Config::empty(home.path().join("dsh-home"), home.path().to_path_buf());
    let Value::Object(table) = json!({"model": {"name": "bench-model", "api_key_env": "PATH"}})
    else {
        unreachable!()
    };
    config.merge(Layer::User, table, None);
    let mut options = HostOptions::new(config);
    options.store = Some(Arc::new(dsh_session::JsonlStore::new(home.path())));
    options.adapter = Some(Arc::new(Steps {
        steps,
        seen: Mutex::default(),
    }));
    options.plugins = Some(Vec::new());
    let host = Host::build(options).unwrap();
    let scope = host.extension_scope("bench").unwrap();
    let noop = Tool::builder("noop")
        .description("does nothing")
        .raw_parameters(json!({"type": "object", "properties": {}}))
        .raw_output(json!({"type": "string"}), |_, _| {
            Ok(vec![ContentBlock::text("ok")])
        })
        .run(|_: Value, _| async { Ok::<_, dsh_tools::ToolError>("ok".to_owned()) })
        .build()
        .unwrap();
    host.sessions().registry().register(&scope, noop).unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(dsh_web::serve(
        listener,
        host.sessions(),
        dsh_web::WebConfig::default(),
        async move {
            let _ = stop_rx.await;
        },
    ));
    let url = format!("ws://{addr}/acp");
    let commits: Commits = Arc::default();
    let latencies: Arc<Mutex<Vec<f64>>> = Arc::default();
    let delivered = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let init =
        json!({"protocolVersion": 1, "clientCapabilities": {"_meta": {"dsh": {"cursor": true}}}});

    // Open every session and its viewers first; then start all turns at once.
    let mut owners = Vec::new();
    let mut watchers = Vec::new();
    let mut stalls = Vec::new();
    let mut subscriptions = Vec::new();
    for index in 0..sessions {
        let cwd = home.path().join(format!("w{index}"));
        std::fs::create_dir_all(&cwd).unwrap();
        let (mut owner, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
        send(&mut owner, 1, "initialize", init.clone()).await;
        answer(&mut owner, 1).await;
        send(
            &mut owner,
            2,
            "session/new",
            json!({"cwd": cwd, "mcpServers": []}),
        )
        .await;
        let session = answer(&mut owner, 2).await["result"]["sessionId"]
            .as_str()
            .unwrap()
            .to_owned();
        let agent = host.sessions().live(&session).unwrap();
        let record = commits.clone();
        let id = session.clone();
        subscriptions.push(agent.log().on_event(move |event| {
            record
                .lock()
                .unwrap()
                .insert((id.clone(), event.seq), Instant::now());
        }));
        for _ in 1..viewers {
            let (mut viewer, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
            send(&mut viewer, 1, "initialize", init.clone()).await;
            answer(&mut viewer, 1).await;
            send(
                &mut viewer,
                2,
                "session/load",
                json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
            )
            .await;
            answer(&mut viewer, 2).await;
            watchers.push((session.clone(), viewer));
        }
        for _ in 0..stalled {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.set_recv_buffer_size(4096).unwrap();
            let stream = socket.connect(addr).await.unwrap();
            let (mut viewer, _) = tokio_tungstenite::client_async(&url, stream).await.unwrap();
            send(&mut viewer, 1, "initialize", init.clone()).await;
            send(
                &mut viewer,
                2,
                "session/load",
                json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
            )
            .await;
            stalls.push(viewer);
        }
        owners.push((session, owner));
    }
    let rss_before = proc_status("VmRSS:");
    let cpu_before = cpu_seconds();
    let started = Instant::now();

    let watch = |session: String, mut socket: Socket, prompt: bool| {
        let commits = commits.clone();
        let latencies = latencies.clone();
        let delivered = delivered.clone();
        tokio::spawn(async move {
            if prompt {
                send(
                    &mut socket,
                    3,
                    "session/prompt",
                    json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}),
                )
                .await;
            }
            let mut done = false;
            let mut answer_text = String::new();
            while let Some(Ok(message)) = socket.next().await {
                let Message::Text(text) = message else {
                    continue;
                };
                let now = Instant::now();
                let frame: Value = serde_json::from_str(&text).unwrap();
                if prompt && frame["id"] == 3 {
                    break;
                }
                let Some(seq) = frame["params"]["_meta"]["dsh"]["seq"].as_u64() else {
                    continue;
                };
                delivered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let committed = commits
                    .lock()
                    .unwrap()
                    .get(&(session.clone(), seq))
                    .copied();
                if let Some(committed) = committed {
                    latencies
                        .lock()
                        .unwrap()
                        .push(now.saturating_duration_since(committed).as_secs_f64() * 1000.0);
                }
                if let Some(text) = frame["params"]["update"]["content"]["text"].as_str() {
                    answer_text.push_str(text);
                    if answer_text.ends_with("All steps done.") {
                        done = true;
                    }
                    if answer_text.len() > 64 {
                        answer_text.drain(..answer_text.len() - 32);
                    }
                }
                if done && !prompt {
                    break;
                }
            }
        })
    };
    let mut tasks = Vec::new();
    for (session, socket) in owners {
        tasks.push(watch(session, socket, true));
    }
    for (session, socket) in watchers {
        tasks.push(watch(session, socket, false));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let wall = started.elapsed();
    let cpu = cpu_seconds() - cpu_before;
    let rss_after = proc_status("VmRSS:");
    let hwm = proc_status("VmHWM:");
    let events: u64 = commits.lock().unwrap().len() as u64;
    let mut latencies = latencies.lock().unwrap().clone();
    latencies.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    println!("sessions {sessions}, steps {steps}, viewers {viewers} (+{stalled} stalled) each");
    println!(
        "wall {:.1} s; events committed {events}; updates delivered (with seq) {}",
        wall.as_secs_f64(),
        delivered.load(std::sync::atomic::Ordering::Relaxed)
    );
    println!(
        "RSS before the turns {} MiB, after {} MiB, peak (VmHWM) {} MiB",
        rss_before / 1024,
        rss_after / 1024,
        hwm / 1024
    );
    println!(
        "CPU {cpu:.1} s = {:.0} us per committed event",
        cpu / events.max(1) as f64 * 1e6
    );
    println!(
        "commit-to-viewer latency: p50 {:.1} ms, p99 {:.1} ms ({} samples)",
        pct(0.5),
        pct(0.99),
        latencies.len()
    );
    drop(stalls);
    drop(subscriptions);
    let _ = stop_tx.send(());
    served.await.unwrap().unwrap();
}
