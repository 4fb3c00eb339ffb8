//! The pipeline side: one `tools/pre-execute` and one `tools/post-execute` listener per bridge.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_tools::Execution;
use dsh_tools::PostDecision;
use dsh_tools::PostInput;
use dsh_tools::PreDecision;
use dsh_tools::ToolRegistry;
use serde_json::Value;
use serde_json::json;

use crate::Dialect;
use crate::HookEvent;
use crate::HooksConfig;
use crate::Point;
use crate::config::Handler;
use crate::runner::HookOutcome;
use crate::runner::interpret;
use crate::runner::run_command;
use crate::runner::stderr_summary;
use dsh_plugin::SessionContext;

/// Registers `config`'s hooks on `registry`, owned by `owner`. Registers nothing for an empty
/// configuration. The listeners go innermost, so a policy prepended outermost (spilling) still
/// sees their decision.
pub fn install(registry: &ToolRegistry, owner: &Scope, config: HooksConfig) -> Vec<Disposer> {
    let mut disposers = Vec::new();
    let dialect = config.dialect;
    if !config.pre_tool_use.is_empty() {
        let handlers = Arc::new(config.pre_tool_use);
        disposers.push(registry.pre_execute().register(owner, move |exec, next| {
            let handlers = handlers.clone();
            Box::pin(async move {
                let mine = run_pre(dialect, &handlers, &exec).await;
                if matches!(mine, PreDecision::Deny { .. }) {
                    return Ok(mine);
                }
                let inner = next.run(exec).await?;
                Ok(fold_pre(mine, inner))
            })
        }));
    }
    if !config.post_tool_use.is_empty() {
        let handlers = Arc::new(config.post_tool_use);
        disposers.push(
            registry
                .post_execute()
                .register(owner, move |input: PostInput, next| {
                    let handlers = handlers.clone();
                    Box::pin(async move {
                        let inner = next.run(input.clone()).await?;
                        // Like Claude Code, PostToolUse follows a tool that ran and succeeded.
                        if !input.exec.body_invoked() || input.result.is_error {
                            return Ok(inner);
                        }
                        let (block, contexts) = run_post(dialect, &handlers, &input).await;
                        Ok(merge_post(inner, block, contexts))
                    })
                }),
        );
    }
    disposers
}

/// deny > ask > allow; the first ask's reason wins.
fn fold_pre(a: PreDecision, b: PreDecision) -> PreDecision {
    match (a, b) {
        (deny @ PreDecision::Deny { .. }, _) | (_, deny @ PreDecision::Deny { .. }) => deny,
        (PreDecision::Ask { reason: first }, PreDecision::Ask { reason: second }) => {
            PreDecision::Ask {
                reason: first.or(second),
            }
        }
        (ask @ PreDecision::Ask { .. }, _) | (_, ask @ PreDecision::Ask { .. }) => ask,
        (PreDecision::Allow, PreDecision::Allow) => PreDecision::Allow,
    }
}

fn merge_post(inner: PostDecision, block: Option<String>, contexts: Vec<Message>) -> PostDecision {
    match (inner, block) {
        (
            PostDecision::Accept {
                additional_contexts,
                ..
            }
            | PostDecision::Block {
                additional_contexts,
                ..
            },
            Some(reason),
        ) => PostDecision::Block {
            feedback: vec![ContentBlock::text(reason)],
            additional_contexts: additional_contexts.into_iter().chain(contexts).collect(),
        },
        (
            PostDecision::Accept {
                content,
                value,
                mut additional_contexts,
            },
            None,
        ) => {
            additional_contexts.extend(contexts);
            PostDecision::Accept {
                content,
                value,
                additional_contexts,
            }
        }
        (
            PostDecision::Block {
                feedback,
                mut additional_contexts,
            },
            None,
        ) => {
            additional_contexts.extend(contexts);
            PostDecision::Block {
                feedback,
                additional_contexts,
            }
        }
    }
}

