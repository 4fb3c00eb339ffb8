//! Automatic triggers (§8.8): pressure compaction before each step (before `next()`), and
//! recovery from a provider's context-length refusal in `agent/request-error`.

use std::sync::Arc;

use dsh_agent::AgentEvent;
use dsh_agent::AgentHooks;
use dsh_agent::AgentStatus;
use dsh_agent::PreStepInput;
use dsh_agent::Recovery;
use dsh_agent::RequestErrorInput;
use dsh_kernel::Disposer;
use dsh_kernel::Scope;

use crate::error::CompactionError;
use crate::service::Compaction;
use crate::service::Trigger;
use crate::service::latest_header;

/// The provider failure code that triggers overflow recovery.
pub const CONTEXT_WINDOW_EXCEEDED: &str = "CONTEXT_WINDOW_EXCEEDED";

/// Registers the automatic listeners on `hooks`, owned by `owner` (nothing when `auto` is off).
pub fn install_triggers(
    compaction: &Arc<Compaction>,
    owner: &Scope,
    hooks: &AgentHooks,
) -> Vec<Disposer> {
    if !compaction.config().auto {
        return Vec::new();
    }
    let pressure = compaction.clone();
    let pre_step = hooks
        .pre_step
        .register(owner, move |input: PreStepInput, next| {
            let compaction = pressure.clone();
            Box::pin(async move {
                if !input.signal.is_cancelled() {
                    compaction.pressure_step(&input).await;
                }
                next.run(input).await
            })
        });
    let overflow = compaction.clone();
    let request_error =
        hooks
            .request_error
            .register(owner, move |input: RequestErrorInput, next| {
                let compaction = overflow.clone();
                Box::pin(async move {
                    if compaction.recover_overflow(&input).await {
                        return Ok(Some(Recovery::Retry));
                    }
                    next.run(input).await
                })
            });
    let idle = compaction.clone();
    let events = hooks.events.register(owner, move |event: &AgentEvent| {
        if let AgentEvent::Status {
            agent,
            status: AgentStatus::Idle,
        } = event
        {
            idle.reset_overflow(agent);
        }
        Ok(())
    });
    vec![pre_step, request_error, events]
}

impl Compaction {
    async fn pressure_step(&self, input: &PreStepInput) {
        match self
            .compact_if_needed(&input.agent, Trigger::Pressure, &input.signal)
            .await
        {
            Ok(_) => {}
            Err(CompactionError::Config(message)) => {
                let key = latest_header(input.agent.log())
                    .map(|h| format!("{}/{}", h.config.provider, h.config.model))
                    .unwrap_or_default();
                if self.first_warning(&key) {
                    tracing::warn!(session = %input.agent.id(), "step compaction failed: {message}; continuing the turn");
                }
            }
            Err(error) => {
                tracing::warn!(session = %input.agent.id(), "step compaction failed: {error}; continuing the turn");
            }
        }
    }

    /// `true` when the same step should be retried against the replacement surface.
    async fn recover_overflow(&self, input: &RequestErrorInput) -> bool {
        if input.failure.code != CONTEXT_WINDOW_EXCEEDED || input.signal.is_cancelled() {
            return false;
        }
        let log = input.agent.log();
        if latest_header(log).is_none() {
            return false;
        }
        let max = self.policy_for(&input.agent).max_overflow_retries;
        if !self.overflow_allowed(log, max) {
            return false;
        }
        let generation = log.replace_generation();
        let outcome = self
            .compact_if_needed(&input.agent, Trigger::ContextOverflow, &input.signal)
            .await;
        let advanced = log.replace_generation() > generation;
        if let Err(error) = &outcome {
            if input.signal.is_cancelled() {
                tracing::warn!(session = %log.id(), "context-overflow compaction failed: {error}; cancellation prevents retry");
            } else if advanced {
                tracing::warn!(session = %log.id(), "context-overflow compaction failed after durable surface progress: {error}; retrying from the replacement surface");
            } else {
                tracing::warn!(session = %log.id(), "context-overflow compaction failed: {error}; preserving the original request error");
            }
        }
        if advanced && !input.signal.is_cancelled() {
            self.note_overflow_retry(log);
            return true;
        }
        false
    }
}
