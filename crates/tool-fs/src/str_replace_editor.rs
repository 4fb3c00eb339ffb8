//! `str_replace_editor`: the Anthropic-style editor (catalog §2.3). Raw bytes (no EOL
//! normalization), absolute paths only, standing sandbox mode only (no escalation).

use std::path::Path;

use dsh_protocol::ContentBlock;
use dsh_tools::FileDiff;
use dsh_tools::FileLocation;
use dsh_tools::ToolCallKind;
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
use crate::mutate;

pub const NAME: &str = "str_replace_editor";

const CLIPPED: &str = "<response clipped><NOTE>To save on context only part of this file has been shown to you. You should retry this tool after you have searched inside the file with `grep -n` in order to find the line numbers of what you are looking for.</NOTE>";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    View,
    Create,
    StrReplace,
    Insert,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StrReplaceEditorArgs {
    pub command: Command,
    /// Absolute path to a file or directory.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insert_line: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_str: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_str: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view_range: Option<Vec<i64>>,
}

/// Canonical value: the single result string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct StrReplaceEditorOutput(pub String);

pub async fn run(
    args: &StrReplaceEditorArgs,
    ctx: &FsContext,
    cancel: CancellationToken,
) -> Result<StrReplaceEditorOutput, FsError> {
    let p = args.path.clone();
    if p.trim().is_empty() {
        return Err(FsError::plain("path must be a non-empty string"));
    }
    if !Path::new(&p).is_absolute() {
        return Err(FsError::plain(format!(
            "The path {p} is not an absolute path, it should start with `/`. Maybe you meant /{p}?"
        )));
    }
    let ctx = ctx.clone();
    let args = args.clone();
    let deadline = ctx.limits.io_timeout;
    blocking(&cancel, deadline, move || {
        execute(&args, &ctx).map(StrReplaceEditorOutput)
    })
    .await
}

fn execute(args: &StrReplaceEditorArgs, ctx: &FsContext) -> Result<String, FsError> {
    let p = args.path.as_str();
    let resolved = ctx.policy.check_read(&ctx.cwd, p)?;
    let meta = std::fs::metadata(p);
    let exists = meta.is_ok();
    let is_dir = meta.as_ref().is_ok_and(std::fs::Metadata::is_dir);
    if args.command != Command::Create && !exists {
        ctx.observe(&resolved.real, Observation::Absent);
        return Err(FsError::coded(
            codes::FS_NOT_FOUND,
            format!("The path {p} does not exist. Please provide a valid path."),
        ));
    }
    if is_dir && args.command != Command::View {
        return Err(FsError::plain(format!(
            "The path {p} is a directory and only the `view` command can be used on directories"
        )));
    }
    let max = ctx.limits.str_replace_max_output_chars;
    match args.command {
        Command::View if is_dir => {
            if args.view_range.is_some() {
                return Err(FsError::plain(
                    "The `view_range` parameter is not allowed when `path` points to a directory.",
                ));
            }
            let listing = clip(&list_dir(Path::new(p)), max);
            Ok(format!(
                "Here're the files and directories up to 2 levels deep in {p}, excluding hidden items, node_modules, and Python cache directories:\n{listing}\n"
            ))
        }
        Command::View => view_file(args, ctx, &resolved.real, max),
        Command::Create => {
            let Some(text) = &args.file_text else {
                return Err(FsError::plain(
                    "Parameter `file_text` is required for command: create",
                ));
            };
            if exists {
                return Err(FsError::plain(format!(
                    "File already exists at: {p}. Cannot overwrite files using command `create`."
                )));
            }
            let target = mutate::check_write_standing(ctx, p)?;
            if !mutate::write_file(ctx, &target.real, text, true, p)? {
                return Err(FsError::plain(format!(
                    "File already exists at: {p}. Cannot overwrite files using command `create`."
                )));
            }
            ctx.observe(
                &target.real,
                FileVersion::current(&target.real)
                    .map_or(Observation::Absent, Observation::Present),
            );
            Ok(format!("New file created successfully at: {p}"))
        }
        Command::StrReplace => str_replace(args, ctx),
        Command::Insert => insert(args, ctx),
    }
}

