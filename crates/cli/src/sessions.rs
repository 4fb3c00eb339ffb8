//! `dsh sessions list | show ID [--json] | rm ID`. One id format everywhere: the full id
//! `list` prints is what `show`, `rm`, `dsh resume` and `dsh exec --resume` take (a unique
//! prefix of it is accepted too).

use std::io::IsTerminal;
use std::io::Write;
use std::process::ExitCode;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use anyhow::Context;
use dsh_session::JsonlStore;
use dsh_session::SessionSummary;

fn store() -> anyhow::Result<JsonlStore> {
    Ok(JsonlStore::new(dsh_host::config::dsh_home()?))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// When the session was last written (its file), else when it was created (epoch ms).
pub fn last_activity(summary: &SessionSummary) -> u64 {
    std::fs::metadata(&summary.path)
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|time| time.duration_since(UNIX_EPOCH).ok())
        .and_then(|since| u64::try_from(since.as_millis()).ok())
        .unwrap_or(summary.created_at)
}

/// `just now`, `3 min ago`, `2 h ago`, `5 d ago`.
pub fn relative(then_ms: u64, now_ms: u64) -> String {
    let secs = now_ms.saturating_sub(then_ms) / 1000;
    match secs {
        0..60 => "just now".to_owned(),
        60..3600 => format!("{} min ago", secs / 60),
        3600..86_400 => format!("{} h ago", secs / 3600),
        _ => format!("{} d ago", secs / 86_400),
    }
}

/// Turns of a stored session (counted from its file without parsing every event).
fn turns(summary: &SessionSummary) -> usize {
    std::fs::read_to_string(&summary.path)
        .map(|text| text.matches("\"type\":\"turn/start\"").count())
        .unwrap_or(0)
}

/// `~/…` for folders under the home directory.
fn short_folder(folder: &str) -> String {
    match std::env::var_os("HOME").map(|h| h.to_string_lossy().into_owned()) {
        Some(home) if !home.is_empty() && folder.starts_with(&home) => {
            format!("~{}", &folder[home.len()..])
        }
        _ => folder.to_owned(),
    }
}

fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Top-level sessions, most recently active first.
fn sessions(store: &JsonlStore) -> anyhow::Result<Vec<(SessionSummary, u64)>> {
    let mut sessions: Vec<(SessionSummary, u64)> = store
        .list()
        .context("cannot list sessions")?
        .into_iter()
        .filter(|s| s.parent_session.is_none())
        .map(|s| {
            let at = last_activity(&s);
            (s, at)
        })
        .collect();
    sessions.sort_by_key(|(_, at)| std::cmp::Reverse(*at));
    Ok(sessions)
}

