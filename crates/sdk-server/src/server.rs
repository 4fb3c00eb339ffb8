//! The server: reads requests line by line, answers each in order, and notifies every event of
//! every session of the runtime from the same ordered writer, so a notification caused while a
//! request is handled (the receipt of a prompt) is written before that request's answer.

use dsh_sync::lock;
use std::collections::HashMap;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use dsh_agent::AgentEvent;
use dsh_agent::AgentHandle;
use dsh_agent::AgentStatus;
use dsh_agent::SessionSource;
use dsh_host::Host;
use dsh_host::NewSession;
use dsh_host::SessionHost;
use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_session::Subscription;
use dsh_tools::ApprovalService;
use serde_json::Map;
use serde_json::Value;
use serde_json::json;
use tokio::io::AsyncBufReadExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use crate::Initialize;
use crate::Launch;
use crate::Note;
use crate::SdkError;
use crate::wire;
use crate::wire::Incoming;
use crate::wire::RequestId;

/// The largest integer a JSON number carries exactly (JavaScript's safe integers).
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// How serving ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The input ended (or failed): the runtime was disposed.
    InputClosed,
    /// A `shutdown` request was answered.
    Shutdown,
    /// The stop future resolved (a signal).
    Stopped,
}

/// The ordered frame queue. Notifications stop once shutdown begins; answers never do.
struct Outbox {
    frames: Mutex<Option<mpsc::UnboundedSender<String>>>,
    notifying: AtomicBool,
}

impl Outbox {
    fn send(&self, frame: String) {
        if let Some(frames) = lock(&self.frames).as_ref() {
            let _ = frames.send(frame);
        }
    }

    fn notify(&self, method: &str, params: Value) {
        if self.notifying.load(Ordering::Acquire) {
            self.send(wire::notification(method, params));
        }
    }

    fn close(&self) {
        lock(&self.frames).take();
    }
}

/// One SDK-created (or resumed) session.
struct Entry {
    agent: AgentHandle,
    /// The refusing approval channel on the agent's scope (children find it there too).
    _approval: Disposer,
}

/// What exists once `initialize` is answered.
struct Runtime {
    host: Host,
    sessions: SessionHost,
    cwd: PathBuf,
    /// Owns the runtime-wide listeners (status, session starts, child endings).
    _owner: Scope,
    _listeners: Vec<Disposer>,
}

struct Server {
    outbox: Arc<Outbox>,
    launch: Launch,
    note: Note,
    runtime: Option<Runtime>,
    entries: HashMap<String, Entry>,
    /// Every followed log, so their listeners live as long as the runtime.
    follows: Arc<Mutex<Vec<Subscription>>>,
    shutting_down: bool,
}

/// Serves the protocol on `input`/`output` until the input ends, a `shutdown` is answered or
/// `stop` resolves; then disposes every session (in-flight turns end as aborted, logs are
/// synced), shuts the host down and flushes the output.
pub async fn serve<R, W>(
    input: R,
    output: W,
    launch: Launch,
    note: Note,
    stop: impl Future<Output = ()> + Send,
) -> Result<Ended, SdkError>
where
    R: tokio::io::AsyncRead + Unpin + Send,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (frames, queue) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(write_frames(queue, output));
    let outbox = Arc::new(Outbox {
        frames: Mutex::new(Some(frames)),
        notifying: AtomicBool::new(true),
    });
    let mut server = Server {
        outbox: outbox.clone(),
        launch,
        note,
        runtime: None,
        entries: HashMap::new(),
        follows: Arc::default(),
        shutting_down: false,
    };
    let mut lines = tokio::io::BufReader::new(input).lines();
    let mut stop = std::pin::pin!(stop);
    let ended = loop {
        let line = tokio::select! {
            line = lines.next_line() => line,
            () = &mut stop => break Ended::Stopped,
        };
        let line = match line {
            Ok(Some(line)) => line,
            Ok(None) => break Ended::InputClosed,
            Err(error) => {
                tracing::warn!(%error, "SDK input failed; closing");
                break Ended::InputClosed;
            }
        };
        let Some(Incoming::Request { id, method, params }) = wire::classify(&line) else {
            continue;
        };
        let shutdown = tokio::select! {
            shutdown = server.request(id, &method, params) => shutdown,
            () = &mut stop => break Ended::Stopped,
        };
        if shutdown {
            break Ended::Shutdown;
        }
    };
    server.teardown().await;
    outbox.close();
    match writer.await {
        Ok(written) => written.map(|()| ended),
        Err(error) => {
            tracing::warn!(%error, "SDK writer task failed");
            Ok(ended)
        }
    }
}

