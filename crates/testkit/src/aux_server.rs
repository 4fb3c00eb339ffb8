//! Auxiliary servers a scenario needs besides the model (`aux_servers` in scenario.json), e.g.
//! the loopback HTTP page a recorded `web_fetch` call fetched. They live for one scenario run.
//! Read straight from scenario.json so the scenario types need no knowledge of them.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use axum::http::StatusCode;
use axum::http::Uri;
use axum::http::header;
use axum::response::IntoResponse;
use axum::response::Response;
use serde::Deserialize;
use tokio::task::JoinHandle;

#[derive(Debug, Clone, Deserialize)]
struct AuxSpec {
    kind: String,
    host: String,
    port: u16,
    #[serde(default)]
    routes: Vec<Route>,
    #[serde(default)]
    default: Option<Reply>,
}

#[derive(Debug, Clone, Deserialize)]
struct Route {
    path: String,
    #[serde(flatten)]
    reply: Reply,
}

#[derive(Debug, Clone, Deserialize)]
struct Reply {
    status: u16,
    #[serde(default)]
    content_type: Option<String>,
    #[serde(default)]
    body: String,
}

#[derive(Deserialize)]
struct SpecFile {
    #[serde(default)]
    aux_servers: Vec<AuxSpec>,
}

/// The running servers; dropping this stops them.
#[derive(Debug, Default)]
pub struct AuxServers {
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for AuxServers {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Why the scenario's auxiliary servers could not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AuxServerError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("invalid aux_servers in {}: {source}", path.display())]
    Spec {
        path: std::path::PathBuf,
        source: serde_json::Error,
    },
    #[error("unsupported aux server kind {0:?}")]
    Kind(String),
    #[error("invalid aux server address {host}:{port}: {source}")]
    Address {
        host: String,
        port: u16,
        source: std::net::AddrParseError,
    },
    #[error("aux server {0} is not on a loopback address")]
    NotLoopback(SocketAddr),
    #[error("cannot bind aux server {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Starts every `aux_servers` entry of the scenario in `dir` (none: an empty guard).
pub async fn start(dir: &Path) -> Result<AuxServers, AuxServerError> {
    let path = dir.join("scenario.json");
    let text = std::fs::read_to_string(&path).map_err(|source| AuxServerError::Read {
        path: path.clone(),
        source,
    })?;
    let spec: SpecFile = serde_json::from_str(&text).map_err(|source| AuxServerError::Spec {
        path: path.clone(),
        source,
    })?;
    let mut servers = AuxServers::default();
    for aux in spec.aux_servers {
        if aux.kind != "http" {
            return Err(AuxServerError::Kind(aux.kind));
        }
        let addr: SocketAddr = format!("{}:{}", aux.host, aux.port)
            .parse()
            .map_err(|source| AuxServerError::Address {
                host: aux.host.clone(),
                port: aux.port,
                source,
            })?;
        if !addr.ip().is_loopback() {
            return Err(AuxServerError::NotLoopback(addr));
        }
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| AuxServerError::Bind { addr, source })?;
        let aux = Arc::new(aux);
        let app = axum::Router::new().fallback(move |uri: Uri| {
            let aux = aux.clone();
            async move { respond(&aux, &uri) }
        });
        servers.tasks.push(tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!("aux server {addr} stopped: {e}");
            }
        }));
    }
    Ok(servers)
}

fn respond(aux: &AuxSpec, uri: &Uri) -> Response {
    let reply = aux
        .routes
        .iter()
        .find(|r| r.path == uri.path())
        .map(|r| &r.reply)
        .or(aux.default.as_ref());
    let Some(reply) = reply else {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    };
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, reply.body.clone()).into_response();
    if let Some(content_type) = &reply.content_type
        && let Ok(value) = content_type.parse()
    {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn serves_routes_and_the_default_on_the_declared_port() {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let dir = tempfile::tempdir().unwrap();
        let spec = serde_json::json!({"aux_servers": [{
            "kind": "http", "host": "127.0.0.1", "port": port,
            "routes": [{"path": "/a.html", "status": 200,
                        "content_type": "text/html; charset=utf-8", "body": "<p>hi</p>"}],
            "default": {"status": 404, "content_type": "text/plain", "body": "not found"}
        }]});
        std::fs::write(dir.path().join("scenario.json"), spec.to_string()).unwrap();
        let servers = start(dir.path()).await.unwrap();
        let hit = reqwest::get(format!("http://127.0.0.1:{port}/a.html?x=1"))
            .await
            .unwrap();
        assert_eq!(hit.status().as_u16(), 200);
        assert_eq!(
            hit.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        assert_eq!(hit.text().await.unwrap(), "<p>hi</p>");
        let miss = reqwest::get(format!("http://127.0.0.1:{port}/b"))
            .await
            .unwrap();
        assert_eq!(miss.status().as_u16(), 404);
        assert_eq!(miss.text().await.unwrap(), "not found");
        drop(servers);
    }

    #[tokio::test]
    async fn a_scenario_without_aux_servers_starts_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("scenario.json"), "{}").unwrap();
        assert!(start(dir.path()).await.unwrap().tasks.is_empty());
    }
}