/// Runs the matching PreToolUse commands in file order, stopping at the first deny.
async fn run_pre(dialect: Dialect, handlers: &[Handler], exec: &Arc<Execution>) -> PreDecision {
    let site = Site::of(exec);
    let mut decision = PreDecision::Allow;
    for handler in handlers.iter().filter(|h| h.matches(exec.name())) {
        let payload = site.payload(Point::PreToolUse, exec, None);
        let (outcome, context) = site.run(dialect, handler, exec, &payload).await;
        if let Some(context) = context {
            exec.defer_context(context_message(dialect, context));
        }
        let mine = match outcome {
            HookOutcome::Deny { reason } | HookOutcome::Block { reason } => {
                PreDecision::Deny { reason }
            }
            HookOutcome::Ask { reason } => PreDecision::Ask { reason },
            HookOutcome::Pass | HookOutcome::Allow | HookOutcome::Error { .. } => {
                PreDecision::Allow
            }
        };
        decision = fold_pre(decision, mine);
        if matches!(decision, PreDecision::Deny { .. }) {
            break;
        }
    }
    decision
}

/// Runs the matching PostToolUse commands: the first block reason, and every context.
async fn run_post(
    dialect: Dialect,
    handlers: &[Handler],
    input: &PostInput,
) -> (Option<String>, Vec<Message>) {
    let exec = &input.exec;
    let site = Site::of(exec);
    let response = json!({
        "content": input.result.content,
        "isError": input.result.is_error,
    });
    let mut block = None;
    let mut contexts = Vec::new();
    for handler in handlers.iter().filter(|h| h.matches(exec.name())) {
        let payload = site.payload(Point::PostToolUse, exec, Some(&response));
        let (outcome, context) = site.run(dialect, handler, exec, &payload).await;
        if let Some(context) = context {
            contexts.push(context_message(dialect, context));
        }
        if let HookOutcome::Block { reason } | HookOutcome::Deny { reason } = outcome {
            block.get_or_insert(reason);
        }
    }
    (block, contexts)
}

fn context_message(dialect: Dialect, text: String) -> Message {
    Message::user(
        vec![ContentBlock::text(text)],
        MessageSource::plugin(dialect.plugin()),
    )
}

/// Where a call's hooks run and report.
struct Site {
    session: Option<Arc<SessionContext>>,
    cwd: PathBuf,
    session_id: String,
}

impl Site {
    fn of(exec: &Execution) -> Self {
        let session = exec.subject().and_then(SessionContext::of);
        let cwd = session
            .as_ref()
            .map(|session| session.cwd().to_path_buf())
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("."));
        let session_id = exec
            .agent()
            .map(|agent| agent.id().to_owned())
            .unwrap_or_default();
        Self {
            session,
            cwd,
            session_id,
        }
    }

    fn payload(&self, point: Point, exec: &Execution, response: Option<&Value>) -> Value {
        let mut payload = json!({
            "session_id": self.session_id,
            "cwd": self.cwd.to_string_lossy(),
            "hook_event_name": point.as_str(),
            "tool_name": exec.name(),
            "tool_input": exec.arguments().map_or(Value::Object(Default::default()), |a| (**a).clone()),
        });
        if let (Some(response), Value::Object(map)) = (response, &mut payload) {
            map.insert("tool_response".into(), response.clone());
        }
        payload
    }

    async fn run(
        &self,
        dialect: Dialect,
        handler: &Handler,
        exec: &Execution,
        payload: &Value,
    ) -> (HookOutcome, Option<String>) {
        self.record(HookEvent::Invoked {
            point: handler.point,
            dialect,
            handler_id: handler.id.clone(),
            matcher: handler.matcher.clone(),
        });
        let run = run_command(
            &handler.command,
            &self.cwd,
            payload,
            handler.timeout,
            exec.signal(),
        )
        .await;
        let (outcome, context) = interpret(handler.point, &run);
        if let Some(error) = &run.spawn_error {
            tracing::warn!(handler = %handler.id, %error, "hook command could not run");
        } else if let HookOutcome::Error { decision } = &outcome {
            tracing::warn!(handler = %handler.id, decision, exit_code = ?run.exit_code, "hook failed; continuing");
        }
        self.record(HookEvent::Result {
            point: handler.point,
            handler_id: handler.id.clone(),
            decision: outcome.decision(),
            exit_code: run.exit_code,
            stderr_summary: stderr_summary(&run.stderr),
            duration_ms: run.duration.as_secs_f64() * 1000.0,
        });
        (outcome, context)
    }

    fn record(&self, event: HookEvent) {
        match &self.session {
            Some(session) => {
                if let Err(error) =
                    session.record_raw(event.event_type(), event.data(session.turn()))
                {
                    tracing::warn!(%error, "cannot log a hook event");
                }
            }
            None => {
                tracing::debug!(event = event.event_type(), data = %event.data(0), "hook event (no sink)")
            }
        }
    }
}

#[cfg(test)]
#[path = "bridge_tests.rs"]
mod tests;
