//! The in-process providers `spawn` (fresh child) and `fork` (seeded with the parent's
//! completed turns) and the one-shot driver (§1.7).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use dsh_agent::AbortReason;
use dsh_agent::AgentHandle;
use dsh_agent::PreStepDecision;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::depth::check_max_depth;
use crate::depth::delegation_depth_of;
use crate::depth::resolve_child_depth;
use crate::descriptor::DESCRIPTOR_KIND;
use crate::descriptor::Descriptor;
use crate::error::SubagentError;
use crate::host::ChildMeta;
use crate::host::ChildSession;
use crate::host::ChildSpec;
use crate::output::StopReason;
use crate::output::final_assistant_output;
use crate::output::fold_consumed_work;
use crate::output::one_shot_stop_reason;
use crate::provider::AgentOptions;
use crate::provider::Capabilities;
use crate::provider::PrepareRequest;
use crate::provider::Prepared;
use crate::provider::RunResult;
use crate::provider::StartRequest;
use crate::provider::SubagentProvider;
use crate::provider::SubagentResult;
use crate::provider::SubagentRun;
use crate::runtime::ChildRuntime;
use crate::runtime::completed_turn_prefix;
use crate::runtime::owned_seed;
use crate::structured::Capture;

pub const ABORTED_BEFORE_PUBLICATION: &str =
    "subagent request was aborted before child publication";

/// `spawn` or `fork`, in process.
pub struct InProcessProvider {
    name: String,
    fork: bool,
    runtime: Arc<ChildRuntime>,
}

impl InProcessProvider {
    pub fn spawn(name: impl Into<String>, runtime: Arc<ChildRuntime>) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            fork: false,
            runtime,
        })
    }

    pub fn fork(name: impl Into<String>, runtime: Arc<ChildRuntime>) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            fork: true,
            runtime,
        })
    }

    /// The fork seed, or `None` (no seed at all, not an empty one) before any turn ended.
    fn seed(
        &self,
        parent: &AgentHandle,
    ) -> Result<Option<Vec<Arc<dsh_session::Event>>>, SubagentError> {
        if !self.fork {
            return Ok(None);
        }
        let prefix = completed_turn_prefix(parent.log())
            .map_err(|e| SubagentError::plain(format!("cannot read the parent's history: {e}")))?;
        Ok((!prefix.is_empty()).then_some(prefix))
    }
}

impl SubagentProvider for InProcessProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn inherits_parent_context(&self) -> bool {
        self.fork
    }

    fn start(
        &self,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentRun, SubagentError>> {
        let prepared = self.prepare_one_shot(&request);
        let runtime = self.runtime.clone();
        let provider = self.name.clone();
        Box::pin(async move {
            let plan = prepared?;
            start_one_shot(runtime, provider, request, plan).await
        })
    }

    fn supports_continuable(&self) -> bool {
        true
    }

    fn prepare_continuable(
        &self,
        request: PrepareRequest,
    ) -> BoxFuture<'static, Result<Prepared, SubagentError>> {
        let seed = self.seed(&request.parent);
        Box::pin(async move { Ok(Prepared { seed: seed? }) })
    }
}

/// Everything computed synchronously at the call (capture-before-await).
struct Plan {
    spec: ChildSpec,
    seed_length: u64,
}

impl InProcessProvider {
    fn prepare_one_shot(&self, request: &StartRequest) -> Result<Plan, SubagentError> {
        check_max_depth(request.max_depth)?;
        if request.signal.is_cancelled() {
            return Err(SubagentError::plain(ABORTED_BEFORE_PUBLICATION));
        }
        let parent = &request.parent;
        let depth = resolve_child_depth(delegation_depth_of(parent), request.max_depth)?;
        let id = uuid::Uuid::new_v4().to_string();
        let policy = self.runtime.capture_policy(parent);
        let prefix = self.seed(parent)?;
        let seed_length = prefix.as_ref().map_or(0, |p| p.len() as u64);
        let header = parent.log().header();
        let spec = ChildSpec {
            session: ChildSession::Fresh {
                id,
                meta: ChildMeta {
                    cwd: header.cwd.clone(),
                    agent_preset: None,
                    parent_session: parent.id().to_owned(),
                    delegation_depth: depth,
                    seed_length: prefix.as_ref().map(|p| p.len() as u64),
                },
                seed: prefix.as_deref().map(owned_seed),
            },
            options: AgentOptions::inherit(parent, request.agent_options.as_ref()),
            policy,
            owner: self.runtime.scope.clone(),
        };
        Ok(Plan { spec, seed_length })
    }
}

