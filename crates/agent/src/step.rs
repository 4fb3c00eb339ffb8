//! One step (§2.7): build and log the request envelope, stream one attempt at a time, recover
//! through `agent/request-error` (whose base is the retry executor, §3.5), commit the message.

use std::sync::atomic::Ordering;
use std::time::Duration;

use dsh_llm::BlockAssembler;
use dsh_llm::ModelRequest;
use dsh_llm::RetryPolicy;
use dsh_protocol::ContentBlock;
use dsh_protocol::FinishReason;
use dsh_protocol::LlmFailure;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_protocol::StreamChunk;
use dsh_session::SessionLog;
use dsh_session::SurfaceIntent;
use dsh_session::data::AdapterDefaults;
use dsh_session::data::AssistantChunk;
use dsh_session::data::AssistantMessage;
use dsh_session::data::EpochHeader;
use dsh_session::data::HeaderConfig;
use dsh_session::data::HeaderReason;
use dsh_session::data::LlmRetry;
use dsh_session::data::LlmRetryStarted;
use dsh_session::data::RequestContext;
use dsh_session::data::RequestHeader;
use dsh_session::data::RetryMode;
use dsh_session::data::TurnEndReason;
use dsh_session::kind;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::agent::AgentHandle;
use crate::driver::StepAssembly;
use crate::driver::check;
use crate::error::TurnError;
use crate::error::error_chain;
use crate::hooks::CallConfig;
use crate::hooks::Recovery;
use crate::hooks::RequestErrorInput;
use crate::hooks::RequestInput;
use crate::prompt::render_system;
use dsh_sync::lock;

/// The code of a route no adapter serves.
pub const NO_ADAPTER: &str = "NO_ADAPTER";

/// The failure code of an answer that grew past [`MAX_MODEL_OUTPUT_BYTES`].
pub const OUTPUT_TOO_LARGE: &str = "OUTPUT_TOO_LARGE";

/// The failure code of an attempt still streaming at its deadline (keepalives or a trickle
/// of deltas would otherwise hold the turn for ever).
pub const MODEL_ATTEMPT_TIMEOUT: &str = "MODEL_ATTEMPT_TIMEOUT";

/// The most a model may stream in one attempt (text, reasoning and tool arguments together):
/// past it the attempt ends with [`OUTPUT_TOO_LARGE`] instead of growing memory and the log.
pub const MAX_MODEL_OUTPUT_BYTES: usize = 32 * 1024 * 1024;

/// Tool-call argument deltas are logged one by one only up to this many bytes per call; the
/// rest is folded without a chunk event each (the call's `blockEnd` carries the whole
/// arguments), so a large argument costs its size, not a JSON envelope per delta.
pub const LOGGED_ARGUMENT_DELTA_BYTES: usize = 64 * 1024;

/// The config as prepared for one attempt.
struct Prepared {
    config: CallConfig,
    defaults: AdapterDefaults,
    context_window: Option<u64>,
    /// `None` for an unprepared route (no adapter owns the provider).
    retry_policy: Option<RetryPolicy>,
}