async fn write_frames<W: tokio::io::AsyncWrite + Unpin>(
    mut queue: mpsc::UnboundedReceiver<String>,
    mut output: W,
) -> Result<(), SdkError> {
    while let Some(mut frame) = queue.recv().await {
        frame.push('\n');
        output
            .write_all(frame.as_bytes())
            .await
            .map_err(SdkError::Output)?;
        // Drain what is already queued before flushing: one flush per burst.
        while let Ok(mut next) = queue.try_recv() {
            next.push('\n');
            output
                .write_all(next.as_bytes())
                .await
                .map_err(SdkError::Output)?;
        }
        output.flush().await.map_err(SdkError::Output)?;
    }
    output.flush().await.map_err(SdkError::Output)
}

/// A handler's failure: the message the client gets.
type Failure = String;

fn string_param<'a>(
    params: &'a Map<String, Value>,
    method: &str,
    key: &str,
) -> Result<&'a str, Failure> {
    match params.get(key) {
        Some(Value::String(value)) if !value.trim().is_empty() => Ok(value),
        Some(_) => Err(format!("{method} {key} must be a non-empty string")),
        None => Err(format!("{method} requires {key}")),
    }
}

impl Server {
    /// Answers one request; `true` once `shutdown` was answered.
    async fn request(&mut self, id: RequestId, method: &str, params: Map<String, Value>) -> bool {
        let outcome = match method {
            "initialize" => self.initialize(&params).await,
            "session/prompt" => self.prompt(&params).await,
            "session/resume" => self.resume(&params),
            "session/working-directory/get" => self.working_directory(&params, None),
            "session/working-directory/set" => {
                string_param(&params, method, "path").and_then(|path| {
                    let path = path.to_owned();
                    self.working_directory(&params, Some(&path))
                })
            }
            "shutdown" => {
                self.begin_shutdown().await;
                self.outbox.send(wire::result(&id, json!({})));
                return true;
            }
            other => Err(format!(
                "unknown DeepSeek Harness SDK runtime method: {other}"
            )),
        };
        let frame = match outcome {
            Ok(result) => wire::result(&id, result),
            Err(message) => wire::error(&id, &message),
        };
        self.outbox.send(frame);
        false
    }

    async fn initialize(&mut self, params: &Map<String, Value>) -> Result<Value, Failure> {
        if self.runtime.is_some() {
            return Err(
                "initialize was already answered: this runtime keeps its first settings; start another runtime for different ones".to_owned(),
            );
        }
        let request = checked_initialize(params)?;
        let max_tokens = request.max_tokens;
        let cwd = request.cwd.clone();
        let host = (self.launch)(request).await.map_err(|e| e.to_string())?;
        let sessions = host.sessions();
        sessions.set_max_tokens(max_tokens);
        let owner = host
            .extension_scope("sdk-server")
            .map_err(|e| format!("cannot start the SDK server: {e}"))?;
        let listeners = listen(&sessions, &owner, &self.outbox, &self.follows);
        self.runtime = Some(Runtime {
            host,
            sessions,
            cwd,
            _owner: owner,
            _listeners: listeners,
        });
        Ok(
            json!({"serverInfo": {"name": "deepseek-harness-sdk-runtime", "version": env!("CARGO_PKG_VERSION")}}),
        )
    }

