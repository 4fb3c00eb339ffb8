//! `dsh sessions list | show ID [--json] | rm ID | export ID`: ids resolved and text rendered
//! by `dsh_headless::sessions`, the transcript by the TUI's transcript view.

use std::io::IsTerminal;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use dsh_headless::sessions;
use dsh_session::JsonlStore;

fn store() -> anyhow::Result<JsonlStore> {
    Ok(JsonlStore::new(dsh_host::config::dsh_home()?))
}

/// The stored session `text` names (its full id or a unique prefix) in `$DSH_HOME/sessions`.
pub fn resolve_id(text: &str) -> anyhow::Result<String> {
    Ok(dsh_host::stored::resolve(&store()?, text)?)
}

pub fn list() -> anyhow::Result<ExitCode> {
    for line in sessions::list_lines(&store()?, sessions::now_ms())? {
        say!("{line}")?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn show(id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let (id, loaded) = sessions::load(&store()?, id)?;
    let mut out = std::io::stdout().lock();
    if json {
        for line in sessions::json_lines(&loaded) {
            // Event lines are JSON: the escapes keep them valid and their values exact.
            if writeln!(out, "{}", dsh_secrets::terminal_safe(&line)).is_err() {
                break;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let folder = sessions::short_folder(loaded.header.cwd.as_deref().unwrap_or(""));
    let tty = std::io::stdout().is_terminal();
    let title = |title: &str| format!("{id} · {folder} · {title}");
    match dsh_tui::scrollback::write_stored(&mut out, &loaded, sessions::now_ms(), 100, tty, title)
    {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => Err(error.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

pub fn rm(id: &str) -> anyhow::Result<ExitCode> {
    say!("{}", sessions::remove(&store()?, id)?)?;
    Ok(ExitCode::SUCCESS)
}

/// `dsh sessions export ID [-o FILE]`: `<id>.zip` by default, `-` for stdout.
pub fn export(id: &str, output: Option<std::path::PathBuf>) -> anyhow::Result<ExitCode> {
    let (id, bytes) = sessions::export(store()?, id)?;
    let path = output.unwrap_or_else(|| std::path::PathBuf::from(format!("{id}.zip")));
    if path.as_os_str() == "-" {
        std::io::stdout().lock().write_all(&bytes)?;
    } else {
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        note!("dsh: wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
