//! Stored sessions as text: the `dsh sessions list` table, `show --json` lines and the export
//! archive. One id format everywhere: the full id `list` prints is what `show`, `rm`,
//! `dsh resume` and `dsh exec --resume` take (a unique prefix of it too, see
//! `dsh_host::stored::resolve`).

use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use dsh_session::LoadedSession;
use dsh_session::SessionStore;

use crate::HeadlessError;

/// Now, in epoch milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
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

/// `~/…` for folders under the home directory.
pub fn short_folder(folder: &str) -> String {
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

/// `dsh sessions list`: top-level sessions, most recently active first, as an aligned table
/// (one line each, header first), or the hint when there are none.
pub fn list_lines(store: &dyn SessionStore, now: u64) -> Result<Vec<String>, HeadlessError> {
    let sessions = dsh_host::stored::recent(store)
        .map_err(|e| HeadlessError::context("cannot list sessions", e))?;
    if sessions.is_empty() {
        return Ok(vec![
            "no stored sessions (start one with `dsh` or `dsh exec`)".to_owned(),
        ]);
    }
    let rows: Vec<[String; 5]> = sessions
        .iter()
        .map(|(s, at)| {
            [
                s.id.clone(),
                relative(*at, now),
                s.turns.to_string(),
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
    let mut lines = vec![line(header)];
    lines.extend(
        rows.iter()
            .map(|row| line([&row[0], &row[1], &row[2], &row[3], &row[4]])),
    );
    Ok(lines)
}

/// The stored session `text` names (its full id or a unique prefix), loaded with crash repair
/// computed: its full id and contents (`dsh sessions show`).
pub fn load(
    store: &dyn SessionStore,
    text: &str,
) -> Result<(String, LoadedSession), HeadlessError> {
    let id = dsh_host::stored::resolve(store, text)?;
    let loaded = store
        .load(&id)
        .map_err(|e| HeadlessError::context(format!("cannot load session {id}"), e))?;
    Ok((id, loaded))
}

/// `dsh sessions rm`: deletes the stored session `text` names; the confirmation line.
pub fn remove(store: &dyn SessionStore, text: &str) -> Result<String, HeadlessError> {
    let id = dsh_host::stored::resolve(store, text)?;
    store
        .remove(&id)
        .map_err(|e| HeadlessError::context(format!("cannot remove session {id}"), e))?;
    Ok(format!("removed session {id}"))
}

/// `dsh sessions show --json`: the events as JSON lines, crash repair shown as it would be
/// applied.
pub fn json_lines(loaded: &LoadedSession) -> impl Iterator<Item = String> + '_ {
    loaded
        .events
        .iter()
        .map(|e| e.to_json_line())
        .chain(loaded.repair.iter().map(|e| e.to_json_line()))
}

/// `dsh sessions export`: the session `text` names (its full id or a unique prefix) with its
/// descendants' logs as one ZIP archive; its full id and the archive.
pub fn export(
    store: dsh_session::JsonlStore,
    text: &str,
) -> Result<(String, Vec<u8>), HeadlessError> {
    let id = dsh_host::stored::resolve(&store, text)?;
    let bytes = archive(store, &id)?;
    Ok((id, bytes))
}

fn archive(store: dsh_session::JsonlStore, id: &str) -> Result<Vec<u8>, HeadlessError> {
    let query = dsh_session_query::SessionQuery::new(
        Some(store),
        dsh_session_query::IndexConfig {
            open_at: dsh_session_query::OpenAt::Never,
            ..dsh_session_query::IndexConfig::default()
        },
    )
    .map_err(|e| HeadlessError::Invalid(e.message))?;
    dsh_session_query::export::export_session(&query, id)
        .map_err(|e| HeadlessError::Invalid(format!("cannot export session {id}: {}", e.message)))
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
