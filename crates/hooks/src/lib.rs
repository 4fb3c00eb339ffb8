//! `dsh-hooks`: the Claude Code and Codex command-hook bridges (upstream `hooks-claude-code`,
//! `hooks-codex`, and their shared `hook-protocol`).
//!
//! Owns: the hook file format and its lenient parsing (whole-file rejection on an invalid
//! matcher), ECMAScript matcher semantics, running one hook through a [`HookExecutor`],
//! decoding its output, merging the outputs of one point, the durable `hook/invoked` /
//! `hook/result` events, and the bridge itself: every event either dialect supports wired to
//! its seam — `SessionStart` (`agent/session-start`, detached), `UserPromptSubmit`
//! (`agent/pre-step`), `PreToolUse` / `PostToolUse` (`tools/pre-execute` / `post-execute`),
//! `Stop` (`agent/turn-stopping`), `SubagentStart` / `SubagentStop` (called by the subagent
//! runtime's lifecycle notifications).
//! Does not own: where the hook file is configured (the plugin's config table), the approval
//! service an `ask` is routed to (the tool registry does that), how child environments are
//! filtered (the executor is given its environment).
//! Must not depend on: front-ends, concrete tool crates.

mod bridge;
mod codec;
mod config;
mod error;
mod event;
mod exec;
mod matcher;
mod merge;
mod plugin;

pub use bridge::BridgeSettings;
pub use bridge::HandlerCounter;
pub use bridge::HookBridge;
pub use bridge::Loaded;
pub use bridge::SubagentRun;
pub use codec::Decision;
pub use codec::HookOutput;
pub use codec::parse_hook_output;
pub use config::CommandHook;
pub use config::Group;
pub use config::HookFile;
pub use config::LoadError;
pub use config::Substitutions;
pub use error::HookConfigError;
pub use error::HookExecError;
pub use event::HookEvent;
pub use event::summarize_stderr;
pub use exec::Confiner;
pub use exec::EnvSource;
pub use exec::ExecOutput;
pub use exec::ExecRequest;
pub use exec::HookExecutor;
pub use exec::LocalExecutor;
pub use matcher::Matcher;
pub use merge::Merged;
pub use merge::MergedDecision;
pub use merge::merge_outputs;
pub use plugin::ClaudeCode;
pub use plugin::Codex;
pub use plugin::DialectMarker;
pub use plugin::HooksPlugin;
pub use plugin::HooksSettings;
pub use plugin::session_confiner;

/// `hookSpecificOutput`'s upstream default timeout (`DEFAULT_HOOK_TIMEOUT_MS`).
pub const DEFAULT_TIMEOUT_MS: f64 = 600_000.0;
/// Upstream's `DEFAULT_STDERR_SUMMARY_MAX_CHARS`.
pub const DEFAULT_STDERR_SUMMARY_MAX_CHARS: usize = 500;

/// Which upstream bridge a configuration belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Dialect {
    #[default]
    ClaudeCode,
    Codex,
}

impl Dialect {
    /// The `dialect` of `hook/invoked`, the prefix of handler ids and the matcher diagnostic's
    /// mode.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude-code",
            Self::Codex => "codex",
        }
    }

    /// The plugin name: the `plugin` of context messages' `{kind:"plugin"}` source and the
    /// prefix of every warning.
    pub fn plugin(self) -> &'static str {
        match self {
            Self::ClaudeCode => "hooks-claude-code",
            Self::Codex => "hooks-codex",
        }
    }

    /// The events this dialect reads from a hook file, in upstream's reading order.
    pub fn events(self) -> &'static [Event] {
        match self {
            Self::ClaudeCode => &[
                Event::SessionStart,
                Event::UserPromptSubmit,
                Event::PreToolUse,
                Event::PostToolUse,
                Event::Stop,
                Event::SubagentStart,
                Event::SubagentStop,
            ],
            Self::Codex => &[
                Event::PreToolUse,
                Event::PostToolUse,
                Event::SessionStart,
                Event::UserPromptSubmit,
                Event::Stop,
            ],
        }
    }
}

/// A bridged hook event (the `point` of `hook/*` events).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    PostToolUse,
    Stop,
    SubagentStart,
    SubagentStop,
}

impl Event {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionStart => "SessionStart",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::PreToolUse => "PreToolUse",
            Self::PostToolUse => "PostToolUse",
            Self::Stop => "Stop",
            Self::SubagentStart => "SubagentStart",
            Self::SubagentStop => "SubagentStop",
        }
    }

    /// Whether the event has a matcher subject (`UserPromptSubmit` and `Stop` discard theirs).
    pub fn has_matcher(self) -> bool {
        !matches!(self, Self::UserPromptSubmit | Self::Stop)
    }
}
