//! The events this crate logs and their fold: which checkpoints a session has, what each turn
//! changed, what is undone, and a restore that was started but never finished.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use dsh_session::Event;
use dsh_session::LogFold;
use dsh_session::data::EventData;
use serde::Deserialize;
use serde::Serialize;

/// Event kinds this crate appends.
pub mod kind {
    pub const CREATED: &str = "checkpoint/created";
    pub const RESTORE_STARTED: &str = "checkpoint/restore-started";
    pub const RESTORED: &str = "checkpoint/restored";
}

/// `checkpoint/created`: the workspace's files as they were before a step (`step`) or at the
/// end of a turn (`step` absent). Logged when the tree changed, and always at a turn's first
/// step and its end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointCreated {
    /// `<turn>.<step>` or `<turn>.end`.
    pub id: String,
    /// The git tree id in the workspace's store.
    pub tree: String,
    pub turn: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// Epoch milliseconds.
    pub time: u64,
    /// The prompt the turn's first step answers (first 200 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
}

impl EventData for CheckpointCreated {
    const KIND: &'static str = kind::CREATED;
}

/// What a restore did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Undo,
    Redo,
    Rewind,
    /// `dsh sessions restore` (not logged in the session).
    Restore,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Undo => "undo",
            Self::Redo => "redo",
            Self::Rewind => "rewind",
            Self::Restore => "restore",
        }
    }
}

/// How one file changed back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    pub path: String,
    /// `restored` (content changed back), `recreated` (it had been deleted), `deleted` (it had
    /// been created).
    pub how: String,
}

/// A file the person changed after the agent: left as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    pub path: String,
    /// Where the version the restore would have written was put, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy: Option<String>,
}

/// One restore: what it changes (`write` from `tree`, `delete`), logged as
/// `checkpoint/restore-started` before any file is touched and `checkpoint/restored` after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestorePlan {
    pub action: Action,
    /// The turn undone or redone; for a rewind, the first turn rewound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u64>,
    /// The checkpoint restored to, when the target is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    pub tree: String,
    pub write: Vec<String>,
    pub delete: Vec<String>,
    pub changed: Vec<FileChange>,
    pub conflicts: Vec<Conflict>,
    /// Finished after a crash, on the next load.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recovered: bool,
}

/// `checkpoint/restore-started`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RestoreStarted(pub RestorePlan);

impl EventData for RestoreStarted {
    const KIND: &'static str = kind::RESTORE_STARTED;
}

/// `checkpoint/restored`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Restored(pub RestorePlan);

impl EventData for Restored {
    const KIND: &'static str = kind::RESTORED;
}

/// What one turn did to the files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnFiles {
    /// The tree before its first step.
    pub before: Option<String>,
    /// The latest tree of the turn (its end, once it ended).
    pub after: Option<String>,
    pub ended: bool,
    pub prompt: Option<String>,
    /// Tools it ran whose effects may reach outside the workspace.
    pub outside: BTreeSet<String>,
    pub undone: bool,
}

impl TurnFiles {
    /// Whether it changed any file (as far as its checkpoints tell).
    pub fn changed(&self) -> bool {
        self.before.is_some() && self.after.is_some() && self.before != self.after
    }
}

/// The fold.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    next_seq: u64,
    pub checkpoints: Vec<CheckpointCreated>,
    pub turns: BTreeMap<u64, TurnFiles>,
    /// A restore logged as started and not as finished (a crash in between).
    pub pending: Option<RestorePlan>,
    /// The tree the workspace should hold by the log: the latest checkpoint or restore target.
    pub expected: Option<String>,
}

/// Tools whose effects may reach beyond the workspace's files.
pub fn reaches_outside(tool: &str) -> bool {
    matches!(
        tool,
        "bash"
            | "run_code"
            | "workflow"
            | "ralph"
            | "subagent"
            | "subagent_fork"
            | "send_message"
            | "job_kill"
    ) || tool.starts_with("terminal_")
        || tool.starts_with("mcp__")
}

impl LogFold for Timeline {
    fn next_seq(&mut self) -> &mut u64 {
        &mut self.next_seq
    }

    fn apply(&mut self, event: &Event) {
        match event.kind.as_str() {
            kind::CREATED => {
                let Some(Ok(created)) = event.decode::<CheckpointCreated>() else {
                    return;
                };
                let turn = self.turns.entry(created.turn).or_default();
                if turn.before.is_none() {
                    turn.before = Some(created.tree.clone());
                    turn.prompt.clone_from(&created.prompt);
                }
                turn.after = Some(created.tree.clone());
                if created.step.is_none() {
                    turn.ended = true;
                }
                self.expected = Some(created.tree.clone());
                self.checkpoints.push(created);
            }
            dsh_session::kind::TOOL_CALL => {
                let name = event.data.value().get("name").and_then(|n| n.as_str());
                if let (Some(turn), Some(name)) = (event.turn(), name)
                    && reaches_outside(name)
                {
                    self.turns
                        .entry(turn)
                        .or_default()
                        .outside
                        .insert(name.to_owned());
                }
            }
            kind::RESTORE_STARTED => {
                if let Some(Ok(RestoreStarted(plan))) = event.decode::<RestoreStarted>() {
                    self.pending = Some(plan);
                }
            }
            kind::RESTORED => {
                let Some(Ok(Restored(plan))) = event.decode::<Restored>() else {
                    return;
                };
                self.pending = None;
                self.expected = Some(plan.tree.clone());
                match (plan.action, plan.turn) {
                    (Action::Undo, Some(t)) => {
                        if let Some(turn) = self.turns.get_mut(&t) {
                            turn.undone = true;
                        }
                    }
                    (Action::Redo, Some(t)) => {
                        if let Some(turn) = self.turns.get_mut(&t) {
                            turn.undone = false;
                        }
                    }
                    (Action::Rewind, Some(t)) => {
                        for (_, turn) in self.turns.range_mut(t..) {
                            turn.undone = true;
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
}

impl Timeline {
    /// The turn `/undo` takes back: the newest one not undone that changed files.
    pub fn undo_target(&self) -> Option<u64> {
        self.turns
            .iter()
            .rev()
            .find(|(_, t)| !t.undone && t.changed())
            .map(|(n, _)| *n)
    }

    /// The turn `/redo` re-applies: the oldest undone one with no later turn that changed
    /// files and stands.
    pub fn redo_target(&self) -> Option<u64> {
        let mut candidate = None;
        for (n, turn) in self.turns.iter().rev() {
            if turn.undone && turn.changed() {
                candidate = Some(*n);
            } else if turn.changed() {
                break;
            }
        }
        candidate
    }

    /// The turns that began with a prompt, oldest first: (turn, prompt, checkpoint before it).
    pub fn prompts(&self) -> Vec<(u64, Option<String>, Option<String>)> {
        self.turns
            .iter()
            .filter(|(_, t)| t.before.is_some())
            .map(|(n, t)| (*n, t.prompt.clone(), t.before.clone()))
            .collect()
    }
}
