//! `dsh ["prompt"]` / `dsh resume [ID]`: the interactive UI (crate `dsh-tui`) over the host.

use std::path::Path;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_host::NewSession;
use dsh_host::SessionHost;
use dsh_session::SessionSummary;

/// How the UI is opened: `dsh ["prompt"] [--cwd DIR] [--model NAME]`, `dsh resume [ID]`.
pub struct TuiArgs {
    pub start: dsh_tui::Start,
    pub prompt: Option<String>,
    pub cwd: Option<PathBuf>,
    pub model: Option<String>,
}

pub fn run(args: TuiArgs) -> anyhow::Result<ExitCode> {
    if !dsh_tui::is_interactive() {
        note!("{}", dsh_tui::NOT_A_TERMINAL);
        return Ok(ExitCode::from(2));
    }
    let cwd = crate::exec::checked_cwd(args.cwd)?;
    let mut overrides = crate::host::overrides();
    if let Some(model) = args.model {
        overrides.set("model.name", model);
    }
    let config = crate::host::load(&cwd, &overrides)?;
    // Asked before the UI takes the terminal over; a yes applies the project layer whole.
    crate::trust::ask_once(&config.home, config.project.as_ref())?;
    let start = match args.start {
        dsh_tui::Start::Resume(Some(id)) => {
            dsh_tui::Start::Resume(Some(crate::sessions::resolve_id(&id)?))
        }
        other => other,
    };
    let prompt = args.prompt;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let host = crate::host::start(&cwd, overrides).await?;
        let _watch = crate::host::watch_and_log(&host);
        let sessions = host.sessions();
        let models = crate::host::models(&host);
        let app = dsh_tui::TuiApp {
            factory: Arc::new(Factory {
                sessions: sessions.clone(),
                models,
                notices: reload_notices(&host),
            }),
            registry: sessions.registry(),
            model: sessions.route().1,
            cwd,
            start,
            prompt,
        };
        let result = dsh_tui::run(app).await;
        host.shutdown();
        result?;
        Ok(ExitCode::SUCCESS)
    })
}

struct Factory {
    sessions: SessionHost,
    models: Vec<String>,
    notices: tokio::sync::broadcast::Sender<dsh_tui::HostNotice>,
}

/// Reload outcomes as UI notices: a refused or partly applied configuration is an error (with
/// its file:line), an applied one is information; "nothing changed" is not shown.
fn reload_notices(host: &dsh_host::Host) -> tokio::sync::broadcast::Sender<dsh_tui::HostNotice> {
    let (tx, _) = tokio::sync::broadcast::channel(16);
    let sender = tx.clone();
    let mut reports = host.reports();
    tokio::spawn(async move {
        loop {
            let report = match reports.recv().await {
                Ok(report) => report,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            };
            let level = match report {
                dsh_host::ReloadReport::Unchanged => continue,
                dsh_host::ReloadReport::Applied { .. } => dsh_tui::model::NoticeLevel::Info,
                dsh_host::ReloadReport::Rejected { .. }
                | dsh_host::ReloadReport::Partial { .. } => dsh_tui::model::NoticeLevel::Error,
            };
            // No UI listening (yet) is not an error.
            let _ = sender.send(dsh_tui::HostNotice {
                level,
                text: report.to_string(),
            });
        }
    });
    tx
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

    fn models(&self) -> Vec<String> {
        self.models.clone()
    }

    fn notices(&self) -> Option<tokio::sync::broadcast::Receiver<dsh_tui::HostNotice>> {
        Some(self.notices.subscribe())
    }

    fn attach_image(
        &self,
        agent: &AgentHandle,
        model: &str,
        path: &Path,
    ) -> anyhow::Result<Option<dsh_protocol::ContentBlock>> {
        if self.sessions.accepts_images(agent.provider(), model) != Some(true) {
            return Ok(None);
        }
        let Some(store) = self.sessions.attachments() else {
            return Ok(None);
        };
        let bytes = std::fs::read(path)?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let record = store.describe(&bytes, None, name)?;
        store.save(&record, &bytes)?;
        Ok(Some(dsh_protocol::ContentBlock::Image {
            attachment: serde_json::to_value(record)?,
        }))
    }
}
