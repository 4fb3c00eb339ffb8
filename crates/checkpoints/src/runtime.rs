//! The service: stores per workspace, the fold per session, checkpoints at pre-step and at the
//! end of a turn, and undo / redo / rewind / restore as logged restores.

use std::collections::HashMap;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::PreStepInput;
use dsh_agent::TurnStopping;
use dsh_kernel::Scope;
use dsh_plugin::HostServices;
use dsh_session::SessionLog;
use dsh_session::SessionStore;

use crate::CheckpointError;
use crate::engine;
use crate::engine::Target;
use crate::store::Limits;
use crate::store::Store;
use crate::timeline::Action;
use crate::timeline::CheckpointCreated;
use crate::timeline::RestorePlan;
use crate::timeline::RestoreStarted;
use crate::timeline::Restored;
use crate::timeline::Timeline;

/// Keep at least this many checkpoints when pruning for the budget.
const KEEP_NEWEST: usize = 8;
/// Loose objects above which a turn's end packs them.
const LOOSE_LIMIT: u64 = 2_000;

/// The checkpoint service (one per host).
pub struct Checkpoints {
    home: PathBuf,
    limits: Limits,
    budget: u64,
    // String: a refusal is remembered as its text (CheckpointError holds io::Error, not Clone).
    stores: Mutex<HashMap<PathBuf, Result<Store, String>>>,
    folds: Mutex<HashMap<String, Timeline>>,
}

impl std::fmt::Debug for Checkpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoints")
            .field("home", &self.home)
            .field("limits", &self.limits)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

/// Whether checkpoints may run in `cwd`: a directory the user owns, not `/`.
fn admissible(cwd: &Path) -> Result<(), CheckpointError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(cwd).map_err(|source| CheckpointError::Io {
        what: format!("cannot read {}", cwd.display()),
        source,
    })?;
    if cwd == Path::new("/") {
        return Err(CheckpointError::Refused(
            "the workspace is the file system's root".into(),
        ));
    }
    if meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(CheckpointError::Refused(format!(
            "{} belongs to another user",
            cwd.display()
        )));
    }
    Ok(())
}

/// The first user text of a step's messages.
fn prompt_of(messages: &[dsh_protocol::Message]) -> Option<String> {
    messages
        .iter()
        .filter(|m| matches!(m.role, dsh_protocol::Role::User))
        .map(|m| dsh_protocol::text_of(&m.content))
        .find(|t| !t.trim().is_empty())
        .map(|t| t.chars().take(200).collect())
}

/// Ref names sort by time: the budget prunes the oldest first.
fn ref_name(session: &str, id: &str) -> String {
    let clean: String = format!("{session}-{id}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{:015}-{clean}", crate::now_ms())
}

impl Checkpoints {
    pub fn new(home: PathBuf, limits: Limits, budget: u64) -> Self {
        Self {
            home,
            limits,
            budget,
            stores: Mutex::new(HashMap::new()),
            folds: Mutex::new(HashMap::new()),
        }
    }

    /// The store of `cwd` (opened once; a refusal is remembered and reported each time).
    pub fn store(&self, cwd: &Path) -> Result<Store, CheckpointError> {
        let mut stores = dsh_sync::lock(&self.stores);
        let entry = stores.entry(cwd.to_path_buf()).or_insert_with(|| {
            admissible(cwd)
                .and_then(|()| Store::open(&self.home, cwd, self.limits.clone()))
                .map_err(|e| e.to_string())
        });
        entry.clone().map_err(CheckpointError::Refused)
    }

    /// The session's fold, brought up to date.
    pub fn timeline(&self, log: &SessionLog) -> Result<Timeline, CheckpointError> {
        let mut folds = dsh_sync::lock(&self.folds);
        let fold = folds.entry(log.id().to_owned()).or_default();
        log.catch_up(fold)?;
        Ok(fold.clone())
    }

