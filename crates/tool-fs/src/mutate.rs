//! Shared plumbing of the mutating tools: per-call sandbox mode (with the one-call
//! escalation through the approver), the policy check, and atomic writes.

use std::path::Path;

use crate::context::FsContext;
use crate::error::FsError;
use crate::error::codes;
use crate::policy::ApprovalOutcome;
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
    if !ctx.policy.escalation_advertised && !ctx.policy.approval_never {
        return Err(FsError::plain(
            "sandbox_permissions is not available in this composition (no sandboxing executor to escalate)",
        ));
    }
    // The mode the call already has simply runs (see `dsh_tool_shell::approve_escalation`).
    if request.mode == ctx.policy.mode {
        return Ok(request.mode);
    }
    request.check_wider(ctx.policy.mode)?;
    let Some(approver) = &ctx.approver else {
        return Err(escalation_without_service(request.mode));
    };
    let reason = request.approval_reason();
    let outcome = approver
        .approve(tool_name, ctx.call_id.as_deref(), &reason)
        .await?;
    // Under `never` nothing runs wider, whatever an answerer that ignores the policy said.
    let outcome = match outcome {
        ApprovalOutcome::RefusedByPolicy(_) => outcome,
        _ if ctx.policy.approval_never => {
            ApprovalOutcome::RefusedByPolicy(dsh_tools::NeverBy::Config {
                danger_full_access: false,
            })
        }
        _ => outcome,
    };
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
        // The policy checked `target` as resolved; a link that appeared there since would
        // send the editor's write elsewhere.
        if std::fs::symlink_metadata(target).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(FsError::plain(format!(
                "cannot write \"{display_path}\": it became a symbolic link after the policy check"
            )));
        }
        if let Some(written) = crate::editor::write_text(ctx, target, content, display_path) {
            return written.map(|()| true);
        }
    }
    atomic_write(target, content.as_bytes(), create_new, display_path)
}

/// Atomic write: temp file beside the target, fsync, then rename (replace) or hard-link
/// (`create_new`: fails if the target appeared meanwhile), all inside the target directory's
/// opened handle so a concurrent symlink swap cannot redirect it. New files get 0600, existing
/// files keep their mode. Returns `Ok(false)` when `create_new` found an existing file.
pub(crate) fn atomic_write(
    target: &Path,
    content: &[u8],
    create_new: bool,
    display_path: &str,
) -> Result<bool, FsError> {
    crate::fsat::atomic_write(target, content, create_new)
        .map_err(|err| FsError::io(&format!("cannot write \"{display_path}\""), &err))
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
