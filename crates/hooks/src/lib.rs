//! `dsh-hooks`: the Claude Code and Codex hook bridges (upstream `hooks-claude-code`,
//! `hooks-codex`).
//!
//! Owns: reading a hook configuration file ([`HooksConfig`]), running its `PreToolUse` /
//! `PostToolUse` command hooks (`bash -c` in the session cwd, JSON payload on stdin, timeout,
//! bounded output), mapping their answers onto the tool pipeline (a `tools/pre-execute`
//! listener that denies/asks, a `tools/post-execute` listener that blocks or adds context), and
//! the `hook/invoked` / `hook/result` event shapes ([`HookEvent`]).
//! The events go to the session log, and commands run in the session's cwd, through the
//! calling agent's `SessionContext`; [`HooksPlugin`] mounts a bridge from `[plugins.hooks-*]`.
//! Must not depend on: any other capability crate, the host, a front-end.

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

/// `[plugins.hooks-claude-code]` and `[plugins.hooks-codex]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksSettings {
    /// The bridge's hook file, resolved against the process's launch directory and read when
    /// the plugin applies; absent = the bridge is off, a missing file = no hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_path: Option<PathBuf>,
}

/// One hook bridge as a plugin; `D` picks the dialect.
#[derive(Debug, Default)]
pub struct HooksPlugin<D: DialectMarker>(std::marker::PhantomData<D>);

/// Type-level dialect of a [`HooksPlugin`].
pub trait DialectMarker: Default + Send + Sync + 'static {
    const DIALECT: Dialect;
    const NAME: &'static str;
}

/// The Claude Code bridge.
#[derive(Debug, Default)]
pub struct ClaudeCode;

/// The Codex bridge.
#[derive(Debug, Default)]
pub struct Codex;

impl DialectMarker for ClaudeCode {
    const DIALECT: Dialect = Dialect::ClaudeCode;
    const NAME: &'static str = "hooks-claude-code";
}

impl DialectMarker for Codex {
    const DIALECT: Dialect = Dialect::Codex;
    const NAME: &'static str = "hooks-codex";
}

impl<D: DialectMarker> dsh_plugin::Plugin for HooksPlugin<D> {
    type Config = HooksSettings;

    fn name(&self) -> &str {
        D::NAME
    }

    fn apply(
        &self,
        ctx: &dsh_kernel::Scope,
        config: HooksSettings,
    ) -> Result<(), dsh_plugin::PluginError> {
        let Some(path) = config.config_path else {
            return Ok(());
        };
        let host = dsh_plugin::HostServices::of(ctx)?;
        // Upstream resolves the file from the launch directory: one file for every session.
        let path = host.info.launch_cwd.join(path);
        let hooks = HooksConfig::load(D::DIALECT, &path).map_err(dsh_plugin::PluginError::other)?;
        if let Some(hooks) = hooks {
            install(&host.tools, ctx, hooks);
        }
        Ok(())
    }
}

impl<D: DialectMarker> dsh_plugin::HostPlugin for HooksPlugin<D> {
    const NAME: &'static str = D::NAME;
}
