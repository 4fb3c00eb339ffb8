//! `dsh-subagent-remote`: out-of-process subagent providers (subagent-spec §3).
//!
//! Owns: the `acp` provider (any ACP agent over stdio, through the official client), the
//! `codex` provider (Codex `app-server --stdio`), the `claude-code` provider (the `claude`
//! CLI's stream-json mode), their configs and load-time checks, and the product failure diagnostics. Their children
//! are started through `dsh-process` (`piped`: the one environment filter, own process group,
//! EOF → SIGTERM → SIGKILL ladder), re-exported here as [`process`].
//! Does not own: the registry and the tools (`dsh-subagent`).
//! Must not depend on: the host, front-ends.

pub mod acp;
pub mod claude;
pub mod codex;
mod common;
pub mod plugin;
pub use dsh_process::piped as process;

pub use acp::AcpConfig;
pub use acp::AcpProvider;
pub use acp::PermissionAnswer;
pub use common::ProductFailure;
pub use common::text_task;
pub use plugin::RemoteSettings;
pub use plugin::RemoteSubagentsPlugin;
