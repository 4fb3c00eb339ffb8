//! `glob`: files whose paths match a glob, oldest first, with over-cap sampling across
//! top-level entries and a spilled full list (catalog §2.4).

use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use dsh_protocol::ContentBlock;
use dsh_tools::SearchView;
use dsh_tools::ToolCallKind;
use dsh_tools::ToolCallView;
use dsh_tools::ToolResultView;
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

pub const NAME: &str = "glob";

const VCS_DIRS: [&str; 6] = [".git", ".svn", ".hg", ".bzr", ".jj", ".sl"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GlobArgs {
    /// Glob over file paths; without a `/` it matches file names at any depth.
    pub pattern: String,
    /// Directory to search in; defaults to the session workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Canonical value `{root, paths}`: every matching file, ascending mtime; `root` is the display
/// form of `path` (or `.`). The shown page is derived from it at render time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GlobOutput {
    pub root: String,
    pub paths: Vec<String>,
    /// `path: reason` of each entry the walk could not read and skipped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

/// Render-time configuration (`globMaxResults`, `sampleOverCapGlobResults`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GlobConfig {
    pub max_results: usize,
    pub sampling: bool,
}

impl Default for GlobConfig {
    fn default() -> Self {
        Self {
            max_results: 100,
            sampling: true,
        }
    }
}

impl GlobConfig {
    pub fn from_limits(limits: &crate::context::FsLimits) -> Self {
        Self {
            max_results: limits.glob_max_results,
            sampling: limits.sample_over_cap_glob_results,
        }
    }
}

/// The over-cap page: what is shown and, when sampled, `(contributing groups, all groups)`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GlobPage {
    pub shown: Vec<String>,
    pub sampled: Option<(usize, usize)>,
}

pub async fn run(
    args: &GlobArgs,
    ctx: &FsContext,
    cancel: CancellationToken,
) -> Result<GlobOutput, FsError> {
    search::check_pattern(&args.pattern, args.path.as_deref())?;
    let policy = ctx.policy.clone();
    let pattern = args.pattern.clone();
    let token = cancel.clone();
    let (cwd, path) = (ctx.cwd.clone(), args.path.clone());
    blocking_or(
        &cancel,
        ctx.limits.io_timeout,
        || search::aborted(NAME),
        move || {
            let root = SearchRoot::new(NAME, &cwd, path.as_deref(), &policy)?;
            let (paths, skipped) = collect(&root, &policy, &pattern, &token)?;
            Ok(GlobOutput {
                root: root.display_root(),
                paths,
                skipped,
            })
        },
    )
    .await
}

/// The direct-call spill (upstream's post-execute listener): over the cap, the full list is
/// saved as `glob-results.txt` and the content re-rendered with its locator. `None` keeps the
/// rendered content (fits, nested call, no store, failed save).
pub fn spill_content(
    args: &GlobArgs,
    out: &GlobOutput,
    ctx: &FsContext,
) -> Option<Vec<ContentBlock>> {
    let config = GlobConfig::from_limits(&ctx.limits);
    if ctx.nested || out.paths.len() <= config.max_results {
        return None;
    }
    let saved = ctx.spill.save("glob-results.txt", &out.paths.join("\n"))?;
    Some(render_with(&config, args, out, Some(&saved)))
}

