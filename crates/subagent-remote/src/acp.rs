//! The `acp` provider (§3): any ACP agent over stdio (`initialize` → `session/new` →
//! `session/prompt`), one prompt per child, no capabilities, no local session.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agent_client_protocol::Agent;
use agent_client_protocol::ByteStreams;
use agent_client_protocol::Client;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::CancelNotification;
use agent_client_protocol::v1::schema::ContentBlock as AcpBlock;
use agent_client_protocol::v1::schema::InitializeRequest;
use agent_client_protocol::v1::schema::NewSessionRequest;
use agent_client_protocol::v1::schema::PermissionOptionKind;
use agent_client_protocol::v1::schema::PromptRequest;
use agent_client_protocol::v1::schema::RequestPermissionOutcome;
use agent_client_protocol::v1::schema::RequestPermissionRequest;
use agent_client_protocol::v1::schema::RequestPermissionResponse;
use agent_client_protocol::v1::schema::SelectedPermissionOutcome;
use agent_client_protocol::v1::schema::SessionId;
use agent_client_protocol::v1::schema::SessionNotification;
use agent_client_protocol::v1::schema::SessionUpdate;
use agent_client_protocol::v1::schema::StopReason as AcpStop;
use agent_client_protocol::v1::schema::TextContent;
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
use tokio_util::compat::TokioAsyncReadCompatExt;
use tokio_util::compat::TokioAsyncWriteCompatExt;

use crate::common::check_grace;
use crate::common::child_cwd;
use crate::common::configured_cwd;
use crate::process;
use dsh_subagent::ChildProgress;
use dsh_subagent::ProgressFn;

const PREFIX: &str = "subagent-acp";

/// How the connection task to an ACP child ended without a stop reason.
#[derive(Debug, thiserror::Error)]
enum ConnectionEnd {
    #[error(transparent)]
    Protocol(agent_client_protocol::Error),
    #[error("the ACP connection task ended")]
    TaskEnded,
}
pub const ABORTED_BEFORE_START: &str = "subagent request was aborted before the ACP child started";
pub const CANCELLED_BEFORE_SESSION: &str = "subagent cancelled before the ACP session started";

/// What the child's permission requests get.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PermissionAnswer {
    /// `cancelled`.
    #[default]
    Reject,
    /// The first `allow_once` / `allow_always` option.
    Allow,
}

/// `subagent-acp` config.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct AcpConfig {
    #[serde(default = "default_name")]
    pub provider_name: String,
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub permission: PermissionAnswer,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default = "default_eof_grace")]
    pub dispose_eof_grace_ms: u64,
    #[serde(default = "default_grace")]
    pub dispose_grace_ms: u64,
}

fn default_name() -> String {
    "acp".to_owned()
}
fn default_eof_grace() -> u64 {
    6000
}
fn default_grace() -> u64 {
    3000
}

impl AcpConfig {
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            provider_name: default_name(),
            command: command.into(),
            args: Vec::new(),
            cwd: None,
            permission: PermissionAnswer::Reject,
            env: BTreeMap::new(),
            dispose_eof_grace_ms: default_eof_grace(),
            dispose_grace_ms: default_grace(),
        }
    }
}

/// The provider.
pub struct AcpProvider {
    config: AcpConfig,
    cwd: Option<PathBuf>,
}

impl AcpProvider {
    /// Validates the config (load-time errors).
    pub fn new(config: AcpConfig) -> Result<Arc<Self>, SubagentError> {
        if config.command.is_empty() {
            return Err(SubagentError::plain(format!(
                "{PREFIX}: command must not be empty"
            )));
        }
        check_grace(PREFIX, "disposeEofGraceMs", config.dispose_eof_grace_ms)?;
        check_grace(PREFIX, "disposeGraceMs", config.dispose_grace_ms)?;
        let cwd = configured_cwd(PREFIX, config.cwd.as_deref())?;
        Ok(Arc::new(Self { config, cwd }))
    }
}

#[derive(Default)]
struct Shared {
    text: Mutex<String>,
    connection: Mutex<Option<(ConnectionTo<Agent>, SessionId)>>,
    cancelled: AtomicBool,
}

