//! `dsh mcp serve` after argv: one new session in `cwd`, its tools offered to an MCP client on
//! stdio (`dsh_mcp::ToolServer`), each call through the guarded pipeline; approvals refused.

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
    let approvals = agent
        .scope()
        .provide::<dyn ApprovalService>(Arc::new(crate::approval::NoApprover::new(io.clone())));
    let catalog: dsh_mcp::Catalog = {
        let sessions = sessions.clone();
        let agent = agent.clone();
        Arc::new(move || {
            sessions
                .offered_tools(&agent)
                .map_err(|error| error.to_string())
        })
    };
    let server = dsh_mcp::ToolServer::new(sessions.registry(), Arc::new(agent.clone()), catalog);
    let served = server.serve_stdio().await;
    drop(approvals);
    agent.dispose().await;
    served.map_err(|e| HeadlessError::Other(Box::new(e)))
}