fn read_raw(ctx: &FsContext, real: &Path, path: &str) -> Result<String, FsError> {
    let io = |err: std::io::Error| FsError::io(&format!("cannot read \"{path}\""), &err);
    let file = crate::fsat::open_read(real).map_err(io)?;
    crate::read::refuse_secret_link(ctx, &file, Path::new(path))?;
    // The checks above apply to the file; its text may come from the editor's buffer.
    if let Some(text) = crate::editor::read_text(ctx, real) {
        return Ok(text);
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut &file, &mut bytes).map_err(io)?;
    if bytes[..bytes.len().min(8192)].contains(&0) {
        return Err(FsError::coded(
            codes::FS_NOT_TEXT,
            format!("cannot read \"{path}\": binary file"),
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        FsError::coded(
            codes::FS_NOT_TEXT,
            format!("cannot read \"{path}\": invalid UTF-8 text"),
        )
    })
}

/// Cuts to `max` characters and appends the clipped note when the text is longer.
fn clip(text: &str, max: usize) -> String {
    match crate::text::truncate_utf16(text, max) {
        Some(kept) => format!("{kept}{CLIPPED}"),
        None => text.to_owned(),
    }
}

fn view_file(
    args: &StrReplaceEditorArgs,
    ctx: &FsContext,
    real: &Path,
    max: usize,
) -> Result<String, FsError> {
    let p = args.path.as_str();
    let text = read_raw(ctx, real, p)?;
    ctx.observe(
        real,
        FileVersion::current(real).map_or(Observation::Absent, Observation::Present),
    );
    let lines: Vec<&str> = text.split('\n').collect();
    let n = lines.len() as i64;
    let (start, end, range_note) = match &args.view_range {
        None => (1, n, String::new()),
        Some(range) => {
            let [a, b] = range.as_slice() else {
                return Err(FsError::plain(
                    "Invalid `view_range`. It should be a list of two integers.",
                ));
            };
            let (a, b) = (*a, *b);
            if a < 1 || a > n {
                return Err(FsError::plain(format!(
                    "Invalid `view_range`: [{a}, {b}]. Its first element `{a}` should be within the range of lines of the file: [1, {n}]"
                )));
            }
            if b > n {
                return Err(FsError::plain(format!(
                    "Invalid `view_range`: [{a}, {b}]. Its second element `{b}` should be smaller than the number of lines in the file: `{n}`"
                )));
            }
            if b != -1 && b < a {
                return Err(FsError::plain(format!(
                    "Invalid `view_range`: [{a}, {b}]. Its second element `{b}` should be larger or equal than its first `{a}`"
                )));
            }
            (
                a,
                if b == -1 { n } else { b },
                format!(" with view_range=[{a}, {b}]"),
            )
        }
    };
    let body: Vec<String> = (start..=end)
        .filter_map(|number| {
            lines
                .get((number - 1) as usize)
                .map(|line| format!("{number:>6}  {line}"))
        })
        .collect();
    let whole = format!(
        "Here's the content of {p} with line numbers (which has a total of {n} lines){range_note}:\n{}\n",
        body.join("\n")
    );
    Ok(clip(&whole, max))
}

/// `d|f|?\t<path>` rows for the directory and two levels below, skipping hidden entries,
/// `node_modules` and `__pycache__`, in code-point order.
fn list_dir(root: &Path) -> String {
    fn walk(dir: &Path, depth: usize, rows: &mut Vec<(String, char)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "node_modules" || name == "__pycache__" {
                continue;
            }
            let path = entry.path();
            let kind = match entry.file_type() {
                Ok(t) if t.is_dir() => 'd',
                Ok(t) if t.is_file() => 'f',
                _ => '?',
            };
            rows.push((path.to_string_lossy().into_owned(), kind));
            if kind == 'd' && depth < 2 {
                walk(&path, depth + 1, rows);
            }
        }
    }
    let mut rows = vec![(root.to_string_lossy().into_owned(), 'd')];
    walk(root, 1, &mut rows);
    rows.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    rows.iter()
        .map(|(path, kind)| format!("{kind}\t{path}\n"))
        .collect()
}

/// The observed version the edit must still match (edit-intent policy), or the stat version.
fn edit_guard(ctx: &FsContext, real: &Path, p: &str) -> Result<Option<FileVersion>, FsError> {
    match ctx.observations.as_ref().map(|o| o.get(real)) {
        None => Ok(FileVersion::current(real)),
        Some(None) => Err(FsError::coded(
            codes::FS_NOT_OBSERVED,
            format!("edit requires reading \"{p}\" first"),
        )),
        Some(Some(Observation::Absent)) => Err(FsError::coded(
            codes::FS_NOT_FOUND,
            format!("The path {p} does not exist. Please provide a valid path."),
        )),
        Some(Some(Observation::Present(version))) => Ok(Some(version)),
    }
}

fn replace_if_version(
    ctx: &FsContext,
    real: &Path,
    guard: Option<FileVersion>,
    content: &str,
    p: &str,
) -> Result<(), FsError> {
    if guard.is_some() && FileVersion::current(real) != guard {
        return Err(mutate::stale(format!(
            "cannot edit \"{p}\": file changed since it was read"
        )));
    }
    mutate::write_file(ctx, real, content, false, p)?;
    ctx.observe(
        real,
        FileVersion::current(real).map_or(Observation::Absent, Observation::Present),
    );
    Ok(())
}