impl AgentHandle {
    /// Runs a step's model call(s) and tools. `Some(completed | max-tokens)` ends the turn
    /// unless input is pending; `None` means the tool results owe another request.
    pub(crate) async fn step(
        &self,
        turn: u64,
        step: u64,
        assembly: &StepAssembly,
        abort: &CancellationToken,
    ) -> Result<Option<TurnEndReason>, TurnError> {
        let system = render_system(&assembly.assembly, &assembly.vars)
            .map_err(|e| TurnError::unknown(e.to_string()))?;
        loop {
            let seed = self.seed_config();
            let input = RequestInput {
                agent: self.clone(),
                turn,
                step,
                config: seed,
                signal: abort.clone(),
            };
            let config = self
                .inner
                .hooks
                .request
                .dispatch(Some(&self.inner.scope), input, |input| {
                    Box::pin(async move { Ok(input.config) })
                })
                .await
                .map_err(|e| TurnError::unknown(error_chain(&e)))?;
            check(abort)?;
            if config.provider.is_empty() || config.model.is_empty() {
                return Err(TurnError::unknown(format!(
                    "agent \"{}\" has no provider/model: provider {:?}, model {:?}; set them in the agent options or from an agent/request listener",
                    self.inner.id, config.provider, config.model
                )));
            }
            let prepared = self.prepare(config)?;
            let header = EpochHeader {
                config: HeaderConfig {
                    provider: prepared.config.provider.clone(),
                    model: prepared.config.model.clone(),
                    temperature: prepared.config.temperature,
                    max_tokens: prepared.config.max_tokens,
                    reasoning_effort: prepared.config.reasoning_effort.clone(),
                    stop: prepared.config.stop.clone(),
                },
                adapter_defaults: (prepared.defaults != AdapterDefaults::default())
                    .then_some(prepared.defaults),
                system: (!system.is_empty()).then(|| system.clone()),
                tools: (!assembly.tools.is_empty()).then(|| assembly.tools.clone()),
            };
            self.log_header(header)?;
            self.log_context(&prepared)?;
            check(abort)?;
            let request = ModelRequest {
                model: prepared.config.model.clone(),
                system: (!system.is_empty()).then(|| system.clone()),
                // Shared with the log, not copied: O(1) however long the history is.
                messages: self.inner.log.derive_messages(),
                tools: assembly.tools.clone(),
                temperature: prepared.config.temperature,
                max_tokens: prepared
                    .config
                    .max_tokens
                    .map(|m| u32::try_from(m).unwrap_or(u32::MAX)),
                stop: prepared.config.stop.clone().unwrap_or_default(),
                reasoning_effort: prepared.config.reasoning_effort.clone(),
                session_id: Some(self.inner.log.id().to_owned()),
                purpose: None,
            };
            #[cfg(debug_assertions)]
            assert_model_visible(&self.inner.log, &request, &prepared.config.provider);
            match self.attempt(turn, step, request, &prepared, abort).await? {
                Attempt::Success(outcome) => {
                    return self.after_success(turn, step, outcome, abort).await;
                }
                Attempt::Failed(failure) => {
                    let input = RequestErrorInput {
                        agent: self.clone(),
                        turn,
                        step,
                        provider: prepared.config.provider.clone(),
                        failure: failure.clone(),
                        retry_policy: prepared.retry_policy.clone(),
                        signal: abort.clone(),
                    };
                    let log = self.inner.log.clone();
                    let recovery = self
                        .inner
                        .hooks
                        .request_error
                        .dispatch(Some(&self.inner.scope), input, move |input| {
                            Box::pin(retry_executor(log, input))
                        })
                        .await
                        .map_err(|e| TurnError::unknown(error_chain(&e)))?;
                    check(abort)?;
                    match recovery {
                        Some(Recovery::Retry) => continue,
                        None => return Err(TurnError::Failed(failure)),
                    }
                }
            }
        }
    }

    /// First request of this loop instance: the agent options (plus a persisted explicit effort
    /// for the same route); later: the folded header minus adapter-materialized fields.
    fn seed_config(&self) -> CallConfig {
        let requested = lock(&self.inner.state).requested;
        let folded = self.folded_header();
        if !requested {
            let reasoning_effort = folded.as_ref().and_then(|h| {
                let same_route =
                    h.config.provider == self.inner.provider && h.config.model == self.inner.model;
                let was_default = h.adapter_defaults.is_some_and(|d| d.reasoning_effort);
                (same_route && !was_default)
                    .then(|| h.config.reasoning_effort.clone())
                    .flatten()
            });
            return CallConfig {
                provider: self.inner.provider.clone(),
                model: self.inner.model.clone(),
                reasoning_effort,
                temperature: None,
                max_tokens: self.inner.max_tokens,
                stop: None,
            };
        }
        match folded {
            Some(header) => {
                let defaults = header.adapter_defaults.unwrap_or_default();
                CallConfig {
                    provider: header.config.provider,
                    model: header.config.model,
                    reasoning_effort: header
                        .config
                        .reasoning_effort
                        .filter(|_| !defaults.reasoning_effort),
                    temperature: header.config.temperature,
                    max_tokens: header.config.max_tokens.filter(|_| !defaults.max_tokens),
                    stop: header.config.stop,
                }
            }
            None => CallConfig {
                provider: self.inner.provider.clone(),
                model: self.inner.model.clone(),
                max_tokens: self.inner.max_tokens,
                ..CallConfig::default()
            },
        }
    }

    fn folded_header(&self) -> Option<EpochHeader> {
        let event = self.inner.log.request_header()?;
        event.decode::<RequestHeader>()?.ok().map(|h| h.header)
    }

