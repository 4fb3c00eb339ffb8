//! What stands in for a person in a headless run: approvals it cannot ask for are refused with
//! a note naming the flag that allows the call, and (when asked) one-line progress notes.

use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_kernel::BoxFuture;
use dsh_session::Subscription;
use dsh_session::data::LlmRetry;
use dsh_session::data::ToolCall;
use dsh_session::data::ToolResult;
use dsh_tools::ApprovalOutcome;
use dsh_tools::ApprovalRequest;
use dsh_tools::ApprovalService;
use dsh_tools::ToolCallView;
use dsh_tools::ToolRegistry;

use crate::Io;

/// The approval channel of `dsh exec`: nobody to ask. The call fails (the tool says no
/// approval channel is available) and stderr says how to allow it.
pub struct Headless {
    io: Io,
}

impl Headless {
    pub fn new(io: Io) -> Self {
        Self { io }
    }
}

/// `escalate sandbox to <mode>: …` → `<mode>`.
fn escalation_mode(reason: Option<&str>) -> Option<&str> {
    let rest = reason?.strip_prefix("escalate sandbox to ")?;
    Some(rest.split_once(':').map_or(rest, |(mode, _)| mode))
}

/// The note for a refused approval.
pub fn refusal_note(request_tool: &str, reason: Option<&str>) -> String {
    match escalation_mode(reason) {
        Some(mode) => format!(
            "dsh: {request_tool} asked to run outside the sandbox (\"{mode}\"); dsh exec cannot ask for approval, so it was refused. Allow it by running the task with `-s {mode}`."
        ),
        None => {
            let why = reason
                .filter(|r| !r.trim().is_empty())
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            format!(
                "dsh: {request_tool} needs approval{why}; dsh exec cannot ask, so it was refused. Approve it in the interactive UI (`dsh`), or change the rule that asks."
            )
        }
    }
}

impl ApprovalService for Headless {
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome> {
        self.io
            .note(&refusal_note(&request.tool_name, request.reason.as_deref()));
        Box::pin(std::future::ready(ApprovalOutcome::Unavailable))
    }
}

/// The approval channel of `dsh mcp serve`: a call that needs approval is refused, and stderr
/// says so (stdout carries the protocol).
pub struct NoApprover {
    io: Io,
}

impl NoApprover {
    pub fn new(io: Io) -> Self {
        Self { io }
    }
}

impl ApprovalService for NoApprover {
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome> {
        let why = request
            .reason
            .as_deref()
            .filter(|reason| !reason.trim().is_empty())
            .map(|reason| format!(" ({reason})"))
            .unwrap_or_default();
        self.io.note(&format!(
            "dsh: {} needs approval{why}; dsh mcp serve cannot ask, so it was refused.",
            request.tool_name
        ));
        Box::pin(std::future::ready(ApprovalOutcome::Unavailable))
    }
}

fn call_title(registry: &ToolRegistry, agent: &AgentHandle, call: &ToolCall) -> String {
    let arguments = serde_json::from_str(&call.arguments).unwrap_or(serde_json::Value::Null);
    let definition = registry.get(&call.name, Some(agent.scope()));
    match dsh_tools::call_card(definition.as_deref(), &call.name, &arguments) {
        ToolCallView::Terminal { title, .. } => format!("$ {title}"),
        ToolCallView::Generic { title, .. } | ToolCallView::Diff { title, .. } => title,
    }
}

/// One stderr line per tool call, its outcome and each retry, while the subscription lives.
pub fn progress(agent: &AgentHandle, registry: Arc<ToolRegistry>, io: Io) -> Subscription {
    let watched = agent.clone();
    agent.log().on_event(move |event| {
        if let Some(Ok(call)) = event.decode::<ToolCall>() {
            let title = call_title(&registry, &watched, &call);
            let first = title.lines().next().unwrap_or_default();
            io.note(&format!("· {first}"));
        } else if let Some(Ok(result)) = event.decode::<ToolResult>() {
            let failed = result.message.content.iter().any(|block| {
                matches!(
                    block,
                    dsh_protocol::ContentBlock::ToolResult {
                        is_error: Some(true),
                        ..
                    }
                )
            });
            if failed {
                io.note("  ✗ failed");
            }
        } else if let Some(Ok(retry)) = event.decode::<LlmRetry>() {
            let of = retry
                .max_retries
                .map(|max| format!("/{max}"))
                .unwrap_or_default();
            io.note(&format!(
                "· retrying {}{of} in {:.1}s: {}",
                retry.retry,
                retry.delay_ms as f64 / 1000.0,
                retry.failure.message
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_flag_that_allows_them() {
        assert_eq!(
            refusal_note(
                "bash",
                Some("escalate sandbox to danger-full-access: needs network")
            ),
            "dsh: bash asked to run outside the sandbox (\"danger-full-access\"); dsh exec cannot ask for approval, so it was refused. Allow it by running the task with `-s danger-full-access`."
        );
        assert!(refusal_note("mcp__x__y", Some("hook says ask")).contains("(hook says ask)"));
    }
}
