//! `dsh-references`: what the user points at from a prompt (context-spec §3–§4).
//!
//! Owns: the `@file` grammar composers use (`active_at_token`, `format_file_mention`), the
//! local candidate service (live listing + bounded fuzzy index, never through symlinks or out
//! of the root) and its model-visible guidance text; `@session` URIs and mentions, the
//! snapshot projection with its byte budget, and the prepended pre-step listener that enters
//! one untrusted snapshot after the message that referenced other sessions.
//! `@file` is path-only: nothing here reads or attaches a referenced file's content.
//! Must not depend on: front-ends, tools.

mod candidates;
mod grammar;
mod plugin;
mod session;
mod session_uri;

pub use candidates::CandidateKind;
pub use candidates::FILE_REFERENCE_GUIDANCE;
pub use candidates::FILE_REFERENCE_ORDER;
pub use candidates::FILE_REFERENCE_SECTION;
pub use candidates::FileCandidate;
pub use candidates::FileIndex;
pub use candidates::FileReferenceConfig;
pub use candidates::FileReferenceConfigError;
pub use candidates::FileReferences;
pub use candidates::file_reference_guidance;
pub use candidates::list_candidates;
pub use candidates::session_root;
pub use grammar::AtToken;
pub use grammar::active_at_token;
pub use grammar::format_file_mention;
pub use plugin::FileReferenceSettings;
pub use plugin::FileReferencesPlugin;
pub use plugin::SessionReferenceSettings;
pub use plugin::SessionReferencesPlugin;
pub use session::FittedReference;
pub use session::SessionCandidate;
pub use session::SessionListing;
pub use session::SessionReader;
pub use session::SessionReferenceConfig;
pub use session::SessionReferenceError;
pub use session::SessionReferences;
pub use session::StoreReader;
pub use session::SurfaceItem;
pub use session::SurfaceSnapshot;
pub use session::context_text;
pub use session::fit_reference;
pub use session_uri::Mention;
pub use session_uri::URI_SCHEME;
pub use session_uri::decode_session_uri;
pub use session_uri::encode_session_uri;
pub use session_uri::format_session_mention;
pub use session_uri::parse_mentions;
