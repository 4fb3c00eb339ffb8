//! The execution pipeline (tool-runtime-spec §5–§6): prepare → dispatch → finalize → finish.
//! Total: every failure becomes one `isError` result; started work is always awaited.

use std::panic::AssertUnwindSafe;
use std::panic::catch_unwind;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use dsh_kernel::Scope;
use dsh_kernel::ScopeId;
use futures::FutureExt;
use serde_json::Value;

use crate::definition::BodyFailure;
use crate::definition::ToolDefinition;
use crate::error::ToolError;
use crate::error::messages;
use crate::execution::Dispatch;
use crate::execution::Execution;
use crate::execution::ToolCallInput;
use crate::execution::ToolRun;
use crate::hooks::ApprovalOutcome;
use crate::hooks::ApprovalRequest;
use crate::hooks::ApprovalService;
use crate::hooks::PostDecision;
use crate::hooks::PostInput;
use crate::hooks::PreDecision;
use crate::hooks::ResultEvent;
use crate::registry::ToolRegistry;
use crate::registry::chain_of;
use crate::result::ToolResult;
use crate::result::content_is_lossless;
use crate::result::feedback_message;
use dsh_sync::lock;

/// Outcome of [`ToolRegistry::prepare`].
pub enum Prepared {
    /// Policy allowed the call: run [`ToolRegistry::dispatch`].
    Dispatch(Arc<Execution>),
    /// A result that still goes through post-execute ([`ToolRegistry::finalize`]).
    Post(Arc<Execution>, Arc<ToolResult>),
    /// A final result: post-execute is skipped ([`ToolRegistry::finish`]).
    Final(Arc<Execution>, Arc<ToolResult>),
}

/// Outcome of [`ToolRegistry::dispatch`].
pub enum Dispatched {
    Post(Arc<ToolResult>),
    Final(Arc<ToolResult>),
}

/// Awaits a stage, turning a panic into a thrown error.
async fn guarded<T>(fut: impl Future<Output = Result<T, ToolError>>) -> Result<T, ToolError> {
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(outcome) => outcome,
        Err(payload) => Err(ToolError::from_panic(payload.as_ref())),
    }
}

fn fail(error: &ToolError) -> Arc<ToolResult> {
    Arc::new(ToolResult::from_error(error))
}

/// The abort that replaces a success: `ABORTED` once the body ran, else before dispatch.
fn aborted(exec: &Execution, contexts: Vec<dsh_protocol::Message>) -> Arc<ToolResult> {
    let error = if exec.body_invoked() {
        ToolError::aborted()
    } else {
        ToolError::aborted_before_dispatch()
    };
    Arc::new(ToolResult::from_error(&error).with_contexts(contexts))
}

/// The largest arguments one tool call may carry (its JSON text, about).
pub const MAX_ARGUMENT_BYTES: usize = 16 * 1024 * 1024;

/// The length of `value` as compact JSON, counted without serializing it (strings count their
/// bytes; escapes are ignored, so this is a lower bound).
fn json_size(value: &Value) -> usize {
    let mut total = 0usize;
    let mut stack: Vec<&Value> = vec![value];
    while let Some(v) = stack.pop() {
        total = total.saturating_add(match v {
            Value::Null => 4,
            Value::Bool(_) => 5,
            Value::Number(_) => 8,
            Value::String(text) => text.len() + 2,
            Value::Array(items) => {
                stack.extend(items.iter());
                2 + items.len()
            }
            Value::Object(map) => {
                stack.extend(map.values());
                2 + map.keys().map(|key| key.len() + 4).sum::<usize>()
            }
        });
    }
    total
}

impl ToolRegistry {
    /// Runs one call through the whole pipeline. Never fails: the result may be an error.
    pub async fn execute(&self, input: ToolCallInput) -> Arc<ToolResult> {
        match self.prepare(input).await {
            Prepared::Dispatch(exec) => match self.dispatch(&exec).await {
                Dispatched::Post(result) => self.finalize(&exec, result).await,
                Dispatched::Final(result) => self.finish(&exec, result),
            },
            Prepared::Post(exec, result) => self.finalize(&exec, result).await,
            Prepared::Final(exec, result) => self.finish(&exec, result),
        }
    }

