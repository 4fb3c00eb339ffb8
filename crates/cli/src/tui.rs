//! `dsh` / `dsh resume [ID]`: the interactive UI (crate `dsh-tui`) over the composed harness.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_session::SessionSummary;

use crate::compose::Harness;
use crate::config::Config;
use crate::config::Overrides;

/// How the UI is opened: `dsh ["prompt"] [--cwd DIR] [--model NAME]`, `dsh resume [ID]`.
pub struct TuiArgs {
    pub start: dsh_tui::Start,
    pub prompt: Option<String>,
    pub cwd: Option<std::path::PathBuf>,
    pub model: Option<String>,
}

pub fn run(args: TuiArgs) -> anyhow::Result<ExitCode> {
    if !dsh_tui::is_interactive() {
        eprintln!("{}", dsh_tui::NOT_A_TERMINAL);
        return Ok(ExitCode::from(2));
    }
    let cwd = crate::exec::checked_cwd(args.cwd)?;
    let overrides = Overrides {
        model: args.model,
        ..Overrides::default()
    };
    let config = Config::load(&cwd, &overrides)?;
    let start = args.start;
    let prompt = args.prompt;
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
            prompt,
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

    /// The adapter's built-in models, the `[[model.catalog]]` entries and the configured one.
    fn models(&self) -> Vec<String> {
        let mut models: Vec<String> = dsh_llm::DeepSeekConfig::default()
            .models
            .iter()
            .map(|m| m.id.clone())
            .collect();
        models.extend(self.harness.settings.catalog.iter().map(|e| e.id.clone()));
        models.push(self.harness.settings.model.clone());
        let mut seen = std::collections::HashSet::new();
        models.retain(|m| seen.insert(m.clone()));
        models
    }
}
