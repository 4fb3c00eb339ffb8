//! A real host behind the UI: `dsh_host::Host` over the scripted model and a JSONL store in a
//! fixed temp folder, the real file tools and the real `bash`, and a deterministic clock so
//! durations are stable.

#![allow(dead_code)]

pub mod pty;

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dsh_agent::scripted::ScriptedAdapter;
use dsh_host::Config;
use dsh_host::Host;
use dsh_host::HostOptions;
use dsh_host::Layer;
use dsh_host::SessionHost;
use dsh_kernel::Scope;
use dsh_session::CreateOptions;
use dsh_session::JsonlStore;
use dsh_session::LoadedSession;
use dsh_session::SessionError;
use dsh_session::SessionLog;
use dsh_session::SessionStore;
use dsh_session::SessionSummary;
use dsh_tool_fs::FilePolicy;
use dsh_tool_fs::FsContext;
use dsh_tool_fs::SandboxMode;
use dsh_tool_shell::JobToolsConfig;
use dsh_tool_shell::JobsConfig;
use dsh_tool_shell::JobsRuntime;
use dsh_tool_shell::ShellContext;
use dsh_tool_shell::register::ShellTools;
use dsh_tools::PreDecision;
use dsh_tools::ToolRegistry;
use dsh_tui::Start;
use dsh_tui::TuiApp;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// Epoch ms of the first event; each event then advances the clock by 250 ms.
pub const T0: u64 = 1_767_225_600_000;

/// The JSONL store whose every opened log runs on a deterministic clock from [`T0`], so
/// durations in frames are stable.
#[derive(Debug)]
struct ClockedStore(JsonlStore);

fn clocked(log: SessionLog) -> SessionLog {
    let clock = Arc::new(AtomicU64::new(T0));
    log.set_clock(Arc::new(move || clock.fetch_add(250, Ordering::SeqCst)));
    log
}

impl SessionStore for ClockedStore {
    fn create(&self, options: CreateOptions) -> Result<SessionLog, SessionError> {
        self.0.create(options).map(clocked)
    }
    fn resume(&self, id: &str) -> Result<SessionLog, SessionError> {
        self.0.resume(id).map(clocked)
    }
    fn load(&self, id: &str) -> Result<LoadedSession, SessionError> {
        self.0.load(id)
    }
    fn fork_log(
        &self,
        source: &SessionLog,
        boundary: Option<u64>,
        child_id: Option<String>,
    ) -> Result<SessionLog, SessionError> {
        self.0.fork_log(source, boundary, child_id).map(clocked)
    }
    fn fork(
        &self,
        source_id: &str,
        boundary: Option<u64>,
        child_id: Option<String>,
    ) -> Result<SessionLog, SessionError> {
        self.0.fork(source_id, boundary, child_id).map(clocked)
    }
    fn list(&self) -> Result<Vec<SessionSummary>, SessionError> {
        self.0.list()
    }
    fn remove(&self, id: &str) -> Result<(), SessionError> {
        self.0.remove(id)
    }
}

/// A real [`Host`] (the one the binary builds) over the scripted model and a JSONL store in a
/// fixed temp folder, with no plugin of the table: the test's tools (the real `bash` and, per
/// session, the real file tools) are registered in the host's extension scope [`TestHost::root`].
pub struct TestHost {
    pub host: Host,
    pub root: Scope,
    /// The host's slash-command registry.
    pub commands: Arc<dsh_commands::CommandRegistry>,
    pub adapter: Arc<ScriptedAdapter>,
    pub registry: Arc<ToolRegistry>,
    pub workspace: PathBuf,
}

/// A fixed folder per test so paths in frames are stable.
pub fn workspace(name: &str) -> PathBuf {
    let dir = PathBuf::from("/tmp/dsh-tui-tests").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("project")).unwrap();
    dir
}

impl TestHost {
    /// Sessions on the model `scripted-model` (`/model` offers it and `scripted-pro`).
    pub fn new(dir: &Path) -> Arc<Self> {
        Self::with_model(dir, "scripted-model")
    }

    /// Sessions on the configured model `model`.
    pub fn with_model(dir: &Path, model: &str) -> Arc<Self> {
        Self::build(dir, model, &[])
    }

