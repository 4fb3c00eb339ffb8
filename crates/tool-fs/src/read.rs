//! `read`: a numbered window over a UTF-8 text file (catalog §2.2a).

use std::path::PathBuf;

use dsh_protocol::ContentBlock;
use dsh_tools::FileLocation;
use dsh_tools::ReadFileLine;
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
use crate::exec::display;
use crate::exec::require_path;
use crate::text::envelope;
use crate::text::envelope_body;
use crate::text::lang_for;
use crate::text::truncate_utf16;

pub const NAME: &str = "read";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReadArgs {
    /// Path to read, resolved against the session workspace.
    pub file_path: String,
    /// First line to return, counting from 1 (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<f64>,
    /// Most lines to return (default and maximum: the configured read limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
}

/// Canonical value: `{path, offset, lines, totalLines}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadOutput {
    /// The display path (absolute, not realpathed).
    pub path: String,
    pub offset: u64,
    pub lines: Vec<ReadLine>,
    pub total_lines: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReadLine {
    pub number: u64,
    pub text: String,
}

fn positive_integer(value: Option<f64>, name: &str) -> Result<Option<u64>, FsError> {
    match value {
        None => Ok(None),
        Some(v) if v.is_finite() && v.fract() == 0.0 && v >= 1.0 => Ok(Some(v as u64)),
        Some(_) => Err(FsError::plain(format!("{name} must be a positive integer"))),
    }
}

pub async fn run(
    args: &ReadArgs,
    ctx: &FsContext,
    cancel: CancellationToken,
) -> Result<ReadOutput, FsError> {
    require_path(&args.file_path, "file_path")?;
    let offset = positive_integer(args.offset, "offset")?.unwrap_or(1);
    let limit = positive_integer(args.limit, "limit")?.unwrap_or(ctx.limits.read_limit as u64);
    if limit > ctx.limits.read_limit as u64 {
        return Err(FsError::plain(format!(
            "limit must be less than or equal to {}",
            ctx.limits.read_limit
        )));
    }
    let ctx = ctx.clone();
    let token = cancel.clone();
    let path = args.file_path.clone();
    let deadline = ctx.limits.io_timeout;
    // The policy's path resolution is file I/O too (a stat on a hung mount blocks).
    blocking(&cancel, deadline, move || {
        let resolved = ctx.policy.check_read(&ctx.cwd, &path)?;
        read_window(&ctx, &token, resolved.display, resolved.real, offset, limit)
    })
    .await
}

/// Refuses an opened file that is a hard link to a secret file.
pub(crate) fn refuse_secret_link(
    ctx: &FsContext,
    file: &std::fs::File,
    display_path: &std::path::Path,
) -> Result<(), FsError> {
    if ctx.policy.is_secret_file(file) {
        return Err(FsError::coded(
            codes::FS_SANDBOX_DENIED,
            format!(
                "[sandbox: reading \"{}\" is refused in every mode: it is a hard link to a secret file]",
                display_path.display()
            ),
        ));
    }
    Ok(())
}

/// Streams a text file line by line with strict decoding: a NUL in the first 8 KiB is binary,
/// every line must be UTF-8 (`\n` never occurs inside a multi-byte sequence, so per-line
/// validation equals whole-file validation), and a leading BOM is dropped. `visit` receives
/// each line without its `\n`; a final segment counts only when non-empty.
fn scan_lines(
    mut file: std::fs::File,
    p: &str,
    cancel: &CancellationToken,
    mut visit: impl FnMut(&str),
) -> Result<(), FsError> {
    use std::io::BufRead;
    use std::io::Read;
    let io = |err: std::io::Error| FsError::io(&format!("cannot read \"{p}\""), &err);
    let mut head = Vec::with_capacity(8192);
    (&mut file).take(8192).read_to_end(&mut head).map_err(io)?;
    if head.contains(&0) {
        return Err(FsError::coded(
            codes::FS_NOT_TEXT,
            format!("cannot read \"{p}\": binary file"),
        ));
    }
    let mut reader =
        std::io::BufReader::with_capacity(64 * 1024, std::io::Cursor::new(head).chain(file));
    let mut buf = Vec::new();
    let mut first = true;
    let mut count: u64 = 0;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf).map_err(io)? == 0 {
            return Ok(());
        }
        count += 1;
        if count.is_multiple_of(4096) && cancel.is_cancelled() {
            return Err(FsError::aborted());
        }
        let mut line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        if std::mem::take(&mut first) {
            line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
        }
        let text = std::str::from_utf8(line).map_err(|_| {
            FsError::coded(
                codes::FS_NOT_TEXT,
                format!("cannot read \"{p}\": invalid UTF-8 text"),
            )
        })?;
        visit(text);
    }
}

