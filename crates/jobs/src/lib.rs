//! `dsh-jobs`: the background jobs runtime.
//!
//! Owns: the [`JobsRuntime`] (ids, owner fencing, the admission limit, reads since the last
//! read, kills, completion notices, owner cleanup), the [`JobProducer`](jobs::JobProducer)
//! seam a job's work is driven through, and the exact notice texts ([`notice`]).
//! Does not own: what a job runs (the `bash` tool, terminals, subagents produce jobs) or the
//! `job_*` tools (`dsh-tool-shell`).
//! Must not depend on: a tool crate, the host, a front-end.

pub mod jobs;
pub mod notice;

// The jobs runtime reports its errors in the shell tools' error type (their exact texts).
pub(crate) use dsh_process::error;

pub use jobs::JobError;
pub use jobs::JobsConfig;
pub use jobs::JobsRuntime;
pub use jobs::OwnerId;
pub use jobs::PublicJob;
pub use notice::WakeBudget;
pub use notice::notice_message;
