//! `dsh mcp serve` after argv: one new session in `cwd`, its tools offered to an MCP client on
//! stdio (`dsh_mcp::ToolServer`), each call through the guarded pipeline; approvals refused.
//! Only tools that can work for an MCP client are offered (see [`works_for_a_client`]); a call
//! to any other name is refused like a name outside the catalog.

use std::path::Path;
use std::sync::Arc;

use dsh_host::SessionHost;
use dsh_tools::ApprovalService;

use crate::HeadlessError;
use crate::Io;

/// Serves until the client closes stdin, then disposes the session.
pub async fn serve(sessions: &SessionHost, cwd: &Path, io: &Io) -> Result<(), HeadlessError> {
    let agent = sessions.create(dsh_host::NewSession {
        id: None,
        cwd: cwd.to_path_buf(),
    })?;
    io.note(&format!("session {}", agent.id()));
    let approvals =
        agent
            .scope()
            .provide::<dyn ApprovalService>(Arc::new(dsh_approval::UserApproval::new(
                Some(Arc::new(crate::approval::NoApprover::new(io.clone()))),
                agent.scope().service::<dyn dsh_approval::PolicySource>(),
            )));
    let catalog: dsh_mcp::Catalog = {
        let sessions = sessions.clone();
        let agent = agent.clone();
        Arc::new(move || {
            let delegation = sessions.has_api_key();
            sessions
                .offered_tools(&agent)
                .map(|tools| {
                    tools
                        .into_iter()
                        .filter(|tool| works_for_a_client(&tool.name, delegation))
                        .collect()
                })
                .map_err(|error| error.to_string())
        })
    };
    let server = dsh_mcp::ToolServer::new(sessions.registry(), Arc::new(agent.clone()), catalog);
    let served = server.serve_stdio().await;
    drop(approvals);
    agent.dispose().await;
    served.map_err(|e| HeadlessError::Other(Box::new(e)))
}

/// Tools that answer only inside a model's own turn: a question for the person at the
/// keyboard, plan mode's exit (a turn-level state), goals and the ralph loop (they drive the
/// agent's next turns, and no turn runs under `mcp serve`).
const TURN_ONLY: &[&str] = &[
    "ask_user_question",
    "exit_plan_mode",
    "create_goal",
    "get_goal",
    "update_goal",
    "ralph",
];

/// Tools that start or steer delegated children, which run their own model turns: offered only
/// when a model key is there for them (without one a child would be "started" and then fail).
const DELEGATION: &[&str] = &[
    "subagent",
    "subagent_fork",
    "workflow",
    "send_message",
    "list_agents",
    "interrupt_agent",
];

/// Whether `name` can do its work for an MCP client; `delegation`: a model key is available.
pub fn works_for_a_client(name: &str, delegation: bool) -> bool {
    !TURN_ONLY.contains(&name) && (delegation || !DELEGATION.contains(&name))
}

#[cfg(test)]
mod tests {
    use super::works_for_a_client;

    #[test]
    fn turn_only_tools_are_never_offered_and_delegation_needs_a_key() {
        for name in [
            "ask_user_question",
            "exit_plan_mode",
            "create_goal",
            "ralph",
        ] {
            assert!(!works_for_a_client(name, true), "{name}");
        }
        for name in ["subagent", "workflow", "send_message"] {
            assert!(works_for_a_client(name, true), "{name}");
            assert!(!works_for_a_client(name, false), "{name}");
        }
        for name in ["bash", "read", "write", "edit", "grep", "web_fetch"] {
            assert!(works_for_a_client(name, false), "{name}");
        }
    }
}
