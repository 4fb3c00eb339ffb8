//! Reads and writes through the client's editor when the front-end provides one
//! ([`dsh_tools::EditorFiles`]); the file policy has already allowed the path.
//!
//! Tool bodies run on the abandonable threads of [`crate::exec`], which enter the calling
//! runtime's context, so these helpers drive the client's round trip on that runtime and wait
//! for it there, under the same file-I/O deadline as the disk. A client that cannot read a file
//! (not text, not found, an error) makes the tool fall back to the disk, which then reports the
//! precise reason; a client that does not answer in time fails the call (`FS_TIMEOUT`) rather
//! than serve the disk's text in place of the editor's.

use std::path::Path;

use crate::context::FsContext;
use crate::error::FsError;
use crate::error::codes;

/// Waits for the client's answer, at most the file-I/O deadline.
fn wait<T>(ctx: &FsContext, future: dsh_kernel::BoxFuture<'static, T>) -> Result<T, FsError> {
    let deadline = ctx.limits.io_timeout;
    // Without the runtime's context the round trip cannot be driven; a silent fall back to the
    // disk here is what made `read` ignore unsaved buffers once bodies left `spawn_blocking`.
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
        FsError::coded(
            codes::FS_IO_ERROR,
            "the editor's file access needs the tool runtime, and this file operation runs outside it",
        )
    })?;
    runtime
        .block_on(tokio::time::timeout(deadline, future))
        .map_err(|_| {
            FsError::coded(
                codes::FS_TIMEOUT,
                format!(
                    "the editor did not answer the file request within {} ms; retry, or save the file in the editor",
                    deadline.as_millis()
                ),
            )
        })
}

/// The editor's text of `path`; `Ok(None)` to read the disk instead.
pub(crate) fn read_text(ctx: &FsContext, path: &Path) -> Result<Option<String>, FsError> {
    let Some(editor) = ctx.editor.as_ref().filter(|e| e.can_read()) else {
        return Ok(None);
    };
    Ok(match wait(ctx, editor.read_text(path.to_path_buf()))? {
        Ok(text) if !text.contains('\0') => Some(text),
        Ok(_) => None,
        Err(reason) => {
            tracing::debug!(path = %path.display(), %reason, "editor read failed; reading the disk");
            None
        }
    })
}

/// Writes `content` through the editor. `None`: no editor writes here (write the disk).
pub(crate) fn write_text(
    ctx: &FsContext,
    path: &Path,
    content: &str,
    display_path: &str,
) -> Option<Result<(), FsError>> {
    let editor = ctx.editor.as_ref().filter(|e| e.can_write())?;
    Some(
        wait(
            ctx,
            editor.write_text(path.to_path_buf(), content.to_owned()),
        )
        .and_then(|written| {
            written.map_err(|reason| {
                FsError::coded(
                    codes::FS_IO_ERROR,
                    format!("cannot write \"{display_path}\": the editor refused: {reason}"),
                )
            })
        }),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::sync::Mutex;
    use std::time::Duration;

    use dsh_kernel::BoxFuture;
    use dsh_tools::ClientRequestError;
    use dsh_tools::EditorFiles;
    use tokio_util::sync::CancellationToken;

    use crate::context::FsContext;
    use crate::error::codes;
    use crate::policy::FilePolicy;
    use crate::policy::SandboxMode;

    /// An editor holding unsaved buffers, as an ACP client does; `stalled` never answers.
    #[derive(Default)]
    struct Buffers {
        open: Mutex<HashMap<PathBuf, String>>,
        stalled: bool,
    }

    impl EditorFiles for Buffers {
        fn can_read(&self) -> bool {
            true
        }

        fn can_write(&self) -> bool {
            true
        }

        fn read_text(
            &self,
            path: PathBuf,
        ) -> BoxFuture<'static, Result<String, ClientRequestError>> {
            let text = self.open.lock().unwrap().get(&path).cloned();
            let stalled = self.stalled;
            Box::pin(async move {
                if stalled {
                    std::future::pending::<()>().await;
                }
                text.ok_or_else(|| ClientRequestError::Refused("not open".to_owned()))
            })
        }

        fn write_text(
            &self,
            path: PathBuf,
            content: String,
        ) -> BoxFuture<'static, Result<(), ClientRequestError>> {
            self.open.lock().unwrap().insert(path, content);
            Box::pin(async { Ok(()) })
        }
    }

    fn workspace(editor: Arc<Buffers>) -> (tempfile::TempDir, FsContext, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::canonicalize(dir.path()).unwrap().join("notes.txt");
        std::fs::write(&file, "1: on disk\n").unwrap();
        let mut ctx = FsContext::new(
            dir.path(),
            FilePolicy::new(SandboxMode::WorkspaceWrite, dir.path()),
        );
        ctx.editor = Some(editor);
        (dir, ctx, file)
    }

    fn read_args(file: &std::path::Path) -> crate::read::ReadArgs {
        crate::read::ReadArgs {
            file_path: file.display().to_string(),
            offset: None,
            limit: None,
        }
    }

    #[tokio::test]
    async fn read_returns_the_unsaved_buffer_not_the_disk() {
        let editor = Arc::new(Buffers::default());
        let (_dir, ctx, file) = workspace(editor.clone());
        editor
            .open
            .lock()
            .unwrap()
            .insert(file.clone(), "unsaved\n".to_owned());
        let out = crate::read::run(&read_args(&file), &ctx, CancellationToken::new())
            .await
            .unwrap();
        let texts: Vec<&str> = out.lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["unsaved"]);
    }

    #[tokio::test]
    async fn edit_changes_the_buffer_and_leaves_the_disk_to_the_editor() {
        let editor = Arc::new(Buffers::default());
        let (_dir, ctx, file) = workspace(editor.clone());
        editor
            .open
            .lock()
            .unwrap()
            .insert(file.clone(), "draft (unsaved)\n".to_owned());
        let args = crate::edit::EditArgs {
            file_path: file.display().to_string(),
            old_string: "draft".to_owned(),
            new_string: "final".to_owned(),
            replace_all: None,
            sandbox_permissions: None,
            justification: None,
        };
        crate::read::run(&read_args(&file), &ctx, CancellationToken::new())
            .await
            .unwrap();
        crate::edit::run(&args, &ctx, CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(
            editor.open.lock().unwrap().get(&file).map(String::as_str),
            Some("final (unsaved)\n")
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "1: on disk\n");
    }

    #[tokio::test]
    async fn an_editor_that_never_answers_fails_the_call_at_the_deadline() {
        let editor = Arc::new(Buffers {
            stalled: true,
            ..Buffers::default()
        });
        let (_dir, mut ctx, file) = workspace(editor);
        ctx.limits.io_timeout = Duration::from_millis(200);
        let started = std::time::Instant::now();
        let err = crate::read::run(&read_args(&file), &ctx, CancellationToken::new())
            .await
            .unwrap_err();
        assert_eq!(
            err.code.as_deref(),
            Some(codes::FS_TIMEOUT),
            "{}",
            err.message
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
