//! `/api/`: what the browser app needs beyond ACP v1 (see `docs/web.md`).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::ConnectInfo;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::get;
use serde_json::json;

use crate::server::App;

pub(crate) fn routes() -> Router<Arc<App>> {
    Router::new().route("/api/status", get(status))
}

/// `GET /api/status`: what the app must know before it draws anything.
async fn status(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Json<serde_json::Value> {
    Json(json!({
        "version": app.bridge.agent_version,
        "loginRequired": app.gate.has_secret(),
        "local": crate::gate::is_local_client(peer, &headers),
    }))
}
