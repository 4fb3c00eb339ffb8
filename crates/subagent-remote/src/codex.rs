//! The `codex` provider (§3): Codex `app-server --stdio` (newline-delimited JSON-RPC), one
//! ephemeral thread, one turn, unattended.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use dsh_protocol::ContentBlock;
use dsh_subagent::Capabilities;
use dsh_subagent::StartRequest;
use dsh_subagent::StopReason;
use dsh_subagent::SubagentError;
use dsh_subagent::SubagentProvider;
use dsh_subagent::SubagentResult;
use dsh_subagent::SubagentRun;
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;
use tokio::io::AsyncBufReadExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::sync::oneshot;

use crate::common::ProductFailure;
use crate::common::check_grace;
use crate::common::child_cwd;
use crate::common::text_task;
use crate::process;

const PREFIX: &str = "subagent-codex";
pub const ABORTED_BEFORE_STARTUP: &str =
    "subagent-codex: request was aborted before app-server startup";
pub const ABORTED_BEFORE_PUBLICATION: &str =
    "subagent-codex: request was aborted before run publication";

/// How Codex handles approvals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CodexPermission {
    /// Approval policy `never`: Codex never asks; a request that still arrives is cancelled.
    #[default]
    Never,
    /// Codex may ask; every request is approved unattended.
    ApproveForMe,
    /// No approvals and no sandbox.
    DangerouslyBypassApprovalsAndSandbox,
}

impl CodexPermission {
    fn as_str(self) -> &'static str {
        match self {
            Self::Never => "never",
            Self::ApproveForMe => "approve-for-me",
            Self::DangerouslyBypassApprovalsAndSandbox => {
                "dangerously-bypass-approvals-and-sandbox"
            }
        }
    }
}

/// `subagent-codex` config. `command` is this port's addition (upstream runs the package-local
/// wrapper); it defaults to `codex` on `PATH`.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct CodexConfig {
    #[serde(default = "default_name")]
    pub provider_name: String,
    #[serde(default = "default_command")]
    pub command: String,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub permission_mode: CodexPermission,
    #[serde(default = "default_grace")]
    pub dispose_grace_ms: u64,
}

fn default_name() -> String {
    "codex".to_owned()
}
fn default_command() -> String {
    "codex".to_owned()
}
fn default_grace() -> u64 {
    3000
}

impl Default for CodexConfig {
    fn default() -> Self {
        Self {
            provider_name: default_name(),
            command: default_command(),
            env: BTreeMap::new(),
            permission_mode: CodexPermission::Never,
            dispose_grace_ms: default_grace(),
        }
    }
}

pub struct CodexProvider {
    config: CodexConfig,
}

impl CodexProvider {
    pub fn new(config: CodexConfig) -> Result<Arc<Self>, SubagentError> {
        if config.provider_name.is_empty() {
            return Err(SubagentError::plain(format!(
                "{PREFIX}: providerName must not be empty"
            )));
        }
        check_grace(PREFIX, "disposeGraceMs", config.dispose_grace_ms)?;
        Ok(Arc::new(Self { config }))
    }
}

/// The final answer: the latest `agentMessage` of phase `final_answer`, else the latest with
/// no phase.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Answers {
    final_answer: Option<String>,
    unphased: Option<String>,
}

impl Answers {
    pub fn record(&mut self, item: &Value) {
        if item.get("type").and_then(Value::as_str) != Some("agentMessage") {
            return;
        }
        let text = item
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match item.get("phase").and_then(Value::as_str) {
            Some("final_answer") => self.final_answer = Some(text),
            None => self.unphased = Some(text),
            Some(_) => {}
        }
    }

    pub fn answer(&self) -> Option<&str> {
        self.final_answer
            .as_deref()
            .or(self.unphased.as_deref())
            .filter(|t| !t.trim().is_empty())
    }
}

/// Maps a finished turn to a stop reason and, on failure, the diagnostic facts.
pub fn turn_outcome(turn: &Value) -> (StopReason, Option<ProductFailure>) {
    let status = turn
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("failed");
    match status {
        "completed" => (StopReason::Completed, None),
        "interrupted" => (StopReason::Aborted, None),
        _ => {
            let info = turn.pointer("/error/codexErrorInfo");
            let (category, http) = match info {
                Some(Value::String(name)) => (name.clone(), None),
                Some(Value::Object(map)) => match map.iter().next() {
                    Some((name, detail)) => (
                        name.clone(),
                        detail
                            .get("httpStatusCode")
                            .and_then(Value::as_u64)
                            .and_then(|n| u16::try_from(n).ok()),
                    ),
                    None => ("unknown".to_owned(), None),
                },
                _ => ("unknown".to_owned(), None),
            };
            let stop = if category == "contextWindowExceeded" {
                StopReason::MaxTokens
            } else {
                StopReason::Error
            };
            (
                stop,
                Some(ProductFailure {
                    product: "Codex",
                    stage: "turn".to_owned(),
                    category,
                    http_status: http,
                    ..ProductFailure::default()
                }),
            )
        }
    }
}