    fn runtime(&self, method: &str) -> Result<&Runtime, Failure> {
        if self.shutting_down {
            return Err("SDK server is shutting down".to_owned());
        }
        self.runtime
            .as_ref()
            .ok_or_else(|| format!("{method} before initialize: send initialize first"))
    }

    /// The live SDK session `id`, created (with that exact id, in the initialize cwd) when
    /// this runtime has none. A session stored in the home is never replaced: it needs
    /// `session/resume` first.
    fn session(&mut self, method: &str, id: &str) -> Result<AgentHandle, Failure> {
        if let Some(entry) = self.entries.get(id) {
            if entry.agent.is_disposing() {
                return Err(format!(
                    "session agent was disposed outside the server: {id}"
                ));
            }
            return Ok(entry.agent.clone());
        }
        let runtime = self.runtime(method)?;
        if runtime.sessions.live(id).is_some() {
            return Err(format!(
                "session {id} is run by another agent of this runtime (a delegated child); prompt its root session instead"
            ));
        }
        let agent = runtime
            .sessions
            .create(NewSession {
                id: Some(id.to_owned()),
                cwd: runtime.cwd.clone(),
            })
            .map_err(|e| {
                format!("cannot create session {id}: {e} (a session stored in DSH_HOME is continued with session/resume first)")
            })?;
        self.adopt(agent.clone())?;
        Ok(agent)
    }

    fn adopt(&mut self, agent: AgentHandle) -> Result<(), Failure> {
        let approval = agent
            .scope()
            .provide::<dyn ApprovalService>(Arc::new(crate::approval::Refuse {
                note: self.note.clone(),
            }))
            .map_err(|e| format!("cannot open session {}: {e}", agent.id()))?;
        self.entries.insert(
            agent.id().to_owned(),
            Entry {
                agent,
                _approval: approval,
            },
        );
        Ok(())
    }

    async fn prompt(&mut self, params: &Map<String, Value>) -> Result<Value, Failure> {
        const METHOD: &str = "session/prompt";
        self.runtime(METHOD)?;
        let id = string_param(params, METHOD, "sessionId")?.to_owned();
        let content = match params.get("contentBlocks") {
            Some(Value::Array(blocks)) if !blocks.is_empty() => {
                serde_json::from_value::<Vec<ContentBlock>>(Value::Array(blocks.clone()))
                    .map_err(|e| format!("{METHOD} contentBlocks: {e}"))?
            }
            Some(Value::Array(_)) => {
                return Err(format!("{METHOD} contentBlocks must not be empty"));
            }
            Some(_) => return Err(format!("{METHOD} contentBlocks must be an array")),
            None => return Err(format!("{METHOD} requires contentBlocks")),
        };
        let agent = self.session(METHOD, &id)?;
        let message = Message::user(content, MessageSource::user());
        let message_id = message.id.clone();
        agent
            .followup(message)
            .map_err(|e| format!("{METHOD} {id}: {e}"))?;
        // The receipt is durable before it is answered: the inbox event is written and fsynced.
        agent
            .log()
            .sync()
            .await
            .map_err(|e| format!("{METHOD} {id}: the prompt could not be saved: {e}"))?;
        Ok(json!({"messageId": message_id}))
    }

    fn resume(&mut self, params: &Map<String, Value>) -> Result<Value, Failure> {
        const METHOD: &str = "session/resume";
        let id = string_param(params, METHOD, "sessionId")?.to_owned();
        let runtime = self.runtime(METHOD)?;
        if self.entries.contains_key(&id) || runtime.sessions.live(&id).is_some() {
            return Err(format!(
                "session {id} is already open in this runtime; prompt it without resuming"
            ));
        }
        let agent = runtime
            .sessions
            .load(&id)
            .map_err(|e| format!("cannot resume session {id}: {e}"))?;
        self.adopt(agent)?;
        Ok(json!({}))
    }

