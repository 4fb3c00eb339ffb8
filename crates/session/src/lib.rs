//! `dsh-session`: the append-only session log.
//!
//! Owns: the event envelope and the core event vocabulary (`Event`, typed [`data`] payloads),
//! the append rules (seq = log length, lossless data, surface rules), the model-visible surface
//! and `derive_messages`, post-commit listeners, JSONL persistence under `$DSH_HOME/sessions`
//! (a writer thread per log, batched writes, fsync at step/turn end, awaited barriers), crash
//! repair, resume, fork and listing; the
//! [`SessionStore`] seam with the JSONL default ([`JsonlStore`]) and an in-process
//! [`MemoryStore`].
//! Does not own: when events are written (the agent loop), what plugins log (their crates).
//! Must not depend on: `dsh-tools`, `dsh-agent`, `dsh-llm`, any front-end.
//!
//! Appending never does I/O: the event is committed in memory, published, and queued for the
//! log's writer thread, which writes whole batches in seq order. [`SessionLog::written`] and
//! [`SessionLog::sync`] are the awaited barriers (in the file; in the file and fsynced); a
//! failed write fails the next barrier and refuses appends until a retry succeeds. The
//! reasons are in `writer.rs`.
//!
//! A persisted log's memory does not grow with its length: it keeps a resident tail (see
//! `RESIDENT_LOW` in `log.rs`) and reads older events back from its file, through the line
//! starts the writer records. Those reads are fallible; per-step readers fold from a recent
//! cursor or use `last_of_kind` instead.

mod backend;
pub mod data;
mod error;
mod event;
mod finite;
mod header;
mod invariants;
mod jsonl;
mod line_index;
mod log;
mod paths;
mod payload;
mod repair;
mod sink;
mod store;
mod surface;
mod writer;

pub use backend::MemoryStore;
pub use backend::SessionStore;
pub use error::SessionError;
pub use event::CORE_KINDS;
pub use event::Event;
pub use event::Kind;
pub use event::SURFACE_KINDS;
pub use event::SurfaceIntent;
pub use event::SurfaceOp;
pub use event::is_core_kind;
pub use event::is_surface_kind;
pub use event::kind;
pub use header::SESSION_FORMAT_VERSION;
pub use header::SessionHeader;
pub use invariants::check_invariants;
pub use jsonl::LoadedSession;
pub use jsonl::read_log_file;
pub use log::Clock;
pub use log::KindCheck;
pub use log::LogFold;
pub use log::SessionLog;
pub use log::Subscription;
pub use log::TurnState;
pub use log::WeakSessionLog;
pub use paths::LOG_FILE_NAME;
pub use paths::encode_segment;
pub use paths::project_dir_name;
pub use payload::Payload;
pub use repair::TOOL_NOT_STARTED_TEXT;
pub use repair::TOOL_OUTCOME_UNKNOWN_TEXT;
pub use repair::crash_repair;
pub use store::CreateOptions;
pub use store::JsonlStore;
pub use store::SessionSummary;
pub use writer::settle_all;
