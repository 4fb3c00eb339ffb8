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

/// `dsh sessions export ID [-o FILE]`: the session's raw log and its descendants' logs as one
/// ZIP archive (`<id>.zip` by default, `-` for stdout).
pub fn export(id: &str, output: Option<std::path::PathBuf>) -> anyhow::Result<ExitCode> {
    let query = dsh_session_query::SessionQuery::new(
        Some(store()?),
        dsh_session_query::IndexConfig {
            open_at: dsh_session_query::OpenAt::Never,
            ..dsh_session_query::IndexConfig::default()
        },
    )
    .map_err(|e| anyhow::anyhow!(e.message))?;
    let bytes = dsh_session_query::export::export_session(&query, id)
        .map_err(|e| anyhow::anyhow!("cannot export session {id}: {}", e.message))?;
    let path = output.unwrap_or_else(|| std::path::PathBuf::from(format!("{id}.zip")));
    if path.as_os_str() == "-" {
        std::io::stdout().lock().write_all(&bytes)?;
    } else {
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("dsh: wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