    /// `get` (`target` none) or `set`. dsh binds a session's tools to the directory it was
    /// created in, so `set` is honoured only when it names that directory.
    fn working_directory(
        &mut self,
        params: &Map<String, Value>,
        target: Option<&str>,
    ) -> Result<Value, Failure> {
        let method = if target.is_some() {
            "session/working-directory/set"
        } else {
            "session/working-directory/get"
        };
        self.runtime(method)?;
        let id = string_param(params, method, "sessionId")?.to_owned();
        let agent = self.session(method, &id)?;
        let origin = agent.cwd().map(PathBuf::from).unwrap_or_default();
        let Some(target) = target else {
            return Ok(json!({"cwd": origin.to_string_lossy()}));
        };
        let wanted = resolve_directory(&origin, target)
            .map_err(|reason| format!("{method} {target}: {reason}"))?;
        let same = origin.canonicalize().is_ok_and(|origin| origin == wanted);
        if !same {
            return Err(format!(
                "{method} {target}: dsh cannot move session {id} to {}: a session's tools stay in the directory it was created in ({}); initialize a runtime with cwd {} for work there",
                wanted.display(),
                origin.display(),
                wanted.display()
            ));
        }
        Ok(json!({"cwd": origin.to_string_lossy()}))
    }

    async fn begin_shutdown(&mut self) {
        self.shutting_down = true;
        // No notification about what the disposal below ends.
        self.outbox.notifying.store(false, Ordering::Release);
        self.dispose_sessions().await;
    }

    async fn dispose_sessions(&mut self) {
        for (_, entry) in self.entries.drain() {
            entry.agent.dispose().await;
            if let Err(error) = entry.agent.log().sync().await {
                (self.note)(&format!(
                    "dsh: session {}: the log could not be synced: {error}",
                    entry.agent.id()
                ));
            }
        }
    }

    async fn teardown(&mut self) {
        self.outbox.notifying.store(false, Ordering::Release);
        self.dispose_sessions().await;
        lock(&self.follows).clear();
        if let Some(runtime) = self.runtime.take() {
            runtime.host.shutdown();
        }
    }
}

