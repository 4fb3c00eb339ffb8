//! A real host behind the bridge: `dsh_host::Host` over the scripted model and a JSONL session
//! store in a temp dir, with two real tools (`bash` runs a process, `edit` rewrites a file)
//! with terminal and diff cards.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]

use std::io;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_acp::BridgeConfig;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_host::Config;
use dsh_host::Host;
use dsh_host::HostOptions;
use dsh_host::Layer;
use dsh_host::SessionHost;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_session::JsonlStore;
use dsh_tools::FileDiff;
use dsh_tools::FileLocation;
use dsh_tools::PreDecision;
use dsh_tools::TerminalExit;
use dsh_tools::Tool;
use dsh_tools::ToolCallView;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolResultView;
use futures::SinkExt as _;
use futures::StreamExt as _;
use futures::channel::mpsc;
use serde_json::Value;
use serde_json::json;

pub const TIMEOUT: Duration = Duration::from_secs(10);

/// A variable every test process has: with `[model] api_key_env` naming it, the host's key
/// check passes.
pub const PRESENT_KEY_ENV: &str = "PATH";
/// A variable no test sets: the host has no key.
pub const ABSENT_KEY_ENV: &str = "DSH_ACP_TEST_UNSET_KEY";

/// A real [`Host`] (the one the binary builds) over the scripted model and a JSONL store in a
/// temp dir, with only the plugins a test names mounted; tests register their own tools and
/// hooks in [`TestHost::root`], an extension scope of the host.
pub struct TestHost {
    pub host: Host,
    /// The host's extension scope for this test's registrations.
    pub root: Scope,
    pub store: Arc<JsonlStore>,
    pub adapter: Arc<ScriptedAdapter>,
    pub registry: Arc<ToolRegistry>,
    /// The host's slash-command registry.
    pub commands: Arc<dsh_commands::CommandRegistry>,
    home: PathBuf,
    cwd: PathBuf,
}

/// The test configuration: the scripted model with one alternate in the catalog, the key
/// variable `key_env`.
fn config(home: &Path, cwd: &Path, key_env: &str) -> Config {
    let mut config = Config::empty(home.join("dsh-home"), cwd.to_path_buf());
    let Value::Object(table) = json!({"model": {
        "name": "scripted-model",
        "api_key_env": key_env,
        "catalog": [{"id": "scripted-model"}, {"id": "alternate-model"}],
    }}) else {
        unreachable!()
    };
    config.merge(Layer::User, table, None);
    config
}

impl TestHost {
    /// The harness's `bash` and `edit` (commands mentioning "needs-approval" ask first), no
    /// plugin of the table.
    pub fn new(home: &Path) -> Arc<Self> {
        let host = Self::bare(home, &[]);
        host.registry.register(&host.root, bash_tool()).unwrap();
        host.registry.register(&host.root, edit_tool()).unwrap();
        // `bash` commands mentioning "needs-approval" ask the user first.
        let _ = host
            .registry
            .pre_execute()
            .register(&host.root, |exec, next| {
                let asks = exec.name() == "bash"
                    && exec
                        .arguments()
                        .is_some_and(|a| a.to_string().contains("needs-approval"));
                if asks {
                    Box::pin(async { Ok(PreDecision::ask(None)) })
                } else {
                    next.run(exec)
                }
            });
        host
    }

    /// No tools; the built-in plugins named in `plugins` mounted (with their defaults).
    pub fn bare(home: &Path, plugins: &[&str]) -> Arc<Self> {
        let store = Arc::new(JsonlStore::new(home));
        let adapter = ScriptedAdapter::new("scripted");
        let mut options = HostOptions::new(config(home, home, PRESENT_KEY_ENV));
        options.store = Some(store.clone());
        options.adapter = Some(adapter.clone());
        options.plugins = Some(
            dsh_host::builtin_plugins()
                .into_iter()
                .filter(|spec| plugins.contains(&spec.name))
                .collect(),
        );
        let host = Host::build(options).unwrap();
        let sessions = host.sessions();
        Arc::new(Self {
            root: host.extension_scope("test").unwrap(),
            registry: sessions.registry(),
            commands: sessions.service::<dsh_commands::CommandRegistry>().unwrap(),
            host,
            store,
            adapter,
            home: home.to_path_buf(),
            cwd: home.to_path_buf(),
        })
    }

