//! The spill store and inline-cap text used by the bash capture come from `dsh-spill`;
//! this module keeps the `dsh_tool_shell::spill::*` paths working for existing callers.

pub use dsh_spill::RETRIEVAL_HINT;
pub use dsh_spill::SpillSaved;
pub use dsh_spill::SpillStore;
pub use dsh_spill::apply_inline_cap;
pub use dsh_spill::encode_segment;
pub use dsh_spill::inline_preview;