    /// Creation, pre-execute, approval and guards. Run in model order.
    /// Prepares one call. Arguments over [`MAX_ARGUMENT_BYTES`] fail at once with a clear
    /// error: nothing downstream has to carry them.
    pub async fn prepare(&self, input: ToolCallInput) -> Prepared {
        let ToolCallInput {
            call_id,
            root_call_id,
            name,
            arguments,
            agent,
            parent,
            signal,
        } = input;
        let chain = chain_of(agent.as_ref().map(|a| a.scope()));
        // The finalizer is bound to the definition visible now, before anything else happens.
        let finalizer = self
            .resolve_in(&name, &chain)
            .and_then(|d| d.finalize_content.clone());
        let ids = (call_id, root_call_id, name);
        if !dsh_schema::is_lossless(&arguments) {
            dsh_schema::drop_deep(arguments);
            let exec = Arc::new(Execution::new(ids, None, agent, parent, signal, finalizer));
            return Prepared::Final(exec, fail(&ToolError::new(messages::ARGS_NOT_LOSSLESS)));
        }
        let size = json_size(&arguments);
        if size > MAX_ARGUMENT_BYTES {
            dsh_schema::drop_deep(arguments);
            let exec = Arc::new(Execution::new(ids, None, agent, parent, signal, finalizer));
            let error = ToolError::new(format!(
                "the arguments of this call are about {size} bytes, over the {MAX_ARGUMENT_BYTES}-byte limit of one tool call; split the work into smaller calls"
            ));
            return Prepared::Final(exec, fail(&error));
        }
        let arguments = Some(Arc::new(arguments));
        if self.collapses(&ids.2, &chain, parent.is_some())
            && self.resolve_in(&ids.2, &chain).is_some()
        {
            let aborted = signal.is_cancelled();
            // A collapsed call could never execute, so its finalizer is dropped (unless aborted).
            let finalizer = if aborted { finalizer } else { None };
            let exec = Arc::new(Execution::new(
                ids, arguments, agent, parent, signal, finalizer,
            ));
            let error = if aborted {
                ToolError::aborted_before_dispatch()
            } else {
                ToolError::unknown_tool_code_only(exec.name())
            };
            return Prepared::Final(exec, fail(&error));
        }
        let exec = Arc::new(Execution::new(
            ids, arguments, agent, parent, signal, finalizer,
        ));
        if exec.signal().is_cancelled() {
            return Prepared::Final(exec.clone(), fail(&ToolError::aborted_before_dispatch()));
        }

        let decision = guarded(async {
            let base = |_| -> dsh_kernel::BoxFuture<'static, _> {
                Box::pin(std::future::ready(Ok(PreDecision::Allow)))
            };
            if self.pre_execute.is_empty() {
                return Ok(PreDecision::Allow);
            }
            self.pre_execute
                .dispatch(exec.subject(), exec.clone(), base)
                .await
        })
        .await;
        let decision = match decision {
            Ok(decision) => decision,
            Err(error) => return Prepared::Final(exec.clone(), fail(&error)),
        };
        let (decision, approval_cancelled) = match decision {
            PreDecision::Ask { reason } => match guarded(self.ask(&exec, reason)).await {
                Ok(pair) => pair,
                Err(error) => return Prepared::Final(exec.clone(), fail(&error)),
            },
            other => (other, false),
        };
        if approval_cancelled && exec.signal().is_cancelled() {
            return Prepared::Post(exec.clone(), fail(&ToolError::aborted_before_dispatch()));
        }
        match decision {
            PreDecision::Deny { reason } => {
                return Prepared::Post(exec.clone(), fail(&ToolError::new(reason)));
            }
            PreDecision::Ask { .. } => {
                return Prepared::Final(
                    exec.clone(),
                    fail(&ToolError::new("unreachable: unresolved ask decision")),
                );
            }
            PreDecision::Allow => {}
        }
        for guard in self.guards_for(&chain) {
            match catch_unwind(AssertUnwindSafe(|| guard(&exec))) {
                Ok(None) => {}
                Ok(Some(reason)) => {
                    return Prepared::Post(exec.clone(), fail(&ToolError::new(reason)));
                }
                Err(payload) => {
                    return Prepared::Final(
                        exec.clone(),
                        fail(&ToolError::from_panic(payload.as_ref())),
                    );
                }
            }
        }
        if exec.signal().is_cancelled() {
            return Prepared::Post(exec.clone(), fail(&ToolError::aborted_before_dispatch()));
        }
        Prepared::Dispatch(exec)
    }

    /// Resolves an `ask` through the approval service; the flag marks an approval cancellation.
    async fn ask(
        &self,
        exec: &Execution,
        reason: Option<String>,
    ) -> Result<(PreDecision, bool), ToolError> {
        let name = exec.name();
        let service = match exec.subject() {
            Some(scope) => scope.service::<dyn ApprovalService>(),
            None => self
                .home()
                .and_then(|home: Scope| home.service::<dyn ApprovalService>()),
        };
        let Some(service) = service else {
            let reason = reason.unwrap_or_else(|| {
                format!("tool \"{name}\" requires approval (not yet supported)")
            });
            return Ok((PreDecision::Deny { reason }, false));
        };
        let Some(agent) = exec.agent() else {
            let reason = format!(
                "tool \"{name}\" requires approval, but the call has no agent to route it through"
            );
            return Ok((PreDecision::Deny { reason }, false));
        };
        let request = ApprovalRequest {
            agent: agent.clone(),
            tool_name: name.to_owned(),
            call_id: exec.call_id().to_owned(),
            reason,
            signal: exec.signal().clone(),
        };
        Ok(match service.request(request).await {
            ApprovalOutcome::AllowedOnce => (PreDecision::Allow, false),
            ApprovalOutcome::Rejected => (
                PreDecision::deny(format!("the user rejected tool \"{name}\"")),
                false,
            ),
            ApprovalOutcome::Cancelled => (
                PreDecision::deny(format!("approval for tool \"{name}\" was cancelled")),
                true,
            ),
            ApprovalOutcome::Unavailable => (
                PreDecision::deny(format!(
                    "tool \"{name}\" requires approval, but no approval channel is available"
                )),
                false,
            ),
            ApprovalOutcome::RefusedByPolicy(by) => (
                PreDecision::deny(crate::hooks::refused_by_policy(
                    &format!("tool \"{name}\""),
                    by,
                )),
                false,
            ),
        })
    }

    /// The around-dispatch waterfall and the body. Only this stage may overlap across calls.
    pub async fn dispatch(&self, exec: &Arc<Execution>) -> Dispatched {
        let Some(me) = self.me.upgrade() else {
            return Dispatched::Final(fail(&ToolError::new("tool registry is gone")));
        };
        let outcome = guarded(async {
            let base = move |d: Dispatch| -> dsh_kernel::BoxFuture<
                'static,
                Result<Arc<ToolResult>, ToolError>,
            > { Box::pin(async move { Ok(me.dispatch_body(d).await) }) };
            self.execute_hook
                .dispatch(exec.subject(), Dispatch::new(exec.clone()), base)
                .await
        })
        .await;
        let result = match outcome.and_then(|r| self.normalize(exec, r)) {
            Ok(result) => result,
            // A wrapper failure (or a failure to normalize its result) is final: post-execute
            // is skipped and deferred contexts are lost.
            Err(error) => return Dispatched::Final(fail(&error)),
        };
        let deferred = exec.take_deferred();
        let mut result = if deferred.is_empty() {
            result
        } else {
            let mut merged = (*result).clone();
            merged.additional_contexts = deferred
                .into_iter()
                .chain(result.additional_contexts.iter().cloned())
                .collect();
            Arc::new(merged)
        };
        if exec.signal().is_cancelled() && !result.is_error {
            result = aborted(exec, result.additional_contexts.clone());
        }
        Dispatched::Post(result)
    }

    /// The base of `tools/execute`: fuse signals, resolve late, run the body, build the result.
    async fn dispatch_body(&self, dispatch: Dispatch) -> Arc<ToolResult> {
        let (exec, replaced) = dispatch.into_parts();
        let caller = exec.signal().clone();
        // Fusion: the body's token is a child of the caller's (caller abort reaches it, never the
        // wrapper's token) and is cancelled below when the wrapper's token fires.
        let (fused, watched) = match replaced {
            None => (caller, None),
            Some(wrapper) => (caller.child_token(), Some(wrapper)),
        };
        if fused.is_cancelled() || watched.as_ref().is_some_and(|w| w.is_cancelled()) {
            return fail(&ToolError::aborted_before_dispatch());
        }
        let chain = chain_of(exec.subject());
        let Some(tool) = self.resolve_for_execution(exec.name(), &chain, exec.parent().is_some())
        else {
            return fail(&ToolError::unknown_tool(exec.name()));
        };
        let Some(arguments) = exec.arguments().cloned() else {
            return fail(&ToolError::new(messages::ARGS_NOT_LOSSLESS));
        };
        exec.body_invoked.store(true, Ordering::Release);
        let run = ToolRun::new(exec.clone(), fused.clone());
        let body = AssertUnwindSafe(async { (tool.body)(arguments, run).await }).catch_unwind();
        // Never raced or abandoned: a wrapper-token abort only cancels the fused token.
        let outcome = match watched {
            None => body.await,
            Some(wrapper) => {
                let mut body = std::pin::pin!(body);
                tokio::select! {
                    biased;
                    outcome = &mut body => outcome,
                    () = wrapper.cancelled() => {
                        fused.cancel();
                        body.await
                    }
                }
            }
        };
        let value = match outcome {
            Err(payload) => return fail(&ToolError::from_panic(payload.as_ref())),
            Ok(Err(BodyFailure::Thrown(error))) => return fail(&error),
            Ok(Err(BodyFailure::Snapshot(message))) => {
                return fail(&ToolError::invalid_output(
                    exec.name(),
                    &[format!("value snapshot failed: {message}")],
                ));
            }
            Ok(Ok(value)) => value,
        };
        match self.create_success(&exec, &tool, value) {
            Err(error) => fail(&error),
            Ok(_) if fused.is_cancelled() => aborted(&exec, Vec::new()),
            Ok(success) => {
                let success = Arc::new(success);
                *lock(&exec.canonical) = Some(success.clone());
                success
            }
        }
    }

    pub(crate) fn resolve_for_execution(
        &self,
        name: &str,
        chain: &[ScopeId],
        nested: bool,
    ) -> Option<Arc<ToolDefinition>> {
        if self.collapses(name, chain, nested) {
            return None;
        }
        self.resolve_in(name, chain)
    }

    /// Validates, freezes and renders a candidate value (`createSuccessResult`).
    fn create_success(
        &self,
        exec: &Execution,
        tool: &ToolDefinition,
        value: Value,
    ) -> Result<ToolResult, ToolError> {
        let name = exec.name();
        if !dsh_schema::is_lossless(&value) {
            return Err(ToolError::invalid_output(
                name,
                &["value is not lossless JSON".to_owned()],
            ));
        }
        let violations = dsh_schema::validate(&tool.output_schema, &value, "value");
        if !violations.is_empty() {
            return Err(ToolError::invalid_output(name, &violations));
        }
        let null = Value::Null;
        let args = exec.arguments().map_or(&null, |a| a.as_ref());
        let content = match catch_unwind(AssertUnwindSafe(|| (tool.render)(args, &value))) {
            Ok(Ok(content)) if content_is_lossless(&content) => content,
            Ok(Ok(_)) => {
                return Err(ToolError::invalid_output(
                    name,
                    &["output.render returned non-lossless JSON".to_owned()],
                ));
            }
            Ok(Err(error)) => {
                return Err(ToolError::invalid_output(
                    name,
                    &[format!("output.render failed: {error}")],
                ));
            }
            Err(payload) => {
                let error = ToolError::from_panic(payload.as_ref());
                return Err(ToolError::invalid_output(
                    name,
                    &[format!("output.render failed: {error}")],
                ));
            }
        };
        let meta = match (&tool.presentation_meta, exec.parent()) {
            (Some(project), None) => match catch_unwind(AssertUnwindSafe(|| project(args, &value)))
            {
                Ok(Ok(meta)) if dsh_schema::is_lossless(&meta) => Some(meta),
                Ok(Ok(_)) => {
                    let violation = "output.presentationMeta returned non-lossless JSON".to_owned();
                    return Err(ToolError::invalid_output(name, &[violation]));
                }
                Ok(Err(error)) => {
                    return Err(ToolError::invalid_output(
                        name,
                        &[format!("output.presentationMeta failed: {error}")],
                    ));
                }
                Err(payload) => {
                    let error = ToolError::from_panic(payload.as_ref());
                    return Err(ToolError::invalid_output(
                        name,
                        &[format!("output.presentationMeta failed: {error}")],
                    ));
                }
            },
            _ => None,
        };
        Ok(ToolResult {
            is_error: false,
            value: Some(Arc::new(value)),
            content,
            error: None,
            meta,
            additional_contexts: Vec::new(),
            concludes_turn: exec.concluded.load(Ordering::Acquire),
        })
    }

    /// `normalizeDispatchResult`: our own result passes; a failure is trusted verbatim; any
    /// other success is revalidated and re-rendered from its value.
    fn normalize(
        &self,
        exec: &Execution,
        result: Arc<ToolResult>,
    ) -> Result<Arc<ToolResult>, ToolError> {
        if lock(&exec.canonical)
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c, &result))
            || result.is_error
        {
            return Ok(result);
        }
        let chain = chain_of(exec.subject());
        let Some(tool) = self.resolve_for_execution(exec.name(), &chain, exec.parent().is_some())
        else {
            return Err(ToolError::unknown_tool(exec.name()));
        };
        let value = result.value.as_deref().map(dsh_schema::clone_deep);
        let Some(value) = value else {
            return Err(ToolError::invalid_output(
                exec.name(),
                &["value is not lossless JSON".to_owned()],
            ));
        };
        let mut rebuilt = self.create_success(exec, &tool, value)?;
        rebuilt.additional_contexts = result.additional_contexts.clone();
        Ok(Arc::new(rebuilt))
    }

    /// Post-execute, then finish. Run in model order.
    pub async fn finalize(
        &self,
        exec: &Arc<Execution>,
        result: Arc<ToolResult>,
    ) -> Arc<ToolResult> {
        let decision = if self.post_execute.is_empty() {
            Ok(PostDecision::accept())
        } else {
            guarded(async {
                let base = |_| -> dsh_kernel::BoxFuture<'static, _> {
                    Box::pin(std::future::ready(Ok(PostDecision::accept())))
                };
                let input = PostInput {
                    exec: exec.clone(),
                    result: result.clone(),
                };
                self.post_execute
                    .dispatch(exec.subject(), input, base)
                    .await
            })
            .await
        };
        let applied = decision.and_then(|decision| self.apply_post(exec, result, decision));
        let result = match applied {
            Ok(result) if exec.signal().is_cancelled() && !result.is_error => {
                aborted(exec, result.additional_contexts.clone())
            }
            Ok(result) => result,
            Err(error) => fail(&error),
        };
        self.finish(exec, result)
    }

    fn apply_post(
        &self,
        exec: &Execution,
        result: Arc<ToolResult>,
        decision: PostDecision,
    ) -> Result<Arc<ToolResult>, ToolError> {
        match decision {
            PostDecision::Accept {
                content: Some(_),
                value: Some(_),
                ..
            } => Err(ToolError::new(messages::POST_BOTH)),
            PostDecision::Accept { value: Some(_), .. } if result.is_error => {
                Err(ToolError::new(messages::POST_VALUE_ON_FAILURE))
            }
            PostDecision::Accept {
                value: Some(value),
                additional_contexts,
                ..
            } => {
                let chain = chain_of(exec.subject());
                let Some(tool) =
                    self.resolve_for_execution(exec.name(), &chain, exec.parent().is_some())
                else {
                    return Err(ToolError::unknown_tool(exec.name()));
                };
                let mut replaced = match self.create_success(exec, &tool, value) {
                    Ok(success) => success,
                    Err(error) => ToolResult::from_error(&error),
                };
                replaced.additional_contexts = result
                    .additional_contexts
                    .iter()
                    .cloned()
                    .chain(additional_contexts)
                    .collect();
                Ok(Arc::new(replaced))
            }
            PostDecision::Accept {
                content,
                value: None,
                additional_contexts,
            } => {
                if content.is_none() && additional_contexts.is_empty() {
                    return Ok(result);
                }
                let mut kept = (*result).clone();
                if let Some(content) = content {
                    kept.content = content;
                }
                kept.additional_contexts.extend(additional_contexts);
                Ok(Arc::new(kept))
            }
            PostDecision::Block {
                feedback,
                additional_contexts,
            } => {
                let message = feedback_message(&feedback);
                Ok(Arc::new(
                    ToolResult::failure(message, feedback).with_contexts(additional_contexts),
                ))
            }
        }
    }

    /// Materialize, run the captured finalizer once, notify `tools/result`, return.
    pub fn finish(&self, exec: &Arc<Execution>, result: Arc<ToolResult>) -> Arc<ToolResult> {
        let mut result = if result.is_lossless() {
            result
        } else {
            fail(&ToolError::new(messages::RESULT_NOT_LOSSLESS))
        };
        if let Some(finalizer) = &exec.finalizer {
            result = match catch_unwind(AssertUnwindSafe(|| finalizer(exec, &result))) {
                Ok(Ok(None)) => result,
                Ok(Ok(Some(content))) if content_is_lossless(&content) => {
                    let mut replaced = (*result).clone();
                    replaced.content = content;
                    Arc::new(replaced)
                }
                Ok(Ok(Some(_))) => fail(&ToolError::new(messages::RESULT_NOT_LOSSLESS)),
                Ok(Err(error)) => fail(&error),
                Err(payload) => fail(&ToolError::from_panic(payload.as_ref())),
            };
        }
        if !self.results.is_empty() {
            let event = ResultEvent {
                exec: exec.clone(),
                result: result.clone(),
            };
            self.results.emit(exec.subject(), &event);
        }
        result
    }
}