impl Shared {
    /// Sends `session/cancel` once the session exists.
    fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
        let connection = dsh_sync::lock(&self.connection).clone();
        if let Some((connection, session)) = connection
            && let Err(error) = connection.send_notification(CancelNotification::new(session))
        {
            tracing::debug!(%error, "session/cancel not sent");
        }
    }
}

fn map_stop(stop: AcpStop) -> StopReason {
    match stop {
        AcpStop::EndTurn => StopReason::Completed,
        AcpStop::MaxTokens => StopReason::MaxTokens,
        AcpStop::Refusal => StopReason::Refusal,
        AcpStop::Cancelled => StopReason::Aborted,
        _ => StopReason::Error,
    }
}

impl SubagentProvider for AcpProvider {
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
        let configured = self.cwd.clone();
        Box::pin(async move { start(config, configured, request).await })
    }
}

async fn start(
    config: AcpConfig,
    configured: Option<PathBuf>,
    request: StartRequest,
) -> Result<SubagentRun, SubagentError> {
    let progress = request.progress.clone();
    if request.signal.is_cancelled() {
        return Err(SubagentError::plain(ABORTED_BEFORE_START));
    }
    let parent_cwd = request.parent.log().header().cwd.clone();
    let cwd = child_cwd(PREFIX, configured.as_deref(), parent_cwd.as_deref(), true)?;
    let env = dsh_process::ChildEnv::inherited().with(config.env.clone());
    let spawned = process::spawn(&config.command, &config.args, &cwd, &env).map_err(|e| {
        SubagentError::plain(format!(
            "{PREFIX} \"{}\": cannot start {}: {e}",
            config.provider_name, config.command
        ))
    })?;
    let process::Spawned {
        child,
        stdin,
        stdout,
        stderr,
        pgid,
    } = spawned;
    let id = uuid::Uuid::new_v4().to_string();
    let shared = Arc::new(Shared::default());
    let prompt_text = dsh_protocol::text_of(&request.prompt);
    let (published_tx, published_rx) = tokio::sync::oneshot::channel::<()>();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<Result<AcpStop, ConnectionEnd>>();
    let permission = config.permission;
    let task = {
        let shared = shared.clone();
        let progress = progress.clone();
        let child_id = id.clone();
        let final_id = id.clone();
        let final_progress = progress.clone();
        let notified = shared.clone();
        tokio::spawn(async move {
            let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
            let outcome = Client
                .v1()
                .on_receive_notification(
                    async move |notification: SessionNotification, _cx| {
                        on_update(&notified, progress.as_ref(), &child_id, notification.update);
                        Ok(())
                    },
                    agent_client_protocol::on_receive_notification!(),
                )
                .on_receive_request(
                    async move |request: RequestPermissionRequest, responder, _connection| {
                        responder.respond(answer_permission(permission, &request))
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .connect_with(transport, async move |connection: ConnectionTo<Agent>| {
                    connection
                        .send_request(InitializeRequest::new(ProtocolVersion::V1))
                        .block_task()
                        .await?;
                    let session = connection
                        .send_request(NewSessionRequest::new(cwd))
                        .block_task()
                        .await?;
                    *dsh_sync::lock(&shared.connection) =
                        Some((connection.clone(), session.session_id.clone()));
                    let _ = published_tx.send(());
                    let response = connection
                        .send_request(PromptRequest::new(
                            session.session_id,
                            vec![AcpBlock::Text(TextContent::new(prompt_text))],
                        ))
                        .block_task()
                        .await?;
                    let answer = dsh_sync::lock(&shared.text).clone();
                    if let Some(progress) = &final_progress
                        && !answer.trim().is_empty()
                    {
                        progress(&final_id, ChildProgress::Text(answer));
                    }
                    Ok(response.stop_reason)
                })
                .await;
            let _ = done_tx.send(outcome.map_err(ConnectionEnd::Protocol));
        })
    };
    let eof_grace = Duration::from_millis(config.dispose_eof_grace_ms);
    let grace = Duration::from_millis(config.dispose_grace_ms);
    let child = Arc::new(tokio::sync::Mutex::new(Some(child)));
    let reap = {
        let child = child.clone();
        move |task: tokio::task::JoinHandle<()>| async move {
            task.abort();
            let _ = task.await;
            if let Some(child) = child.lock().await.take() {
                process::reap(child, pgid, eof_grace, grace).await;
            }
        }
    };
    // Publish only after the handshake; before that, a failure or an abort reaps the child.
    let mut done_rx = done_rx;
    tokio::select! {
        published = published_rx => {
            if published.is_err() {
                let detail = match (&mut done_rx).await {
                    Ok(Err(error)) => error.to_string(),
                    _ => "the ACP child closed before its session started".to_owned(),
                };
                reap(task).await;
                let tail = dsh_sync::lock(&stderr).trim().to_owned();
                let detail = if tail.is_empty() { detail } else { format!("{detail}; stderr: {tail}") };
                return Err(SubagentError::plain(format!(
                    "{PREFIX} \"{}\": {}",
                    config.provider_name, dsh_subagent::limit_diagnostic(&detail)
                )));
            }
        }
        () = request.signal.cancelled() => {
            reap(task).await;
            return Err(SubagentError::plain(CANCELLED_BEFORE_SESSION));
        }
    }
    let watcher = {
        let shared = shared.clone();
        let signal = request.signal.clone();
        tokio::spawn(async move {
            signal.cancelled().await;
            shared.cancel();
        })
    };
    let name = config.provider_name.clone();
    let result_shared = shared.clone();
    let result: BoxFuture<'static, dsh_subagent::RunResult> = Box::pin(async move {
        let outcome = done_rx.await.unwrap_or(Err(ConnectionEnd::TaskEnded));
        let text = dsh_sync::lock(&result_shared.text).clone();
        let output = if text.is_empty() {
            Vec::new()
        } else {
            vec![ContentBlock::text(text)]
        };
        let cancelled = result_shared.cancelled.load(Ordering::Acquire);
        Ok(match outcome {
            Ok(stop) => {
                let stop = map_stop(stop);
                if cancelled && stop != StopReason::Completed {
                    SubagentResult::new(output, StopReason::Aborted)
                } else {
                    SubagentResult::new(output, stop)
                }
            }
            Err(_) if cancelled => SubagentResult::new(output, StopReason::Aborted),
            Err(error) => {
                tracing::warn!("subagent-acp \"{name}\": child run failed (error): {error}");
                let mut result = SubagentResult::new(output, StopReason::Error);
                result.diagnostic = Some(dsh_subagent::limit_diagnostic(&error.to_string()));
                result
            }
        })
    });
    let dispose_shared = shared;
    let dispose = move || -> BoxFuture<'static, Result<(), SubagentError>> {
        Box::pin(async move {
            watcher.abort();
            if !task.is_finished() {
                dispose_shared.cancel();
                let _ = tokio::time::timeout(eof_grace, async {
                    while !task.is_finished() {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                })
                .await;
            }
            reap(task).await;
            Ok(())
        })
    };
    Ok(SubagentRun::new(id, None, result, dispose))
}

