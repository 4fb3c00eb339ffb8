//! `dsh ["prompt"]` / `dsh resume [ID]`: the interactive UI (crate `dsh-tui`) over the host.

use std::path::PathBuf;
use std::process::ExitCode;

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
    let cwd = crate::host::checked_cwd(args.cwd)?;
    let mut overrides = crate::host::overrides();
    if let Some(model) = args.model {
        overrides.set("model.name", model);
    }
    let config = crate::host::load(&cwd, &overrides)?;
    // Asked before the UI takes the terminal over; a yes applies the project layer whole.
    dsh_tui::ask_trust(&config.home, config.project.as_ref())?;
    let start = match args.start {
        dsh_tui::Start::Resume(Some(id)) => {
            dsh_tui::Start::Resume(Some(crate::sessions::resolve_id(&id)?))
        }
        other => other,
    };
    let prompt = args.prompt;
    crate::host::block_on(async move {
        let host = crate::host::start(&cwd, overrides).await?;
        let _watch = host.watch_and_log();
        let app = dsh_tui::TuiApp {
            sessions: host.sessions(),
            cwd,
            start,
            prompt,
        };
        let result = dsh_tui::run(app).await;
        host.shutdown();
        result?;
        Ok(ExitCode::SUCCESS)
    })?
}
