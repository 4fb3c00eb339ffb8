//! Planning and carrying out a restore, and the texts the person reads. No agent, no log:
//! the caller logs the plan before [`execute`] and the result after.

use std::collections::HashMap;
use std::path::Path;

use crate::CheckpointError;
use crate::store::Entry;
use crate::store::Store;
use crate::timeline::Action;
use crate::timeline::Conflict;
use crate::timeline::FileChange;
use crate::timeline::RestorePlan;
use crate::timeline::TurnFiles;

/// What a restore is about.
#[derive(Debug, Clone)]
pub struct Target {
    pub action: Action,
    pub turn: Option<u64>,
    pub checkpoint: Option<String>,
    /// The tree the files go back (or forward) to.
    pub tree: String,
    /// The tree the agent left them in. `None`: make the workspace exactly `tree`, whoever
    /// changed what (the command line's explicit restore).
    pub from: Option<String>,
}

/// Plans a restore against the workspace as it is now (`current`, a fresh snapshot). Only
/// the paths that differ between `from` and `tree` are touched; one the person changed since
/// `from` is a conflict: it stays as it is and the version the restore would have written is
/// put beside it.
pub fn plan(store: &Store, target: &Target, current: &str) -> Result<RestorePlan, CheckpointError> {
    let mut plan = RestorePlan {
        action: target.action,
        turn: target.turn,
        checkpoint: target.checkpoint.clone(),
        tree: target.tree.clone(),
        write: Vec::new(),
        delete: Vec::new(),
        changed: Vec::new(),
        conflicts: Vec::new(),
        recovered: false,
    };
    let from = target.from.as_deref().unwrap_or(current);
    let wanted = store.diff(from, &target.tree)?;
    let since: HashMap<String, Option<Entry>> = if from == current {
        HashMap::new()
    } else {
        store
            .diff(from, current)?
            .into_iter()
            .map(|c| (c.path, c.new))
            .collect()
    };
    let mut taken: Vec<String> = Vec::new();
    // A file system mounted inside the workspace is not ours to restore (nor to stat: it may
    // not answer); snapshots leave it out too.
    let mounts = crate::store::mounts_inside(store.work_tree());
    for change in wanted {
        if crate::store::is_under_any(&change.path, &mounts) {
            continue;
        }
        let now = match since.get(&change.path) {
            Some(now) => now.clone(),
            None => change.old.clone(),
        };
        if now == change.new {
            continue;
        }
        if now != change.old {
            let copy = change.new.as_ref().map(|_| {
                let copy = free_copy_name(store.work_tree(), &change.path, target.action, &taken);
                taken.push(copy.clone());
                copy
            });
            plan.conflicts.push(Conflict {
                path: change.path,
                copy,
            });
            continue;
        }
        let how = match (&change.old, &change.new) {
            (_, None) => "deleted",
            (None, Some(_)) => "recreated",
            (Some(_), Some(_)) => "restored",
        };
        plan.changed.push(FileChange {
            path: change.path.clone(),
            how: how.to_owned(),
        });
        if change.new.is_some() {
            plan.write.push(change.path);
        } else {
            plan.delete.push(change.path);
        }
    }
    Ok(plan)
}

fn free_copy_name(root: &Path, path: &str, action: Action, taken: &[String]) -> String {
    let base = format!("{path}.dsh-{}", action.as_str());
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) || std::fs::symlink_metadata(root.join(&name)).is_ok() {
        name = format!("{base}-{n}");
        n += 1;
    }
    name
}

/// Carries out a logged plan: the conflict copies first (never over an existing file), then
/// the files. Running it again after a crash finishes it.
pub fn execute(store: &Store, plan: &RestorePlan) -> Result<(), CheckpointError> {
    for conflict in &plan.conflicts {
        let Some(copy) = &conflict.copy else { continue };
        crate::store::check_relative(copy)?;
        let Some(entry) = store.entry(&plan.tree, &conflict.path)? else {
            continue;
        };
        let full = store.work_tree().join(copy);
        if std::fs::symlink_metadata(&full).is_ok() {
            continue;
        }
        let bytes = store.blob(&entry.blob)?;
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&full)
            .and_then(|mut file| std::io::Write::write_all(&mut file, &bytes));
        written.map_err(|source| CheckpointError::Io {
            what: format!("cannot write the conflict copy {copy}"),
            source,
        })?;
    }
    store.apply(&plan.tree, &plan.write, &plan.delete)
}

/// What the person reads after a restore.
pub fn report(plan: &RestorePlan, turn: Option<&TurnFiles>) -> String {
    let mut lines = Vec::new();
    let what = match (plan.action, plan.turn) {
        (Action::Undo, Some(t)) => format!("Undid turn {t}{}", about(turn)),
        (Action::Redo, Some(t)) => format!("Redid turn {t}{}", about(turn)),
        (Action::Rewind, Some(t)) => {
            format!("Rewound the files to before turn {t}{}", about(turn))
        }
        (_, _) => match &plan.checkpoint {
            Some(id) => format!("Restored the files to checkpoint {id}"),
            None => "Restored the files".to_owned(),
        },
    };
    let n = plan.changed.len();
    lines.push(match n {
        0 => format!("{what}: no file needed changing."),
        1 => format!("{what}: 1 file changed back."),
        _ => format!("{what}: {n} files changed back."),
    });
    for change in &plan.changed {
        lines.push(format!("  {} {}", change.how, change.path));
    }
    for conflict in &plan.conflicts {
        lines.push(match &conflict.copy {
            Some(copy) => format!(
                "Conflict: {} was changed after the agent's change; it was left as it is, and the version {} would restore is in {copy}.",
                conflict.path,
                plan.action.as_str()
            ),
            None => format!(
                "Conflict: {} was changed after the agent's change; it was left as it is ({} would have deleted it).",
                conflict.path,
                plan.action.as_str()
            ),
        });
    }
    if let Some(turn) = turn
        && !turn.outside.is_empty()
    {
        let tools: Vec<&str> = turn.outside.iter().map(String::as_str).collect();
        lines.push(format!(
            "This turn ran {}: only the workspace's files are restored; effects outside them (databases, installed packages, network calls, files elsewhere) are not undone.",
            tools.join(", ")
        ));
    }
    lines.join("\n")
}

fn about(turn: Option<&TurnFiles>) -> String {
    match turn.and_then(|t| t.prompt.as_deref()) {
        Some(prompt) => format!(" (\"{}\")", excerpt(prompt, 60)),
        None => String::new(),
    }
}

/// The first `max` characters of `text` on one line.
pub fn excerpt(text: &str, max: usize) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}