/// Steps 3–6 of the one-shot driver.
async fn start_one_shot(
    runtime: Arc<ChildRuntime>,
    provider: String,
    request: StartRequest,
    plan: Plan,
) -> Result<SubagentRun, SubagentError> {
    let Plan { spec, seed_length } = plan;
    let parent = request.parent.clone();
    let policy = spec.policy.clone();
    let descriptor = Descriptor::OneShot {
        provider,
        label: request.label.clone(),
    };
    let capture_slot: Arc<std::sync::Mutex<Option<Capture>>> = Arc::default();
    let setup = {
        let runtime = runtime.clone();
        let persona = request.persona.clone();
        let tool_filter = request.tool_filter.clone();
        let schema = request.output_schema.clone();
        let capture_slot = capture_slot.clone();
        Box::new(move |child: &AgentHandle| {
            runtime.append_policy_events(child.log(), &policy)?;
            runtime.apply_composition(child, persona.as_deref(), tool_filter.as_ref())?;
            if let Some(schema) = &schema {
                *dsh_sync::lock(&capture_slot) =
                    Some(crate::structured::install(&runtime, child, schema)?);
            }
            attach_descriptor(child, descriptor);
            Ok(())
        })
    };
    let child = runtime.host.build(spec, setup).await?;
    if request.signal.is_cancelled() {
        runtime.host.discard(child).await;
        return Err(SubagentError::plain(ABORTED_BEFORE_PUBLICATION));
    }
    runtime.directory.register(&child, Some(parent.id()));
    let cancelled = Arc::new(AtomicBool::new(false));
    // Disposing the parent's scope settles the child: cancel now, dispose in the background.
    let cascade = {
        let child = child.clone();
        parent.scope().defer(move || {
            child.cancel(AbortReason::Parent, false);
            let child = child.clone();
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move { child.dispose().await });
            }
        })
    };
    let listener_stop = CancellationToken::new();
    {
        let (signal, stop, child, cancelled) = (
            request.signal.clone(),
            listener_stop.clone(),
            child.clone(),
            cancelled.clone(),
        );
        tokio::spawn(async move {
            tokio::select! {
                () = signal.cancelled() => {
                    cancelled.store(true, Ordering::Release);
                    child.cancel(AbortReason::Parent, false);
                }
                () = stop.cancelled() => {}
            }
        });
    }
    // Closes the handoff race: an abort that fired before the listener was installed.
    if request.signal.is_cancelled() {
        cancelled.store(true, Ordering::Release);
        child.cancel(AbortReason::Parent, false);
    }
    let capture = dsh_sync::lock(&capture_slot).take();
    let watching = request
        .progress
        .clone()
        .map(|progress| watch_progress(&child, progress));
    let result: BoxFuture<'static, RunResult> = {
        let child = child.clone();
        let cancelled = cancelled.clone();
        let prompt = request.prompt.clone();
        Box::pin(async move {
            if !cancelled.load(Ordering::Acquire) {
                let message = Message::user(prompt, MessageSource::user());
                if let Err(error) = child.followup(message) {
                    tracing::debug!(child = child.id(), %error, "one-shot prompt not accepted");
                }
            }
            child.when_idle().await;
            Ok(read_result(
                &child,
                seed_length,
                cancelled.load(Ordering::Acquire),
                capture.as_ref(),
            ))
        })
    };
    let dispose = {
        let child = child.clone();
        let cancelled = cancelled.clone();
        let directory = runtime.directory.clone();
        move || -> BoxFuture<'static, Result<(), SubagentError>> {
            Box::pin(async move {
                drop(watching);
                listener_stop.cancel();
                cancelled.store(true, Ordering::Release);
                child.dispose().await;
                // Already settled: running the deferral now only detaches it from the parent.
                cascade.dispose();
                directory.unregister(&child);
                if let Err(error) = child.log().sync().await {
                    tracing::warn!(child = child.id(), %error, "final flush of a one-shot child failed");
                }
                Ok(())
            })
        }
    };
    Ok(SubagentRun::new(
        child.id().to_owned(),
        Some(child),
        result,
        dispose,
    ))
}

