//! `dsh-tool-shell`: the `bash` tool and the job tools (`job_output`, `job_list`, `job_kill`).
//!
//! Owns: the `bash` tool (arguments, timeouts, background starts, the exact upstream result
//! texts and cards, fail-closed runner failures, one-call escalation through the tool
//! runtime's approval seam, client terminals) and the `job_*` tools over the jobs runtime.
//! Does not own: spawning, confinement, capture and the process guard (`dsh-process`), the
//! jobs runtime (`dsh-jobs`), when tools run or how results are logged (`dsh-tools`,
//! `dsh-agent`).
//! [`JobsPlugin`] (`[plugins.jobs]`) and [`BashPlugin`] (`[plugins.bash]`) mount them through
//! the host's seams, with the job-notice policy.
//! Must not depend on: other concrete tool crates, the host, a front-end.

mod background;
pub mod bash;
mod client_terminal;
mod context;
pub mod escalation;
pub mod job_tools;
mod plugin;
pub mod register;
pub mod spill;
pub mod texts;

// The process library and the jobs runtime, under the paths this crate has always offered.
pub use dsh_jobs::jobs;
pub use dsh_jobs::notice;
use dsh_process::capture;
use dsh_process::error;
pub use dsh_process::guard;
use dsh_process::process;
pub use dsh_process::sandbox;

pub use bash::BashArgs;
pub use bash::BashOutput;
pub use bash::SandboxPermissions;
pub use bash::SandboxReport;
pub use bash::StreamText;
pub use capture::Capture;
pub use capture::CaptureConfig;
pub use capture::OutputTap;
pub use context::BashConfig;
pub use context::LOCK_DIR;
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
