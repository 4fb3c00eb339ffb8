//! The client's terminals as the shell tool's foreground runner (ACP `terminal/*`), provided on
//! each owned agent's scope when `clientCapabilities.terminal` is true.
//!
//! Flow per call: `terminal/create` with the confined command line the tool built, then the
//! call's card gets the terminal (`{type:"terminal", terminalId}`) so the client shows it live;
//! `terminal/wait_for_exit` raced against the call's timeout and cancellation (`terminal/kill`
//! on either), `terminal/output` for the text the model gets, and `terminal/release` (a
//! released terminal keeps showing on its card).

use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::CreateTerminalRequest;
use agent_client_protocol::v1::schema::KillTerminalRequest;
use agent_client_protocol::v1::schema::ReleaseTerminalRequest;
use agent_client_protocol::v1::schema::TerminalExitStatus;
use agent_client_protocol::v1::schema::TerminalOutputRequest;
use agent_client_protocol::v1::schema::WaitForTerminalExitRequest;
use dsh_kernel::BoxFuture;
use dsh_tools::ClientRequestError;
use dsh_tools::ClientTerminals;
use dsh_tools::TerminalCommand;
use dsh_tools::TerminalOutcome;

/// Where a created terminal is attached to its call's card.
pub(crate) trait TerminalCards: Send + Sync {
    fn show_terminal(&self, call_id: &str, terminal_id: &str);
}

pub(crate) struct ClientTerminalRunner {
    pub(crate) session_id: String,
    pub(crate) connection: ConnectionTo<Client>,
    pub(crate) cards: Arc<dyn TerminalCards>,
}

impl ClientTerminals for ClientTerminalRunner {
    fn run(
        &self,
        command: TerminalCommand,
    ) -> BoxFuture<'static, Result<TerminalOutcome, ClientRequestError>> {
        let session = self.session_id.clone();
        let connection = self.connection.clone();
        let cards = self.cards.clone();
        Box::pin(async move {
            let create = CreateTerminalRequest::new(session.clone(), command.program)
                .args(command.args)
                .cwd(command.cwd)
                .output_byte_limit(command.output_byte_limit);
            let created = connection
                .send_request(create)
                .block_task()
                .await
                .map_err(|e| ClientRequestError::Refused(e.to_string()))?;
            let id = created.terminal_id;
            cards.show_terminal(&command.call_id, &id.0);
            let wait = || {
                connection
                    .send_request(WaitForTerminalExitRequest::new(session.clone(), id.clone()))
                    .block_task()
            };
            let kill = || async {
                let killed = connection
                    .send_request(KillTerminalRequest::new(session.clone(), id.clone()))
                    .block_task()
                    .await;
                if let Err(error) = killed {
                    tracing::warn!(%error, "terminal/kill failed");
                }
            };
            let mut timed_out = false;
            let mut aborted = false;
            let exit = tokio::select! {
                exit = wait() => exit.ok().map(|r| r.exit_status),
                () = tokio::time::sleep(command.timeout) => {
                    timed_out = true;
                    kill().await;
                    wait().await.ok().map(|r| r.exit_status)
                }
                () = command.signal.cancelled() => {
                    aborted = true;
                    kill().await;
                    None
                }
            };
            let output = connection
                .send_request(TerminalOutputRequest::new(session.clone(), id.clone()))
                .block_task()
                .await;
            let released = connection
                .send_request(ReleaseTerminalRequest::new(session.clone(), id.clone()))
                .block_task()
                .await;
            if let Err(error) = released {
                tracing::debug!(%error, "terminal/release failed");
            }
            let output = output.map_err(|e| ClientRequestError::Refused(e.to_string()))?;
            let status: Option<TerminalExitStatus> = exit.or(output.exit_status);
            Ok(TerminalOutcome {
                output: output.output,
                truncated: output.truncated,
                exit_code: status.as_ref().and_then(|s| s.exit_code).map(i64::from),
                signal: status.and_then(|s| s.signal),
                timed_out,
                aborted,
            })
        })
    }
}
