//! `dsh-approval`: the user-approval service (upstream `dsh-user-approval`).
//!
//! Owns: the effective approval policy of a session (the last `approval/policy` event, else
//! the session's configured standing), the audit pair every request leaves
//! (`approval/asked {id, toolName, callId?, reason?}`, then `approval/decided {id, outcome}`),
//! and the decision order: an already-aborted signal is `cancelled`, policy `never` is
//! refused by policy without asking anyone (audited as upstream's `rejected`; the outcome
//! names the setting that made it `never`), an answer remembered for the session
//! (`approval/remembered {toolName, allow}`, what "allow for this session" leaves in the TUI
//! and over ACP) decides a tool's ordinary asks, otherwise the answerer decides (none =
//! `unavailable`). Remembered answers are logged, so load, resume and fork keep them; a
//! sandbox escalation is always asked.
//! Also presents the pair in every front-end's transcript (`present.rs`).
//! Does not own: who answers (a front-end's [`ApprovalService`] is wrapped), what an outcome
//! means to the model (the tool registry maps outcomes to texts).
//! Must not depend on: front-ends.

mod present;

use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_kernel::BoxFuture;
use dsh_session::SessionLog;
use dsh_tools::ApprovalOutcome;
use dsh_tools::ApprovalRequest;
use dsh_tools::ApprovalService;
use dsh_tools::NeverBy;
use serde_json::Map;
use serde_json::Value;

/// The two policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Ask,
    Never,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::Never => "never",
        }
    }
}

/// The session's standing policy when its log has no `approval/policy` event yet (the
/// composition's configured policy, e.g. a permission preset). Provided by the composition;
/// without one the default is `ask`.
pub trait PolicySource: Send + Sync {
    fn standing(&self) -> Policy;

    /// Which setting makes the standing policy (or a logged change that does not say its
    /// source) `never`, named in the refusal the model reads.
    fn never_by(&self) -> NeverBy {
        NeverBy::Config {
            danger_full_access: false,
        }
    }
}

/// Which setting made `log`'s effective policy `never`: a delegation's pinned policy says so
/// in its `approval/policy` event; anything else is the session's own setting.
fn never_by(log: &SessionLog, source: Option<&Arc<dyn PolicySource>>) -> NeverBy {
    let delegated = log
        .last_of_kind("approval/policy")
        .is_some_and(|e| e.data.get("source").and_then(Value::as_str) == Some("delegation"));
    if delegated {
        return NeverBy::Delegation;
    }
    source.map_or(
        NeverBy::Config {
            danger_full_access: false,
        },
        |source| source.never_by(),
    )
}

