//! What stands in for a person in a headless run: approvals it cannot ask for are refused with
//! a note naming the flag that allows the call, and (when asked) one-line progress notes.

use std::sync::Mutex;

use dsh_agent::AgentHandle;
use dsh_kernel::BoxFuture;
use dsh_session::Subscription;
use dsh_tools::ApprovalOutcome;
use dsh_tools::ApprovalRequest;
use dsh_tools::ApprovalService;
use dsh_tools::ToolCallView;
use dsh_transcript::Fold;
use dsh_transcript::Item;
use dsh_transcript::Presentation;

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

/// The one stderr line a display item makes in `dsh exec` progress, if any.
pub fn progress_line(item: &Item) -> Option<String> {
    match item {
        Item::ToolCall(call) => {
            let title = match &call.card {
                ToolCallView::Terminal { title, .. } => format!("$ {title}"),
                ToolCallView::Generic { title, .. } | ToolCallView::Diff { title, .. } => {
                    title.clone()
                }
            };
            let first = title.lines().next().unwrap_or_default();
            Some(format!("· {first}"))
        }
        Item::ToolResult(result) if result.view.is_error => Some("  ✗ failed".to_owned()),
        Item::Retry(retry) => {
            let of = retry
                .max_retries
                .map(|max| format!("/{max}"))
                .unwrap_or_default();
            Some(format!(
                "· retrying {}{of} in {:.1}s: {}",
                retry.retry,
                retry.delay_ms as f64 / 1000.0,
                retry.message
            ))
        }
        _ => None,
    }
}

/// One stderr line per tool call, its outcome and each retry, while the subscription lives.
pub fn progress(agent: &AgentHandle, presentation: Presentation, io: Io) -> Subscription {
    let fold = Mutex::new(Fold::new());
    agent.log().on_event(move |event| {
        let items = dsh_sync::lock(&fold).apply(&presentation, event);
        for item in items {
            if let Some(line) = progress_line(&item.item) {
                io.note(&line);
            }
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

    fn event(seq: u64, kind: &str, data: serde_json::Value) -> dsh_session::Event {
        dsh_session::Event::new(kind, seq, 0, data)
    }

    /// Progress lines come from the transcript's items: the call's card title, a failure, a
    /// retry; arguments that are not JSON reach the card as the raw string (never `null`).
    #[test]
    fn progress_lines_render_the_transcript_items() {
        let mut fold = Fold::new();
        let presentation = Presentation::default();
        let events = [
            event(
                1,
                "tool/call",
                serde_json::json!({"turn":1,"step":1,"callId":"c1","name":"mystery","arguments":"{oops"}),
            ),
            event(
                2,
                "tool/result",
                serde_json::to_value(dsh_session::data::ToolResult {
                    turn: 1,
                    step: 1,
                    message: dsh_protocol::Message::tool_result(
                        "c1",
                        vec![dsh_protocol::ContentBlock::text("Error: bad")],
                        true,
                    ),
                    error: None,
                    meta: None,
                })
                .unwrap(),
            ),
            event(
                3,
                "llm/retry",
                serde_json::to_value(dsh_session::data::LlmRetry {
                    retry_id: "r".into(),
                    turn: 1,
                    step: 1,
                    provider: "p".into(),
                    mode: dsh_session::data::RetryMode::Normal,
                    policy_key: "k".into(),
                    retry: 1,
                    max_retries: Some(3),
                    delay_ms: 1500,
                    failure: dsh_protocol::LlmFailure::new("RATE_LIMIT", "slow down"),
                })
                .unwrap(),
            ),
        ];
        let mut lines = Vec::new();
        for event in &events {
            for item in fold.apply(&presentation, event) {
                if let Item::ToolCall(call) = &item.item {
                    assert_eq!(*call.arguments, serde_json::json!("{oops"));
                }
                lines.extend(progress_line(&item.item));
            }
        }
        assert_eq!(
            lines,
            [
                "· mystery",
                "  ✗ failed",
                "· retrying 1/3 in 1.5s: slow down"
            ]
        );
    }
}
