//! `dsh-process`: every child process dsh starts.
//!
//! Owns: the environment a child inherits (the one filter of `dsh-secrets`, applied to
//! `vars_os` so a variable that is not UTF-8 is dropped, never a panic), spawning in a process
//! group of its own (`bash -c` with stdin at EOF, under the sandbox runner or the process
//! guard), group-wide kills and the reap ladder, the client side of the process guard
//! ([`guard`]), bubblewrap confinement per [`SandboxMode`] ([`sandbox`]: the runner, the
//! policy, denial markers; [`placeholders`]: the empty protected folders a launch makes and
//! removes), and bounded capture of a child's pipes with full-stream spill
//! files ([`capture`]).
//! Does not own: what a tool does with a child's output (the `bash` tool, `dsh-tool-shell`),
//! background jobs (`dsh-jobs`).
//! Must not depend on: a tool crate, the host, a front-end.

pub mod capture;
mod command;
pub mod error;
pub mod guard;
pub mod piped;
pub mod placeholders;
pub mod process;
pub mod sandbox;

pub use capture::Capture;
pub use capture::CaptureConfig;
pub use capture::OutputTap;
pub use command::ChildEnv;
pub use command::command;
pub use command::std_command;
pub use error::ShellError;
pub use process::kill_all;
pub use process::kill_group;
pub use sandbox::ApprovalPolicy;
pub use sandbox::SandboxConfig;
pub use sandbox::SandboxMode;
pub use sandbox::SandboxPolicy;
pub use sandbox::SandboxRunner;
