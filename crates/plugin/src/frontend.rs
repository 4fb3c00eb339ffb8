//! What a front-end asks of a plugin without naming its crate: a second axis of the session's
//! modes (plan mode) and the delegated children of a session (subagents). The owning plugin
//! provides the trait object on its scope (`ctx.provide::<dyn ModeAxis>(…)`); a front-end
//! finds it with `scope.service::<dyn ModeAxis>()`, and does without it when the plugin is off.

use std::error::Error;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_kernel::Disposer;
use dsh_session::Event;

/// A boolean mode a plugin keeps per session beside the permission presets, offered by a
/// front-end as combined modes: every base mode `<m>` also exists as `<m><suffix>` with the
/// axis on (ACP `session/set_mode`).
pub trait ModeAxis: Send + Sync {
    /// The suffix of a combined mode id with the axis on (`"+plan"`).
    fn suffix(&self) -> &str;
    /// The display name of `base_name`'s variant with the axis on.
    fn variant_name(&self, base_name: &str) -> String;
    /// The description of that variant.
    fn variant_description(&self, base_description: Option<&str>) -> String;
    /// Whether the axis is on for `agent` now.
    fn is_on(&self, agent: &AgentHandle) -> bool;
    /// Turns the axis on or off for `agent` (logged by the plugin).
    fn set(&self, agent: &AgentHandle, on: bool);
    /// The state a committed event moves the axis to, if any. Called inside the log's event
    /// callback: it must not append to the log.
    fn state_of(&self, event: &Event) -> Option<bool>;
}

impl dyn ModeAxis {
    /// The combined id: `base` with the axis on or off.
    pub fn mode_id(&self, base: &str, on: bool) -> String {
        if on {
            format!("{base}{}", self.suffix())
        } else {
            base.to_owned()
        }
    }

    /// Splits a combined id into its base mode and whether the axis is on. A bare suffix is
    /// not a combined id.
    pub fn split_mode_id<'a>(&self, id: &'a str) -> (&'a str, bool) {
        match id.strip_suffix(self.suffix()) {
            Some(base) if !base.is_empty() => (base, true),
            _ => (id, false),
        }
    }

    /// The combined id after `event`, given the current one: `Some` only when the event moves
    /// the axis.
    pub fn follow(&self, current: &str, event: &Event) -> Option<String> {
        let on = self.state_of(event)?;
        Some(self.mode_id(self.split_mode_id(current).0, on))
    }
}

/// Why settling a session's children failed (the owning plugin's error, boxed).
pub type ChildrenError = Box<dyn Error + Send + Sync>;

/// Called with each in-process child a session delegates to, and its parent's session id.
pub type ChildStarted = Arc<dyn Fn(&AgentHandle, &str) + Send + Sync>;

/// The children a session delegates to, as a front-end follows and settles them.
pub trait DelegatedChildren: Send + Sync {
    /// Calls `started` for each in-process child `owner` starts from now on, while `owner`'s
    /// scope lives (or until the returned disposer runs).
    fn on_start(&self, owner: &AgentHandle, started: ChildStarted) -> Disposer;

    /// Settles the continuable children of `parents` (and theirs) before the parents go, so
    /// each child closes its own turn while its parent still hears about it.
    fn drain<'a>(
        &'a self,
        parents: &'a [AgentHandle],
    ) -> Pin<Box<dyn Future<Output = Result<(), ChildrenError>> + Send + 'a>>;
}