fn collect(
    root: &SearchRoot,
    policy: &crate::policy::FilePolicy,
    pattern: &str,
    cancel: &CancellationToken,
) -> Result<(Vec<String>, Vec<String>), FsError> {
    let mut overrides = OverrideBuilder::new(&root.cwd);
    overrides
        .add(pattern)
        .map_err(|err| search::invalid_pattern(NAME, &err.to_string()))?;
    for dir in VCS_DIRS {
        for glob in [format!("!**/{dir}"), format!("!**/{dir}/**")] {
            overrides
                .add(&glob)
                .map_err(|err| search::invalid_pattern(NAME, &err.to_string()))?;
        }
    }
    let overrides = overrides
        .build()
        .map_err(|err| search::invalid_pattern(NAME, &err.to_string()))?;
    let (filter_root, filter_policy) = (root.clone(), policy.clone());
    let mut walker = WalkBuilder::new(&root.abs);
    walker
        .standard_filters(false)
        .hidden(false)
        .overrides(overrides)
        .filter_entry(move |entry| !filter_root.refused(&filter_policy, entry.path()));
    let raw_bytes = AtomicUsize::new(0);
    let walked = search::walk_parallel(&walker, root, cancel, NAME, || {
        let raw_bytes = &raw_bytes;
        move |entry: &ignore::DirEntry| {
            let display = root.display(entry.path());
            let total =
                raw_bytes.fetch_add(display.len() + 1, Ordering::Relaxed) + display.len() + 1;
            if total > search::RAW_OUTPUT_MAX_BYTES {
                return Visit::Fail(search::overflow(NAME, total));
            }
            let mtime = entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            Visit::Hit((display, mtime))
        }
    })?;
    let mut hits: Vec<(String, SystemTime)> = walked.hits.into_iter().map(|(_, hit)| hit).collect();
    // `--sort=modified`: ascending mtime; the path-sorted walk order breaks ties (stable sort).
    hits.sort_by_key(|(_, mtime)| *mtime);
    Ok((
        hits.into_iter().map(|(display, _)| display).collect(),
        walked.skipped,
    ))
}

/// The top-level entry of a displayed path: its first segment below the displayed root.
fn top_level<'a>(root: &str, path: &'a str) -> &'a str {
    let below = if root == "." {
        path.strip_prefix("./").unwrap_or(path)
    } else {
        path.strip_prefix(root)
            .and_then(|rest| rest.strip_prefix('/'))
            .unwrap_or(path)
    };
    below.split('/').next().unwrap_or(below)
}

/// The page shown for an over-cap result; `None` when everything fits.
pub fn page(config: &GlobConfig, out: &GlobOutput) -> Option<GlobPage> {
    let max = config.max_results;
    if out.paths.len() <= max {
        return None;
    }
    if config.sampling {
        Some(sample(&out.root, &out.paths, max))
    } else {
        Some(GlobPage {
            shown: out.paths[..max].to_vec(),
            sampled: None,
        })
    }
}

/// Round-robin over top-level entries (ordered by first appearance), oldest first, until
/// `max` are taken; the page is printed grouped by entry, not interleaved.
fn sample(root: &str, paths: &[String], max: usize) -> GlobPage {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for display in paths {
        let group = top_level(root, display);
        match groups.iter_mut().find(|(key, _)| *key == group) {
            Some((_, members)) => members.push(display),
            None => groups.push((group, vec![display])),
        }
    }
    let mut taken = vec![0usize; groups.len()];
    let mut count = 0;
    'rounds: while count < max {
        let mut progressed = false;
        for (index, (_, members)) in groups.iter().enumerate() {
            if count == max {
                break 'rounds;
            }
            if taken[index] < members.len() {
                taken[index] += 1;
                count += 1;
                progressed = true;
            }
        }
        if !progressed {
            break;
        }
    }
    let shown: Vec<String> = groups
        .iter()
        .zip(&taken)
        .flat_map(|((_, members), n)| members[..*n].iter().map(|s| (*s).to_owned()))
        .collect();
    let contributing = taken.iter().filter(|n| **n > 0).count();
    GlobPage {
        shown,
        sampled: Some((contributing, groups.len())),
    }
}

/// Model text with the default configuration and no spill.
pub fn render(args: &GlobArgs, out: &GlobOutput) -> Vec<ContentBlock> {
    render_with(&GlobConfig::default(), args, out, None)
}

