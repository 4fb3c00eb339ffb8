//! `dsh-host`: the composition of dsh as a library.
//!
//! Owns: the layered configuration ([`Config`]: defaults → `$DSH_HOME/config.toml` →
//! `.dsh/config.toml` → environment → overrides, every key located) and its validation against
//! the plugin table (`file:line: key` errors); the plugin table itself ([`builtin_plugins`]);
//! [`Host`], which mounts each enabled plugin through `dsh_kernel::mount` in its own scope under
//! one root and re-applies exactly the changed ones on a reload (file watching in [`watch`]);
//! [`SessionHost`], the session API `dsh exec`, `dsh acp` and the TUI share; the host's own
//! tables (`[model]` with the provider registry, `[tools]`, `[prompt]`) and the permission
//! plugins (`[plugins.sandbox]`, `[plugins.approval]`); `dsh config show` ([`show`]).
//! Does not own: any capability (each is its crate's plugin), argv, printing, a front-end.
//! Must not depend on: `dsh-acp`, `dsh-tui`, `dsh` (the binary).

pub mod config;
pub mod core;
mod host;
mod model;
pub mod model_choice;
mod permission_choice;
mod permissions;
mod redact;
pub mod show;
pub mod stored;
mod table;
pub mod trust;
mod validate;
mod vocabulary;
pub mod watch;

pub use config::AssignmentError;
pub use config::Config;
pub use config::ConfigError;
pub use config::ConfigErrors;
pub use config::Layer;
pub use config::Overrides;
pub use config::ProjectLayer;
pub use host::ChildFinished;
pub use host::ChildSession;
pub use host::Host;
pub use host::HostError;
pub use host::HostOptions;
pub use host::NewSession;
pub use host::ReloadReport;
pub use host::SessionHost;
pub use model::RoutedAdapter;
pub use model_choice::ModelSelected;
pub use permissions::ApprovalPlugin;
pub use permissions::ApprovalSettings;
pub use permissions::SandboxPlugin;
pub use permissions::SandboxSettings;
pub use stored::last_activity;
pub use table::builtin_plugins;
pub use validate::CoreSettings;
pub use validate::check;
pub use vocabulary::EventVocabulary;
pub use vocabulary::VocabularyError;

pub use dsh_plugin::PRESETS;
pub use dsh_plugin::Preset;
