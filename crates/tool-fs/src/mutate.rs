//! Shared plumbing of the mutating tools: per-call sandbox mode (with the one-call
//! escalation through the approver), the policy check, and atomic writes.

use std::io::Write;
use std::path::Path;

use crate::context::FsContext;
use crate::error::FsError;
use crate::error::codes;
use crate::policy::EscalationMode;
use crate::policy::EscalationRequest;
use crate::policy::ResolvedPath;
use crate::policy::SandboxMode;
use crate::policy::escalation_outcome;
use crate::policy::escalation_without_service;

/// Resolves the mode this call runs under: the standing mode, or an approved escalation.
pub(crate) async fn call_mode(
    ctx: &FsContext,
    tool_name: &str,
    sandbox_permissions: Option<EscalationMode>,
    justification: Option<&str>,
) -> Result<SandboxMode, FsError> {
    let Some(request) = EscalationRequest::from_args(sandbox_permissions, justification)? else {
        return Ok(ctx.policy.mode);
    };
    if !ctx.policy.escalation_advertised {
        return Err(FsError::plain(
            "sandbox_permissions is not available in this composition (no sandboxing executor to escalate)",
        ));
    }
    request.check_wider(ctx.policy.mode)?;
    let Some(approver) = &ctx.approver else {
        return Err(escalation_without_service(request.mode));
    };
    let reason = request.approval_reason();
    let outcome = approver
        .approve(tool_name, ctx.call_id.as_deref(), &reason)
        .await?;
    escalation_outcome(request.mode, outcome)
}

pub(crate) fn check_write(
    ctx: &FsContext,
    mode: SandboxMode,
    path: &str,
) -> Result<ResolvedPath, FsError> {
    ctx.policy
        .check_write_as(mode, &ctx.cwd, path)
        .map_err(|denial| denial.into_error())
}

/// For tools without an escalation parameter: the denial never advertises escalation.
pub(crate) fn check_write_standing(ctx: &FsContext, path: &str) -> Result<ResolvedPath, FsError> {
    ctx.policy.check_write(&ctx.cwd, path).map_err(|denial| {
        crate::policy::PolicyDenial {
            escalation_available: false,
            ..denial
        }
        .into_error()
    })
}

/// Writes `content` to `target`: through the client's editor when it writes files, else
/// [`atomic_write`]. Returns `Ok(false)` when `create_new` found an existing file on disk.
pub(crate) fn write_file(
    ctx: &FsContext,
    target: &Path,
    content: &str,
    create_new: bool,
    display_path: &str,
) -> Result<bool, FsError> {
    if ctx.editor.as_ref().is_some_and(|e| e.can_write()) {
        if create_new && target.exists() {
            return Ok(false);
        }
        if let Some(written) = crate::editor::write_text(ctx, target, content, display_path) {
            return written.map(|()| true);
        }
    }
    atomic_write(target, content.as_bytes(), create_new, display_path)
}

/// Atomic write: temp file beside the target, fsync, then rename (replace) or hard-link
/// (`create_new`: fails if the target appeared meanwhile). New files get 0600, existing files
/// keep their mode. Returns `Ok(false)` when `create_new` found an existing file.
pub(crate) fn atomic_write(
    target: &Path,
    content: &[u8],
    create_new: bool,
    display_path: &str,
) -> Result<bool, FsError> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::fs::PermissionsExt;
    let io_err =
        |err: std::io::Error| FsError::io(&format!("cannot write \"{display_path}\""), &err);
    let parent = target.parent().unwrap_or_else(|| Path::new("/"));
    std::fs::create_dir_all(parent).map_err(io_err)?;
    let mode = std::fs::metadata(target)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o600);
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let random: [u8; 6] = rand::random();
    let tmp = parent.join(format!(".{name}.dsh-{}.tmp", crate::text::hex(&random)));
    let result = (|| -> std::io::Result<bool> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(content)?;
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.sync_all()?;
        drop(file);
        if create_new {
            match std::fs::hard_link(&tmp, target) {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
                Err(err) => return Err(err),
            }
            std::fs::remove_file(&tmp)?;
        } else {
            std::fs::rename(&tmp, target)?;
        }
        Ok(true)
    })();
    if !matches!(result, Ok(true)) || create_new {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io_err)
}

pub(crate) fn not_observed(message: String) -> FsError {
    FsError::coded(
        codes::FS_NOT_OBSERVED,
        format!("{message} — read the file, then retry"),
    )
}

pub(crate) fn stale(message: String) -> FsError {
    FsError::coded(
        codes::FS_STALE_VERSION,
        format!("{message} — re-read the file, then retry"),
    )
}
