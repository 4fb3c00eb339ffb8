//! File access through the front-end's editor (ACP `fs/read_text_file` / `fs/write_text_file`).
//!
//! A front-end whose client edits the files itself provides an [`EditorFiles`] on the agent's
//! scope. File tools then read what the editor has (unsaved changes included) and write
//! through it, so edits land in the editor's buffers. The tools' own file policy still decides
//! every path first: this seam only changes where the bytes come from and go to.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_kernel::BoxFuture;
use dsh_kernel::Scope;

use crate::ClientRequestError;
use crate::execution::ToolRun;

/// Reads and writes text files through the client. Paths are absolute and already allowed by
/// the calling tool's policy. `Err` carries the client's reason; a tool may then fall back to
/// the disk.
pub trait EditorFiles: Send + Sync {
    /// Whether the client reads files (`fs.readTextFile`).
    fn can_read(&self) -> bool;
    /// Whether the client writes files (`fs.writeTextFile`).
    fn can_write(&self) -> bool;
    /// The whole text of `path` as the editor has it.
    fn read_text(&self, path: PathBuf) -> BoxFuture<'static, Result<String, ClientRequestError>>;
    /// Replaces the text of `path` (creating it when absent).
    fn write_text(
        &self,
        path: PathBuf,
        content: String,
    ) -> BoxFuture<'static, Result<(), ClientRequestError>>;
}

/// The editor visible from `scope`, if a front-end provided one.
pub fn editor_files_in(scope: &Scope) -> Option<Arc<dyn EditorFiles>> {
    scope.service::<dyn EditorFiles>()
}

/// The editor for a call: looked up from the calling agent's scope (none without an agent).
pub fn editor_files(run: &ToolRun) -> Option<Arc<dyn EditorFiles>> {
    run.agent().and_then(|agent| editor_files_in(agent.scope()))
}