    /// `prepareCall`: materializes adapter defaults and validates the reasoning effort.
    fn prepare(&self, config: CallConfig) -> Result<Prepared, TurnError> {
        let adapter = &self.inner.adapter;
        if config.provider != adapter.provider() {
            return Ok(Prepared {
                config,
                defaults: AdapterDefaults::default(),
                context_window: None,
                retry_policy: None,
            });
        }
        let mut config = config;
        let mut defaults = AdapterDefaults::default();
        let info = adapter.model_info(&config.model);
        if let Some(info) = &info {
            if config.max_tokens.is_none()
                && let Some(default) = info.default_max_tokens
            {
                config.max_tokens = Some(u64::from(default));
                defaults.max_tokens = true;
            }
            match &config.reasoning_effort {
                Some(effort) if !info.efforts.contains(effort) => {
                    return Err(TurnError::Failed(LlmFailure::new(
                        "UNSUPPORTED_REASONING_EFFORT",
                        format!(
                            "reasoning effort \"{effort}\" is not supported by {}/{} (supported: {})",
                            config.provider,
                            config.model,
                            info.efforts.join(", ")
                        ),
                    )));
                }
                Some(_) => {}
                None => {
                    if let Some(default) = &info.default_effort {
                        config.reasoning_effort = Some(default.clone());
                        defaults.reasoning_effort = true;
                    }
                }
            }
        }
        Ok(Prepared {
            config,
            defaults,
            context_window: info.map(|i| i.context_window),
            retry_policy: Some(adapter.retry_policy()),
        })
    }

    /// Logs the header: `initial`/`resume` before this instance's first request, later only a
    /// `change`.
    fn log_header(&self, header: EpochHeader) -> Result<(), TurnError> {
        let first = !std::mem::replace(&mut lock(&self.inner.state).requested, true);
        let folded = self.folded_header();
        let reason = match (first, &folded) {
            (true, None) => Some(HeaderReason::Initial),
            (true, Some(_)) => Some(HeaderReason::Resume),
            (false, Some(folded)) if *folded == header => None,
            (false, _) => Some(HeaderReason::Change),
        };
        if let Some(reason) = reason {
            self.inner
                .log
                .append_data(&RequestHeader { header, reason }, None)?;
        }
        Ok(())
    }

    /// `request/context` only when provider, model or context window changed.
    fn log_context(&self, prepared: &Prepared) -> Result<(), TurnError> {
        let current = RequestContext {
            provider: prepared.config.provider.clone(),
            model: prepared.config.model.clone(),
            context_window: prepared.context_window,
        };
        // The log keeps the latest context: no snapshot of the whole log per request.
        let last = self
            .inner
            .log
            .request_context()
            .and_then(|e| e.decode::<RequestContext>())
            .and_then(Result::ok);
        if last.as_ref() != Some(&current) {
            self.inner.log.append_data(&current, None)?;
        }
        Ok(())
    }

