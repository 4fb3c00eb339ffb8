//! `dsh sessions list | show ID [--json] | rm ID | export ID | checkpoints ID [--json] |
//! restore ID CHECKPOINT`: ids resolved and text rendered
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

/// `dsh sessions checkpoints ID [--json]`: oldest first.
pub fn checkpoints(id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let store = store()?;
    let id = resolve_id(id)?;
    let timeline = dsh_checkpoints::list(&store, &id)?;
    if json {
        let items: Vec<serde_json::Value> = timeline
            .checkpoints
            .iter()
            .map(|c| {
                serde_json::json!({
                    "id": c.id,
                    "time": c.time,
                    "turn": c.turn,
                    "step": c.step,
                    "prompt": timeline.turns.get(&c.turn).and_then(|t| t.prompt.clone()),
                    "tree": c.tree,
                })
            })
            .collect();
        say!("{}", serde_json::Value::Array(items))?;
        return Ok(ExitCode::SUCCESS);
    }
    if timeline.checkpoints.is_empty() {
        say!("session {id} has no checkpoint")?;
        return Ok(ExitCode::SUCCESS);
    }
    let now = sessions::now_ms();
    for c in &timeline.checkpoints {
        let at = match c.step {
            Some(step) => format!("before step {step} of turn {}", c.turn),
            None => format!("end of turn {}", c.turn),
        };
        let prompt = timeline
            .turns
            .get(&c.turn)
            .and_then(|t| t.prompt.as_deref())
            .map(|p| dsh_checkpoints::engine::excerpt(p, 50))
            .unwrap_or_default();
        say!(
            "{:<8} {:<10} {at:<26} {prompt}",
            c.id,
            sessions::relative(c.time, now)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `dsh sessions restore ID CHECKPOINT`: the session's workspace files become exactly the
/// checkpoint's (the session's own checkpoint settings apply: what they leave out is left).
pub fn restore(id: &str, checkpoint: &str) -> anyhow::Result<ExitCode> {
    let store = store()?;
    let id = resolve_id(id)?;
    let loaded = store.load(&id)?;
    let cwd = loaded
        .header
        .cwd
        .clone()
        .map(std::path::PathBuf::from)
        .context("the session has no workspace folder")?;
    let config = dsh_host::config::Config::load(&cwd, &dsh_host::config::Overrides::default())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut table = config
        .get("plugins.checkpoints")
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    if let Some(map) = table.as_object_mut() {
        map.remove("enabled");
    }
    let settings: dsh_checkpoints::CheckpointSettings = serde_json::from_value(table)
        .context("[plugins.checkpoints] is not valid (dsh config show says where)")?;
    let service = dsh_checkpoints::Checkpoints::new(
        config.home.clone(),
        settings.limits(),
        settings.disk_budget_bytes,
    );
    let timeline = dsh_checkpoints::list(&store, &id)?;
    let plan = service.restore_to(&timeline, &cwd, checkpoint)?;
    say!("{}", dsh_checkpoints::engine::report(&plan, None))?;
    Ok(ExitCode::SUCCESS)
}
