//! `grep`: ripgrep-regex search over file contents, grouped by file, capped inline with the
//! full match list spilled (catalog §2.4). Respects ignore and hidden rules like `rg`.

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use dsh_protocol::ContentBlock;
use dsh_tools::SearchFile;
use dsh_tools::SearchView;
use dsh_tools::ToolCallKind;
use dsh_tools::ToolCallView;
use dsh_tools::ToolResultView;
use grep_regex::RegexMatcher;
use grep_searcher::BinaryDetection;
use grep_searcher::SearcherBuilder;
use grep_searcher::sinks::Bytes;
use ignore::WalkBuilder;
use ignore::overrides::OverrideBuilder;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::cards::ResultInput;
use crate::context::FsContext;
use crate::error::FsError;
use crate::exec::blocking_or;
use crate::search;
use crate::search::SearchRoot;
use crate::search::Visit;
use crate::spill::SpillSaved;
use crate::text::truncate_bytes;

pub const NAME: &str = "grep";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GrepArgs {
    /// Regular expression (ripgrep syntax).
    pub pattern: String,
    /// File or directory to search; defaults to the session workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// One glob filter for which files to search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<String>,
}

/// Canonical value: every match, grouped by file in first-seen order, and the match count.
/// The inline cap is applied at render time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GrepOutput {
    pub files: Vec<GrepFile>,
    pub total: u64,
    /// `path: reason` of each entry the walk could not read and skipped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GrepFile {
    pub path: String,
    pub matches: Vec<GrepMatch>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrepMatch {
    pub line_number: u64,
    pub line: String,
}

/// Render-time configuration (`grepMaxMatches`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrepConfig {
    pub max_matches: usize,
}

impl Default for GrepConfig {
    fn default() -> Self {
        Self { max_matches: 250 }
    }
}