    /// Streams one provider attempt, logging every chunk before folding it.
    async fn attempt(
        &self,
        turn: u64,
        step: u64,
        request: ModelRequest,
        prepared: &Prepared,
        abort: &CancellationToken,
    ) -> Result<Attempt, TurnError> {
        let cancel = abort.child_token();
        let mut stream = if prepared.retry_policy.is_some() {
            self.inner.adapter.stream(request, cancel.clone())
        } else {
            let failure = LlmFailure::new(
                NO_ADAPTER,
                format!(
                    "no model adapter is registered for provider \"{}\"",
                    prepared.config.provider
                ),
            );
            futures::stream::iter([StreamChunk::Finish {
                reason: FinishReason::Error { failure },
                replay_state: None,
            }])
            .boxed()
        };
        let mut assembler = BlockAssembler::new();
        let mut seqs = Vec::new();
        let mut streamed = 0usize;
        let mut argument_bytes: std::collections::HashMap<u32, usize> = Default::default();
        let limit = Duration::from_millis(self.inner.attempt_timeout_ms.load(Ordering::Relaxed));
        let deadline = tokio::time::Instant::now() + limit;
        let mut timed_out = false;
        loop {
            let next = tokio::select! {
                biased;
                () = abort.cancelled() => None,
                () = tokio::time::sleep_until(deadline), if !timed_out => Some(None),
                chunk = stream.next() => Some(Some(chunk)),
            };
            let chunk = match next {
                None => break,
                Some(Some(None)) => break,
                Some(Some(Some(_))) if abort.is_cancelled() => break,
                Some(Some(Some(chunk))) => chunk,
                Some(None) => {
                    timed_out = true;
                    cancel.cancel();
                    StreamChunk::Finish {
                        reason: FinishReason::Error {
                            failure: LlmFailure::new(
                                MODEL_ATTEMPT_TIMEOUT,
                                format!(
                                    "the model was still answering after {} s (the [model] attempt_timeout_secs limit); the request was stopped",
                                    limit.as_secs()
                                ),
                            ),
                        },
                        replay_state: None,
                    }
                }
            };
            let (chunk, log_it) = match chunk {
                StreamChunk::TextDelta { ref text, .. }
                | StreamChunk::ReasoningDelta { ref text, .. } => {
                    streamed = streamed.saturating_add(text.len());
                    (chunk, true)
                }
                StreamChunk::ToolCallDelta {
                    index,
                    ref arguments_delta,
                    ..
                } => {
                    streamed = streamed.saturating_add(arguments_delta.len());
                    let seen = argument_bytes.entry(index).or_default();
                    let logged = *seen < LOGGED_ARGUMENT_DELTA_BYTES;
                    *seen = seen.saturating_add(arguments_delta.len());
                    (chunk, logged)
                }
                other => (other, true),
            };
            let chunk = if streamed > MAX_MODEL_OUTPUT_BYTES {
                cancel.cancel();
                StreamChunk::Finish {
                    reason: FinishReason::Error {
                        failure: LlmFailure::new(
                            OUTPUT_TOO_LARGE,
                            format!(
                                "the model's answer grew past {} MiB in one request; it was stopped",
                                MAX_MODEL_OUTPUT_BYTES / (1024 * 1024)
                            ),
                        ),
                    },
                    replay_state: None,
                }
            } else {
                chunk
            };
            let finished = matches!(chunk, StreamChunk::Finish { .. });
            if log_it || finished {
                let event = self.inner.log.append_data(
                    &AssistantChunk {
                        turn,
                        step,
                        chunk: chunk.clone(),
                    },
                    None,
                )?;
                seqs.push(event.seq);
            }
            assembler.push(&chunk);
            if finished && (streamed > MAX_MODEL_OUTPUT_BYTES || timed_out) {
                break;
            }
        }
        if abort.is_cancelled() {
            cancel.cancel();
            drop(stream);
            self.commit_interrupted(turn, step, &assembler, seqs, &prepared.config)?;
            return Err(TurnError::Aborted);
        }
        match assembler.finish() {
            FinishReason::Error { failure } | FinishReason::Aborted { failure } => {
                Ok(Attempt::Failed(failure))
            }
            FinishReason::Stop | FinishReason::ToolCalls | FinishReason::MaxTokens => {
                let blocks = assembler
                    .blocks()
                    .map_err(|e| TurnError::Failed(e.to_failure()))?;
                let mut source =
                    MessageSource::model(&prepared.config.provider, &prepared.config.model);
                if let Some(replay) = assembler.replay_state() {
                    source = source.with("replayState", replay);
                }
                let message = Message::assistant(blocks, source);
                let data = AssistantMessage {
                    turn,
                    step,
                    message: message.clone(),
                    interrupted: false,
                    usage: assembler.usage().cloned(),
                };
                self.inner
                    .log
                    .append_data(&data, Some(SurfaceIntent::append_from(seqs)))?;
                Ok(Attempt::Success(Success {
                    message,
                    max_tokens: assembler.finish() == FinishReason::MaxTokens,
                }))
            }
        }
    }

    /// The interrupted prefix (§2.10 step 4): visible text/reasoning streamed so far.
    fn commit_interrupted(
        &self,
        turn: u64,
        step: u64,
        assembler: &BlockAssembler,
        seqs: Vec<u64>,
        config: &CallConfig,
    ) -> Result<(), TurnError> {
        let blocks = assembler.interrupted_blocks();
        if blocks.is_empty() {
            return Ok(());
        }
        let message = Message::assistant(
            blocks,
            MessageSource::model(&config.provider, &config.model),
        );
        let data = AssistantMessage {
            turn,
            step,
            message,
            interrupted: true,
            usage: assembler.usage().cloned(),
        };
        self.inner
            .log
            .append_data(&data, Some(SurfaceIntent::append_from(seqs)))?;
        Ok(())
    }

