//! `dsh-web`: the server behind `dsh web`.
//!
//! Owns: the HTTP server of the browser app: the app's files (embedded from `app/` at build
//! time), the Agent Client Protocol over WebSocket at `/acp` (one JSON-RPC message per text
//! frame, served by `dsh-acp` exactly as on stdio), the small `/api/` the app needs beyond
//! ACP, and the access gate in front of all of it (`Host` against DNS rebinding, `Origin`
//! against other sites' pages, the access secret and its session cookie, the loopback-only
//! settings rule), in place before the first connection is accepted.
//! Does not own: sessions, tools, policy (the sandbox, approvals and trust are those of
//! `dsh-host` and `dsh-acp`: the web is one more front-end) or the app's own code.
//! Must not depend on: `dsh` (the binary), the TUI, any tool or capability crate.

mod acp_ws;
mod api;
mod assets;
mod error;
mod gate;
mod server;

pub use acp_ws::VIEWER_QUEUE_BYTES;
pub use error::WebError;
pub use gate::ACCESS_SECRET_VAR;
pub use gate::COOKIE_NAME;
pub use gate::MIN_SECRET_CHARS;
pub use server::WebConfig;
pub use server::check;
pub use server::serve;