/// [`scan_lines`] over text the editor returned (already decoded).
fn scan_text(
    text: &str,
    cancel: &CancellationToken,
    mut visit: impl FnMut(&str),
) -> Result<(), FsError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut segments = text.split('\n').peekable();
    let mut count: u64 = 0;
    while let Some(segment) = segments.next() {
        // The segment after a final newline is not a line.
        if segments.peek().is_none() && segment.is_empty() {
            break;
        }
        count += 1;
        if count.is_multiple_of(4096) && cancel.is_cancelled() {
            return Err(FsError::aborted());
        }
        visit(segment);
    }
    Ok(())
}

fn read_window(
    ctx: &FsContext,
    cancel: &CancellationToken,
    display_path: PathBuf,
    real: PathBuf,
    offset: u64,
    limit: u64,
) -> Result<ReadOutput, FsError> {
    let p = display(&display_path);
    let meta = match std::fs::metadata(&display_path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            ctx.observe(&real, Observation::Absent);
            return Err(FsError::coded(
                codes::FS_NOT_FOUND,
                format!("cannot read \"{p}\": not found"),
            ));
        }
        Err(err) => return Err(FsError::io(&format!("cannot read \"{p}\""), &err)),
    };
    if !meta.is_file() {
        return Err(FsError::coded(
            codes::FS_NOT_REGULAR_FILE,
            format!("cannot read \"{p}\": not a regular file"),
        ));
    }
    let max_len = ctx.limits.read_max_line_length;
    let max_bytes = ctx.limits.read_max_bytes;
    let mut total: u64 = 0;
    let mut lines = Vec::new();
    let mut used = 0usize;
    let mut capped = false;
    // Opened here even when the editor supplies the text: the checks on the file itself
    // (secret links, what it resolves to) apply either way.
    let file = crate::fsat::open_read(&real)
        .map_err(|err| FsError::io(&format!("cannot read \"{p}\""), &err))?;
    refuse_secret_link(ctx, &file, &display_path)?;
    let visit = |segment: &str| {
        total += 1;
        if total < offset || capped || lines.len() as u64 >= limit {
            return;
        }
        let line = segment.strip_suffix('\r').unwrap_or(segment);
        let line = match truncate_utf16(line, max_len) {
            Some(kept) => format!("{kept}... (line truncated to {max_len} chars)"),
            None => line.to_owned(),
        };
        let cost = line.len() + usize::from(!lines.is_empty());
        if used + cost > max_bytes {
            capped = true;
            return;
        }
        used += cost;
        lines.push(ReadLine {
            number: total,
            text: line,
        });
    };
    match crate::editor::read_text(ctx, &real) {
        Some(text) => scan_text(&text, cancel, visit)?,
        None => scan_lines(file, &p, cancel, visit)?,
    }
    if offset > total && !(total == 0 && offset == 1) {
        return Err(FsError::coded(
            codes::FS_NOT_FOUND,
            format!("offset {offset} is out of range for \"{p}\" ({total} lines)"),
        ));
    }
    ctx.observe(&real, Observation::Present(FileVersion::of(&meta)));
    Ok(ReadOutput {
        path: p,
        offset,
        lines,
        total_lines: total,
    })
}

