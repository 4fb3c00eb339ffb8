//! `dsh-transcript`: the typed transcript every front-end renders.
//!
//! Owns: the closed set of display [`Item`]s (user and assistant text, thoughts, tool calls
//! with their arguments parsed once and the tool's own cards, results, plan, title, mode,
//! usage, notices, pending approvals and questions, a child's progress), each tagged with the
//! log seq it came from ([`TranscriptItem`]); the one [`Fold`] from committed session events
//! to items, the same for the live stream and a replayed log (`session/load`, `dsh resume`);
//! and the presenter registry ([`EventPresenters`], in the host services) through which a
//! plugin turns the events it owns into items, in its own crate.
//! Does not own: how a front-end draws an item (ACP `session/update`s, TUI entries, `dsh exec`
//! progress lines), any plugin's payload types.
//! Must not depend on: a capability crate (`tool-*`, `plan-mode`, `goal`, `subagent`, …),
//! `dsh-agent`, `dsh-plugin`, the host, a front-end.

mod fold;
mod item;
mod presenters;

/// The committed event a presenter reads.
pub use dsh_session::Event;
pub use fold::CORE_KINDS;
pub use fold::Fold;
pub use item::*;
pub use presenters::EventPresenters;
pub use presenters::PresentFn;
pub use presenters::Presentation;
pub use presenters::PresenterError;