/// The unattended answer to a server request, or `None` for a request that fails the run.
pub fn answer_request(
    mode: CodexPermission,
    method: &str,
) -> Option<(Value, Option<&'static str>)> {
    match method {
        "item/commandExecution/requestApproval" | "item/fileChange/requestApproval" => {
            if mode == CodexPermission::ApproveForMe {
                Some((json!({"decision": "accept"}), Some("accept")))
            } else {
                Some((json!({"decision": "cancel"}), Some("cancel")))
            }
        }
        "item/permissions/requestApproval" => Some((json!({"permissions": {}}), Some("empty"))),
        "item/tool/requestUserInput" => Some((json!({"answers": {}}), None)),
        "mcpServer/elicitation/request" => Some((json!({"action": "decline"}), Some("decline"))),
        _ => None,
    }
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, Value>>>>>;

/// A minimal JSON-RPC peer over the child's stdio.
struct Peer {
    writer: mpsc::UnboundedSender<String>,
    pending: Pending,
    next: Mutex<u64>,
}

impl Peer {
    fn request(&self, method: &str, params: Value) -> oneshot::Receiver<Result<Value, Value>> {
        let id = {
            let mut next = dsh_sync::lock(&self.next);
            *next += 1;
            *next
        };
        let (tx, rx) = oneshot::channel();
        dsh_sync::lock(&self.pending).insert(id, tx);
        let line = json!({"id": id, "method": method, "params": params}).to_string();
        let _ = self.writer.send(line);
        rx
    }

    fn notify(&self, method: &str, params: Value) {
        let _ = self
            .writer
            .send(json!({"method": method, "params": params}).to_string());
    }

    fn respond(&self, id: &Value, result: Value) {
        let _ = self
            .writer
            .send(json!({"id": id, "result": result}).to_string());
    }
}

enum Event {
    Item(Value),
    TurnCompleted(Value),
    Unhandled(String),
    Decision(String, &'static str),
    Closed,
}

impl SubagentProvider for CodexProvider {
    fn name(&self) -> &str {
        &self.config.provider_name
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }
    fn inherits_parent_context(&self) -> bool {
        false
    }
    fn start(
        &self,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentRun, SubagentError>> {
        let config = self.config.clone();
        Box::pin(async move { start(config, request).await })
    }
}

fn startup_error(failure: ProductFailure) -> SubagentError {
    SubagentError::plain(format!("{PREFIX}: {}", failure.render()))
}

async fn start(config: CodexConfig, request: StartRequest) -> Result<SubagentRun, SubagentError> {
    let task = text_task(PREFIX, &request.prompt)?;
    if request.signal.is_cancelled() {
        return Err(SubagentError::plain(ABORTED_BEFORE_STARTUP));
    }
    let parent_cwd = request.parent.log().header().cwd.clone();
    let cwd = child_cwd(PREFIX, None, parent_cwd.as_deref(), false)?;
    let env = dsh_process::ChildEnv::inherited().with(config.env.clone());
    let fail_at = |stage: &str, category: &str| ProductFailure {
        product: "Codex",
        stage: stage.to_owned(),
        category: category.to_owned(),
        ..ProductFailure::default()
    };
    let spawned = process::spawn(
        &config.command,
        &["app-server".to_owned(), "--stdio".to_owned()],
        &cwd,
        &env,
    )
    .map_err(|_| startup_error(fail_at("initialize", "process-start")))?;
    let process::Spawned {
        child,
        mut stdin,
        stdout,
        pgid,
        ..
    } = spawned;
    let (writer, mut lines) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        while let Some(line) = lines.recv().await {
            if stdin
                .write_all(format!("{line}\n").as_bytes())
                .await
                .is_err()
            {
                break;
            }
        }
    });
    let pending: Pending = Arc::default();
    let peer = Arc::new(Peer {
        writer,
        pending: pending.clone(),
        next: Mutex::new(0),
    });
    let (events_tx, mut events) = mpsc::unbounded_channel::<Event>();
    let mode = config.permission_mode;
    {
        let peer = peer.clone();
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let method = message
                    .get("method")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                match (message.get("id"), method) {
                    (Some(id), Some(method)) => match answer_request(mode, &method) {
                        Some((answer, decision)) => {
                            peer.respond(id, answer);
                            if let Some(decision) = decision {
                                let _ = events_tx.send(Event::Decision(method, decision));
                            }
                        }
                        None => {
                            let _ = events_tx.send(Event::Unhandled(method));
                        }
                    },
                    (Some(id), None) => {
                        let waiter = id
                            .as_u64()
                            .and_then(|id| dsh_sync::lock(&pending).remove(&id));
                        if let Some(waiter) = waiter {
                            let outcome = match message.get("error") {
                                Some(error) => Err(error.clone()),
                                None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
                            };
                            let _ = waiter.send(outcome);
                        }
                    }
                    (None, Some(method)) => {
                        let params = message.get("params").cloned().unwrap_or(Value::Null);
                        let event = match method.as_str() {
                            "item/completed" => params.get("item").cloned().map(Event::Item),
                            "turn/completed" => {
                                params.get("turn").cloned().map(Event::TurnCompleted)
                            }
                            _ => None,
                        };
                        if let Some(event) = event {
                            let _ = events_tx.send(event);
                        }
                    }
                    (None, None) => {}
                }
            }
            let _ = events_tx.send(Event::Closed);
        })
    };
    let grace = Duration::from_millis(config.dispose_grace_ms);
    let abort = |child: tokio::process::Child| async move {
        process::reap(child, pgid, Duration::from_millis(50), grace).await;
    };
    let call = |method: &'static str, params: Value| {
        let rx = peer.request(method, params);
        async move {
            rx.await
                .unwrap_or_else(|_| Err(json!({"message": "app-server closed"})))
        }
    };
    let init = call(
        "initialize",
        json!({"clientInfo": {"name": "dsh", "title": "dsh subagent", "version": env!("CARGO_PKG_VERSION")}}),
    )
    .await;
    if init.is_err() {
        abort(child).await;
        return Err(startup_error(fail_at("initialize", "unknown")));
    }
    peer.notify("initialized", json!({}));
    let (approval, sandbox) = match mode {
        CodexPermission::Never => ("never", "workspace-write"),
        CodexPermission::ApproveForMe => ("on-request", "workspace-write"),
        CodexPermission::DangerouslyBypassApprovalsAndSandbox => ("never", "danger-full-access"),
    };
    let thread = call(
        "thread/start",
        json!({"cwd": cwd, "approvalPolicy": approval, "sandbox": sandbox, "ephemeral": true}),
    )
    .await;
    let Some(thread_id) = thread
        .as_ref()
        .ok()
        .and_then(|t| t.pointer("/thread/id").and_then(Value::as_str))
        .map(str::to_owned)
    else {
        abort(child).await;
        return Err(startup_error(fail_at("thread-start", "unknown")));
    };
    if request.signal.is_cancelled() {
        abort(child).await;
        return Err(SubagentError::plain(ABORTED_BEFORE_PUBLICATION));
    }
    let turn = call(
        "turn/start",
        json!({"threadId": thread_id, "input": [{"type": "text", "text": task, "text_elements": []}]}),
    )
    .await;
    let Some(turn_id) = turn
        .as_ref()
        .ok()
        .and_then(|t| t.pointer("/turn/id").and_then(Value::as_str))
        .map(str::to_owned)
    else {
        abort(child).await;
        return Err(startup_error(fail_at("turn-start", "unknown")));
    };
    let (result_tx, result_rx) = oneshot::channel::<SubagentResult>();
    let signal = request.signal.clone();
    let name = config.provider_name.clone();
    let interrupter = peer.clone();
    let driver = tokio::spawn(async move {
        let mut answers = Answers::default();
        let mut decision: Option<(String, &'static str)> = None;
        let mut interrupted = false;
        let outcome = loop {
            tokio::select! {
                () = signal.cancelled(), if !interrupted => {
                    interrupted = true;
                    // The reply does not matter: the turn's own completion reports the outcome.
                    drop(interrupter.request("turn/interrupt", json!({"threadId": thread_id, "turnId": turn_id})));
                }
                event = events.recv() => match event {
                    Some(Event::Item(item)) => answers.record(&item),
                    Some(Event::Decision(method, d)) => decision = Some((method, d)),
                    Some(Event::TurnCompleted(turn)) => break Some(turn_outcome(&turn)),
                    Some(Event::Unhandled(method)) => {
                        let mut failure = fail_at("turn", "unknown");
                        failure.decision = Some((mode.as_str().to_owned(), method, "fail".to_owned(), "unsupported server request".to_owned()));
                        break Some((StopReason::Error, Some(failure)));
                    }
                    Some(Event::Closed) | None => break None,
                }
            }
        };
        let text = answers.answer().map(str::to_owned);
        let output = text
            .clone()
            .map(|t| vec![ContentBlock::text(t)])
            .unwrap_or_default();
        let result = match outcome {
            Some((StopReason::Completed, _)) if text.is_some() => {
                SubagentResult::new(output, StopReason::Completed)
            }
            Some((StopReason::Aborted, _)) => SubagentResult::new(output, StopReason::Aborted),
            _ if interrupted => SubagentResult::new(output, StopReason::Aborted),
            other => {
                let (stop, failure) = match other {
                    Some((StopReason::Completed, _)) => (
                        StopReason::Error,
                        Some(fail_at("turn", "empty-final-answer")),
                    ),
                    Some((stop, failure)) => (stop, failure),
                    None => (StopReason::Error, Some(fail_at("process", "process-exit"))),
                };
                let mut failure = failure.unwrap_or_else(|| fail_at("turn", "unknown"));
                if failure.decision.is_none()
                    && let Some((request, d)) = decision
                {
                    failure.decision = Some((
                        mode.as_str().to_owned(),
                        request,
                        d.to_owned(),
                        "the run is unattended".to_owned(),
                    ));
                }
                tracing::warn!(
                    "subagent-codex \"{name}\": child run failed (error): {}",
                    failure.render()
                );
                let mut result = SubagentResult::new(output, stop);
                result.diagnostic = Some(dsh_subagent::limit_diagnostic(&failure.render()));
                result
            }
        };
        let _ = result_tx.send(result);
    });
    let result: BoxFuture<'static, dsh_subagent::RunResult> = Box::pin(async move {
        result_rx
            .await
            .map_err(|_| SubagentError::plain("subagent-codex: the run ended without a result"))
    });
    let child = Arc::new(tokio::sync::Mutex::new(Some(child)));
    let dispose = move || -> BoxFuture<'static, Result<(), SubagentError>> {
        Box::pin(async move {
            if !driver.is_finished() {
                driver.abort();
            }
            drop(peer);
            if let Some(child) = child.lock().await.take() {
                process::reap(child, pgid, grace, grace).await;
            }
            Ok(())
        })
    };
    Ok(SubagentRun::new(
        uuid::Uuid::new_v4().to_string(),
        None,
        result,
        dispose,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_final_answer_prefers_the_final_phase() {
        let mut answers = Answers::default();
        answers.record(
            &json!({"type": "agentMessage", "text": "thinking aloud", "phase": "commentary"}),
        );
        answers.record(&json!({"type": "agentMessage", "text": "plain"}));
        assert_eq!(answers.answer(), Some("plain"));
        answers.record(
            &json!({"type": "agentMessage", "text": "the answer", "phase": "final_answer"}),
        );
        answers.record(&json!({"type": "agentMessage", "text": "later plain"}));
        assert_eq!(answers.answer(), Some("the answer"));
        let mut blank = Answers::default();
        blank.record(&json!({"type": "agentMessage", "text": "  ", "phase": "final_answer"}));
        assert_eq!(blank.answer(), None);
    }

    #[test]
    fn failed_turns_map_to_stop_reasons_and_categories() {
        let (stop, failure) = turn_outcome(
            &json!({"status": "failed", "error": {"message": "x", "codexErrorInfo": "contextWindowExceeded"}}),
        );
        assert_eq!(stop, StopReason::MaxTokens);
        assert_eq!(failure.unwrap().category, "contextWindowExceeded");
        let (stop, failure) = turn_outcome(
            &json!({"status": "failed", "error": {"codexErrorInfo": {"httpConnectionFailed": {"httpStatusCode": 502}}}}),
        );
        assert_eq!(stop, StopReason::Error);
        assert_eq!(
            failure.unwrap().render(),
            "Product subagent failure (product: Codex; stage: turn; category: httpConnectionFailed; HTTP status: 502)"
        );
        assert_eq!(
            turn_outcome(&json!({"status": "completed"})).0,
            StopReason::Completed
        );
        assert_eq!(
            turn_outcome(&json!({"status": "interrupted"})).0,
            StopReason::Aborted
        );
    }

    #[test]
    fn unattended_requests_are_cancelled_or_declined() {
        assert_eq!(
            answer_request(
                CodexPermission::Never,
                "item/commandExecution/requestApproval"
            )
            .unwrap()
            .0,
            json!({"decision": "cancel"})
        );
        assert_eq!(
            answer_request(CodexPermission::Never, "mcpServer/elicitation/request")
                .unwrap()
                .0,
            json!({"action": "decline"})
        );
        assert_eq!(
            answer_request(CodexPermission::Never, "item/tool/requestUserInput")
                .unwrap()
                .0,
            json!({"answers": {}})
        );
        assert!(answer_request(CodexPermission::Never, "something/new").is_none());
    }
}