pub fn list() -> anyhow::Result<ExitCode> {
    let store = store()?;
    let sessions = sessions(&store)?;
    if sessions.is_empty() {
        say!("no stored sessions (start one with `dsh` or `dsh exec`)")?;
        return Ok(ExitCode::SUCCESS);
    }
    let now = now_ms();
    let rows: Vec<[String; 5]> = sessions
        .iter()
        .map(|(s, at)| {
            [
                s.id.clone(),
                relative(*at, now),
                turns(s).to_string(),
                clip(&short_folder(s.cwd.as_deref().unwrap_or("-")), 40),
                clip(s.title.as_deref().unwrap_or("(untitled)"), 60),
            ]
        })
        .collect();
    let header = ["ID", "ACTIVE", "TURNS", "FOLDER", "TITLE"];
    let widths: Vec<usize> = (0..5)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain(std::iter::once(header[i].len()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: [&str; 5]| {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i == 4 {
                text.push_str(cell);
            } else if i == 2 {
                text.push_str(&format!("{cell:>w$}  ", w = widths[i]));
            } else {
                text.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        text.trim_end().to_owned()
    };
    say!("{}", line(header))?;
    for row in &rows {
        say!("{}", line([&row[0], &row[1], &row[2], &row[3], &row[4]]))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// [`resolve`] in the default store (`$DSH_HOME/sessions`).
pub fn resolve_id(text: &str) -> anyhow::Result<String> {
    resolve(&store()?, text)
}

/// The stored session `text` names: its full id, or a prefix only one id starts with.
pub fn resolve(store: &JsonlStore, text: &str) -> anyhow::Result<String> {
    let all = store.list().context("cannot list sessions")?;
    if all.iter().any(|s| s.id == text) {
        return Ok(text.to_owned());
    }
    let matches: Vec<&SessionSummary> = all.iter().filter(|s| s.id.starts_with(text)).collect();
    match matches.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => anyhow::bail!("no stored session {text} (see `dsh sessions list`)"),
        many => anyhow::bail!(
            "{text} matches {} sessions: {}",
            many.len(),
            many.iter()
                .map(|s| s.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

pub fn show(id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let store = store()?;
    let id = resolve(&store, id)?;
    let loaded = store
        .load(&id)
        .with_context(|| format!("cannot load session {id}"))?;
    if json {
        let mut out = std::io::stdout().lock();
        let repair = loaded.repair.iter();
        for line in loaded
            .events
            .iter()
            .map(|e| e.to_json_line())
            .chain(repair.map(|e| e.to_json_line()))
        {
            if writeln!(out, "{line}").is_err() {
                break;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let cwd = loaded.header.cwd.clone().unwrap_or_default();
    let mut events: Vec<std::sync::Arc<dsh_session::Event>> = loaded.events.to_vec();
    events.extend(loaded.repair.iter().cloned().map(std::sync::Arc::new));
    let transcript =
        dsh_tui::Transcript::from_events(events.iter(), &dsh_tui::Presenters::default());
    let mut state = dsh_tui::UiState::new("", cwd.clone(), id.clone());
    state.transcript = transcript;
    state.now_ms = now_ms();
    let width = 100;
    let lines = dsh_tui::view::transcript_lines(&state, width);
    let mut out = std::io::stdout().lock();
    let title = state
        .transcript
        .title
        .clone()
        .unwrap_or_else(|| "(untitled)".to_owned());
    let head = format!("{id} · {} · {title}", short_folder(&cwd));
    let result = if std::io::stdout().is_terminal() {
        dsh_tui::scrollback::write_lines(&mut out, &[ratatui_line(&head)])
            .and_then(|()| dsh_tui::scrollback::write_lines(&mut out, &lines))
    } else {
        dsh_tui::scrollback::write_plain(&mut out, &[ratatui_line(&head)])
            .and_then(|()| dsh_tui::scrollback::write_plain(&mut out, &lines))
    };
    match result {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => Err(error.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

fn ratatui_line(text: &str) -> dsh_tui::scrollback::PlainLine {
    dsh_tui::scrollback::PlainLine::from(text.to_owned())
}

pub fn rm(id: &str) -> anyhow::Result<ExitCode> {
    let store = store()?;
    let id = resolve(&store, id)?;
    store
        .remove(&id)
        .with_context(|| format!("cannot remove session {id}"))?;
    say!("removed session {id}")?;
    Ok(ExitCode::SUCCESS)
}

/// `dsh sessions export ID [-o FILE]`: the session's raw log and its descendants' logs as one
/// ZIP archive (`<id>.zip` by default, `-` for stdout).
pub fn export(id: &str, output: Option<std::path::PathBuf>) -> anyhow::Result<ExitCode> {
    let store = store()?;
    let id = resolve(&store, id)?;
    let id = id.as_str();
    let query = dsh_session_query::SessionQuery::new(
        Some(store),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_times() {
        let now = 10_000_000_000;
        assert_eq!(relative(now - 5_000, now), "just now");
        assert_eq!(relative(now - 3 * 60_000, now), "3 min ago");
        assert_eq!(relative(now - 2 * 3_600_000, now), "2 h ago");
        assert_eq!(relative(now - 5 * 86_400_000, now), "5 d ago");
    }
}
