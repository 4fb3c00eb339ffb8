//! `dsh-acp`: the ACP editor bridge that `dsh acp` serves over stdio.
//!
//! Owns: the Agent Client Protocol surface (built on the official `agent-client-protocol`
//! crate): `initialize`, `authenticate`, `session/new|load|list|prompt|cancel|set_mode`, the
//! prompt lifecycle (admission including inline images, settlement precedence, cancel,
//! teardown, exact error texts),
//! the mapping of committed session events to `session/update`s (message and thought chunks,
//! tool cards with diffs and terminals, plans, titles) for live turns and `session/load`
//! replay alike, running calls' live output as progress updates, and the client as the
//! agents' approval channel.
//! Does not own: how agents are composed (tools, model, policy) or where image bytes are kept:
//! [`dsh_host::SessionHost`] supplies agents, modes (the approval presets, plan mode), models,
//! the route's image facts and the attachment store.
//! Must not depend on: `dsh` (the binary), a capability crate (`dsh-tool-*`, `dsh-plan-mode`,
//! `dsh-goal`, `dsh-subagent*`; `scripts/check-deps.py`): cards come through the registry,
//! plugin events through the transcript's presenters, plan mode and subagents through
//! `dsh_plugin::ModeAxis` and `dsh_plugin::DelegatedChildren`.

mod approval;
mod bridge;
mod cards;
mod client_fs;
mod client_terminal;
mod error;
mod host;
mod images;
pub mod lines;
mod live;
mod mapping;
mod prompt;
mod questions;
mod registry;
mod serve;
mod session;
mod time;

pub use bridge::BridgeConfig;
pub use error::AcpError;
pub use error::auth_required;
pub use error::internal_error;
pub use error::invalid_params;
pub use error::texts;
pub use images::ImageInput;
pub use images::ImageStoreError;
pub use images::PROMPT_MEDIA_TYPES;
pub use images::PromptImage;
pub use images::PromptImageStore;
pub use registry::LiveSessions;
pub use serve::serve;
pub use serve::serve_shared;
pub use serve::serve_stdio;
pub use serve::serve_stdio_until;
pub use serve::serve_transport;