/// Why a session's requested directory cannot be used (`<method> <path>: <this>`).
#[derive(Debug, thiserror::Error)]
enum DirectoryError {
    #[error("not a directory")]
    NotADirectory,
    #[error("no such directory")]
    Missing,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

fn resolve_directory(base: &Path, path: &str) -> Result<PathBuf, DirectoryError> {
    let joined = base.join(path);
    match std::fs::metadata(&joined) {
        Ok(meta) if meta.is_dir() => Ok(joined.canonicalize()?),
        Ok(_) => Err(DirectoryError::NotADirectory),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(DirectoryError::Missing),
        Err(e) => Err(DirectoryError::Io(e)),
    }
}

fn checked_initialize(params: &Map<String, Value>) -> Result<Initialize, Failure> {
    const METHOD: &str = "initialize";
    let cwd = string_param(params, METHOD, "cwd")?;
    let cwd = match std::fs::metadata(cwd) {
        Ok(meta) if meta.is_dir() => PathBuf::from(cwd)
            .canonicalize()
            .map_err(|e| format!("initialize cwd {cwd}: {e}"))?,
        Ok(_) => return Err(format!("initialize cwd {cwd}: not a directory")),
        Err(e) => return Err(format!("initialize cwd {cwd}: {e}")),
    };
    let provider = string_param(params, METHOD, "provider")?.to_owned();
    let model = string_param(params, METHOD, "model")?.to_owned();
    let reasoning_effort = match params.get("reasoningEffort") {
        None | Some(Value::Null) => None,
        Some(_) => Some(string_param(params, METHOD, "reasoningEffort")?.to_owned()),
    };
    let max_tokens = match params.get("maxTokens") {
        None | Some(Value::Null) => None,
        Some(value) => match value.as_u64() {
            Some(n) if (1..=MAX_SAFE_INTEGER).contains(&n) => Some(n),
            _ => return Err("initialize maxTokens must be a positive safe integer".to_owned()),
        },
    };
    Ok(Initialize {
        cwd,
        provider,
        model,
        reasoning_effort,
        max_tokens,
    })
}

/// The runtime-wide listeners: every agent's status, every session's start (its events
/// followed from then on; a child's `subagent.started` before its first event), every
/// in-process child's ending.
fn listen(
    sessions: &SessionHost,
    owner: &Scope,
    outbox: &Arc<Outbox>,
    follows: &Arc<Mutex<Vec<Subscription>>>,
) -> Vec<Disposer> {
    let hooks = sessions.agent_hooks();
    let mut listeners = Vec::new();
    let status = {
        let outbox = outbox.clone();
        hooks.events.register(owner, move |event| {
            if let AgentEvent::Status { agent, status } = event {
                let status = match status {
                    AgentStatus::Running => "running",
                    AgentStatus::Idle => "idle",
                };
                outbox.notify(
                    "session.status",
                    json!({"sessionId": agent, "status": status}),
                );
            }
            Ok(())
        })
    };
    listeners.push(status);
    let started = {
        let outbox = outbox.clone();
        let follows = follows.clone();
        hooks.session_start.register(owner, move |started| {
            let agent = &started.agent;
            if let Some(parent) = agent.log().header().parent_session.clone() {
                outbox.notify(
                    "subagent.started",
                    json!({"parentSessionId": parent, "childSessionId": agent.id()}),
                );
            }
            let from_start = started.source == SessionSource::Startup;
            let subscription = follow(&outbox, agent, from_start);
            lock(&follows).push(subscription);
            Ok(())
        })
    };
    listeners.push(started);
    let outbox = outbox.clone();
    if let Some(finished) = sessions.on_child_finished(owner, move |end| {
        // Out-of-process children report no ending (upstream's rule).
        if !end.local {
            return;
        }
        let ok = end.stop_reason == "completed";
        let mut params = json!({
            "provider": end.provider,
            "agentId": end.child_id,
            "parentSessionId": end.parent_id,
            "childSessionId": end.child_id,
            "status": if ok { "ok" } else { "error" },
            "stopReason": end.stop_reason,
        });
        if let Some(message) = &end.last_assistant_message {
            params["lastAssistantMessage"] = json!(message);
        }
        outbox.notify("subagent.finished", params);
    }) {
        listeners.push(finished);
    }
    listeners
}

/// Notifies each event `agent`'s log commits, exactly once and in order; a new session's
/// events from its first, a resumed one's from now on (its history is not news).
fn follow(outbox: &Arc<Outbox>, agent: &AgentHandle, from_start: bool) -> Subscription {
    let session = agent.id().to_owned();
    // The next seq to send; `None` until the snapshot is taken (a listener call before that
    // commits an event the snapshot will contain).
    let next: Arc<Mutex<Option<u64>>> = Arc::default();
    let subscription = {
        let next = next.clone();
        let outbox = Arc::downgrade(outbox);
        let session = session.clone();
        agent.log().on_event(move |event| {
            let mut next = lock(&next);
            let Some(n) = next.as_mut() else { return };
            if event.seq < *n {
                return;
            }
            *n = event.seq + 1;
            if let Some(outbox) = outbox.upgrade() {
                outbox.notify(
                    "session.event",
                    json!({"sessionId": session, "event": event.as_ref()}),
                );
            }
        })
    };
    let mut next = lock(&next);
    if !from_start {
        *next = Some(agent.log().len());
        return subscription;
    }
    match agent.log().events_since(0) {
        Ok(snapshot) => {
            *next = Some(snapshot.last().map_or(0, |event| event.seq + 1));
            for event in snapshot {
                outbox.notify(
                    "session.event",
                    json!({"sessionId": session, "event": event.as_ref()}),
                );
            }
        }
        Err(error) => {
            tracing::warn!(%error, session, "cannot read a new session's first events; following it from now on");
            *next = Some(agent.log().len());
        }
    }
    drop(next);
    subscription
}
