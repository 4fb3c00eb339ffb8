//! `dsh-secrets`: what must never reach a child process, the model, or the person's terminal.
//!
//! Owns: the one child-environment filter every process dsh starts goes through (bash, MCP
//! servers, hooks, and later language servers and terminals), the process-wide registry of
//! secret values (the provider key) that the filter and the tool-output redaction use, and the
//! default list of secret paths that the file tools refuse and the sandbox hides, and how a
//! child's program is found (in its own filtered `PATH`, as an absolute path); the one
//! terminal sanitiser ([`terminal_safe`]) every front-end passes model, tool, file and log text
//! through before printing it; the credentials start-up takes out of dsh's own environment
//! ([`keep_taken`], read back through [`var`]).
//! Must not depend on: any other dsh crate but `dsh-sync` (std-only locking), an async
//! runtime, or anything that does I/O beyond reading the process environment.

mod env;
mod paths;
mod program;
mod registry;
mod taken;
mod terminal;

pub use env::filter_env;
pub use env::inheritable;
pub use env::is_secret_name;
pub use env::parent_env;
pub use paths::secret_paths;
pub use program::resolve_program;
pub use registry::REDACTED;
pub use registry::holds_secret;
pub use registry::redact;
pub use registry::register_secret;
pub use taken::credential_vars;
pub use taken::keep_taken;
pub use taken::var;
pub use terminal::is_terminal_control;
pub use terminal::terminal_safe;
