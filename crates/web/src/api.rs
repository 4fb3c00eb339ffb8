//! `/api/`: what the browser app needs beyond ACP v1 (see `docs/web.md`). Read-only but for
//! settings, whose writes pass the loopback-only fence.

use std::net::SocketAddr;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::ConnectInfo;
use axum::extract::Query;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::routing::get;
use serde_json::Value;
use serde_json::json;

use crate::server::App;

/// Entries listed per folder at most.
const MAX_ENTRIES: usize = 1000;
/// Recent folders and search hits returned at most.
const MAX_RESULTS: usize = 50;

pub(crate) fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/status", get(status))
        .route("/api/folders", get(folders))
        .route("/api/recent", get(recent))
        .route("/api/sessions", get(sessions))
        .route("/api/settings", get(settings).put(change_settings))
}

fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    (
        status,
        Json(json!({"error": {"code": code, "message": message.into()}})),
    )
        .into_response()
}

/// `GET /api/status`: what the app must know before it draws anything.
async fn status(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Json<Value> {
    Json(json!({
        "version": app.bridge.agent_version,
        "loginRequired": app.gate.has_secret(),
        "local": crate::gate::is_local_client(peer, &headers),
        "roots": app.roots,
    }))
}

#[derive(serde::Deserialize)]
struct FolderQuery {
    path: Option<PathBuf>,
}

/// Whether `path` (canonical) is inside one of `roots` (canonical).
fn inside(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|root| path.starts_with(root))
}

/// `GET /api/folders?path=DIR`: the sub-folders of `DIR` (default: the first root), for the
/// workspace picker; only inside the configured roots (symlinks resolved first).
async fn folders(State(app): State<Arc<App>>, Query(query): Query<FolderQuery>) -> Response {
    let Some(first) = app.roots.first() else {
        return error(
            StatusCode::FORBIDDEN,
            "no-roots",
            "no folder roots are configured",
        );
    };
    let wanted = query.path.unwrap_or_else(|| first.clone());
    if !wanted.is_absolute() {
        return error(
            StatusCode::BAD_REQUEST,
            "not-absolute",
            "the path must be absolute",
        );
    }
    let roots = app.roots.clone();
    let listed = tokio::task::spawn_blocking(move || {
        let path =
            std::fs::canonicalize(&wanted).map_err(|e| (StatusCode::NOT_FOUND, e.to_string()))?;
        if !inside(&path, &roots) {
            return Err((
                StatusCode::FORBIDDEN,
                format!("{} is outside the configured roots", path.display()),
            ));
        }
        let mut entries = Vec::new();
        let mut truncated = false;
        let read = std::fs::read_dir(&path).map_err(|e| (StatusCode::FORBIDDEN, e.to_string()))?;
        for entry in read.flatten() {
            let child = entry.path();
            // Folders only; a link counts when it leads to a folder inside the roots.
            let Ok(target) = std::fs::canonicalize(&child) else {
                continue;
            };
            if !target.is_dir() || !inside(&target, &roots) {
                continue;
            }
            if entries.len() == MAX_ENTRIES {
                truncated = true;
                break;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            entries.push(json!({
                "name": name,
                "path": child,
                "hidden": name.starts_with('.'),
            }));
        }
        entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        let parent = path
            .parent()
            .filter(|parent| inside(parent, &roots))
            .map(Path::to_path_buf);
        Ok(json!({"path": path, "parent": parent, "entries": entries, "truncated": truncated}))
    })
    .await;
    match listed {
        Ok(Ok(listing)) => Json(listing).into_response(),
        Ok(Err((status, message))) => error(status, "folder-unreadable", message),
        Err(join) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            join.to_string(),
        ),
    }
}

/// Stored sessions, newest first, off the async threads.
async fn stored(app: &App) -> Result<Vec<dsh_session::SessionSummary>, Response> {
    let sessions = app.sessions.clone();
    match tokio::task::spawn_blocking(move || sessions.list()).await {
        Ok(Ok(list)) => Ok(list),
        Ok(Err(e)) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            e.to_string(),
        )),
        Err(e) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            e.to_string(),
        )),
    }
}

/// `GET /api/recent`: the folders of the latest sessions, each once, newest first.
async fn recent(State(app): State<Arc<App>>) -> Response {
    let list = match stored(&app).await {
        Ok(list) => list,
        Err(response) => return response,
    };
    let mut seen = std::collections::HashSet::new();
    let folders: Vec<&str> = list
        .iter()
        .filter(|s| s.parent_session.is_none())
        .filter_map(|s| s.cwd.as_deref())
        .filter(|cwd| seen.insert(*cwd))
        .take(MAX_RESULTS)
        .collect();
    Json(json!({"folders": folders})).into_response()
}

#[derive(serde::Deserialize)]
struct SessionQuery {
    q: Option<String>,
    cwd: Option<String>,
}

/// `GET /api/sessions?q=TEXT&cwd=DIR`: stored sessions whose title or folder contains the
/// text (case-insensitive), newest first, with their parent (the delegation tree).
async fn sessions(State(app): State<Arc<App>>, Query(query): Query<SessionQuery>) -> Response {
    let list = match stored(&app).await {
        Ok(list) => list,
        Err(response) => return response,
    };
    let needle = query.q.unwrap_or_default().to_lowercase();
    let hits: Vec<Value> = list
        .into_iter()
        .filter(|s| query.cwd.is_none() || s.cwd == query.cwd)
        .filter(|s| {
            needle.is_empty()
                || s.title
                    .as_deref()
                    .is_some_and(|t| t.to_lowercase().contains(&needle))
                || s.cwd
                    .as_deref()
                    .is_some_and(|c| c.to_lowercase().contains(&needle))
        })
        .take(MAX_RESULTS)
        .map(|s| {
            json!({
                "sessionId": s.id,
                "cwd": s.cwd,
                "title": s.title,
                "createdAt": s.created_at,
                "turns": s.turns,
                "parentSessionId": s.parent_session,
                "live": app.live.viewers(&s.id) > 0,
            })
        })
        .collect();
    Json(json!({"sessions": hits})).into_response()
}

/// `GET /api/settings`: the model route and whether a key is set; never a key itself.
async fn settings(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Json<Value> {
    let (provider, model) = app.sessions.route();
    Json(json!({
        "provider": provider,
        "model": model,
        "models": app.sessions.models(),
        "apiKeyEnv": app.sessions.api_key_env(),
        "keySet": app.sessions.has_api_key(),
        "writable": crate::gate::is_local_client(peer, &headers),
    }))
}

/// `PUT /api/settings`: refused unless the client is on this machine (a phone chats, it does
/// not reconfigure). Keys, providers and policy live in `$DSH_HOME/config.toml` and the
/// environment today; this server does not write them yet, and says so.
async fn change_settings(
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if !crate::gate::is_local_client(peer, &headers) {
        return error(
            StatusCode::FORBIDDEN,
            "loopback-only",
            "settings are changed only from a browser on the machine dsh runs on",
        );
    }
    error(
        StatusCode::NOT_IMPLEMENTED,
        "not-writable",
        "settings are not written by the web server yet: edit $DSH_HOME/config.toml (keys: the provider's environment variable)",
    )
}