    pub fn sessions(&self) -> SessionHost {
        self.host.sessions()
    }

    /// The live agent of session `id`.
    pub fn agent(&self, id: &str) -> dsh_agent::AgentHandle {
        self.sessions().live(id).expect("a live session")
    }

    /// Reloads the configuration with `[model] api_key_env = key_env`.
    pub async fn set_key_env(&self, key_env: &str) {
        let report = self
            .host
            .reload(config(&self.home, &self.cwd, key_env))
            .await;
        assert!(
            matches!(report, dsh_host::ReloadReport::Applied { .. }),
            "{report:?}"
        );
    }
}

/// `bash {command}`: runs `bash -c` in the session cwd; a terminal card.
fn bash_tool() -> dsh_tools::ToolDefinition {
    Tool::builder("bash")
        .description("Run a shell command")
        .validated_parameters(json!({
            "type": "object",
            "properties": {"command": {"type": "string"}, "cwd": {"type": "string"}},
            "required": ["command"]
        }))
        .raw_output(
            json!({"type": "object", "properties": {"output": {"type": "string"}, "exitCode": {"type": "integer"}}, "required": ["output", "exitCode"]}),
            |_, value| Ok(vec![ContentBlock::text(value["output"].as_str().unwrap_or_default())]),
        )
        .present_call(|args: &Value| {
            Some(ToolCallView::terminal(args["command"].as_str()?, Some("Runs a command".into()), None))
        })
        .present_result(|_, view| {
            let output = dsh_protocol::text_of(&view.content);
            let exit = if view.is_error { 1 } else { 0 };
            Some(ToolResultView::terminal(None, Some(output), Some(TerminalExit::Code(exit))))
        })
        .run(|args: Value, run| async move {
            let command = args["command"].as_str().unwrap_or_default().to_owned();
            let cwd = args["cwd"].as_str().map(PathBuf::from);
            let mut process = tokio::process::Command::new("bash");
            process.arg("-c").arg(&command).kill_on_drop(true);
            if let Some(cwd) = cwd {
                process.current_dir(cwd);
            }
            let output = tokio::select! {
                output = process.output() => output.map_err(|e| ToolError::new(e.to_string()))?,
                () = run.signal().cancelled() => return Err(ToolError::new("tool call aborted")),
            };
            let text = String::from_utf8_lossy(&output.stdout).into_owned();
            Ok(json!({"output": text, "exitCode": output.status.code().unwrap_or(-1)}))
        })
        .build()
        .unwrap()
}

/// `edit {path, old, new}`: replaces text in a real file; a diff card.
fn edit_tool() -> dsh_tools::ToolDefinition {
    Tool::builder("edit")
        .description("Edit a file")
        .validated_parameters(json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
            "required": ["path", "old", "new"]
        }))
        .raw_output(
            json!({"type": "object", "properties": {"replaced": {"type": "integer"}}, "required": ["replaced"]}),
            |args, _| Ok(vec![ContentBlock::text(format!("Edited {}", args["path"].as_str().unwrap_or_default()))]),
        )
        .present_call(|args: &Value| {
            let path = args["path"].as_str()?;
            let diff = FileDiff { path: path.into(), old_text: Some(args["old"].as_str()?.into()), new_text: args["new"].as_str()?.into() };
            Some(ToolCallView::diff(format!("Edit {path}"), vec![diff]).locations(vec![FileLocation { path: path.into(), line: None }]))
        })
        .present_result(|args: &Value, _| {
            let path = args["path"].as_str()?;
            let diff = FileDiff { path: path.into(), old_text: Some(args["old"].as_str()?.into()), new_text: args["new"].as_str()?.into() };
            Some(ToolResultView::Diff { title: Some(format!("Edited {path}")), diffs: vec![diff] })
        })
        .run(|args: Value, _run| async move {
            let path = args["path"].as_str().unwrap_or_default();
            let text = tokio::fs::read_to_string(path).await.map_err(|e| ToolError::new(e.to_string()))?;
            let old = args["old"].as_str().unwrap_or_default();
            if !text.contains(old) {
                return Err(ToolError::new("old text not found"));
            }
            let replaced = text.replacen(old, args["new"].as_str().unwrap_or_default(), 1);
            tokio::fs::write(path, replaced).await.map_err(|e| ToolError::new(e.to_string()))?;
            Ok(json!({"replaced": 1}))
        })
        .build()
        .unwrap()
}