    /// With the named plugins of the binary's table mounted (`checkpoints`).
    #[allow(dead_code, reason = "not every test binary mounts plugins")]
    pub fn with_plugins(dir: &Path, plugins: &[&str]) -> Arc<Self> {
        Self::build(dir, "scripted-model", plugins)
    }

    fn build(dir: &Path, model: &str, plugins: &[&str]) -> Arc<Self> {
        let workspace = dir.join("project");
        let mut config = Config::empty(dir.join("home"), workspace.clone());
        let serde_json::Value::Object(table) = serde_json::json!({"model": {
            "name": model,
            "catalog": [{"id": "scripted-model"}, {"id": "scripted-pro"}],
        }}) else {
            unreachable!()
        };
        config.merge(Layer::User, table, None);
        let adapter = ScriptedAdapter::new("scripted");
        let mut options = HostOptions::new(config);
        options.store = Some(Arc::new(ClockedStore(JsonlStore::new(dir.join("home")))));
        options.adapter = Some(adapter.clone());
        options.plugins = Some(
            dsh_host::builtin_plugins()
                .into_iter()
                .filter(|spec| plugins.contains(&spec.name))
                .collect(),
        );
        let host = Host::build(options).unwrap();
        let root = host.extension_scope("test").unwrap();
        let sessions = host.sessions();
        let registry = sessions.registry();
        let jobs = JobsRuntime::new(JobsConfig::default());
        let cwd = workspace.clone();
        let shell = ShellTools {
            resolve: Arc::new(move |run| {
                let ctx = ShellContext::new(
                    cwd.clone(),
                    run.agent().map(|a| a.id().to_owned()).unwrap_or_default(),
                );
                Ok(ctx)
            }),
            jobs,
            job_config: JobToolsConfig::default(),
            run_in_background: false,
            sandbox: None,
        };
        dsh_tool_shell::register::register_shell_tools(&registry, &root, &shell).unwrap();
        // `bash` commands mentioning "needs-approval" ask the person first.
        let _ = registry.pre_execute().register(&root, |exec, next| {
            let asks = exec.name() == "bash"
                && exec
                    .arguments()
                    .is_some_and(|a| a.to_string().contains("needs-approval"));
            if asks {
                Box::pin(async {
                    Ok(PreDecision::ask(Some(
                        "the command touches the network".into(),
                    )))
                })
            } else {
                next.run(exec)
            }
        });
        // The file tools of each session, in its own scope, confined to nothing.
        let fs_workspace = workspace.clone();
        let tools = registry.clone();
        sessions
            .services()
            .sessions
            .attach(&root, "test-fs", move |session| {
                let fs = FsContext::new(
                    &fs_workspace,
                    FilePolicy::new(SandboxMode::DangerFullAccess, &fs_workspace),
                );
                dsh_tool_fs::register::register_fs_tools(&tools, session.scope, fs)
                    .map_err(dsh_kernel::PluginError::other)?;
                Ok(())
            })
            .unwrap();
        Arc::new(Self {
            commands: sessions.service::<dsh_commands::CommandRegistry>().unwrap(),
            host,
            root,
            adapter,
            registry,
            workspace,
        })
    }

    pub fn sessions(&self) -> SessionHost {
        self.host.sessions()
    }

    /// The UI as `dsh` / `dsh resume` opens it in the workspace.
    pub fn app(&self, start: Start) -> TuiApp {
        TuiApp {
            sessions: self.sessions(),
            cwd: self.workspace.clone(),
            start,
            prompt: None,
        }
    }
}

/// Waits (bounded) until `check` holds, pumping the controller.
pub async fn until(
    controller: &mut dsh_tui::Controller,
    what: &str,
    check: impl Fn(&dsh_tui::Controller) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        controller.pump();
        if check(controller) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Renders the state into a `width`×`height` test terminal.
pub fn frame(state: &dsh_tui::UiState, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| dsh_tui::render(state, f)).unwrap();
    terminal
}

pub fn key(code: crossterm::event::KeyCode) -> crossterm::event::KeyEvent {
    crossterm::event::KeyEvent::new(code, crossterm::event::KeyModifiers::NONE)
}

pub fn type_text(controller: &mut dsh_tui::Controller, text: &str) {
    for c in text.chars() {
        controller.on_key(key(crossterm::event::KeyCode::Char(c)));
    }
}
