//! The background jobs runtime (§3): ids `<kind>-N`, owner fencing, a per-owner admission
//! limit, consuming reads, first-wins settlement, completion notices and owner cleanup.
//!
//! Producers (bash, later subagents) hand over a [`JobRun`]; the runtime never knows what a
//! job does, only how to cancel it, read it, and await its outcome.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::time::Duration;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::error::ShellError;
use crate::notice::notice_text;

/// The agent (session) that owns a job.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OwnerId(pub String);

impl OwnerId {
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }
}

/// Lifecycle of a job. `completed`, `killed` and `failed` are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    Running,
    Stopping,
    Completed,
    Killed,
    Failed,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Stopping => "stopping",
            Self::Completed => "completed",
            Self::Killed => "killed",
            Self::Failed => "failed",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Killed | Self::Failed)
    }
}

/// What tools and UIs may see of a job: never the owner or the reported bit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublicJob {
    pub id: String,
    pub kind: String,
    pub label: String,
    pub status: JobStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub started_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<u64>,
}

impl PublicJob {
    /// `[status: <status>]` or `[status: <status>, <detail>]`.
    pub fn status_line(&self) -> String {
        match &self.detail {
            Some(detail) => format!("[status: {}, {detail}]", self.status.as_str()),
            None => format!("[status: {}]", self.status.as_str()),
        }
    }
}

/// How a producer's work ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutcome {
    pub status: JobStatus,
    pub detail: Option<String>,
    pub output: Option<String>,
}

/// The live side of a job, implemented by each producer.
pub trait JobProducer: Send + Sync + 'static {
    /// Requests the work to stop; settlement follows through `done`.
    fn cancel(&self, reason: Option<&str>) -> Result<(), JobError>;
    /// A consuming read of new output (stream jobs). `None` marks a final-output job.
    fn read_output(&self) -> Option<String> {
        None
    }
}

/// What `run()` hands back: the producer and its completion.
pub struct JobRun {
    pub producer: Arc<dyn JobProducer>,
    /// An `Err` settles the job as `failed` with its text.
    pub done: BoxFuture<'static, Result<JobOutcome, JobError>>,
}

/// A producer's failure: its text becomes the job's `failed` detail (or the kill's error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// The producer could not stop its work.
    #[error("{0}")]
    CancelRefused(String),
    /// The work failed before it produced an outcome.
    #[error("{0}")]
    Failed(String),
}

/// What to start.
#[derive(Debug, Clone)]
pub struct JobSpec {
    pub kind: String,
    pub label: String,
    pub owner: Option<OwnerId>,
    pub output_limit_bytes: Option<u64>,
}

/// Runtime settings.
#[derive(Debug, Clone)]
pub struct JobsConfig {
    /// `maxConcurrentJobsPerOwner`: running plus stopping jobs per owner (unowned jobs share
    /// one bucket).
    pub max_concurrent_jobs_per_owner: usize,
}

impl Default for JobsConfig {
    fn default() -> Self {
        Self {
            max_concurrent_jobs_per_owner: 10,
        }
    }
}

/// Result of `kill`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum KillOutcome {
    CancellationRequested,
    AlreadyFinished,
}

/// A consuming read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRead {
    pub text: String,
    pub job: PublicJob,
    pub output_limit_bytes: Option<u64>,
}

/// A completion notice for the owner: the text is what the model sees as a user message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobNotice {
    pub owner: OwnerId,
    pub job: PublicJob,
    pub text: String,
}

struct Record {
    public: PublicJob,
    owner: Option<OwnerId>,
    output_limit_bytes: Option<u64>,
    reported: bool,
    waiters: usize,
    producer: Arc<dyn JobProducer>,
    output: Option<String>,
    settled: watch::Sender<bool>,
}

#[derive(Default)]
struct State {
    /// Insertion order is listing order.
    jobs: Vec<Record>,
    counters: HashMap<String, u64>,
    listeners: HashMap<OwnerId, Vec<mpsc::UnboundedSender<JobNotice>>>,
}

impl State {
    fn find(&self, id: &str) -> Option<&Record> {
        self.jobs.iter().find(|r| r.public.id == id)
    }

    fn find_mut(&mut self, id: &str) -> Option<&mut Record> {
        self.jobs.iter_mut().find(|r| r.public.id == id)
    }

    /// The access fence: unknown ids and other owners' jobs look the same to every tool.
    fn check(&self, caller: Option<&OwnerId>, id: &str) -> Result<(), ShellError> {
        let record = self
            .find(id)
            .ok_or_else(|| ShellError::plain(format!("unknown job {id}")))?;
        match &record.owner {
            Some(owner) if Some(owner) != caller => Err(ShellError::plain(format!(
                "job {id} belongs to another session"
            ))),
            _ => Ok(()),
        }
    }
}