fn check_include(include: Option<&str>) -> Result<(), FsError> {
    let Some(glob) = include else { return Ok(()) };
    if glob.trim().is_empty() {
        return Err(FsError::plain(
            "include must be a non-empty glob when given",
        ));
    }
    if glob.starts_with('!') {
        return Err(FsError::plain(
            "include must be a positive glob filter; negated patterns (\"!…\") are not supported",
        ));
    }
    let mut depth = 0usize;
    for ch in glob.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                return Err(FsError::plain(
                    "include must be one glob, not a comma-separated list (use {a,b} alternation instead)",
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

pub async fn run(
    args: &GrepArgs,
    ctx: &FsContext,
    cancel: CancellationToken,
) -> Result<GrepOutput, FsError> {
    search::check_pattern(&args.pattern, args.path.as_deref())?;
    check_include(args.include.as_deref())?;
    let matcher = RegexMatcher::new_line_matcher(&args.pattern)
        .map_err(|err| search::invalid_pattern(NAME, &err.to_string()))?;
    let policy = ctx.policy.clone();
    let (cwd, path) = (ctx.cwd.clone(), args.path.clone());
    let include = args.include.clone();
    let max_line_bytes = ctx.limits.grep_max_line_bytes;
    let token = cancel.clone();
    blocking_or(
        &cancel,
        ctx.limits.io_timeout,
        || search::aborted(NAME),
        move || {
            let root = SearchRoot::new(NAME, &cwd, path.as_deref(), &policy)?;
            let (files, skipped) = collect(
                &root,
                &policy,
                &matcher,
                include.as_deref(),
                max_line_bytes,
                &token,
            )?;
            let total = files.iter().map(|f| f.matches.len() as u64).sum();
            Ok(GrepOutput {
                files,
                total,
                skipped,
            })
        },
    )
    .await
}

/// The direct-call spill (upstream's post-execute listener): over the cap, every match is
/// saved as `grep-results.txt` and the content re-rendered with its locator. `None` keeps the
/// rendered content (fits, nested call, no store, failed save).
pub fn spill_content(
    args: &GrepArgs,
    out: &GrepOutput,
    ctx: &FsContext,
) -> Option<Vec<ContentBlock>> {
    let config = GrepConfig {
        max_matches: ctx.limits.grep_max_matches,
    };
    if ctx.nested || out.total as usize <= config.max_matches {
        return None;
    }
    let saved = ctx.spill.save(
        "grep-results.txt",
        &full_text(&out.files, out.total as usize),
    )?;
    Some(render_with(&config, args, out, Some(&saved)))
}

fn collect(
    root: &SearchRoot,
    policy: &crate::policy::FilePolicy,
    matcher: &RegexMatcher,
    include: Option<&str>,
    max_line_bytes: usize,
    cancel: &CancellationToken,
) -> Result<(Vec<GrepFile>, Vec<String>), FsError> {
    let mut walker = WalkBuilder::new(&root.abs);
    {
        let (root, policy) = (root.clone(), policy.clone());
        walker.filter_entry(move |entry| !root.refused(&policy, entry.path()));
    }
    if let Some(glob) = include {
        let mut overrides = OverrideBuilder::new(&root.cwd);
        overrides
            .add(glob)
            .map_err(|err| search::invalid_pattern(NAME, &err.to_string()))?;
        walker.overrides(
            overrides
                .build()
                .map_err(|err| search::invalid_pattern(NAME, &err.to_string()))?,
        );
    }
    let root_is_file = root.abs.is_file();
    let searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(if root_is_file {
            BinaryDetection::convert(0)
        } else {
            BinaryDetection::quit(0)
        })
        .clone();
    let raw_bytes = AtomicUsize::new(0);
    let walked = search::walk_parallel(&walker, root, cancel, NAME, || {
        let mut searcher = searcher.build();
        let raw_bytes = &raw_bytes;
        move |entry: &ignore::DirEntry| {
            let mut matches = Vec::new();
            let mut file_bytes = 0usize;
            let sink = Bytes(|line_number, bytes| {
                file_bytes += bytes.len();
                matches.push(GrepMatch {
                    line_number,
                    line: preview(bytes, max_line_bytes),
                });
                Ok(file_bytes <= search::RAW_OUTPUT_MAX_BYTES)
            });
            if let Err(err) = searcher.search_path(matcher, entry.path(), sink) {
                tracing::debug!(path = %entry.path().display(), error = %err, "grep skipped unreadable file");
                return Visit::Skip;
            }
            let total = raw_bytes.fetch_add(file_bytes, Ordering::Relaxed) + file_bytes;
            if total > search::RAW_OUTPUT_MAX_BYTES {
                return Visit::Fail(search::overflow(NAME, total));
            }
            if matches.is_empty() {
                Visit::Skip
            } else {
                Visit::Hit(matches)
            }
        }
    })?;
    let files = walked
        .hits
        .into_iter()
        .map(|(path, matches)| GrepFile {
            path: root.display(&path),
            matches,
        })
        .collect();
    Ok((files, walked.skipped))
}

/// Strips the line terminator, marks non-UTF-8 lines, caps the preview UTF-8-safely.
fn preview(bytes: &[u8], max_bytes: usize) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let Ok(text) = std::str::from_utf8(bytes) else {
        return "(line is not valid UTF-8)".to_owned();
    };
    match truncate_bytes(text, max_bytes) {
        Some(kept) => format!("{kept} (line truncated)"),
        None => text.to_owned(),
    }
}

fn groups(files: &[GrepFile]) -> String {
    files
        .iter()
        .map(|file| {
            let mut group = file.path.clone();
            for m in &file.matches {
                group.push_str(&format!("\nLine {}: {}", m.line_number, m.line));
            }
            group
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn found(count: usize) -> String {
    if count == 1 {
        "Found 1 match".to_owned()
    } else {
        format!("Found {count} matches")
    }
}

fn full_text(files: &[GrepFile], total: usize) -> String {
    format!("{}\n\n{}", found(total), groups(files))
}

/// The first `kept` matches, still grouped by file.
fn head(files: &[GrepFile], kept: usize) -> Vec<GrepFile> {
    let mut left = kept;
    let mut out = Vec::new();
    for file in files {
        if left == 0 {
            break;
        }
        let take = file.matches.len().min(left);
        left -= take;
        out.push(GrepFile {
            path: file.path.clone(),
            matches: file.matches[..take].to_vec(),
        });
    }
    out
}

/// Model text with the default cap and no spill.
pub fn render(args: &GrepArgs, out: &GrepOutput) -> Vec<ContentBlock> {
    render_with(&GrepConfig::default(), args, out, None)
}

pub fn render_with(
    config: &GrepConfig,
    _args: &GrepArgs,
    out: &GrepOutput,
    spill: Option<&SpillSaved>,
) -> Vec<ContentBlock> {
    let total = out.total as usize;
    let kept = config.max_matches;
    let text = if total == 0 {
        "No matches found".to_owned()
    } else if total > kept {
        let recovery = match spill {
            Some(saved) => format!("Full grep result stored at: {}. {}", saved.locator, saved.retrieval_hint),
            None => "The complete result could not be saved; narrow pattern, path, or include to see more.".to_owned(),
        };
        format!(
            "Found {kept} of {total} matches\n\n{}\n\n({recovery})",
            groups(&head(&out.files, kept))
        )
    } else {
        full_text(&out.files, total)
    };
    vec![ContentBlock::text(
        text + &search::skipped_note(&out.skipped),
    )]
}

/// `{shape:'matches', files, truncated, total}` over the kept matches, byte-bounded.
pub fn presentation_meta_with(
    config: &GrepConfig,
    out: &GrepOutput,
    max_bytes: usize,
) -> serde_json::Value {
    let capped = out.total as usize > config.max_matches;
    let kept = if capped {
        head(&out.files, config.max_matches)
    } else {
        out.files.clone()
    };
    let total = out.total;
    search::bounded_meta(
        &kept,
        capped,
        max_bytes,
        |files, truncated| serde_json::json!({"shape": "matches", "files": files, "truncated": truncated, "total": total}),
    )
}

pub fn presentation_meta(_args: &GrepArgs, out: &GrepOutput) -> serde_json::Value {
    presentation_meta_with(&GrepConfig::default(), out, 65_536)
}

pub fn present_call(args: &GrepArgs) -> ToolCallView {
    let scope = args
        .path
        .as_ref()
        .map(|p| format!(" in {p}"))
        .unwrap_or_default();
    let include = args
        .include
        .as_ref()
        .map(|i| format!(" ({i})"))
        .unwrap_or_default();
    ToolCallView::Generic {
        title: format!("Grep {}{scope}{include}", args.pattern),
        kind: Some(ToolCallKind::Search),
        raw_input: Some(serde_json::Value::String(args.pattern.clone())),
        content: None,
        locations: None,
    }
}

#[derive(Deserialize)]
struct MatchesMeta {
    files: Vec<SearchFile>,
    truncated: bool,
    total: u64,
}

pub fn present_result(_args: &GrepArgs, result: ResultInput<'_>) -> Option<ToolResultView> {
    if result.is_error {
        return None;
    }
    let meta: MatchesMeta = serde_json::from_value(result.meta?.clone()).ok()?;
    Some(ToolResultView::Search(SearchView::Matches {
        title: None,
        files: meta.files,
        truncated: meta.truncated,
        total: meta.total,
    }))
}

#[cfg(test)]
#[path = "grep_tests.rs"]
mod tests;