/// The effective policy of `log`: its last `approval/policy` event, else `standing`. O(1): it
/// is asked on every tool call.
pub fn effective_policy(log: &SessionLog, standing: Policy) -> Policy {
    log.last_of_kind("approval/policy")
        .and_then(|e| {
            e.data
                .get("policy")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .map_or(standing, |p| {
            if p == "never" {
                Policy::Never
            } else {
                Policy::Ask
            }
        })
}

/// The event a person's "for the rest of this session" answer leaves.
pub const REMEMBERED: &str = "approval/remembered";

/// Whether an approval reason asks for a wider sandbox (`escalate sandbox to <mode>: …`):
/// decided per call, never by a remembered answer.
pub fn is_escalation(reason: Option<&str>) -> bool {
    reason.is_some_and(|reason| reason.starts_with("escalate sandbox to "))
}

/// Logs that `tool`'s ordinary asks are allowed (`allow`) or refused for the rest of the
/// session.
pub fn remember_for_session(
    log: &SessionLog,
    tool: &str,
    allow: bool,
) -> Result<(), dsh_session::SessionError> {
    // Ignorable: a reader that does not know it (an older dsh) loads the log and asks again.
    log.append_ignorable(
        REMEMBERED,
        serde_json::json!({"toolName": tool, "allow": allow}),
    )
    .map(|_| ())
}

/// [`remember_for_session`] in the log of the agent an approval request came from.
// String: a failure is only logged; the call it came with is decided all the same.
pub fn remember_for_agent(
    agent: &dyn dsh_tools::AgentHandle,
    tool: &str,
    allow: bool,
) -> Result<(), String> {
    let agent = AgentHandle::from_scope(agent.scope())
        .ok_or_else(|| "the asking agent is gone".to_owned())?;
    remember_for_session(agent.log(), tool, allow).map_err(|error| error.to_string())
}

/// The session's latest remembered answer for `tool`, unless the ask is a sandbox escalation.
pub fn remembered_for_session(log: &SessionLog, tool: &str, reason: Option<&str>) -> Option<bool> {
    if is_escalation(reason) {
        return None;
    }
    let mut latest = None;
    let visited = log.visit_since(0, |event| {
        if event.kind == REMEMBERED
            && event.data.get("toolName").and_then(Value::as_str) == Some(tool)
        {
            latest = event.data.get("allow").and_then(Value::as_bool);
        }
    });
    if let Err(error) = visited {
        tracing::warn!(%error, "cannot read remembered approvals");
        return None;
    }
    latest
}

fn outcome_text(outcome: ApprovalOutcome) -> &'static str {
    match outcome {
        ApprovalOutcome::AllowedOnce => "allowed-once",
        // Upstream's audit word for both: the model-facing text tells them apart.
        ApprovalOutcome::Rejected | ApprovalOutcome::RefusedByPolicy(_) => "rejected",
        ApprovalOutcome::Cancelled => "cancelled",
        ApprovalOutcome::Unavailable => "unavailable",
    }
}

/// The service the tool registry finds on an agent's scope: audits, applies the policy and
/// delegates to the front-end's answerer.
pub struct UserApproval {
    answerer: Option<Arc<dyn ApprovalService>>,
    standing: Option<Arc<dyn PolicySource>>,
}

impl std::fmt::Debug for UserApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserApproval")
            .field("answerer", &self.answerer.is_some())
            .finish_non_exhaustive()
    }
}

impl UserApproval {
    /// `answerer` asks a person (ACP client, TUI); `None` = no channel (headless).
    pub fn new(
        answerer: Option<Arc<dyn ApprovalService>>,
        standing: Option<Arc<dyn PolicySource>>,
    ) -> Self {
        Self { answerer, standing }
    }
}

impl ApprovalService for UserApproval {
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome> {
        let agent = AgentHandle::from_scope(request.agent.scope());
        let Some(agent) = agent else {
            // No session to audit into: decide without the pair (upstream cannot reach here).
            tracing::warn!(tool = %request.tool_name, "approval request without a live agent");
            return Box::pin(std::future::ready(ApprovalOutcome::Unavailable));
        };
        // Upstream throws outside an open turn (unreachable from a tool call); dsh audits and
        // decides all the same, so a front-end may also ask outside a turn.
        let log = agent.log().clone();
        let standing = self
            .standing
            .as_ref()
            .map_or(Policy::Ask, |source| source.standing());
        let policy = effective_policy(&log, standing);
        let by = never_by(&log, self.standing.as_ref());
        let id = uuid::Uuid::new_v4().to_string();
        let mut asked = Map::new();
        asked.insert("id".into(), id.clone().into());
        asked.insert("toolName".into(), request.tool_name.clone().into());
        if !request.call_id.is_empty() {
            asked.insert("callId".into(), request.call_id.clone().into());
        }
        if let Some(reason) = &request.reason {
            asked.insert("reason".into(), reason.clone().into());
        }
        append(&log, "approval/asked", Value::Object(asked));
        let answerer = self.answerer.clone();
        let remembered =
            remembered_for_session(&log, &request.tool_name, request.reason.as_deref());
        Box::pin(async move {
            let mut from_memory = false;
            let outcome = if request.signal.is_cancelled() {
                ApprovalOutcome::Cancelled
            } else if policy == Policy::Never {
                ApprovalOutcome::RefusedByPolicy(by)
            } else if let Some(allow) = remembered {
                from_memory = true;
                if allow {
                    ApprovalOutcome::AllowedOnce
                } else {
                    ApprovalOutcome::Rejected
                }
            } else {
                match answerer {
                    Some(answerer) => {
                        let signal = request.signal.clone();
                        tokio_select(answerer.request(request), signal).await
                    }
                    None => ApprovalOutcome::Unavailable,
                }
            };
            let mut decided = Map::new();
            decided.insert("id".into(), id.into());
            decided.insert("outcome".into(), outcome_text(outcome).into());
            if from_memory {
                decided.insert("remembered".into(), true.into());
            }
            append(&log, "approval/decided", Value::Object(decided));
            outcome
        })
    }
}