fn on_update(
    shared: &Shared,
    progress: Option<&ProgressFn>,
    child_id: &str,
    update: SessionUpdate,
) {
    match update {
        SessionUpdate::AgentMessageChunk(chunk) => {
            // Chunks accumulate; the whole answer is reported once the prompt ends.
            if let AcpBlock::Text(text) = &chunk.content {
                dsh_sync::lock(&shared.text).push_str(&text.text);
            }
        }
        SessionUpdate::ToolCall(call) => {
            if let Some(progress) = progress {
                progress(
                    child_id,
                    ChildProgress::ToolCall {
                        id: call.tool_call_id.to_string(),
                        title: call.title.clone(),
                    },
                );
            }
        }
        _ => {}
    }
}

fn answer_permission(
    permission: PermissionAnswer,
    request: &RequestPermissionRequest,
) -> RequestPermissionResponse {
    let chosen = match permission {
        PermissionAnswer::Reject => None,
        PermissionAnswer::Allow => request
            .options
            .iter()
            .find(|o| {
                matches!(
                    o.kind,
                    PermissionOptionKind::AllowOnce | PermissionOptionKind::AllowAlways
                )
            })
            .map(|o| o.option_id.clone()),
    };
    match chosen {
        Some(id) => RequestPermissionResponse::new(RequestPermissionOutcome::Selected(
            SelectedPermissionOutcome::new(id),
        )),
        None => RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled),
    }
}
