//! `dsh-hooks`: the Claude Code and Codex hook bridges (upstream `hooks-claude-code`,
//! `hooks-codex`).
//!
//! Owns: reading a hook configuration file ([`HooksConfig`]), running its `PreToolUse` /
//! `PostToolUse` command hooks (`bash -c` in the session cwd, JSON payload on stdin, timeout,
//! bounded output), mapping their answers onto the tool pipeline (a `tools/pre-execute`
//! listener that denies/asks, a `tools/post-execute` listener that blocks or adds context), and
//! the `hook/invoked` / `hook/result` event shapes ([`HookEvent`]).
//! Does not own: where the events go or which cwd a session has — the composition provides a
//! [`HookSink`] as a kernel service on each agent's scope (it appends to the session log).
//! Must not depend on: `dsh-agent`, `dsh-session`, any concrete tool crate.

mod bridge;
mod config;
mod event;
mod runner;

use std::path::PathBuf;

pub use bridge::install;
pub use config::DEFAULT_TIMEOUT;
pub use config::Handler;
pub use config::HooksConfig;
pub use event::HookEvent;
pub use event::HookSink;
pub use runner::HookOutcome;
pub use runner::HookRun;
pub use runner::run_command;

/// Which upstream bridge a configuration belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    #[default]
    ClaudeCode,
    Codex,
}

impl Dialect {
    /// The `dialect` of `hook/invoked` and the prefix of handler ids.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude-code",
            Self::Codex => "codex",
        }
    }

    /// The plugin name: the `plugin` of context messages' `{kind:"plugin"}` source.
    pub fn plugin(self) -> &'static str {
        match self {
            Self::ClaudeCode => "hooks-claude-code",
            Self::Codex => "hooks-codex",
        }
    }
}

/// The tool events the bridges handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    PreToolUse,
    PostToolUse,
}

impl Point {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PreToolUse => "PreToolUse",
            Self::PostToolUse => "PostToolUse",
        }
    }

    /// The event key of a configuration file. Codex also accepts its snake_case names.
    pub fn from_event_name(dialect: Dialect, name: &str) -> Option<Self> {
        match (dialect, name) {
            (_, "PreToolUse") | (Dialect::Codex, "pre_tool_use") => Some(Self::PreToolUse),
            (_, "PostToolUse") | (Dialect::Codex, "post_tool_use") => Some(Self::PostToolUse),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HooksError {
    #[error("cannot read hook configuration {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid hook configuration {}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}
