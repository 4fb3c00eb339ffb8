//! The bridge as the agent's approval channel (§5.5): a pipeline `ask` becomes
//! `session/request_permission`; "always" answers are remembered for the session.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::PermissionOption;
use agent_client_protocol::v1::schema::PermissionOptionKind;
use agent_client_protocol::v1::schema::RequestPermissionOutcome;
use agent_client_protocol::v1::schema::RequestPermissionRequest;
use agent_client_protocol::v1::schema::ToolCallUpdate;
use agent_client_protocol::v1::schema::ToolCallUpdateFields;
use dsh_kernel::BoxFuture;
use dsh_kernel::ScopeId;
use dsh_tools::ApprovalOutcome;
use dsh_tools::ApprovalRequest;
use dsh_tools::ApprovalService;

use crate::session::lock;

pub(crate) const ALLOW_ONCE: &str = "allow-once";
pub(crate) const ALLOW_ALWAYS: &str = "allow-always";
pub(crate) const REJECT_ONCE: &str = "reject-once";
pub(crate) const REJECT_ALWAYS: &str = "reject-always";

/// Answers approval requests of one session's agent by asking the client.
pub(crate) struct ClientApproval {
    session_id: String,
    /// The scope of the one agent this bridge session owns: requests from any other agent
    /// (a same-id impostor included) never reach the client.
    owner: ScopeId,
    connection: ConnectionTo<Client>,
    /// Tool name → remembered answer (`true` = always allow, `false` = always reject).
    remembered: Arc<Mutex<HashMap<String, bool>>>,
}

impl ClientApproval {
    pub(crate) fn new(
        session_id: String,
        owner: ScopeId,
        connection: ConnectionTo<Client>,
    ) -> Self {
        Self {
            session_id,
            owner,
            connection,
            remembered: Arc::default(),
        }
    }
}

fn options() -> Vec<PermissionOption> {
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
        let remembered = lock(&self.remembered).get(&request.tool_name).copied();
        if let Some(allow) = remembered {
            let outcome = if allow {
                ApprovalOutcome::AllowedOnce
            } else {
                ApprovalOutcome::Rejected
            };
            return Box::pin(std::future::ready(outcome));
        }
        let ask = RequestPermissionRequest::new(
            self.session_id.clone(),
            ToolCallUpdate::new(request.call_id.clone(), ToolCallUpdateFields::new()),
            options(),
        );
        let sent = self.connection.send_request(ask);
        let memory = self.remembered.clone();
        let tool = request.tool_name;
        let signal = request.signal;
        Box::pin(async move {
            let answer = tokio::select! {
                answer = sent.block_task() => answer,
                // Dropping the pending request tells the client to stop asking.
                () = signal.cancelled() => return ApprovalOutcome::Cancelled,
            };
            match answer {
                Ok(response) => match response.outcome {
                    RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
                        ALLOW_ONCE => ApprovalOutcome::AllowedOnce,
                        ALLOW_ALWAYS => {
                            lock(&memory).insert(tool, true);
                            ApprovalOutcome::AllowedOnce
                        }
                        REJECT_ALWAYS => {
                            lock(&memory).insert(tool, false);
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
        })
    }
}