    /// Records the workspace before step `step` of `turn` (`None`: at the turn's end). Logged
    /// when the files changed since the last checkpoint, at a turn's first step and at its end.
    pub fn checkpoint(
        &self,
        log: &SessionLog,
        cwd: &Path,
        turn: u64,
        step: Option<u64>,
        prompt: Option<String>,
    ) -> Result<Option<CheckpointCreated>, CheckpointError> {
        let store = self.store(cwd)?;
        self.finish_pending(&store, log)?;
        let tree = store.snapshot()?;
        let timeline = self.timeline(log)?;
        let first = timeline.turns.get(&turn).is_none_or(|t| t.before.is_none());
        let last = timeline.checkpoints.last().map(|c| c.tree.as_str());
        if !first && step.is_some() && last == Some(tree.as_str()) {
            return Ok(None);
        }
        let id = match step {
            Some(step) => format!("{turn}.{step}"),
            None => format!("{turn}.end"),
        };
        store.keep(&tree, &ref_name(log.id(), &id))?;
        let created = CheckpointCreated {
            id,
            tree,
            turn,
            step,
            time: crate::now_ms(),
            prompt: if first { prompt } else { None },
        };
        log.append_data(&created, None)?;
        if step.is_none() {
            self.keep_within_budget(&store);
        }
        Ok(Some(created))
    }

