//! `dsh` / `dsh resume [ID]`: the interactive UI (crate `dsh-tui`) over the composed harness.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_session::SessionSummary;

use crate::compose::Harness;
use crate::config::Config;
use crate::config::Overrides;

pub fn run(start: dsh_tui::Start) -> anyhow::Result<ExitCode> {
    if !dsh_tui::is_interactive() {
        eprintln!("{}", dsh_tui::NOT_A_TERMINAL);
        return Ok(ExitCode::from(2));
    }
    let cwd = std::env::current_dir()?;
    let mut config = Config::load(&cwd, &Overrides::default())?;
    if crate::trust::ask_once(&config.home, config.project.as_ref())? {
        config = Config::load(&cwd, &Overrides::default())?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let harness = Arc::new(Harness::build(config)?);
        harness.start_mcp().await?;
        let app = dsh_tui::TuiApp {
            factory: Arc::new(Factory {
                harness: harness.clone(),
            }),
            registry: harness.registry.clone(),
            model: harness.settings.model.clone(),
            cwd,
            start,
        };
        let result = dsh_tui::run(app).await;
        harness.shutdown();
        result?;
        Ok(ExitCode::SUCCESS)
    })
}

struct Factory {
    harness: Arc<Harness>,
}

impl dsh_tui::SessionFactory for Factory {
    fn new_session(&self, cwd: &Path) -> anyhow::Result<AgentHandle> {
        self.harness.new_agent(cwd, None)
    }

    fn resume(&self, id: &str) -> anyhow::Result<AgentHandle> {
        self.harness.resume_agent(id)
    }

    fn list_sessions(&self) -> anyhow::Result<Vec<SessionSummary>> {
        Ok(self.harness.store.list()?)
    }

    fn jobs(&self, agent: &AgentHandle) -> Vec<String> {
        self.harness.job_lines(agent)
    }
}
