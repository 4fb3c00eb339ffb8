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

/// The guard for a binary that calls [`run_if_invoked`] first thing in `main` (the `dsh`
/// binary): the `dsh-tool-guard` executable installed next to the running executable; without
/// it, the running binary itself (same guarantees, but each command then starts the whole
/// harness binary: a few ms of CPU more per call). `/proc/self/exe` still runs the binary that
/// is running even after it was replaced on disk.
pub fn installed_or_self() -> PathBuf {
    let exe = std::env::current_exe();
    if let Some(guard) = exe.as_deref().ok().and_then(dsh_tool_guard::next_to) {
        return guard;
    }
    tracing::info!(
        "no `{BINARY_NAME}` next to the dsh binary; unconfined commands are guarded by dsh itself"
    );
    let proc_exe = PathBuf::from("/proc/self/exe");
    if proc_exe.exists() {
        return proc_exe;
    }
    exe.unwrap_or(proc_exe)
}

/// The guard program, when one was set.
pub fn program() -> Option<&'static Path> {
    PROGRAM.get().map(PathBuf::as_path)
}

pub(crate) use dsh_tool_guard::parse_status;
