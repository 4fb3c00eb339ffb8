//! `dsh` / `dsh resume [ID]`: the interactive UI (crate `dsh-tui`) over the host.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_host::NewSession;
use dsh_host::SessionHost;
use dsh_session::SessionSummary;

pub fn run(start: dsh_tui::Start) -> anyhow::Result<ExitCode> {
    if !dsh_tui::is_interactive() {
        eprintln!("{}", dsh_tui::NOT_A_TERMINAL);
        return Ok(ExitCode::from(2));
    }
    let cwd = std::env::current_dir()?;
    let overrides = crate::host::overrides();
    let config = crate::host::load(&cwd, &overrides)?;
    // Asked before the UI takes the terminal over; a yes applies the project layer whole.
    crate::trust::ask_once(&config.home, config.project.as_ref())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let host = crate::host::start(&cwd, overrides).await?;
        let _watch = crate::host::watch_and_log(&host);
        let sessions = host.sessions();
        let app = dsh_tui::TuiApp {
            factory: Arc::new(Factory {
                sessions: sessions.clone(),
            }),
            registry: sessions.registry(),
            model: sessions.route().1,
            cwd,
            start,
        };
        let result = dsh_tui::run(app).await;
        host.shutdown();
        result?;
        Ok(ExitCode::SUCCESS)
    })
}

struct Factory {
    sessions: SessionHost,
}

impl dsh_tui::SessionFactory for Factory {
    fn new_session(&self, cwd: &Path) -> anyhow::Result<AgentHandle> {
        Ok(self.sessions.create(NewSession {
            id: None,
            cwd: cwd.to_path_buf(),
        })?)
    }

    fn resume(&self, id: &str) -> anyhow::Result<AgentHandle> {
        Ok(self.sessions.load(id)?)
    }

    fn list_sessions(&self) -> anyhow::Result<Vec<SessionSummary>> {
        Ok(self.sessions.list()?)
    }

    fn jobs(&self, agent: &AgentHandle) -> Vec<String> {
        self.sessions.job_lines(agent)
    }
}