pub fn render_with(
    config: &GlobConfig,
    _args: &GlobArgs,
    out: &GlobOutput,
    spill: Option<&SpillSaved>,
) -> Vec<ContentBlock> {
    let note = search::skipped_note(&out.skipped);
    vec![ContentBlock::text(render_text(config, out, spill) + &note)]
}

fn render_text(config: &GlobConfig, out: &GlobOutput, spill: Option<&SpillSaved>) -> String {
    if out.paths.is_empty() {
        return "No files found".to_owned();
    }
    let Some(page) = page(config, out) else {
        return out.paths.join("\n");
    };
    let total = out.paths.len();
    let basis = match page.sampled {
        Some((shown, groups)) if groups != total => {
            let narrow = if shown < groups {
                " Narrow path to inspect a specific subtree."
            } else {
                ""
            };
            format!(
                ", sampled across {shown} of the {groups} top-level entries this pattern matched instead of taken in modification-time order.{narrow}"
            )
        }
        _ => ".".to_owned(),
    };
    let recovery = match spill {
        Some(saved) => format!(
            "Full sorted result stored at: {}. {}",
            saved.locator, saved.retrieval_hint
        ),
        None => {
            "The complete result could not be saved; narrow pattern or path to see more.".to_owned()
        }
    };
    format!(
        "{}\n\n(Showing {} of {total} paths{basis} {recovery})",
        page.shown.join("\n"),
        page.shown.len()
    )
}

/// `{shape:'paths', paths:<page>, truncated, total}`, byte-bounded.
pub fn presentation_meta_with(
    config: &GlobConfig,
    out: &GlobOutput,
    max_bytes: usize,
) -> serde_json::Value {
    let page = page(config, out);
    let shown = page.as_ref().map_or(&out.paths, |page| &page.shown);
    let total = out.paths.len();
    search::bounded_meta(
        shown,
        page.is_some(),
        max_bytes,
        |paths, truncated| serde_json::json!({"shape": "paths", "paths": paths, "truncated": truncated, "total": total}),
    )
}

pub fn presentation_meta(_args: &GlobArgs, out: &GlobOutput) -> serde_json::Value {
    presentation_meta_with(&GlobConfig::default(), out, 65_536)
}

pub fn present_call(args: &GlobArgs) -> ToolCallView {
    let scope = args
        .path
        .as_ref()
        .map(|p| format!(" in {p}"))
        .unwrap_or_default();
    ToolCallView::Generic {
        title: format!("Glob {}{scope}", args.pattern),
        kind: Some(ToolCallKind::Search),
        raw_input: Some(serde_json::Value::String(args.pattern.clone())),
        content: None,
        locations: None,
    }
}

#[derive(Deserialize)]
struct PathsMeta {
    paths: Vec<String>,
    truncated: bool,
    total: u64,
}

pub fn present_result(_args: &GlobArgs, result: ResultInput<'_>) -> Option<ToolResultView> {
    if result.is_error {
        return None;
    }
    let meta: PathsMeta = serde_json::from_value(result.meta?.clone()).ok()?;
    Some(ToolResultView::Search(SearchView::Paths {
        title: None,
        paths: meta.paths,
        truncated: meta.truncated,
        total: meta.total,
    }))
}

/// The model-facing description for a cap of `max` paths.
pub fn description(max: usize, sampling: bool) -> String {
    let over_cap = if sampling {
        format!(
            "when more files match, the {max} shown are sampled across the top-level entries under the search directory"
        )
    } else {
        format!("when more files match, you get the {max} oldest")
    };
    format!(
        "Find files by path pattern. Returns file paths only, never directories, and includes hidden and ignored files; version-control metadata directories such as .git are skipped. Paths are ordered by modification time, oldest first. At most {max} paths are returned: {over_cap}. A cut-down result says so and tells you where the complete sorted list was stored. Use it to locate files, not to list what a directory contains."
    )
}

#[cfg(test)]
#[path = "glob_tests.rs"]
mod tests;
