//! Serving the bridge over a transport: stdio for `dsh acp`, any byte streams for tests.

use std::sync::Arc;

use agent_client_protocol::Agent;
use agent_client_protocol::ConnectTo;
use agent_client_protocol::on_receive_notification;
use agent_client_protocol::on_receive_request;
use agent_client_protocol::v1::schema::AuthenticateRequest;
use agent_client_protocol::v1::schema::CancelNotification;
use agent_client_protocol::v1::schema::CloseSessionRequest;
use agent_client_protocol::v1::schema::DeleteSessionRequest;
use agent_client_protocol::v1::schema::InitializeRequest;
use agent_client_protocol::v1::schema::ListSessionsRequest;
use agent_client_protocol::v1::schema::LoadSessionRequest;
use agent_client_protocol::v1::schema::LogoutRequest;
use agent_client_protocol::v1::schema::NewSessionRequest;
use agent_client_protocol::v1::schema::PromptRequest;
use agent_client_protocol::v1::schema::ResumeSessionRequest;
use agent_client_protocol::v1::schema::SetSessionConfigOptionRequest;
use agent_client_protocol::v1::schema::SetSessionModeRequest;

use crate::bridge::Bridge;
use crate::bridge::BridgeConfig;
use crate::error::AcpError;

/// Answers a `session/new`, `session/load` or `session/resume`, then sends the session's commands: the
/// client knows the session id only once the response frame is out.
fn respond_then_announce<
    T: agent_client_protocol::JsonRpcResponse,
    P: agent_client_protocol::Protocol,
>(
    responder: agent_client_protocol::Responder<T, P>,
    result: Result<(T, Arc<crate::session::Session>), agent_client_protocol::Error>,
) -> Result<(), agent_client_protocol::Error> {
    match result {
        Ok((response, session)) => {
            responder.respond(response)?;
            session.push_commands();
            session.push_usage();
            Ok(())
        }
        Err(error) => responder.respond_with_error(error),
    }
}

/// Serves ACP on stdin/stdout until stdin closes, then tears every session down. Stdout
/// carries protocol frames only; log through `tracing` to stderr. A bad line (not UTF-8, over
/// [`crate::lines::MAX_LINE_BYTES`]) is answered with a parse error and the next one served.
pub async fn serve_stdio(
    sessions: dsh_host::SessionHost,
    config: BridgeConfig,
) -> Result<(), AcpError> {
    serve_stdio_until(sessions, config, std::future::pending()).await
}

/// [`serve_stdio`] that also stops, tearing every session down the same way, when `stop`
/// completes (a signal).
pub async fn serve_stdio_until(
    sessions: dsh_host::SessionHost,
    config: BridgeConfig,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), AcpError> {
    let (transport, writer) = crate::lines::transport(tokio::io::stdin(), tokio::io::stdout());
    let served = serve_until(sessions, config, None, transport, stop).await;
    drain(writer).await;
    served
}

/// Waits for the last frames (the answers of the teardown) to reach the peer.
async fn drain(writer: tokio::task::JoinHandle<()>) {
    const DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);
    if tokio::time::timeout(DRAIN_LIMIT, writer).await.is_err() {
        tracing::warn!("the last ACP frames could not be written in time");
    }
}

/// Serves ACP over tokio byte streams (a pipe, a socket, a `tokio::io::duplex` half), with the
/// same line rules as [`serve_stdio`].
pub async fn serve<R, W>(
    sessions: dsh_host::SessionHost,
    config: BridgeConfig,
    incoming: R,
    outgoing: W,
) -> Result<(), AcpError>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (transport, writer) = crate::lines::transport(incoming, outgoing);
    let served = serve_until(sessions, config, None, transport, std::future::pending()).await;
    drain(writer).await;
    served
}

/// [`serve`] for one of several connections of a server that share their live sessions
/// (`dsh web`): a `session/load` of a session live in `shared` attaches to it as one more
/// viewer; at the end of input this connection only detaches, and the sessions keep running
/// until [`crate::LiveSessions::shutdown`].
pub async fn serve_shared<R, W>(
    sessions: dsh_host::SessionHost,
    config: BridgeConfig,
    shared: crate::LiveSessions,
    incoming: R,
    outgoing: W,
) -> Result<(), AcpError>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (transport, writer) = crate::lines::transport(incoming, outgoing);
    let served = serve_until(
        sessions,
        config,
        Some(shared),
        transport,
        std::future::pending(),
    )
    .await;
    drain(writer).await;
    served
}