/// Raw newline-delimited JSON-RPC to a bridge running in a task.
pub struct Wire {
    incoming: Option<mpsc::UnboundedSender<io::Result<String>>>,
    outgoing: mpsc::UnboundedReceiver<String>,
    pub task: tokio::task::JoinHandle<Result<(), dsh_acp::AcpError>>,
    pub seen: Vec<Value>,
}

impl Wire {
    pub fn start(host: impl std::borrow::Borrow<TestHost>) -> Self {
        let sessions = host.borrow().sessions();
        let (incoming, incoming_rx) = mpsc::unbounded::<io::Result<String>>();
        let (outgoing_tx, outgoing) = mpsc::unbounded::<String>();
        let lines = agent_client_protocol::Lines::new(
            outgoing_tx.sink_map_err(io::Error::other),
            incoming_rx,
        );
        let task = tokio::spawn(dsh_acp::serve_transport(
            sessions,
            BridgeConfig::default(),
            lines,
        ));
        Self {
            incoming: Some(incoming),
            outgoing,
            task,
            seen: Vec::new(),
        }
    }

    pub fn send_raw(&self, line: &str) {
        self.incoming
            .as_ref()
            .unwrap()
            .unbounded_send(Ok(line.to_owned()))
            .unwrap();
    }

    pub fn send(&self, message: Value) {
        self.send_raw(&message.to_string());
    }

    pub fn request(&self, id: u64, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }

    pub async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(TIMEOUT, self.outgoing.next())
            .await
            .expect("bridge answers in time")
            .expect("bridge output open");
        let value: Value = serde_json::from_str(&line).expect("stdout carries JSON frames only");
        self.seen.push(value.clone());
        value
    }

    /// Reads frames until the response to `id`; returns (frames before it, response).
    pub async fn until_response(&mut self, id: u64) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let frame = self.next().await;
            if frame.get("id") == Some(&json!(id)) && frame.get("method").is_none() {
                return (before, frame);
            }
            before.push(frame);
        }
    }

    pub fn close(&mut self) {
        self.incoming = None;
    }

    /// Initialize (optionally with the terminal capability) and open one session.
    pub async fn open(&mut self, cwd: &Path, terminal: bool) -> String {
        let caps = if terminal {
            json!({"_meta": {"terminal_output": true}})
        } else {
            json!({})
        };
        self.request(
            1,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": caps}),
        );
        self.until_response(1).await;
        self.request(2, "session/new", json!({"cwd": cwd, "mcpServers": []}));
        let (_, response) = self.until_response(2).await;
        let id = response["result"]["sessionId"]
            .as_str()
            .expect("a session id")
            .to_owned();
        // Right after the response: the session's slash commands.
        let commands = self.next().await;
        assert_eq!(
            commands["params"]["update"]["sessionUpdate"], "available_commands_update",
            "{commands}"
        );
        assert_eq!(commands["params"]["sessionId"], json!(id));
        id
    }
}

/// Replaces the session id and the workspace path by placeholders (as the conformance suite does).
pub fn normalize(value: &Value, session: &str, cwd: &Path) -> Value {
    let text = value
        .to_string()
        .replace(session, "{{sessionId}}")
        .replace(&cwd.to_string_lossy().into_owned(), "{{cwd}}");
    serde_json::from_str(&text).unwrap()
}

/// Text of the `agent_message_chunk` updates among `frames`.
pub fn message_text(frames: &[Value]) -> String {
    frames
        .iter()
        .filter(|f| f["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|f| f["params"]["update"]["content"]["text"].as_str())
        .collect()
}