/// The jobs service shared by every session of a process.
pub struct JobsRuntime {
    config: JobsConfig,
    state: Mutex<State>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl JobsRuntime {
    pub fn new(config: JobsConfig) -> Arc<Self> {
        Arc::new(Self {
            config,
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        dsh_sync::lock(&self.state)
    }

    /// Registers a job after the preflight checks pass; `run` is called exactly once, only then.
    pub fn start(
        self: &Arc<Self>,
        spec: JobSpec,
        run: impl FnOnce() -> Result<JobRun, ShellError>,
    ) -> Result<String, ShellError> {
        if spec.kind.is_empty() {
            return Err(ShellError::plain(
                "invalid job kind: expected a non-empty string",
            ));
        }
        if spec.label.is_empty() {
            return Err(ShellError::plain(
                "invalid job label: expected a non-empty string",
            ));
        }
        if spec.output_limit_bytes == Some(0) {
            return Err(ShellError::plain(
                "invalid outputLimitBytes: expected a positive safe integer",
            ));
        }
        {
            let state = self.lock();
            let live = state
                .jobs
                .iter()
                .filter(|r| r.owner == spec.owner && !r.public.status.is_terminal())
                .count();
            let limit = self.config.max_concurrent_jobs_per_owner;
            if live >= limit {
                return Err(ShellError::plain(format!(
                    "background job limit reached for this owner (limit: {limit}); use job_kill to stop an unneeded job, wait for it to finish, then retry"
                )));
            }
        }
        let JobRun { producer, done } = run()?;
        let id = {
            let mut state = self.lock();
            let counter = state.counters.entry(spec.kind.clone()).or_insert(0);
            *counter += 1;
            let id = format!("{}-{counter}", spec.kind);
            let (settled, _) = watch::channel(false);
            state.jobs.push(Record {
                public: PublicJob {
                    id: id.clone(),
                    kind: spec.kind,
                    label: spec.label,
                    status: JobStatus::Running,
                    detail: None,
                    started_at: now_ms(),
                    finished_at: None,
                },
                owner: spec.owner,
                output_limit_bytes: spec.output_limit_bytes,
                reported: false,
                waiters: 0,
                producer,
                output: None,
                settled,
            });
            id
        };
        let runtime = Arc::clone(self);
        let settle_id = id.clone();
        tokio::spawn(async move {
            let outcome = done.await.unwrap_or_else(|err| JobOutcome {
                status: JobStatus::Failed,
                detail: Some(err.to_string()),
                output: None,
            });
            runtime.settle(&settle_id, outcome);
        });
        Ok(id)
    }

    /// First-wins settlement, then the completion notice for an unreported owned job.
    fn settle(&self, id: &str, outcome: JobOutcome) {
        let notice = {
            let mut state = self.lock();
            let Some(record) = state.find_mut(id) else {
                return;
            };
            if record.public.status.is_terminal() {
                return;
            }
            let status = if outcome.status.is_terminal() {
                outcome.status
            } else {
                JobStatus::Failed
            };
            record.public.status = status;
            record.public.detail = outcome.detail;
            record.public.finished_at = Some(now_ms());
            record.output = outcome.output;
            if record.waiters > 0 {
                record.reported = true;
            }
            record.settled.send_replace(true);
            match (&record.owner, record.reported) {
                (Some(owner), false) => {
                    let job = record.public.clone();
                    let text = notice_text(&job, record.output_limit_bytes);
                    Some(JobNotice {
                        owner: owner.clone(),
                        job,
                        text,
                    })
                }
                _ => None,
            }
        };
        if let Some(notice) = notice {
            let mut state = self.lock();
            if let Some(senders) = state.listeners.get_mut(&notice.owner) {
                senders.retain(|tx| tx.send(notice.clone()).is_ok());
            }
        }
    }

    /// Completion notices for `owner`'s jobs. The agent loop decides between waking an idle
    /// owner and injecting into the next step (see [`WakeBudget`]).
    pub fn subscribe(&self, owner: &OwnerId) -> mpsc::UnboundedReceiver<JobNotice> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock()
            .listeners
            .entry(owner.clone())
            .or_default()
            .push(tx);
        rx
    }

    pub fn get(&self, caller: Option<&OwnerId>, id: &str) -> Result<PublicJob, ShellError> {
        let state = self.lock();
        state.check(caller, id)?;
        state
            .find(id)
            .map(|r| r.public.clone())
            .ok_or_else(|| ShellError::plain(format!("unknown job {id}")))
    }

    /// A consuming read: the producer's delta for stream jobs, else `""` until terminal and
    /// then the outcome output. A read while terminal marks the job reported.
    pub fn read(&self, caller: Option<&OwnerId>, id: &str) -> Result<JobRead, ShellError> {
        let producer = {
            let state = self.lock();
            state.check(caller, id)?;
            state.find(id).map(|r| Arc::clone(&r.producer))
        };
        // Read outside the lock: the producer has its own synchronisation.
        let delta = producer.and_then(|p| p.read_output());
        let mut state = self.lock();
        let record = state
            .find_mut(id)
            .ok_or_else(|| ShellError::plain(format!("unknown job {id}")))?;
        let terminal = record.public.status.is_terminal();
        let text = match delta {
            Some(text) => text,
            None if terminal => record.output.clone().unwrap_or_default(),
            None => String::new(),
        };
        if terminal {
            record.reported = true;
        }
        Ok(JobRead {
            text,
            job: record.public.clone(),
            output_limit_bytes: record.output_limit_bytes,
        })
    }

    /// Requests cancellation. A terminal job is only marked reported.
    pub fn kill(
        &self,
        caller: Option<&OwnerId>,
        id: &str,
        reason: Option<&str>,
    ) -> Result<(KillOutcome, PublicJob), ShellError> {
        let producer = {
            let mut state = self.lock();
            state.check(caller, id)?;
            let record = state
                .find_mut(id)
                .ok_or_else(|| ShellError::plain(format!("unknown job {id}")))?;
            if record.public.status.is_terminal() {
                record.reported = true;
                return Ok((KillOutcome::AlreadyFinished, record.public.clone()));
            }
            Arc::clone(&record.producer)
        };
        producer
            .cancel(reason)
            .map_err(|e| ShellError::plain(e.to_string()))?;
        let mut state = self.lock();
        let record = state
            .find_mut(id)
            .ok_or_else(|| ShellError::plain(format!("unknown job {id}")))?;
        if !record.public.status.is_terminal() {
            record.public.status = JobStatus::Stopping;
        }
        record.reported = true;
        Ok((KillOutcome::CancellationRequested, record.public.clone()))
    }

    /// Waits up to `timeout` for settlement. Returns the terminal snapshot (marked reported) or
    /// the live one on timeout; `cancel` rejects only this wait with `wait aborted`.
    pub async fn wait(
        &self,
        caller: Option<&OwnerId>,
        id: &str,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<PublicJob, ShellError> {
        let mut settled = {
            let mut state = self.lock();
            state.check(caller, id)?;
            let record = state
                .find_mut(id)
                .ok_or_else(|| ShellError::plain(format!("unknown job {id}")))?;
            record.waiters += 1;
            record.settled.subscribe()
        };
        let finished = tokio::select! {
            biased;
            res = tokio::time::timeout(timeout, settled.wait_for(|done| *done)) => matches!(res, Ok(Ok(_))),
            () = cancel.cancelled() => false,
        };
        let mut state = self.lock();
        let record = state
            .find_mut(id)
            .ok_or_else(|| ShellError::plain(format!("unknown job {id}")))?;
        record.waiters = record.waiters.saturating_sub(1);
        let terminal = record.public.status.is_terminal();
        if terminal {
            record.reported = true;
            return Ok(record.public.clone());
        }
        if cancel.is_cancelled() && !finished {
            return Err(ShellError::plain("wait aborted"));
        }
        Ok(record.public.clone())
    }

    /// Jobs visible to `caller`: its own and unowned ones, in start order.
    pub fn list(&self, caller: Option<&OwnerId>) -> Vec<PublicJob> {
        self.lock()
            .jobs
            .iter()
            .filter(|r| r.owner.is_none() || r.owner.as_ref() == caller)
            .map(|r| r.public.clone())
            .collect()
    }

    /// Owner cleanup: cancels the owner's live jobs (no notice), awaits their settlement and
    /// removes every record the owner had.
    pub async fn dispose_owner(&self, owner: &OwnerId) {
        let waits = self.cancel_where(|r| r.owner.as_ref() == Some(owner));
        for mut rx in waits {
            let _ = rx.wait_for(|done| *done).await;
        }
        let mut state = self.lock();
        state.jobs.retain(|r| r.owner.as_ref() != Some(owner));
        state.listeners.remove(owner);
    }

    /// Service disposal: cancels every job and awaits them.
    pub async fn dispose(&self) {
        for mut rx in self.cancel_where(|_| true) {
            let _ = rx.wait_for(|done| *done).await;
        }
    }

    fn cancel_where(&self, matches: impl Fn(&Record) -> bool) -> Vec<watch::Receiver<bool>> {
        let mut to_cancel = Vec::new();
        let mut waits = Vec::new();
        {
            let mut state = self.lock();
            for record in state.jobs.iter_mut().filter(|r| matches(r)) {
                record.reported = true;
                if !record.public.status.is_terminal() {
                    record.public.status = JobStatus::Stopping;
                    to_cancel.push((record.public.id.clone(), Arc::clone(&record.producer)));
                    waits.push(record.settled.subscribe());
                }
            }
        }
        let mut kept = Vec::new();
        for ((id, producer), rx) in to_cancel.into_iter().zip(waits) {
            match producer.cancel(Some("owner disposed")) {
                Ok(()) => kept.push(rx),
                Err(err) => {
                    tracing::warn!(job = %id, %err, "job cancel failed during disposal; force-failing it");
                    self.settle(
                        &id,
                        JobOutcome {
                            status: JobStatus::Failed,
                            detail: Some(err.to_string()),
                            output: None,
                        },
                    );
                }
            }
        }
        kept
    }
}

#[cfg(test)]
#[path = "jobs_tests.rs"]
mod tests;