    async fn after_success(
        &self,
        turn: u64,
        step: u64,
        success: Success,
        abort: &CancellationToken,
    ) -> Result<Option<TurnEndReason>, TurnError> {
        if success.max_tokens {
            return Ok(Some(TurnEndReason::MaxTokens));
        }
        let calls: Vec<(String, String, String)> = success
            .message
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolCall {
                    id,
                    name,
                    arguments,
                } => Some((id.clone(), name.clone(), arguments.clone())),
                _ => None,
            })
            .collect();
        if calls.is_empty() {
            return Ok(Some(TurnEndReason::Completed));
        }
        let concluded = self.run_tools(turn, step, calls, abort).await?;
        Ok(concluded.then_some(TurnEndReason::Completed))
    }
}

struct Success {
    message: Message,
    max_tokens: bool,
}

enum Attempt {
    Success(Success),
    Failed(LlmFailure),
}

/// The default `agent/request-error` behaviour: the normal-mode retry executor (§3.5).
async fn retry_executor(
    log: SessionLog,
    input: RequestErrorInput,
) -> Result<Option<Recovery>, dsh_kernel::HookError> {
    let Some(policy) = input.retry_policy else {
        return Ok(None);
    };
    let policy_key = policy.policy_key();
    // Retries of this step are logged after its step/start: look no further back.
    let step_start = log.last_of_kind(kind::STEP_START).map_or(0, |e| e.seq);
    let since = log
        .events_since(step_start)
        .map_err(dsh_kernel::HookError::other)?;
    let previous = since.iter().rev().find_map(|event| {
        let retry = event.decode::<LlmRetry>()?.ok()?;
        (retry.turn == input.turn
            && retry.step == input.step
            && retry.provider == input.provider
            && retry.policy_key == policy_key)
            .then_some(retry)
    });
    let retry = previous.as_ref().map_or(1, |p| p.retry + 1);
    let Some(delay) = policy.decide(u32::try_from(retry).unwrap_or(u32::MAX), &input.failure)
    else {
        return Ok(None);
    };
    let retry_id = previous.map_or_else(|| uuid::Uuid::new_v4().to_string(), |p| p.retry_id);
    let record = LlmRetry {
        retry_id: retry_id.clone(),
        turn: input.turn,
        step: input.step,
        provider: input.provider.clone(),
        mode: RetryMode::Normal,
        policy_key,
        retry,
        max_retries: Some(u64::from(policy.max_retries)),
        delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
        failure: input.failure.clone(),
    };
    log.append_data(&record, None)
        .map_err(dsh_kernel::HookError::other)?;
    tokio::select! {
        () = tokio::time::sleep(delay) => {}
        () = input.signal.cancelled() => return Ok(None),
    }
    let started = LlmRetryStarted {
        retry_id,
        turn: input.turn,
        step: input.step,
        retry,
    };
    log.append_data(&started, None)
        .map_err(dsh_kernel::HookError::other)?;
    Ok(Some(Recovery::Retry))
}

/// "Model-visible means logged": the request is a pure function of the log.
#[cfg(debug_assertions)]
fn assert_model_visible(log: &SessionLog, request: &ModelRequest, provider: &str) {
    debug_assert_eq!(
        request.messages,
        log.derive_messages(),
        "request messages must equal derive_messages()"
    );
    let folded = log
        .request_header()
        .and_then(|e| e.decode::<RequestHeader>())
        .and_then(Result::ok);
    let Some(folded) = folded.map(|h| h.header) else {
        debug_assert!(false, "a request needs a logged request/header");
        return;
    };
    debug_assert_eq!(folded.config.provider, provider);
    debug_assert_eq!(folded.config.model, request.model);
    debug_assert_eq!(folded.system, request.system);
    debug_assert_eq!(folded.tools.unwrap_or_default(), request.tools);
    debug_assert_eq!(folded.config.temperature, request.temperature);
    debug_assert_eq!(
        folded
            .config
            .max_tokens
            .map(|m| u32::try_from(m).unwrap_or(u32::MAX)),
        request.max_tokens
    );
    debug_assert_eq!(folded.config.stop.unwrap_or_default(), request.stop);
    debug_assert_eq!(folded.config.reasoning_effort, request.reasoning_effort);
}
