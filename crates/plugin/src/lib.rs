//! `dsh-plugin`: what a capability crate builds its plugin against.
//!
//! Owns: [`HostPlugin`] and [`PluginSpec`] (a plugin's line in the host's table), the
//! [`HostServices`] every plugin reaches from its scope (tool registry, agent hooks, prompt
//! sections, session attachments, the model adapter, host facts), the per-session
//! [`SessionContext`] (id, cwd, live permissions as typed enums, the durable-event sink), the
//! [`Sessions`] registry through which per-session pieces attach to each agent's scope, the
//! permission [`PRESETS`], and the traits through which a front-end reaches a plugin's part
//! without naming its crate ([`ModeAxis`]: plan mode; [`DelegatedChildren`]: subagents).
//! Re-exports the prompt slots ([`Slot`], [`Section`]) the agent loop assembles.
//! Does not own: which plugins exist or how configuration is layered (`dsh-host`), any tool.
//! Must not depend on: a capability crate, `dsh-host`, a front-end.

mod context;
mod frontend;
mod services;
mod sessions;
mod spec;
mod startup;

pub use context::DefaultPermissions;
pub use context::PRESETS;
pub use context::Permissions;
pub use context::PermissionsOrigin;
pub use context::Preset;
pub use context::SandboxLimits;
pub use context::SandboxNetwork;
pub use context::SessionContext;
pub use context::approval_text;
pub use frontend::ChildStarted;
pub use frontend::ChildrenError;
pub use frontend::DelegatedChildren;
pub use frontend::ModeAxis;
pub use services::HostInfo;
pub use services::HostServices;
pub use sessions::AttachedSession;
pub use sessions::Sessions;
pub use sessions::SetPermissionsError;
pub use spec::HostPlugin;
pub use spec::PluginSpec;
pub use spec::invalid_config;
pub use startup::Startup;
pub use startup::StartupTask;

/// The display items and presenter registry (`HostServices::presenters`) a plugin presents its
/// events with.
pub use dsh_transcript as transcript;

pub use dsh_agent::prompt::PromptRegistry;
pub use dsh_agent::prompt::Section;
pub use dsh_agent::prompt::SectionText;
pub use dsh_agent::prompt::Slot;
pub use dsh_kernel::Plugin;
pub use dsh_kernel::PluginError;
pub use dsh_kernel::Scope;
/// A plugin's own durable event payload: a serde type with its event `type` ([`EventData::KIND`]).
pub use dsh_session::data::EventData as DurableEvent;
pub use dsh_tools::ApprovalPolicy;
pub use dsh_tools::NetworkAccess;
pub use dsh_tools::SandboxMode;
