//! `edit`: literal replacement in an existing text file, keeping its dominant line ending
//! (catalog §2.2d).

use dsh_protocol::ContentBlock;
use dsh_tools::FileDiff;
use dsh_tools::FileLocation;
use dsh_tools::ToolCallView;
use dsh_tools::ToolResultView;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::cards::ResultInput;
use crate::context::FileVersion;
use crate::context::FsContext;
use crate::context::Observation;
use crate::error::FsError;
use crate::error::codes;
use crate::exec::blocking;
use crate::exec::display;
use crate::exec::require_path;
use crate::mutate;
use crate::policy::EscalationMode;
use crate::text::diff_hunks;
use crate::text::dominant_is_crlf;
use crate::text::to_lf;

pub const NAME: &str = "edit";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EditArgs {
    /// Path to edit, resolved against the session workspace.
    pub file_path: String,
    /// Literal text to replace.
    pub old_string: String,
    /// Literal replacement text; empty deletes the match.
    pub new_string: String,
    /// Replace every match instead of requiring exactly one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace_all: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_permissions: Option<EscalationMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub justification: Option<String>,
}

/// Canonical value: the LF-normalized texts before and after the replacement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EditOutput {
    pub path: String,
    pub before: String,
    pub after: String,
}

pub async fn run(
    args: &EditArgs,
    ctx: &FsContext,
    cancel: CancellationToken,
) -> Result<EditOutput, FsError> {
    require_path(&args.file_path, "file_path")?;
    if args.old_string.is_empty() {
        return Err(FsError::plain("old_string must be a non-empty string"));
    }
    if args.old_string == args.new_string {
        return Err(FsError::plain("old_string and new_string must differ"));
    }
    let mode = mutate::call_mode(
        ctx,
        NAME,
        args.sandbox_permissions,
        args.justification.as_deref(),
    )
    .await?;
    let ctx = ctx.clone();
    let args = args.clone();
    let deadline = ctx.limits.io_timeout;
    blocking(&cancel, deadline, move || {
        let resolved = mutate::check_write(&ctx, mode, &args.file_path)?;
        let p = display(&resolved.display);
        let real = resolved.real;
        let guard = match ctx.observations.as_ref().map(|o| o.get(&real)) {
            None => None,
            Some(None) => return Err(mutate::not_observed(format!("edit requires reading \"{p}\" first"))),
            Some(Some(Observation::Absent)) => {
                return Err(FsError::coded(codes::FS_NOT_FOUND, format!("cannot edit \"{p}\": not found")));
            }
            Some(Some(Observation::Present(version))) => Some(version),
        };
        let changed = || mutate::stale(format!("cannot edit \"{p}\": file changed since it was read"));
        let Some(current) = FileVersion::current(&real) else {
            return Err(changed());
        };
        if guard.is_some_and(|version| version != current) {
            return Err(changed());
        }
        let bytes = crate::fsat::read(&real).map_err(|err| FsError::io(&format!("cannot edit \"{p}\""), &err))?;
        if bytes.contains(&0) {
            return Err(FsError::coded(codes::FS_NOT_TEXT, format!("cannot edit \"{p}\": binary file")));
        }
        // The editor's buffer (unsaved changes included) is what gets edited, when it has one.
        let raw = match crate::editor::read_text(&ctx, &real)? {
            Some(text) => text,
            None => String::from_utf8(bytes)
                .map_err(|_| FsError::coded(codes::FS_NOT_TEXT, format!("cannot edit \"{p}\": invalid UTF-8 text")))?,
        };
        let crlf = dominant_is_crlf(&raw);
        let before = to_lf(&raw);
        let old = to_lf(&args.old_string);
        let new = to_lf(&args.new_string);
        let matches = before.matches(old.as_str()).count();
        if matches == 0 {
            return Err(FsError::coded(codes::FS_EDIT_NOT_FOUND, format!("old_string was not found in \"{p}\"")));
        }
        if matches > 1 && args.replace_all != Some(true) {
            return Err(FsError::coded(
                codes::FS_AMBIGUOUS_EDIT,
                format!("old_string matched {matches} times in \"{p}\"; provide a more specific old_string or set replace_all to true"),
            ));
        }
        let after = before.replace(old.as_str(), &new);
        let on_disk = if crlf { after.replace('\n', "\r\n") } else { after.clone() };
        mutate::write_file(&ctx, &real, &on_disk, false, &p)?;
        ctx.observe(&real, FileVersion::current(&real).map_or(Observation::Absent, Observation::Present));
        Ok(EditOutput { path: p, before, after })
    })
    .await
}

pub fn render(args: &EditArgs, out: &EditOutput) -> Vec<ContentBlock> {
    let text = if args.replace_all == Some(true) {
        format!(
            "The file {} has been updated. All occurrences were successfully replaced.",
            out.path
        )
    } else {
        format!("The file {} has been updated successfully.", out.path)
    };
    vec![ContentBlock::text(text)]
}

pub fn presentation_meta(args: &EditArgs, out: &EditOutput) -> serde_json::Value {
    serde_json::json!({ "diffs": diff_hunks(&args.file_path, &out.before, &out.after) })
}

fn args_diff(args: &EditArgs) -> Vec<FileDiff> {
    vec![FileDiff {
        path: args.file_path.clone(),
        old_text: Some(args.old_string.clone()).filter(|s| !s.is_empty()),
        new_text: args.new_string.clone(),
    }]
}

pub fn present_call(args: &EditArgs) -> ToolCallView {
    ToolCallView::Diff {
        title: format!("Edit {}", args.file_path),
        diffs: args_diff(args),
        locations: Some(vec![FileLocation::path(args.file_path.clone())]),
    }
}

pub fn present_result(args: &EditArgs, result: ResultInput<'_>) -> Option<ToolResultView> {
    if result.is_error {
        return None;
    }
    let diffs = crate::write::diffs_from_meta(result.meta).unwrap_or_else(|| args_diff(args));
    Some(ToolResultView::Diff {
        title: Some(format!("Edit {}", args.file_path)),
        diffs,
    })
}

#[cfg(test)]
#[path = "edit_tests.rs"]
mod tests;
