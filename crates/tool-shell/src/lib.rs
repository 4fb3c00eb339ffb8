//! `dsh-tool-shell`: the `bash` tool and the background jobs runtime with its tools
//! (`job_output`, `job_list`, `job_kill`).
//!
//! Owns: spawning `bash -c` in its own process group (stdin at EOF, group-wide kills on
//! timeout, cancel and drop), bounded stream capture with full-stream spill files, the exact
//! upstream result texts and cards, and the [`JobsRuntime`] (ids, owner fencing, admission
//! limit, completion notices, owner cleanup). Also the confining executor: bubblewrap
//! confinement per [`SandboxMode`] (see [`sandbox`]), denial markers, fail-closed runner
//! failures, and one-call escalation through the tool runtime's approval seam; and the process
//! guard of unconfined commands ([`guard`]: own session, subreaper, dies with dsh).
//! Does not own: when tools run or how results are logged (`dsh-tools`, `dsh-agent`).
//! [`JobsPlugin`] (`[plugins.jobs]`) and [`BashPlugin`] (`[plugins.bash]`) mount them through
//! the host's seams, with the job-notice policy.
//! Must not depend on: other concrete tool crates, the host, a front-end.

mod background;
pub mod bash;
mod capture;
mod client_terminal;
mod context;
mod error;
pub mod escalation;
pub mod guard;
pub mod job_tools;
pub mod jobs;
pub mod notice;
mod plugin;
mod process;
pub mod register;
pub mod sandbox;
pub mod spill;
pub mod texts;

pub use bash::BashArgs;
pub use bash::BashOutput;
pub use bash::SandboxPermissions;
pub use bash::SandboxReport;
pub use bash::StreamText;
pub use capture::Capture;
pub use capture::CaptureConfig;
pub use capture::OutputTap;
pub use context::BashConfig;
pub use context::ShellContext;
pub use error::ShellError;
pub use escalation::ApprovalRoute;
pub use job_tools::JobToolsConfig;
pub use job_tools::JobsContext;
pub use jobs::JobsConfig;
pub use jobs::JobsRuntime;
pub use jobs::OwnerId;
pub use jobs::PublicJob;
pub use notice::WakeBudget;
pub use notice::notice_message;
pub use plugin::BashPlugin;
pub use plugin::BashSettings;
pub use plugin::Completion;
pub use plugin::JobsPlugin;
pub use plugin::JobsSettings;
pub use plugin::job_lines;
pub use process::kill_all;
pub use process::kill_group;
pub use register::ShellTools;
pub use register::register_shell_tools;
pub use register::shell_tool_definitions;
pub use sandbox::ApprovalPolicy;
pub use sandbox::SandboxConfig;
pub use sandbox::SandboxMode;
pub use sandbox::SandboxPolicy;
pub use sandbox::SandboxRunner;
