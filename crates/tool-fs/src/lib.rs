//! `dsh-tool-fs`: the model's file tools (`read`, `read_image`, `write`, `edit`,
//! `str_replace_editor`, `glob`, `grep`).
//!
//! Owns: each tool as plain typed functions (arguments, `run` → canonical value, model text,
//! presentation meta and cards), the file sandbox policy (roots, canonicalization, the one-call
//! `sandbox_permissions` escalation), the per-session observation map (read-before-write,
//! stale detection), the model-facing schemas and prompt sections, and `register`, the runtime
//! glue (definitions, approval routing, glob/grep spill).
//! The plain tool functions use only the shared vocabulary of `dsh-tools` (cards,
//! `SandboxMode`, image attachments); everything else of the `dsh-tools` runtime stays in
//! `register`. The spill store and the generic inline cap belong to `dsh-spill`.
//! [`FsPlugin`] (`[plugins.fs]`) attaches the tools to each session through the host's seams.
//! Must not depend on: other tool crates, the host, a front-end, any transport.

pub mod cards;
pub mod context;
pub mod edit;
mod editor;
pub mod error;
mod exec;
mod fsat;
pub mod glob;
pub mod grep;
mod mutate;
mod plugin;
pub mod policy;
pub mod read;
pub mod read_image;
pub mod register;
pub mod schema;
mod search;
pub mod spill;
pub mod str_replace_editor;
pub mod text;
pub mod write;

pub use context::FsContext;
pub use context::FsLimits;
pub use error::FsError;
pub use plugin::FsPlugin;
pub use plugin::FsSettings;
pub use plugin::session_policy;
pub use policy::FilePolicy;
pub use policy::PolicyDenial;
pub use policy::ResolvedPath;
pub use policy::SandboxMode;
pub use spill::SpillConfig;
