//! The bridge as the agent's approval channel (§5.5): a pipeline `ask` becomes
//! `session/request_permission`; "always" answers are remembered for the session in its log
//! (`dsh_approval::remember_for_session`, as the TUI's "allow for this session"), so load,
//! resume and fork keep them and the approval service decides later asks without the client.

use std::sync::Arc;

use agent_client_protocol::v1::schema::PermissionOption;
use agent_client_protocol::v1::schema::PermissionOptionKind;
use agent_client_protocol::v1::schema::RequestPermissionOutcome;
use agent_client_protocol::v1::schema::RequestPermissionRequest;
use agent_client_protocol::v1::schema::ToolCallStatus;
use agent_client_protocol::v1::schema::ToolCallUpdate;
use dsh_kernel::BoxFuture;
use dsh_kernel::ScopeId;
use dsh_tools::ApprovalOutcome;
use dsh_tools::ApprovalRequest;
use dsh_tools::ApprovalService;

pub(crate) const ALLOW_ONCE: &str = "allow-once";
pub(crate) const ALLOW_ALWAYS: &str = "allow-always";
pub(crate) const REJECT_ONCE: &str = "reject-once";
pub(crate) const REJECT_ALWAYS: &str = "reject-always";

/// The session's view of the calls its client was shown: what a permission request repeats,
/// and the ordered channel for a shown call's status changes.
pub(crate) trait ShownCalls: Send + Sync {
    /// The full tool call (status `pending`) for a request, and whether the client was shown
    /// that call (only then may its status change).
    fn permission_call(&self, request: &ApprovalRequest) -> (ToolCallUpdate, bool);
    /// Sends a status change of a shown call, after every update already queued.
    fn set_status(&self, call_id: &str, status: ToolCallStatus);
}

/// Answers approval requests of one session's agent by asking the client.
pub(crate) struct ClientApproval {
    session_id: String,
    /// The scope of the one agent this bridge session owns: requests from any other agent
    /// (a same-id impostor included) never reach the client.
    owner: ScopeId,
    /// The connections watching the session: the newest one is asked.
    clients: crate::session::Clients,
    calls: Arc<dyn ShownCalls>,
}

impl ClientApproval {
    pub(crate) fn new(
        session_id: String,
        owner: ScopeId,
        clients: crate::session::Clients,
        calls: Arc<dyn ShownCalls>,
    ) -> Self {
        Self {
            session_id,
            owner,
            clients,
            calls,
        }
    }
}

/// The answers offered. A sandbox escalation is decided per call: remembering "always" for a
/// tool would grant every later escalation of it unseen.
fn options(escalation: bool) -> Vec<PermissionOption> {
    if escalation {
        return vec![
            PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
            PermissionOption::new(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
        ];
    }
    vec![
        PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
        PermissionOption::new(
            ALLOW_ALWAYS,
            "Always allow",
            PermissionOptionKind::AllowAlways,
        ),
        PermissionOption::new(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
        PermissionOption::new(
            REJECT_ALWAYS,
            "Always reject",
            PermissionOptionKind::RejectAlways,
        ),
    ]
}

impl ApprovalService for ClientApproval {
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome> {
        // §5.5: without a call to attach the prompt to, or for an agent the bridge does not
        // own, the client is not the approval channel.
        if request.call_id.is_empty() || request.agent.scope().id() != self.owner {
            return Box::pin(std::future::ready(ApprovalOutcome::Unavailable));
        }
        let escalation = crate::cards::escalation(request.reason.as_deref()).is_some();
        let Some(connection) = self.clients.current() else {
            return Box::pin(std::future::ready(ApprovalOutcome::Unavailable));
        };
        let (tool_call, shown) = self.calls.permission_call(&request);
        if shown {
            self.calls
                .set_status(&request.call_id, ToolCallStatus::Pending);
        }
        let ask =
            RequestPermissionRequest::new(self.session_id.clone(), tool_call, options(escalation));
        let sent = connection.send_request(ask);
        let asker = request.agent.clone();
        let tool = request.tool_name;
        let signal = request.signal;
        let calls = self.calls.clone();
        let call_id = request.call_id;
        Box::pin(async move {
            let answer = tokio::select! {
                answer = sent.block_task() => answer,
                // Dropping the pending request tells the client to stop asking.
                () = signal.cancelled() => return ApprovalOutcome::Cancelled,
            };
            let outcome = outcome_of(answer, asker.as_ref(), &tool, escalation);
            // An allowed call runs now; any other outcome is reported by the call's result.
            if shown && outcome == ApprovalOutcome::AllowedOnce {
                calls.set_status(&call_id, ToolCallStatus::InProgress);
            }
            outcome
        })
    }
}

fn outcome_of(
    answer: Result<
        agent_client_protocol::v1::schema::RequestPermissionResponse,
        agent_client_protocol::Error,
    >,
    asker: &dyn dsh_tools::AgentHandle,
    tool: &str,
    escalation: bool,
) -> ApprovalOutcome {
    match answer {
        Ok(response) => match response.outcome {
            RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
                ALLOW_ONCE => ApprovalOutcome::AllowedOnce,
                // Only what was offered counts: an escalation offers no "always".
                _ if escalation => ApprovalOutcome::Rejected,
                ALLOW_ALWAYS => {
                    remember(asker, tool, true);
                    ApprovalOutcome::AllowedOnce
                }
                REJECT_ALWAYS => {
                    remember(asker, tool, false);
                    ApprovalOutcome::Rejected
                }
                _ => ApprovalOutcome::Rejected,
            },
            RequestPermissionOutcome::Cancelled => ApprovalOutcome::Cancelled,
            // A future outcome this version cannot read is no grant.
            _ => ApprovalOutcome::Rejected,
        },
        Err(error) => {
            tracing::warn!(%error, "session/request_permission failed; no approval channel");
            ApprovalOutcome::Unavailable
        }
    }
}

/// A remembered answer that cannot be logged still decides this call; later asks ask again.
fn remember(asker: &dyn dsh_tools::AgentHandle, tool: &str, allow: bool) {
    if let Err(error) = dsh_approval::remember_for_agent(asker, tool, allow) {
        tracing::warn!(%error, tool, "the session's remembered approval could not be logged");
    }
}