/// Reports the child's tool calls and committed messages as they are logged.
pub(crate) fn watch_progress(
    child: &AgentHandle,
    progress: crate::provider::ProgressFn,
) -> dsh_session::Subscription {
    let id = child.id().to_owned();
    child
        .log()
        .on_event(move |event| match event.kind.as_str() {
            dsh_session::kind::TOOL_CALL => {
                let name = event
                    .data
                    .get("name")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default();
                let arguments = event
                    .data
                    .get("arguments")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default();
                let call_id = event
                    .data
                    .get("callId")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default();
                progress(
                    &id,
                    crate::provider::ChildProgress::ToolCall {
                        id: call_id.to_owned(),
                        title: call_title(name, arguments),
                    },
                );
            }
            dsh_session::kind::ASSISTANT_MESSAGE => {
                if let Some(Ok(message)) = event.decode::<dsh_session::data::AssistantMessage>() {
                    let text = dsh_protocol::text_of(&message.message.content);
                    if !text.trim().is_empty() {
                        progress(&id, crate::provider::ChildProgress::Text(text));
                    }
                }
            }
            _ => {}
        })
}

/// `name {arguments}`, cut to one short line.
pub(crate) fn call_title(name: &str, arguments: &str) -> String {
    let arguments: String = arguments.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = if arguments.is_empty() {
        name.to_owned()
    } else {
        format!("{name} {arguments}")
    };
    if line.chars().count() <= 100 {
        return line;
    }
    let mut cut: String = line.chars().take(99).collect();
    cut.push('…');
    cut
}

/// Appends the one-shot descriptor at the first pre-step that enters (after the first claim,
/// before `step/start`); a rejected prompt leaves no descriptor.
fn attach_descriptor(child: &AgentHandle, descriptor: Descriptor) {
    let appended = Arc::new(AtomicBool::new(false));
    let log = child.log().downgrade();
    let data = descriptor.to_value();
    child
        .hooks()
        .pre_step
        .register(child.scope(), move |input, next| {
            let appended = appended.clone();
            let log = log.clone();
            let data = data.clone();
            Box::pin(async move {
                let out = next.run(input).await;
                if matches!(out, Ok(PreStepDecision::Enter(_)))
                    && !appended.swap(true, Ordering::AcqRel)
                    && let Some(log) = log.upgrade()
                    && let Err(error) = log.append(DESCRIPTOR_KIND, data, None)
                {
                    tracing::warn!(%error, "cannot append the subagent descriptor");
                }
                out
            })
        });
}

/// `readResult` (§1.7 step 5).
fn read_result(
    child: &AgentHandle,
    seed_length: u64,
    cancelled: bool,
    capture: Option<&Capture>,
) -> SubagentResult {
    let own = match child.log().events_since(seed_length) {
        Ok(own) => own,
        Err(error) => {
            tracing::warn!(%error, "cannot read the child's history; its run is reported failed");
            return SubagentResult::new(Vec::new(), StopReason::Error);
        }
    };
    let output = final_assistant_output(&own);
    let mut stop = one_shot_stop_reason(fold_consumed_work(&own).end.as_ref());
    if cancelled && stop != StopReason::Completed {
        stop = StopReason::Aborted;
    }
    let mut result = SubagentResult::new(output, stop);
    if let Some(capture) = capture {
        match capture.committed() {
            Some(value) => result.structured = Some(value),
            None if result.stop_reason == StopReason::Completed => {
                result.stop_reason = if cancelled {
                    StopReason::Aborted
                } else {
                    StopReason::Error
                };
            }
            None => {}
        }
    }
    result
}
