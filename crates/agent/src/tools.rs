//! Tool-call scheduling (§2.8): prepare and finalize in model order, dispatch overlapping for
//! runs of concurrency-safe calls (bounded pool), exclusive calls as barriers, results
//! committed in model order, synthetic results for calls an abort kept from starting.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_session::SurfaceIntent;
use dsh_session::data::ToolCall;
use dsh_session::data::ToolErrorId;
use dsh_session::data::ToolResult as ToolResultData;
use dsh_tools::Dispatched;
use dsh_tools::Execution;
use dsh_tools::ExecutionMode;
use dsh_tools::Prepared;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolError;
use dsh_tools::ToolResult;
use dsh_tools::messages;
use dsh_tools::parse_arguments;
use futures::FutureExt;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::agent::AgentHandle;
use crate::error::TurnError;

/// A call's state between prepare and commit.
enum Ready {
    /// Still goes through post-execute (`finalize`).
    Post(Arc<Execution>, Arc<ToolResult>),
    /// Skips post-execute (`finish` only).
    Final(Arc<Execution>, Arc<ToolResult>),
}

struct Call {
    id: String,
    name: String,
    raw: String,
    arguments: Value,
}

impl AgentHandle {
    /// Runs the step's tool calls. Returns whether any committed result concluded the turn.
    pub(crate) async fn run_tools(
        &self,
        turn: u64,
        step: u64,
        calls: Vec<(String, String, String)>,
        abort: &CancellationToken,
    ) -> Result<bool, TurnError> {
        let calls: Vec<Call> = calls
            .into_iter()
            .map(|(id, name, raw)| Call {
                arguments: parse_arguments(&raw),
                id,
                name,
                raw,
            })
            .collect();
        let registry = self.inner.tools.clone();
        let subject = self.inner.scope.clone();
        let agent: Arc<dyn dsh_tools::AgentHandle> = Arc::new(self.clone());
        let count = calls.len();
        // Calls past the cap never start; each still gets its call and an error result, so
        // the conversation stays well formed and the model learns why.
        let cap = self
            .inner
            .max_calls_per_response
            .load(Ordering::Relaxed)
            .max(1);
        let runnable = count.min(cap);
        let mut call_seqs: Vec<u64> = Vec::with_capacity(count);
        let mut ready: Vec<Option<Ready>> = (0..count).map(|_| None).collect();
        let mut in_flight = FuturesUnordered::new();
        let (mut started, mut committed) = (0usize, 0usize);
        let mut exclusive_open = false;
        let mut failure: Option<TurnError> = None;
        let mut concluded = false;
        let mut contexts: Vec<Vec<Message>> = Vec::new();
        loop {
            while started < runnable && failure.is_none() && !abort.is_cancelled() {
                let call = &calls[started];
                // Re-classified just before starting: registry changes can create a barrier.
                let mode = registry.execution_mode(&call.name, &call.arguments, Some(&subject));
                let max = self.inner.max_parallel.load(Ordering::Relaxed).max(1);
                let may_start = match mode {
                    ExecutionMode::Exclusive => committed == started,
                    ExecutionMode::Parallel => !exclusive_open && in_flight.len() < max,
                };
                if !may_start {
                    break;
                }
                let record = ToolCall {
                    turn,
                    step,
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.raw.clone(),
                };
                match self.inner.log.append_data(&record, None) {
                    Ok(event) => call_seqs.push(event.seq),
                    Err(error) => {
                        failure = Some(error.into());
                        break;
                    }
                }
                // The record must be in the file before the tool can act: after a SIGKILL,
                // crash repair then reports the call's outcome as unknown, never as a call
                // that did not start (which invites a blind retry).
                if let Err(error) = self.inner.log.written().await {
                    failure = Some(error.into());
                    break;
                }
                let input = ToolCallInput::new(
                    call.id.clone(),
                    call.name.clone(),
                    call.arguments.clone(),
                    abort.clone(),
                )
                .agent(agent.clone());
                match registry.prepare(input).await {
                    Prepared::Dispatch(exec) => {
                        let registry = registry.clone();
                        let index = started;
                        let task_exec = exec.clone();
                        let task = tokio::spawn(async move { registry.dispatch(&task_exec).await });
                        in_flight.push(task.map(move |joined| (index, exec, joined)));
                    }
                    Prepared::Post(exec, result) => {
                        ready[started] = Some(Ready::Post(exec, result))
                    }
                    Prepared::Final(exec, result) => {
                        ready[started] = Some(Ready::Final(exec, result))
                    }
                }
                exclusive_open = mode == ExecutionMode::Exclusive;
                started += 1;
            }
            while committed < started {
                let Some(next) = ready[committed].take() else {
                    break;
                };
                let result = match next {
                    Ready::Post(exec, result) => registry.finalize(&exec, result).await,
                    Ready::Final(exec, result) => registry.finish(&exec, result),
                };
                if failure.is_none() {
                    let call = &calls[committed];
                    if let Err(error) =
                        self.commit_result(turn, step, &call.id, call_seqs[committed], &result)
                    {
                        failure = Some(error);
                    }
                }
                concluded |= result.concludes_turn;
                contexts.push(result.additional_contexts.clone());
                committed += 1;
                if committed == started {
                    exclusive_open = false;
                }
            }
            let stopped = failure.is_some() || abort.is_cancelled();
            if committed == started && (started == runnable || stopped) {
                break;
            }
            if let Some((index, exec, joined)) = in_flight.next().await {
                let ready_now = match joined {
                    Ok(Dispatched::Post(result)) => Ready::Post(exec, result),
                    Ok(Dispatched::Final(result)) => Ready::Final(exec, result),
                    Err(error) => {
                        let error = ToolError::new(format!("tool dispatch task failed: {error}"));
                        Ready::Final(exec, Arc::new(ToolResult::from_error(&error)))
                    }
                };
                ready[index] = Some(ready_now);
            }
        }
        if let Some(failure) = failure {
            return Err(failure);
        }
        for (index, call) in calls.iter().enumerate().skip(started) {
            if index >= cap {
                self.commit_over_cap(turn, step, call, count, cap)?;
            } else {
                self.commit_unstarted(turn, step, call)?;
            }
        }
        for batch in contexts {
            self.append_next_step(batch)
                .map_err(|e| TurnError::unknown(crate::error::error_chain(&e)))?;
        }
        Ok(concluded)
    }

