//! `dsh sessions list` and `dsh sessions show ID`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use dsh_session::JsonlStore;

fn store() -> anyhow::Result<JsonlStore> {
    Ok(JsonlStore::new(dsh_host::config::dsh_home()?))
}

pub fn list() -> anyhow::Result<ExitCode> {
    let mut sessions = store()?.list().context("cannot list sessions")?;
    sessions.sort_by_key(|s| std::cmp::Reverse(s.created_at));
    let mut out = std::io::stdout().lock();
    for session in sessions {
        let title = session.title.unwrap_or_default();
        let cwd = session.cwd.unwrap_or_else(|| "-".to_owned());
        writeln!(
            out,
            "{}\t{}\t{} events\t{}\t{}",
            session.id, session.created_at, session.event_count, cwd, title
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn show(id: &str) -> anyhow::Result<ExitCode> {
    let loaded = store()?
        .load(id)
        .with_context(|| format!("cannot load session {id}"))?;
    let mut out = std::io::stdout().lock();
    for event in loaded.events.iter() {
        writeln!(out, "{}", event.to_json_line())?;
    }
    for event in &loaded.repair {
        writeln!(out, "{}", event.to_json_line())?;
    }
    Ok(ExitCode::SUCCESS)
}