    fn keep_within_budget(&self, store: &Store) {
        match store.pack_if_loose(LOOSE_LIMIT) {
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "checkpoints: cannot pack the store"),
        }
        match store.prune(self.budget, KEEP_NEWEST) {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                dropped = n,
                "checkpoints: oldest pruned for the disk budget"
            ),
            Err(error) => tracing::warn!(%error, "checkpoints: cannot prune the store"),
        }
    }

    /// Finishes a restore a crash interrupted (logged started, never finished).
    pub fn finish_pending(&self, store: &Store, log: &SessionLog) -> Result<(), CheckpointError> {
        let timeline = self.timeline(log)?;
        let Some(mut plan) = timeline.pending else {
            return Ok(());
        };
        engine::execute(store, &plan)?;
        plan.recovered = true;
        log.append_data(&Restored(plan), None)?;
        Ok(())
    }

    /// Logs the plan, makes it durable, carries it out and logs the result.
    fn run(
        &self,
        store: &Store,
        log: &SessionLog,
        plan: RestorePlan,
    ) -> Result<RestorePlan, CheckpointError> {
        log.append_data(&RestoreStarted(plan.clone()), None)?;
        block_on_sync(log)?;
        engine::execute(store, &plan)?;
        log.append_data(&Restored(plan.clone()), None)?;
        block_on_sync(log)?;
        Ok(plan)
    }

    fn missing(error: CheckpointError, what: &str) -> CheckpointError {
        match error {
            CheckpointError::Git { .. } => CheckpointError::Missing(format!(
                "the checkpoint {what} is no longer in the store (pruned for the disk budget?): {error}"
            )),
            other => other,
        }
    }

    /// `/undo`: the newest turn that changed files and is not undone goes back to before it.
    pub fn undo(&self, log: &SessionLog, cwd: &Path) -> Result<String, CheckpointError> {
        let store = self.store(cwd)?;
        self.finish_pending(&store, log)?;
        let timeline = self.timeline(log)?;
        let Some(n) = timeline.undo_target() else {
            return Ok("Nothing to undo: no turn of this session changed a file.".into());
        };
        let turn = &timeline.turns[&n];
        let current = store.snapshot()?;
        let last_turn = timeline.turns.keys().next_back().copied();
        // A turn that ended without its end checkpoint (cancelled, failed) left its last
        // step's changes unrecorded: the files as they are now are its end.
        let after = if !turn.ended && last_turn == Some(n) {
            current.clone()
        } else {
            turn.after.clone().unwrap_or_else(|| current.clone())
        };
        let before = turn.before.clone().unwrap_or_default();
        let target = Target {
            action: Action::Undo,
            turn: Some(n),
            checkpoint: first_checkpoint_of(&timeline, n),
            tree: before,
            from: Some(after),
        };
        let plan = engine::plan(&store, &target, &current)
            .map_err(|e| Self::missing(e, &format!("before turn {n}")))?;
        let plan = self.run(&store, log, plan)?;
        Ok(engine::report(&plan, Some(turn)))
    }

    /// `/redo`: the oldest undone turn with nothing standing after it comes back.
    pub fn redo(&self, log: &SessionLog, cwd: &Path) -> Result<String, CheckpointError> {
        let store = self.store(cwd)?;
        self.finish_pending(&store, log)?;
        let timeline = self.timeline(log)?;
        let Some(n) = timeline.redo_target() else {
            return Ok("Nothing to redo.".into());
        };
        let turn = &timeline.turns[&n];
        let (Some(before), Some(after)) = (turn.before.clone(), turn.after.clone()) else {
            return Ok("Nothing to redo.".into());
        };
        let current = store.snapshot()?;
        let target = Target {
            action: Action::Redo,
            turn: Some(n),
            checkpoint: last_checkpoint_of(&timeline, n),
            tree: after,
            from: Some(before),
        };
        let plan = engine::plan(&store, &target, &current)
            .map_err(|e| Self::missing(e, &format!("after turn {n}")))?;
        let plan = self.run(&store, log, plan)?;
        Ok(engine::report(&plan, Some(turn)))
    }

    /// `/rewind N`: the files go back to before turn `n`'s first step.
    pub fn rewind(&self, log: &SessionLog, cwd: &Path, n: u64) -> Result<String, CheckpointError> {
        let store = self.store(cwd)?;
        self.finish_pending(&store, log)?;
        let timeline = self.timeline(log)?;
        let Some(turn) = timeline.turns.get(&n) else {
            return Err(CheckpointError::Missing(format!(
                "turn {n} has no checkpoint"
            )));
        };
        let Some(before) = turn.before.clone() else {
            return Err(CheckpointError::Missing(format!(
                "turn {n} has no checkpoint"
            )));
        };
        let current = store.snapshot()?;
        let target = Target {
            action: Action::Rewind,
            turn: Some(n),
            checkpoint: first_checkpoint_of(&timeline, n),
            tree: before,
            from: timeline.expected.clone(),
        };
        let plan = engine::plan(&store, &target, &current)
            .map_err(|e| Self::missing(e, &format!("before turn {n}")))?;
        let plan = self.run(&store, log, plan)?;
        let mut outside = crate::timeline::TurnFiles {
            prompt: turn.prompt.clone(),
            ..Default::default()
        };
        for (_, later) in timeline.turns.range(n..) {
            outside.outside.extend(later.outside.iter().cloned());
        }
        Ok(engine::report(&plan, Some(&outside)))
    }

    /// `dsh sessions restore`: the workspace becomes exactly the checkpoint `id` (nothing
    /// is logged in the session; the plan is returned for the report).
    pub fn restore_to(
        &self,
        timeline: &Timeline,
        cwd: &Path,
        id: &str,
    ) -> Result<RestorePlan, CheckpointError> {
        let Some(checkpoint) = timeline.checkpoints.iter().find(|c| c.id == id) else {
            let known: Vec<&str> = timeline.checkpoints.iter().map(|c| c.id.as_str()).collect();
            return Err(CheckpointError::Missing(format!(
                "no checkpoint {id} in this session (it has: {})",
                known.join(", ")
            )));
        };
        let store = self.store(cwd)?;
        let current = store.snapshot()?;
        let target = Target {
            action: Action::Restore,
            turn: None,
            checkpoint: Some(id.to_owned()),
            tree: checkpoint.tree.clone(),
            from: None,
        };
        let plan = engine::plan(&store, &target, &current).map_err(|e| Self::missing(e, id))?;
        engine::execute(&store, &plan)?;
        Ok(plan)
    }
}