/// Serves ACP over any transport of the official crate (`ByteStreams`, `Lines`, …).
pub async fn serve_transport(
    sessions: dsh_host::SessionHost,
    config: BridgeConfig,
    transport: impl ConnectTo<Agent> + 'static,
) -> Result<(), AcpError> {
    serve_until(sessions, config, None, transport, std::future::pending()).await
}

async fn serve_until(
    sessions: dsh_host::SessionHost,
    config: BridgeConfig,
    shared: Option<crate::LiveSessions>,
    transport: impl ConnectTo<Agent> + 'static,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), AcpError> {
    let bridge = Arc::new(Bridge::new(sessions, config, shared));
    let result = Agent
        .v1()
        .name("dsh-acp")
        .on_receive_request(
            {
                let bridge = bridge.clone();
                async move |request: InitializeRequest, responder, _cx| responder.respond(bridge.initialize(&request))
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let bridge = bridge.clone();
                async move |request: AuthenticateRequest, responder, _cx| {
                    responder.respond_with_result(bridge.authenticate(&request))
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let bridge = bridge.clone();
                async move |request: NewSessionRequest, responder, cx| {
                    respond_then_announce(responder, bridge.new_session(request, cx).await)
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let bridge = bridge.clone();
                async move |request: LoadSessionRequest, responder, cx| {
                    respond_then_announce(responder, bridge.load_session(request, cx).await)
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let bridge = bridge.clone();
                async move |request: ResumeSessionRequest, responder, cx| {
                    respond_then_announce(responder, bridge.resume_session(request, cx).await)
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let bridge = bridge.clone();
                async move |request: CloseSessionRequest, responder, _cx| {
                    bridge.close_session(&request, move |outcome| {
                        if let Err(error) = responder.respond_with_result(outcome) {
                            tracing::debug!(%error, "session/close answer not delivered (connection closed)");
                        }
                    });
                    Ok(())
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let bridge = bridge.clone();
                async move |request: DeleteSessionRequest, responder, _cx| {
                    bridge.delete_session(&request, move |outcome| {
                        if let Err(error) = responder.respond_with_result(outcome) {
                            tracing::debug!(%error, "session/delete answer not delivered (connection closed)");
                        }
                    });
                    Ok(())
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let bridge = bridge.clone();
                async move |request: LogoutRequest, responder, _cx| {
                    responder.respond_with_result(bridge.logout(&request))
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let bridge = bridge.clone();
                async move |request: ListSessionsRequest, responder, _cx| {
                    responder.respond_with_result(bridge.list_sessions(request).await)
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let bridge = bridge.clone();
                async move |request: SetSessionModeRequest, responder, _cx| {
                    let session_id = request.session_id.0.to_string();
                    let answered = bridge.set_mode(request);
                    let changed = answered.is_ok();
                    responder.respond_with_result(answered)?;
                    if changed {
                        bridge.after_mode_change(&session_id);
                    }
                    Ok(())
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let bridge = bridge.clone();
                async move |request: SetSessionConfigOptionRequest, responder, _cx| {
                    responder.respond_with_result(bridge.set_config_option(request))
                }
            },
            on_receive_request!(),
        )
        .on_receive_request(
            {
                let bridge = bridge.clone();
                async move |request: PromptRequest, responder, _cx| {
                    let withdrawn = responder.cancellation();
                    let cancel_request = async move { withdrawn.cancelled().await };
                    bridge.prompt(request, cancel_request, move |outcome| {
                        if let Err(error) = responder.respond_with_result(outcome) {
                            tracing::debug!(%error, "prompt answer not delivered (connection closed)");
                        }
                    });
                    Ok(())
                }
            },
            on_receive_request!(),
        )
        .on_receive_notification(
            {
                let bridge = bridge.clone();
                async move |notification: CancelNotification, _cx| {
                    bridge.cancel(&notification);
                    Ok(())
                }
            },
            on_receive_notification!(),
        )
        .connect_with(transport, {
            let bridge = bridge.clone();
            async move |cx| {
                tokio::select! {
                    () = cx.incoming_closed() => {}
                    () = stop => {}
                }
                bridge.shutdown().await.map_err(|e| agent_client_protocol::Error::internal_error().data(e.to_string()))
            }
        })
        .await;
    // A transport error skips the orderly path above; still leave no agent behind.
    bridge.shutdown().await?;
    result.map_err(AcpError::from)
}
