//! `dsh sessions list | show ID [--json] | rm ID | export ID`: ids resolved by
//! `dsh_host::stored`, text from `dsh_headless::sessions` and the TUI's transcript view.

use std::io::IsTerminal;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use dsh_session::JsonlStore;

fn store() -> anyhow::Result<JsonlStore> {
    Ok(JsonlStore::new(dsh_host::config::dsh_home()?))
}

/// The stored session `text` names (its full id or a unique prefix) in `$DSH_HOME/sessions`.
pub fn resolve_id(text: &str) -> anyhow::Result<String> {
    Ok(dsh_host::stored::resolve(&store()?, text)?)
}

pub fn list() -> anyhow::Result<ExitCode> {
    for line in dsh_headless::sessions::list_lines(&store()?, dsh_headless::sessions::now_ms())? {
        say!("{line}")?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn show(id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let store = store()?;
    let id = dsh_host::stored::resolve(&store, id)?;
    let loaded = store
        .load(&id)
        .with_context(|| format!("cannot load session {id}"))?;
    let mut out = std::io::stdout().lock();
    if json {
        for line in dsh_headless::sessions::json_lines(&loaded) {
            if writeln!(out, "{line}").is_err() {
                break;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let folder = dsh_headless::sessions::short_folder(loaded.header.cwd.as_deref().unwrap_or(""));
    let result = dsh_tui::scrollback::write_stored(
        &mut out,
        &loaded,
        dsh_headless::sessions::now_ms(),
        100,
        std::io::stdout().is_terminal(),
        |title| format!("{id} · {folder} · {title}"),
    );
    match result {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => Err(error.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

pub fn rm(id: &str) -> anyhow::Result<ExitCode> {
    let store = store()?;
    let id = dsh_host::stored::resolve(&store, id)?;
    store
        .remove(&id)
        .with_context(|| format!("cannot remove session {id}"))?;
    say!("removed session {id}")?;
    Ok(ExitCode::SUCCESS)
}

/// `dsh sessions export ID [-o FILE]`: `<id>.zip` by default, `-` for stdout.
pub fn export(id: &str, output: Option<std::path::PathBuf>) -> anyhow::Result<ExitCode> {
    let store = store()?;
    let id = dsh_host::stored::resolve(&store, id)?;
    let bytes = dsh_headless::sessions::export(store, &id)?;
    let path = output.unwrap_or_else(|| std::path::PathBuf::from(format!("{id}.zip")));
    if path.as_os_str() == "-" {
        std::io::stdout().lock().write_all(&bytes)?;
    } else {
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        note!("dsh: wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