fn first_checkpoint_of(timeline: &Timeline, turn: u64) -> Option<String> {
    timeline
        .checkpoints
        .iter()
        .find(|c| c.turn == turn)
        .map(|c| c.id.clone())
}

fn last_checkpoint_of(timeline: &Timeline, turn: u64) -> Option<String> {
    timeline
        .checkpoints
        .iter()
        .rev()
        .find(|c| c.turn == turn)
        .map(|c| c.id.clone())
}

/// Waits for the log's write and fsync barrier from blocking code.
fn block_on_sync(log: &SessionLog) -> Result<(), CheckpointError> {
    let sync = log.sync();
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle.block_on(sync)?,
        Err(_) => tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|source| CheckpointError::Io {
                what: "cannot start a runtime to wait for the log".into(),
                source,
            })?
            .block_on(sync)?,
    }
    Ok(())
}

/// A stored session's checkpoints, oldest first.
pub fn list(store: &dyn SessionStore, id: &str) -> Result<Timeline, CheckpointError> {
    let loaded = store.load(id)?;
    let mut timeline = Timeline::default();
    for event in &loaded.events {
        dsh_session::LogFold::apply(&mut timeline, event);
    }
    Ok(timeline)
}

/// The hooks: a checkpoint before every step of a root session, and at each turn's end.
pub(crate) fn install(checkpoints: &Arc<Checkpoints>, host: &Arc<HostServices>, owner: &Scope) {
    {
        let checkpoints = checkpoints.clone();
        let sessions = host.sessions.clone();
        host.hooks
            .pre_step
            .register(owner, move |input: PreStepInput, next| {
                let checkpoints = checkpoints.clone();
                let sessions = sessions.clone();
                Box::pin(async move {
                    if !input.signal.is_cancelled()
                        && let Some((_, context)) = sessions.get(input.agent.id())
                        && context.delegation_depth() == 0
                    {
                        let prompt = (input.step <= 1)
                            .then(|| prompt_of(&input.messages))
                            .flatten();
                        let log = input.agent.log().clone();
                        let cwd = context.cwd().to_path_buf();
                        let (turn, step) = (input.turn, input.step);
                        let outcome = tokio::task::spawn_blocking(move || {
                            checkpoints.checkpoint(&log, &cwd, turn, Some(step), prompt)
                        })
                        .await;
                        report_failure(outcome);
                    }
                    next.run(input).await
                })
            });
    }
    {
        let checkpoints = checkpoints.clone();
        let sessions = host.sessions.clone();
        host.hooks
            .turn_stopping
            .register(owner, move |event: Arc<TurnStopping>| {
                let checkpoints = checkpoints.clone();
                let sessions = sessions.clone();
                Box::pin(async move {
                    if let Some((_, context)) = sessions.get(event.agent.id())
                        && context.delegation_depth() == 0
                    {
                        let log = event.agent.log().clone();
                        let cwd = context.cwd().to_path_buf();
                        let turn = event.turn;
                        let outcome = tokio::task::spawn_blocking(move || {
                            checkpoints.checkpoint(&log, &cwd, turn, None, None)
                        })
                        .await;
                        report_failure(outcome);
                    }
                    Ok(())
                })
            });
    }
}

/// A checkpoint that fails never stops the agent: it is reported in the diagnostics.
fn report_failure(
    outcome: Result<Result<Option<CheckpointCreated>, CheckpointError>, tokio::task::JoinError>,
) {
    match outcome {
        Ok(Ok(_)) => {}
        Ok(Err(CheckpointError::Refused(reason))) => {
            tracing::debug!(%reason, "checkpoints are off for this workspace");
        }
        Ok(Err(error @ CheckpointError::Timeout { .. })) => {
            tracing::warn!(%error, "checkpoint skipped, the step goes on");
        }
        Ok(Err(error)) => tracing::warn!(%error, "checkpoint failed"),
        Err(error) => tracing::warn!(%error, "checkpoint task failed"),
    }
}
