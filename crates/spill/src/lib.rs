//! `dsh-spill`: where oversized tool output goes.
//!
//! Owns: the spill store (`<root>/session-<12 hex of sha256(session id)>/<12 random hex>-<name>`,
//! directories 0700, files created exclusively 0600, never deleted automatically), the inline
//! preview arithmetic of upstream's generic policy, and that policy itself as a
//! `tools/post-execute` listener ([`install_policy`]), and [`SpillPlugin`] (`[plugins.spill]`),
//! which provides the store to other plugins as a service.
//! Must not depend on: concrete tools, the host, a front-end.

mod plugin;
mod policy;
mod store;

pub use plugin::SpillPlugin;
pub use plugin::SpillSettings;
pub use policy::SpillPolicy;
pub use policy::install_policy;
pub use store::RETRIEVAL_HINT;
pub use store::SpillSaved;
pub use store::SpillStore;
pub use store::apply_inline_cap;
pub use store::encode_segment;
pub use store::inline_preview;
