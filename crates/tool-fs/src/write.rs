//! `write`: create or fully replace a file, atomically and verbatim (catalog §2.2c).

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
use crate::exec::blocking;
use crate::exec::display;
use crate::exec::require_path;
use crate::mutate;
use crate::policy::EscalationMode;
use crate::text::diff_hunks;
use crate::text::envelope;
use crate::text::to_lf;

pub const NAME: &str = "write";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WriteArgs {
    /// Path to write, resolved against the session workspace.
    pub file_path: String,
    /// Full UTF-8 text content to write (may be empty).
    pub content: String,
    /// The wider sandbox mode for a one-shot retry of a denied operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_permissions: Option<EscalationMode>,
    /// Required with `sandbox_permissions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub justification: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WriteOperation {
    Create,
    Update,
}

/// Canonical value `{path, operation, before, after}`: `before`/`after` are the LF-normalized
/// diff basis; `before` is null for a create or when no diff basis could be taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WriteOutput {
    pub path: String,
    pub operation: WriteOperation,
    pub before: Option<String>,
    pub after: String,
}

pub async fn run(
    args: &WriteArgs,
    ctx: &FsContext,
    cancel: CancellationToken,
) -> Result<WriteOutput, FsError> {
    require_path(&args.file_path, "file_path")?;
    let mode = mutate::call_mode(
        ctx,
        NAME,
        args.sandbox_permissions,
        args.justification.as_deref(),
    )
    .await?;
    let ctx = ctx.clone();
    let content = args.content.clone();
    let path = args.file_path.clone();
    let deadline = ctx.limits.io_timeout;
    blocking(&cancel, deadline, move || {
        let resolved = mutate::check_write(&ctx, mode, &path)?;
        let p = display(&resolved.display);
        let real = resolved.real;
        let current = FileVersion::current(&real);
        let observed = ctx.observations.as_ref().map(|o| o.get(&real));
        // Observation policy: unseen/absent → create-if-absent; present → replace-if-version.
        let create_new = match observed {
            None => false,
            Some(None | Some(Observation::Absent)) => {
                if current.is_some() {
                    return Err(mutate::not_observed(format!(
                        "cannot overwrite existing \"{p}\" without reading it first"
                    )));
                }
                true
            }
            Some(Some(Observation::Present(version))) => match current {
                None => {
                    return Err(mutate::stale(format!(
                        "cannot write \"{p}\": file no longer exists"
                    )));
                }
                Some(now) if now != version => {
                    return Err(mutate::stale(format!(
                        "cannot write \"{p}\": file changed since it was read"
                    )));
                }
                Some(_) => false,
            },
        };
        let operation = if current.is_some() {
            WriteOperation::Update
        } else {
            WriteOperation::Create
        };
        let limit = ctx.limits.diff_basis_max_bytes;
        let before = match operation {
            WriteOperation::Create => None,
            WriteOperation::Update if content.len() >= limit => None,
            WriteOperation::Update => crate::editor::read_text(&ctx, &real)
                .map(String::into_bytes)
                .or_else(|| crate::fsat::read(&real).ok())
                .filter(|bytes| bytes.len() < limit && !bytes.contains(&0))
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .map(|text| to_lf(&text)),
        };
        if !mutate::write_file(&ctx, &real, &content, create_new, &p)? {
            return Err(mutate::not_observed(format!(
                "cannot overwrite existing \"{p}\" without reading it first"
            )));
        }
        ctx.observe(
            &real,
            FileVersion::current(&real).map_or(Observation::Absent, Observation::Present),
        );
        Ok(WriteOutput {
            path: p,
            operation,
            before,
            after: to_lf(&content),
        })
    })
    .await
}

pub fn render(_args: &WriteArgs, out: &WriteOutput) -> Vec<ContentBlock> {
    let verb = match out.operation {
        WriteOperation::Create => "Created file",
        WriteOperation::Update => "Updated file",
    };
    vec![ContentBlock::text(envelope(&out.path, "file", verb))]
}

/// `{diffs}`: 3-line-context hunks keyed by the `file_path` argument; `[]` without a basis.
pub fn presentation_meta(args: &WriteArgs, out: &WriteOutput) -> serde_json::Value {
    let diffs = match &out.before {
        Some(before) => diff_hunks(&args.file_path, before, &out.after),
        None => Vec::new(),
    };
    serde_json::json!({ "diffs": diffs })
}

fn whole_file_diff(args: &WriteArgs) -> Vec<FileDiff> {
    vec![FileDiff {
        path: args.file_path.clone(),
        old_text: None,
        new_text: args.content.clone(),
    }]
}

pub fn present_call(args: &WriteArgs) -> ToolCallView {
    ToolCallView::Diff {
        title: format!("Write {}", args.file_path),
        diffs: whole_file_diff(args),
        locations: Some(vec![FileLocation::path(args.file_path.clone())]),
    }
}

pub(crate) fn diffs_from_meta(meta: Option<&serde_json::Value>) -> Option<Vec<FileDiff>> {
    serde_json::from_value(meta?.get("diffs")?.clone()).ok()
}

pub fn present_result(args: &WriteArgs, result: ResultInput<'_>) -> Option<ToolResultView> {
    if result.is_error {
        return None;
    }
    let diffs = diffs_from_meta(result.meta)
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| whole_file_diff(args));
    Some(ToolResultView::Diff {
        title: Some(format!("Write {}", args.file_path)),
        diffs,
    })
}

#[cfg(test)]
#[path = "write_tests.rs"]
mod tests;
