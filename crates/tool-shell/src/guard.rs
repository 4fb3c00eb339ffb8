//! The process guard of unconfined tool commands: which executable this process starts as the
//! guard. The guard itself (own session, child subreaper, orders and status over a socket,
//! the final sweep) is `dsh-tool-guard`; see that crate for what it guarantees.

use std::path::Path;
use std::path::PathBuf;
use std::sync::OnceLock;

pub use dsh_tool_guard::BINARY_NAME;
pub use dsh_tool_guard::GUARD_ARG;
pub use dsh_tool_guard::run;
pub use dsh_tool_guard::run_if_invoked;

static PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// Makes `program` (absolute) the guard of every unconfined tool command of this process: the
/// `dsh-tool-guard` executable, or any binary that calls [`run_if_invoked`] first thing in
/// `main`. A process that never calls this runs unconfined commands directly (its own process
/// group, the caller's session).
pub fn set_program(program: impl Into<PathBuf>) {
    let _ = PROGRAM.set(program.into());
}

/// The guard program, when one was set.
pub fn program() -> Option<&'static Path> {
    PROGRAM.get().map(PathBuf::as_path)
}

pub(crate) use dsh_tool_guard::parse_status;