/// The footer; a short window that ends before the file does was cut by the byte cap.
fn footer(args: &ReadArgs, out: &ReadOutput, read_limit: u64) -> String {
    let limit = args.limit.map_or(read_limit, |l| l as u64);
    let Some(last) = out.lines.last().map(|l| l.number) else {
        return format!("(End of file - total {} lines)", out.total_lines);
    };
    if last >= out.total_lines {
        format!("(End of file - total {} lines)", out.total_lines)
    } else if (out.lines.len() as u64) < limit {
        format!(
            "(Output capped. Showing lines {}-{last}. Use offset={} to continue.)",
            out.offset,
            last + 1
        )
    } else {
        format!(
            "(Showing lines {}-{last} of {}. Use offset={} to continue.)",
            out.offset,
            out.total_lines,
            last + 1
        )
    }
}

pub fn render_with_limit(
    args: &ReadArgs,
    out: &ReadOutput,
    read_limit: usize,
) -> Vec<ContentBlock> {
    let footer = footer(args, out, read_limit as u64);
    let body = if out.lines.is_empty() {
        footer
    } else {
        let numbered: Vec<String> = out
            .lines
            .iter()
            .map(|l| format!("{}: {}", l.number, l.text))
            .collect();
        format!("{}\n\n{footer}", numbered.join("\n"))
    };
    vec![ContentBlock::text(envelope(&out.path, "file", &body))]
}

/// Model-facing text with the default `readLimit` (2000).
pub fn render(args: &ReadArgs, out: &ReadOutput) -> Vec<ContentBlock> {
    render_with_limit(args, out, 2000)
}

/// Persisted meta: the canonical four fields plus `lang` when the extension maps to one.
pub fn presentation_meta(_args: &ReadArgs, out: &ReadOutput) -> serde_json::Value {
    let mut meta = serde_json::json!({
        "path": out.path,
        "offset": out.offset,
        "lines": out.lines,
        "totalLines": out.total_lines,
    });
    if let (Some(lang), Some(map)) = (lang_for(&out.path), meta.as_object_mut()) {
        map.insert("lang".into(), lang.into());
    }
    meta
}

pub fn present_call(args: &ReadArgs) -> ToolCallView {
    let offset = args.offset.map(|o| o as u64);
    let suffix = match (offset, args.limit.map(|l| l as u64)) {
        (o, Some(limit)) => {
            let start = o.unwrap_or(1);
            format!(" ({start} - {})", (start + limit).saturating_sub(1))
        }
        (Some(o), None) => format!(" (from line {o})"),
        (None, None) => String::new(),
    };
    ToolCallView::Generic {
        title: format!("Read {}{suffix}", args.file_path),
        kind: Some(ToolCallKind::Read),
        raw_input: None,
        content: None,
        locations: Some(vec![FileLocation {
            path: args.file_path.clone(),
            line: Some(offset.unwrap_or(1)),
        }]),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReadMeta {
    path: String,
    offset: u64,
    lines: Vec<ReadFileLine>,
    total_lines: u64,
    #[serde(default)]
    lang: Option<String>,
}

/// `read{…}` built from the persisted meta; none when it is missing or invalid, or on error.
pub fn present_result(_args: &ReadArgs, result: ResultInput<'_>) -> Option<ToolResultView> {
    if result.is_error {
        return None;
    }
    let meta: ReadMeta = serde_json::from_value(result.meta?.clone()).ok()?;
    let text = dsh_protocol::text_of(result.content);
    let content = envelope_body(&text).map(str::to_owned);
    Some(ToolResultView::Read {
        title: None,
        path: meta.path,
        offset: meta.offset,
        lines: meta.lines,
        total_lines: meta.total_lines,
        lang: meta.lang,
        content,
    })
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
