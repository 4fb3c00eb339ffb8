//! A real agent behind the UI: the scripted model, a JSONL store in a fixed temp folder, the
//! real file tools and the real `bash`, and a deterministic clock so durations are stable.

#![allow(dead_code)]

pub mod pty;

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHandle;
use dsh_agent::DEFAULT_MAX_PARALLEL_TOOL_CALLS;
use dsh_agent::PromptConfig;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_kernel::Scope;
use dsh_session::CreateOptions;
use dsh_session::JsonlStore;
use dsh_session::SessionLog;
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
use dsh_tools::RegistryConfig;
use dsh_tools::ToolRegistry;
use dsh_tui::SessionFactory;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// Epoch ms of the first event; each event then advances the clock by 250 ms.
pub const T0: u64 = 1_767_225_600_000;

pub struct TestFactory {
    pub root: Scope,
    /// The shared slash-command registry (on the root, as the host installs it).
    pub commands: dsh_commands::CommandRegistry,
    pub store: JsonlStore,
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

impl TestFactory {
    pub fn new(dir: &Path) -> Arc<Self> {
        let root = Scope::root();
        let registry = ToolRegistry::new(RegistryConfig::default());
        let workspace = dir.join("project");
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
        let commands = dsh_commands::CommandRegistry::install(&root).unwrap();
        Arc::new(Self {
            root,
            commands,
            store: JsonlStore::new(dir.join("home")),
            adapter: ScriptedAdapter::new("scripted"),
            registry,
            workspace,
        })
    }

    fn agent(&self, log: SessionLog, resume: bool) -> anyhow::Result<AgentHandle> {
        let clock = Arc::new(AtomicU64::new(T0));
        log.set_clock(Arc::new(move || clock.fetch_add(250, Ordering::SeqCst)));
        let config = AgentConfig {
            id: log.id().to_owned(),
            cwd: Some(self.workspace.to_string_lossy().into_owned()),
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
        let agent = if resume {
            Agent::resume(config)?
        } else {
            Agent::create(config)?
        };
        let fs = FsContext::new(
            &self.workspace,
            FilePolicy::new(SandboxMode::DangerFullAccess, &self.workspace),
        );
        dsh_tool_fs::register::register_fs_tools(&self.registry, agent.scope(), fs)?;
        Ok(agent)
    }
}

impl SessionFactory for TestFactory {
    fn new_session(&self, cwd: &Path) -> anyhow::Result<AgentHandle> {
        let log = self.store.create(CreateOptions {
            cwd: Some(cwd.to_path_buf()),
            ..Default::default()
        })?;
        self.agent(log, false)
    }

    fn resume(&self, id: &str) -> anyhow::Result<AgentHandle> {
        let log = self.store.resume(id)?;
        self.agent(log, true)
    }

    fn list_sessions(&self) -> anyhow::Result<Vec<SessionSummary>> {
        Ok(self.store.list()?)
    }

    fn models(&self) -> Vec<String> {
        vec!["scripted-model".into(), "scripted-pro".into()]
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