    fn commit_result(
        &self,
        turn: u64,
        step: u64,
        call_id: &str,
        call_seq: u64,
        result: &ToolResult,
    ) -> Result<(), TurnError> {
        let error = result
            .error
            .as_ref()
            .and_then(|e| e.info.as_ref())
            .map(|info| ToolErrorId {
                name: info.name.clone(),
                code: info.code.clone(),
            });
        let data = ToolResultData {
            turn,
            step,
            message: Message::tool_result(call_id, result.content.clone(), result.is_error),
            error,
            meta: result.meta.clone(),
        };
        self.inner
            .log
            .append_data(&data, Some(SurfaceIntent::append_from(vec![call_seq])))?;
        Ok(())
    }

    /// The synthetic `tool/call` + `tool/result` pair of a call an abort kept from starting.
    fn commit_unstarted(&self, turn: u64, step: u64, call: &Call) -> Result<(), TurnError> {
        let text = format!("Error: {}", messages::ABORTED_BEFORE_DISPATCH);
        self.commit_not_run(
            turn,
            step,
            call,
            text,
            "AbortError",
            "ABORTED_BEFORE_DISPATCH",
        )
    }

    /// The pair of a call past the per-response cap: it is never run.
    fn commit_over_cap(
        &self,
        turn: u64,
        step: u64,
        call: &Call,
        count: usize,
        cap: usize,
    ) -> Result<(), TurnError> {
        let text = format!(
            "Error: this response made {count} tool calls and at most {cap} run per response, so this call was not run. Make at most {cap} tool calls in one response; repeat the ones you still need in the next."
        );
        self.commit_not_run(
            turn,
            step,
            call,
            text,
            "ToolCallLimitError",
            "TOO_MANY_TOOL_CALLS",
        )
    }

    fn commit_not_run(
        &self,
        turn: u64,
        step: u64,
        call: &Call,
        text: String,
        name: &str,
        code: &str,
    ) -> Result<(), TurnError> {
        let record = ToolCall {
            turn,
            step,
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.raw.clone(),
        };
        let event = self.inner.log.append_data(&record, None)?;
        let data = ToolResultData {
            turn,
            step,
            message: Message::tool_result(&call.id, vec![ContentBlock::text(text)], true),
            error: Some(ToolErrorId {
                name: name.into(),
                code: code.into(),
            }),
            meta: None,
        };
        self.inner
            .log
            .append_data(&data, Some(SurfaceIntent::append_from(vec![event.seq])))?;
        Ok(())
    }
}
