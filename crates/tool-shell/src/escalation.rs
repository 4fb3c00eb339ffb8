//! One-call sandbox escalation (§2.1 "Escalation flow"): checks the requested mode against
//! the call's effective one and asks the user through the approval seam.

use std::sync::Arc;

use dsh_tools::AgentHandle;
use dsh_tools::ApprovalOutcome;
use dsh_tools::ApprovalRequest;
use dsh_tools::ApprovalService;
use tokio_util::sync::CancellationToken;

use crate::bash::BASH_TOOL_NAME;
use crate::error::ShellError;
use crate::sandbox::ApprovalPolicy;
use crate::sandbox::SandboxMode;
use crate::sandbox::SandboxPolicy;

/// Where an approval request for this call goes: the service found in the calling agent's
/// scope (if any), the agent itself, and the call id the prompt refers to.
#[derive(Clone)]
pub struct ApprovalRoute {
    pub service: Option<Arc<dyn ApprovalService>>,
    pub agent: Option<Arc<dyn AgentHandle>>,
    pub call_id: String,
}

/// Decides a `sandbox_permissions` request. `Ok(mode)` means this one call may run under
/// `mode`; every refusal carries upstream's exact text and nothing has run.
pub async fn approve_escalation(
    requested: SandboxMode,
    justification: &str,
    policy: &SandboxPolicy,
    route: Option<&ApprovalRoute>,
    signal: &CancellationToken,
) -> Result<SandboxMode, ShellError> {
    let m = requested.as_str();
    // The mode the call already has needs no one's approval: it simply runs. Upstream refuses
    // it as "not strictly wider", but dsh's own advice ("run with `-s <mode>`") leads a model
    // to exactly this request, and refusing it made the advice fail.
    if requested == policy.mode {
        return Ok(requested);
    }
    if !requested.is_strictly_wider_than(policy.mode) {
        return Err(ShellError::plain(format!(
            "sandbox escalation to \"{m}\" is not strictly wider than this call's current \"{}\" mode",
            policy.mode.as_str()
        )));
    }
    // Approval prompts are disabled: the approval service refuses before any answerer runs
    // (and audits it, and knows which setting made the policy `never`). Without one, the
    // policy still refuses here.
    let never = policy.approval == ApprovalPolicy::Never;
    let by_policy = |by| {
        ShellError::plain(dsh_tools::refused_by_policy(
            &format!("sandbox escalation to \"{m}\""),
            by,
        ))
    };
    let routed = route.and_then(|r| r.service.clone().zip(r.agent.clone()));
    if never && routed.is_none() {
        return Err(by_policy(dsh_tools::NeverBy::Config {
            danger_full_access: false,
        }));
    }
    let Some(service) = route.and_then(|r| r.service.clone()) else {
        return Err(ShellError::plain(format!(
            "sandbox escalation to \"{m}\" requires approval, but no approval service is composed"
        )));
    };
    let Some((agent, call_id)) =
        route.and_then(|r| r.agent.clone().map(|a| (a, r.call_id.clone())))
    else {
        return Err(ShellError::plain(format!(
            "sandbox escalation to \"{m}\" requires approval, but the call has no agent to route it through"
        )));
    };
    let request = ApprovalRequest {
        agent,
        tool_name: BASH_TOOL_NAME.to_owned(),
        call_id,
        reason: Some(format!("escalate sandbox to {m}: {justification}")),
        signal: signal.clone(),
    };
    match service.request(request).await {
        ApprovalOutcome::RefusedByPolicy(by) => Err(by_policy(by)),
        // The sandbox policy says `never`: whatever an answerer said, nothing runs wider.
        _ if never => Err(by_policy(dsh_tools::NeverBy::Config {
            danger_full_access: false,
        })),
        ApprovalOutcome::AllowedOnce => Ok(requested),
        ApprovalOutcome::Rejected => Err(rejected(requested)),
        ApprovalOutcome::Cancelled => Err(ShellError::plain(format!(
            "approval for escalating to \"{m}\" was cancelled"
        ))),
        ApprovalOutcome::Unavailable => Err(ShellError::plain(format!(
            "sandbox escalation to \"{m}\" requires approval, but no approval channel is available"
        ))),
    }
}

fn rejected(mode: SandboxMode) -> ShellError {
    ShellError::plain(format!(
        "the user rejected escalating this command to \"{}\"",
        mode.as_str()
    ))
}