fn str_replace(args: &StrReplaceEditorArgs, ctx: &FsContext) -> Result<String, FsError> {
    let p = args.path.as_str();
    let target = mutate::check_write_standing(ctx, p)?;
    let guard = edit_guard(ctx, &target.real, p)?;
    let Some(old) = &args.old_str else {
        return Err(FsError::plain(
            "Parameter `old_str` is required for command: str_replace",
        ));
    };
    if old.is_empty() {
        return Err(FsError::plain(
            "Parameter `old_str` is empty for command: str_replace",
        ));
    }
    let new = args.new_str.as_deref().unwrap_or("");
    let text = read_raw(ctx, &target.real, p)?;
    let starts: Vec<usize> = text.match_indices(old.as_str()).map(|(at, _)| at).collect();
    match starts.as_slice() {
        [] => Err(FsError::coded(
            codes::FS_EDIT_NOT_FOUND,
            format!(
                "No replacement was performed, old_str `{old}` did not appear verbatim in {p}."
            ),
        )),
        [_] => {
            let updated = text.replacen(old.as_str(), new, 1);
            replace_if_version(ctx, &target.real, guard, &updated, p)?;
            Ok(format!("The file {p} has been edited successfully."))
        }
        many => {
            let lines: Vec<String> = many
                .iter()
                .map(|at| (text[..*at].matches('\n').count() + 1).to_string())
                .collect();
            Err(FsError::coded(
                codes::FS_AMBIGUOUS_EDIT,
                format!(
                    "No replacement was performed. Multiple occurrences of old_str `{old}` in lines [{}]. Please ensure it is unique",
                    lines.join(", ")
                ),
            ))
        }
    }
}

fn insert(args: &StrReplaceEditorArgs, ctx: &FsContext) -> Result<String, FsError> {
    let p = args.path.as_str();
    let target = mutate::check_write_standing(ctx, p)?;
    let guard = edit_guard(ctx, &target.real, p)?;
    let Some(line) = args.insert_line else {
        return Err(FsError::plain(
            "Parameter `insert_line` is required for command: insert",
        ));
    };
    let Some(new) = &args.new_str else {
        return Err(FsError::plain(
            "Parameter `new_str` is required for command: insert",
        ));
    };
    let text = read_raw(ctx, &target.real, p)?;
    let mut lines: Vec<&str> = text.split('\n').collect();
    let n = lines.len() as i64;
    if line < 0 || line > n {
        return Err(FsError::plain(format!(
            "Invalid `insert_line` parameter: {line}. It should be within the range of lines of the file: [0, {n}]"
        )));
    }
    let at = line as usize;
    lines.splice(at..at, new.split('\n'));
    replace_if_version(ctx, &target.real, guard, &lines.join("\n"), p)?;
    Ok(format!("The file {p} has been edited successfully."))
}

pub fn render(_args: &StrReplaceEditorArgs, out: &StrReplaceEditorOutput) -> Vec<ContentBlock> {
    vec![ContentBlock::text(out.0.clone())]
}

pub fn present_call(args: &StrReplaceEditorArgs) -> ToolCallView {
    let path = args.path.clone();
    match args.command {
        Command::View => ToolCallView::Generic {
            title: format!("View {path}"),
            kind: Some(ToolCallKind::Read),
            raw_input: None,
            content: None,
            locations: Some(vec![FileLocation::path(path)]),
        },
        Command::Create => ToolCallView::Diff {
            title: format!("Create {path}"),
            diffs: vec![FileDiff {
                path: path.clone(),
                old_text: None,
                new_text: args.file_text.clone().unwrap_or_default(),
            }],
            locations: Some(vec![FileLocation::path(path)]),
        },
        Command::StrReplace => ToolCallView::Diff {
            title: format!("Edit {path}"),
            diffs: vec![FileDiff {
                path: path.clone(),
                old_text: args.old_str.clone().filter(|s| !s.is_empty()),
                new_text: args.new_str.clone().unwrap_or_default(),
            }],
            locations: Some(vec![FileLocation::path(path)]),
        },
        Command::Insert => ToolCallView::Generic {
            title: format!("Insert into {path}"),
            kind: Some(ToolCallKind::Edit),
            raw_input: None,
            content: None,
            locations: Some(vec![FileLocation {
                path,
                line: args.insert_line.and_then(|l| u64::try_from(l + 1).ok()),
            }]),
        },
    }
}

pub fn present_result(
    _args: &StrReplaceEditorArgs,
    result: ResultInput<'_>,
) -> Option<ToolResultView> {
    Some(ToolResultView::Generic {
        title: None,
        content: Some(result.content.to_vec()),
    })
}

#[cfg(test)]
#[path = "str_replace_editor_tests.rs"]
mod tests;
