//! A real `dsh web` server in the test process: a real host (the one the binary builds) over
//! the scripted model and a JSONL store in a temp dir, served on a free loopback port; and
//! the clients a browser would be: HTTP (reqwest) and WebSocket (tokio-tungstenite).
#![allow(dead_code, reason = "each test binary uses part of it")]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use dsh_agent::scripted::ScriptedAdapter;
use dsh_host::Config;
use dsh_host::Host;
use dsh_host::HostOptions;
use dsh_host::Layer;
use futures::SinkExt;
use futures::StreamExt;
use serde_json::Value;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

pub const TIMEOUT: Duration = Duration::from_secs(20);
pub const SECRET: &str = "a long enough access secret";

pub struct Server {
    pub addr: SocketAddr,
    pub adapter: Arc<ScriptedAdapter>,
    pub host: Host,
    pub home: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub served: tokio::task::JoinHandle<Result<(), dsh_web::WebError>>,
}

fn config(home: &std::path::Path) -> Config {
    let mut config = Config::empty(home.join("dsh-home"), home.to_path_buf());
    let Value::Object(table) = json!({"model": {
        "name": "scripted-model",
        "api_key_env": "PATH",
    }}) else {
        unreachable!()
    };
    config.merge(Layer::User, table, None);
    config
}

pub fn host(home: &std::path::Path) -> (Host, Arc<ScriptedAdapter>) {
    let store = Arc::new(dsh_session::JsonlStore::new(home));
    let adapter = ScriptedAdapter::new("scripted");
    let mut options = HostOptions::new(config(home));
    options.store = Some(store);
    options.adapter = Some(adapter.clone());
    options.plugins = Some(Vec::new());
    (Host::build(options).unwrap(), adapter)
}

impl Server {
    pub async fn start(secret: Option<&str>) -> Self {
        Self::start_with(dsh_web::WebConfig {
            access_secret: secret.map(str::to_owned),
            ..dsh_web::WebConfig::default()
        })
        .await
    }

    pub async fn start_with(config: dsh_web::WebConfig) -> Self {
        let home = tempfile::tempdir().unwrap();
        let (host, adapter) = host(home.path());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(dsh_web::serve(
            listener,
            host.sessions(),
            config,
            async move {
                let _ = stopped.await;
            },
        ));
        Self {
            addr,
            adapter,
            host,
            home,
            stop: Some(stop),
            served,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.addr.port())
    }

    pub fn ws_url(&self) -> String {
        format!("ws://127.0.0.1:{}/acp", self.addr.port())
    }

    /// Stops the server and waits for it to end every session.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(TIMEOUT, &mut self.served)
            .await
            .expect("the server stops in time")
            .unwrap()
            .unwrap();
    }
}

pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Logs in with `secret`; the cookie pair (`name=value`) on success.
pub async fn login(server: &Server, secret: &str) -> reqwest::Response {
    http()
        .post(server.url("/__dsh/access"))
        .json(&json!({"secret": secret}))
        .send()
        .await
        .unwrap()
}

pub fn cookie_pair(response: &reqwest::Response) -> String {
    let set = response
        .headers()
        .get("set-cookie")
        .expect("a cookie is set")
        .to_str()
        .unwrap();
    set.split(';').next().unwrap().to_owned()
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// An ACP client over one WebSocket.
pub struct Client {
    pub socket: Socket,
    /// Every frame received, in order.
    pub frames: Vec<Value>,
    next_id: u64,
}

/// Opens `/acp` with extra headers; the HTTP status when the upgrade is refused.
pub async fn connect_with(url: &str, headers: &[(&str, &str)]) -> Result<Client, u16> {
    let mut request = url.into_client_request().unwrap();
    for (name, value) in headers {
        request
            .headers_mut()
            .insert(http_name(name), value.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(Client {
            socket,
            frames: Vec::new(),
            next_id: 1,
        }),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            Err(response.status().as_u16())
        }
        Err(other) => panic!("unexpected WebSocket failure: {other}"),
    }
}

fn http_name(name: &str) -> tokio_tungstenite::tungstenite::http::HeaderName {
    tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(name.as_bytes()).unwrap()
}

impl Client {
    pub async fn send(&mut self, frame: &Value) {
        self.socket
            .send(Message::Text(frame.to_string().into()))
            .await
            .unwrap();
    }

    /// The next frame, answering permission requests with "cancelled".
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            let message = tokio::time::timeout(TIMEOUT, self.socket.next())
                .await
                .expect("a frame in time")?;
            match message.ok()? {
                Message::Text(text) => {
                    let frame: Value = serde_json::from_str(&text).unwrap();
                    self.frames.push(frame.clone());
                    return Some(frame);
                }
                Message::Close(_) => return None,
                _ => continue,
            }
        }
    }

    /// Sends a request and returns its answer, keeping every frame before it.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let frame = self.next().await.expect("the connection stays open");
            if frame["id"] == json!(id) && frame.get("method").is_none() {
                return frame;
            }
        }
    }

    pub async fn initialize(&mut self) -> Value {
        self.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await
    }

    /// `initialize` asking for the log cursor on every update (`_meta.dsh.seq`).
    pub async fn initialize_with_cursor(&mut self) -> Value {
        self.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"_meta": {"dsh": {"cursor": true}}}}),
        )
        .await
    }

    /// `session/load` of `session`, from `cursor` when given.
    pub async fn load(
        &mut self,
        session: &str,
        cwd: &std::path::Path,
        cursor: Option<u64>,
    ) -> Value {
        let mut params = json!({"sessionId": session, "cwd": cwd, "mcpServers": []});
        if let Some(cursor) = cursor {
            params["_meta"] = json!({"dsh": {"cursor": cursor}});
        }
        self.request("session/load", params).await
    }

    /// Reads frames until `done` holds for the updates of `session` received so far.
    pub async fn until(&mut self, session: &str, done: impl Fn(&[Value]) -> bool) {
        while !done(&self.updates(session)) {
            self.next().await.expect("the connection stays open");
        }
    }

    /// The `(seq, update)` of every update of `session` that carries a cursor.
    pub fn sequenced(&self, session: &str) -> Vec<(u64, Value)> {
        self.frames
            .iter()
            .filter(|f| f["method"] == "session/update" && f["params"]["sessionId"] == session)
            .filter_map(|f| {
                let seq = f["params"]["_meta"]["dsh"]["seq"].as_u64()?;
                Some((seq, f["params"]["update"].clone()))
            })
            .collect()
    }

    /// `session/new` in `cwd`; the session id.
    pub async fn new_session(&mut self, cwd: &std::path::Path) -> String {
        let answer = self
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        answer["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"))
            .to_owned()
    }

    /// The `session/update`s received so far for `session`.
    pub fn updates(&self, session: &str) -> Vec<Value> {
        self.frames
            .iter()
            .filter(|f| f["method"] == "session/update" && f["params"]["sessionId"] == session)
            .map(|f| f["params"]["update"].clone())
            .collect()
    }
}

/// The text of every `user_message_chunk` in `updates`.
pub fn user_text(updates: &[Value]) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

/// The text of every `agent_message_chunk` in `updates`.
pub fn agent_text(updates: &[Value]) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}
