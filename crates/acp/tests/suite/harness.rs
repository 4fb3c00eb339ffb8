//! A real agent behind the bridge: the scripted model, a JSONL session store in a temp dir, and
//! two real tools (`bash` runs a process, `edit` rewrites a file) with terminal and diff cards.

use std::io;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_acp::BridgeConfig;
use dsh_acp::FactoryError;
use dsh_acp::ModeInfo;
use dsh_acp::ModeState;
use dsh_acp::NewSession;
use dsh_acp::SessionFactory;
use dsh_acp::SessionParts;
use dsh_acp::StoredSession;
use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHandle;
use dsh_agent::DEFAULT_MAX_PARALLEL_TOOL_CALLS;
use dsh_agent::PromptConfig;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_kernel::BoxFuture;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_session::CreateOptions;
use dsh_session::JsonlStore;
use dsh_session::SessionLog;
use dsh_tools::FileDiff;
use dsh_tools::FileLocation;
use dsh_tools::PreDecision;
use dsh_tools::RegistryConfig;
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

pub struct TestFactory {
    pub root: Scope,
    pub store: JsonlStore,
    pub adapter: Arc<ScriptedAdapter>,
    pub registry: Arc<ToolRegistry>,
    pub modes: std::sync::Mutex<Vec<String>>,
    /// Whether `check_credentials` passes.
    pub credentials: std::sync::Mutex<bool>,
    #[allow(
        dead_code,
        reason = "kept alive with the factory; tests register into it"
    )]
    pub commands: dsh_commands::CommandRegistry,
}

fn modes() -> ModeState {
    let mode = |id: &str, name: &str| ModeInfo {
        id: id.into(),
        name: name.into(),
        description: None,
    };
    ModeState {
        current: "workspace-write".into(),
        available: vec![
            mode("read-only", "Read only"),
            mode("workspace-write", "Workspace write"),
        ],
    }
}

impl TestFactory {
    pub fn new(home: &Path) -> Arc<Self> {
        let root = Scope::root();
        let commands = dsh_commands::CommandRegistry::install(&root).unwrap();
        let registry = ToolRegistry::new(RegistryConfig::default());
        registry.register(&root, bash_tool()).unwrap();
        registry.register(&root, edit_tool()).unwrap();
        // `bash` commands mentioning "needs-approval" ask the user first.
        let _ = registry.pre_execute().register(&root, |exec, next| {
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
        Arc::new(Self {
            root,
            store: JsonlStore::new(home),
            adapter: ScriptedAdapter::new("scripted"),
            registry,
            modes: std::sync::Mutex::new(Vec::new()),
            credentials: std::sync::Mutex::new(true),
            commands,
        })
    }

    fn agent(&self, id: String, cwd: &Path, log: SessionLog) -> Result<SessionParts, FactoryError> {
        let config = AgentConfig {
            id,
            cwd: Some(cwd.to_string_lossy().into_owned()),
            provider: "scripted".into(),
            model: "scripted-model".into(),
            max_tokens: None,
            adapter: self.adapter.clone(),
            tools: self.registry.clone(),
            scope: self.root.clone(),
            log,
            prompt: PromptConfig::default(),
            max_parallel_tool_calls: DEFAULT_MAX_PARALLEL_TOOL_CALLS,
        };
        let agent = Agent::create(config).map_err(|e| FactoryError::internal(e.to_string()))?;
        Ok(SessionParts {
            agent,
            tools: Some(self.registry.clone()),
            modes: Some(modes()),
            mode_watch: None,
        })
    }
}

impl SessionFactory for TestFactory {
    fn create(
        &self,
        request: NewSession,
    ) -> BoxFuture<'static, Result<SessionParts, FactoryError>> {
        let options = CreateOptions {
            id: Some(request.session_id.clone()),
            cwd: Some(request.cwd.clone()),
            ..Default::default()
        };
        let result = self
            .store
            .create(options)
            .map_err(|e| FactoryError::internal(e.to_string()))
            .and_then(|log| self.agent(request.session_id, &request.cwd, log));
        Box::pin(std::future::ready(result))
    }

    fn load(
        &self,
        session_id: String,
        cwd: PathBuf,
    ) -> BoxFuture<'static, Result<SessionParts, FactoryError>> {
        let result = self
            .store
            .resume(&session_id)
            .map_err(|e| FactoryError::invalid(e.to_string()))
            .and_then(|log| self.agent(session_id, &cwd, log));
        Box::pin(std::future::ready(result))
    }

    fn list(
        &self,
        cwd: Option<PathBuf>,
    ) -> BoxFuture<'static, Result<Vec<StoredSession>, FactoryError>> {
        let result = dsh_acp::stored_sessions(&self.store, cwd.as_deref());
        Box::pin(std::future::ready(result))
    }

    fn auth_methods(&self) -> Vec<dsh_acp::AuthMethodInfo> {
        vec![dsh_acp::AuthMethodInfo {
            id: "test-key".into(),
            name: "Test key".into(),
            description: Some("Set TEST_KEY".into()),
        }]
    }

    fn check_credentials(&self) -> Result<(), FactoryError> {
        if *self.credentials.lock().unwrap() {
            Ok(())
        } else {
            Err(FactoryError::auth_required("no test key"))
        }
    }

    fn models(&self) -> Vec<String> {
        vec!["alternate-model".to_owned()]
    }

    fn set_mode(&self, _agent: &AgentHandle, mode_id: &str) -> Result<(), FactoryError> {
        self.modes.lock().unwrap().push(mode_id.to_owned());
        Ok(())
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
    pub fn start(factory: Arc<dyn SessionFactory>) -> Self {
        let (incoming, incoming_rx) = mpsc::unbounded::<io::Result<String>>();
        let (outgoing_tx, outgoing) = mpsc::unbounded::<String>();
        let lines = agent_client_protocol::Lines::new(
            outgoing_tx.sink_map_err(io::Error::other),
            incoming_rx,
        );
        let task = tokio::spawn(dsh_acp::serve_transport(
            factory,
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
