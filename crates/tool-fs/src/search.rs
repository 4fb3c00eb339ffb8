//! Shared plumbing of `glob` and `grep` (catalog §2.4): argument checks, the search root,
//! ripgrep-compatible display paths, error texts, and byte-bounded meta.

use std::path::Path;
use std::path::PathBuf;

use crate::error::FsError;
use crate::error::codes;

/// `rawOutputMaxBytes`: the cap on what ripgrep may print before the call fails.
pub(crate) const RAW_OUTPUT_MAX_BYTES: usize = 20_000_000;

pub(crate) fn check_pattern(pattern: &str, path: Option<&str>) -> Result<(), FsError> {
    if pattern.trim().is_empty() {
        return Err(FsError::plain("pattern must be a non-empty string"));
    }
    if path.is_some_and(|p| p.trim().is_empty()) {
        return Err(FsError::plain("path must be a non-empty string when given"));
    }
    Ok(())
}

/// Where a search runs and how its hits are displayed.
#[derive(Debug, Clone)]
pub(crate) struct SearchRoot {
    pub cwd: PathBuf,
    pub abs: PathBuf,
    /// `abs` canonicalized: the walk follows no symlink below it, so an entry's real path is
    /// this joined with the entry's path below `abs`.
    pub real: PathBuf,
    /// The `path` argument as given.
    pub arg: Option<String>,
}

impl SearchRoot {
    /// Resolves the root; a missing one fails like ripgrep's exit 2.
    pub fn new(
        tool: &str,
        cwd: &Path,
        arg: Option<&str>,
        policy: &crate::policy::FilePolicy,
    ) -> Result<Self, FsError> {
        // `components()` drops `.` segments, so hits strip cleanly against the root.
        let abs: PathBuf = cwd.join(arg.unwrap_or(".")).components().collect();
        policy.check_read(cwd, arg.unwrap_or("."))?;
        if std::fs::metadata(&abs).is_err() {
            let shown = arg.unwrap_or(".");
            return Err(FsError::coded(
                codes::SEARCH_FAILED,
                format!(
                    "{tool} search failed (exit 2): rg: {shown}: IO error for operation on {shown}: No such file or directory (os error 2)"
                ),
            ));
        }
        let real = crate::policy::canonicalize_lenient(&abs);
        Ok(Self {
            cwd: cwd.to_path_buf(),
            abs,
            real,
            arg: arg.map(str::to_owned),
        })
    }

    /// Whether the read policy refuses `path` (an entry of the walk): refused folders are not
    /// entered and refused files are not listed or searched.
    pub fn refused(&self, policy: &crate::policy::FilePolicy, path: &Path) -> bool {
        let real = match path.strip_prefix(&self.abs) {
            Ok(rel) if rel.as_os_str().is_empty() => self.real.clone(),
            Ok(rel) => self.real.join(rel),
            Err(_) => path.to_path_buf(),
        };
        policy.read_refusal(path, &real).is_some()
    }

    /// The display root for canonical values: the `path` argument's display form, or `.`.
    pub fn display_root(&self) -> String {
        match &self.arg {
            None => ".".to_owned(),
            Some(arg) => self.rewrite_absolute(Path::new(arg)),
        }
    }

    /// How ripgrep prints a hit: relative hits keep the `path` argument as their prefix;
    /// absolute hits are rewritten relative to the workdir when inside it.
    pub fn display(&self, hit: &Path) -> String {
        let rel = hit.strip_prefix(&self.abs).unwrap_or(hit);
        match &self.arg {
            None => rel.to_string_lossy().into_owned(),
            Some(arg) => {
                let joined = if rel.as_os_str().is_empty() {
                    PathBuf::from(arg)
                } else {
                    Path::new(arg).join(rel)
                };
                if joined.is_absolute() {
                    self.rewrite_absolute(&joined)
                } else {
                    joined.to_string_lossy().into_owned()
                }
            }
        }
    }

    fn rewrite_absolute(&self, path: &Path) -> String {
        if !path.is_absolute() {
            return path.to_string_lossy().into_owned();
        }
        match path.strip_prefix(&self.cwd) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => path.to_string_lossy().into_owned(),
        }
    }
}

pub(crate) fn aborted(tool: &str) -> FsError {
    FsError::coded(
        codes::SEARCH_ABORTED,
        format!("{tool} was aborted before completion (tool timeout or caller cancellation)"),
    )
}

pub(crate) fn invalid_pattern(tool: &str, stderr: &str) -> FsError {
    FsError::coded(
        codes::SEARCH_INVALID_PATTERN,
        format!("{tool} pattern rejected by ripgrep: {}", stderr.trim()),
    )
}

pub(crate) fn overflow(tool: &str, bytes: usize) -> FsError {
    FsError::coded(
        codes::SEARCH_RAW_OUTPUT_OVERFLOW,
        format!(
            "{tool} produced {bytes} bytes of raw output, over the {RAW_OUTPUT_MAX_BYTES}-byte cap; narrow pattern, path, or include and retry"
        ),
    )
}

pub(crate) fn walk_failed(tool: &str, err: &ignore::Error) -> FsError {
    FsError::coded(
        codes::SEARCH_FAILED,
        format!("{tool} search failed (exit 2): rg: {err}"),
    )
}

/// Drops trailing items (keeping at least one) until `build(items, truncated)` serializes
/// within `max_bytes`; any drop marks the meta truncated.
pub(crate) fn bounded_meta<T: Clone>(
    items: &[T],
    truncated: bool,
    max_bytes: usize,
    build: impl Fn(&[T], bool) -> serde_json::Value,
) -> serde_json::Value {
    let mut keep = items.len();
    let mut meta = build(items, truncated);
    while keep > 1 && serde_json::to_string(&meta).map_or(0, |s| s.len()) > max_bytes {
        keep -= 1;
        meta = build(&items[..keep], true);
    }
    meta
}
