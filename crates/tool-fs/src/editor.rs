//! Reads and writes through the client's editor when the front-end provides one
//! ([`dsh_tools::EditorFiles`]); the file policy has already allowed the path.
//!
//! Tool bodies run on blocking threads, so these helpers wait on the client there. A client
//! that cannot read a file (not text, not found, an error) makes the tool fall back to the
//! disk, which then reports the precise reason.

use std::path::Path;

use crate::context::FsContext;
use crate::error::FsError;
use crate::error::codes;

fn wait<T>(future: dsh_kernel::BoxFuture<'static, T>) -> Option<T> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    Some(runtime.block_on(future))
}

/// The editor's text of `path`, or `None` to read the disk instead.
pub(crate) fn read_text(ctx: &FsContext, path: &Path) -> Option<String> {
    let editor = ctx.editor.as_ref().filter(|e| e.can_read())?;
    match wait(editor.read_text(path.to_path_buf()))? {
        Ok(text) if !text.contains('\0') => Some(text),
        Ok(_) => None,
        Err(reason) => {
            tracing::debug!(path = %path.display(), %reason, "editor read failed; reading the disk");
            None
        }
    }
}

/// Writes `content` through the editor. `None`: no editor writes here (write the disk).
pub(crate) fn write_text(
    ctx: &FsContext,
    path: &Path,
    content: &str,
    display_path: &str,
) -> Option<Result<(), FsError>> {
    let editor = ctx.editor.as_ref().filter(|e| e.can_write())?;
    let written = wait(editor.write_text(path.to_path_buf(), content.to_owned()))?;
    Some(written.map_err(|reason| {
        FsError::coded(
            codes::FS_IO_ERROR,
            format!("cannot write \"{display_path}\": the editor refused: {reason}"),
        )
    }))
}