/// An abort while the answerer is deciding is `cancelled`; a late answer is discarded.
async fn tokio_select(
    answer: BoxFuture<'static, ApprovalOutcome>,
    signal: dsh_tools::CancellationToken,
) -> ApprovalOutcome {
    signal
        .run_until_cancelled_owned(answer)
        .await
        .unwrap_or(ApprovalOutcome::Cancelled)
}

fn append(log: &SessionLog, kind: &str, data: Value) {
    if let Err(error) = log.append(kind, data, None) {
        tracing::warn!(%error, "cannot log {kind}");
    }
}

#[cfg(test)]
mod tests;

/// The session's standing policy, read live from its `SessionContext` permissions.
struct ContextPolicy(Arc<dsh_plugin::SessionContext>);

impl PolicySource for ContextPolicy {
    fn standing(&self) -> Policy {
        match self.0.permissions().approval {
            dsh_tools::ApprovalPolicy::Never => Policy::Never,
            dsh_tools::ApprovalPolicy::Ask => Policy::Ask,
        }
    }

    fn never_by(&self) -> NeverBy {
        match self.0.permissions_origin() {
            dsh_plugin::PermissionsOrigin::Client => NeverBy::Preset,
            dsh_plugin::PermissionsOrigin::Config => NeverBy::Config {
                danger_full_access: self.0.permissions().sandbox
                    == dsh_tools::SandboxMode::DangerFullAccess,
            },
        }
    }
}

/// `[plugins.user-approval]`: every session's approval service (audit + policy); a front-end
/// that can ask a person wraps its answerer in one of its own.
#[derive(Debug, Default)]
pub struct UserApprovalPlugin;

/// No settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserApprovalSettings {}

impl dsh_plugin::Plugin for UserApprovalPlugin {
    type Config = UserApprovalSettings;

    fn name(&self) -> &str {
        <Self as dsh_plugin::HostPlugin>::NAME
    }

    fn apply(
        &self,
        ctx: &dsh_kernel::Scope,
        _config: UserApprovalSettings,
    ) -> Result<(), dsh_plugin::PluginError> {
        let host = dsh_plugin::HostServices::of(ctx)?;
        host.presenters
            .register(ctx, present::ASKED, present::asked)
            .map_err(dsh_plugin::PluginError::other)?;
        host.presenters
            .register(ctx, present::DECIDED, present::decided)
            .map_err(dsh_plugin::PluginError::other)?;
        host.sessions.attach(ctx, "user-approval", |session| {
            let policy: Arc<dyn PolicySource> = Arc::new(ContextPolicy(session.context.clone()));
            session.scope.provide::<dyn PolicySource>(policy.clone())?;
            session
                .scope
                .provide::<dyn ApprovalService>(Arc::new(UserApproval::new(None, Some(policy))))?;
            Ok(())
        })?;
        Ok(())
    }
}

impl dsh_plugin::HostPlugin for UserApprovalPlugin {
    const NAME: &'static str = "user-approval";
    const EVENT_KINDS: &'static [&'static str] = &[present::ASKED, present::DECIDED];
}
