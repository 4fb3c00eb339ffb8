//! Shared plumbing of `glob` and `grep` (catalog §2.4): argument checks, the search root,
//! ripgrep-compatible display paths, error texts, and byte-bounded meta.

use std::path::Path;
use std::path::PathBuf;
use std::sync::Mutex;

use ignore::DirEntry;
use ignore::WalkBuilder;
use ignore::WalkState;
use tokio_util::sync::CancellationToken;

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

/// How many skipped paths a result names before it only counts the rest.
const SKIPPED_NAMED: usize = 5;

/// `path: reason` of an entry the walk could not read (an unreadable folder, a vanished file).
fn skipped_entry(root: &SearchRoot, err: &ignore::Error) -> String {
    match err {
        ignore::Error::WithPath { path, err } => format!("{}: {err}", root.display(path)),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            skipped_entry(root, err)
        }
        other => other.to_string(),
    }
}

/// The note a result ends with when the walk skipped entries; empty when it skipped none.
pub(crate) fn skipped_note(skipped: &[String]) -> String {
    if skipped.is_empty() {
        return String::new();
    }
    let count = skipped.len();
    let noun = if count == 1 { "path" } else { "paths" };
    let mut named = skipped[..count.min(SKIPPED_NAMED)].join("; ");
    if count > SKIPPED_NAMED {
        named.push_str(&format!("; and {} more", count - SKIPPED_NAMED));
    }
    format!("\n\n(Skipped {count} unreadable {noun}: {named})")
}

/// What a parallel walk produced: the per-file results in walk order (depth first, names
/// sorted: the order of ripgrep's `--sort path`), and the entries it could not read.
pub(crate) struct Walked<T> {
    pub hits: Vec<(PathBuf, T)>,
    pub skipped: Vec<String>,
}

/// What the per-file visitor decided.
pub(crate) enum Visit<T> {
    /// Nothing to report for this file.
    Skip,
    Hit(T),
    /// Stop the whole walk with this error (cancellation, an output cap).
    Fail(FsError),
}

/// Walks `walker` on the `ignore` crate's parallel walker and calls `visit` for every file,
/// from several threads. Output order does not depend on thread timing: hits are sorted by
/// path at the end. Unreadable entries are skipped and named in [`Walked::skipped`], so one
/// unreadable folder (say `/proc/1/fdinfo`) no longer fails the whole search.
/// `make_visitor` builds one visitor per thread (each keeps its own searcher).
pub(crate) fn walk_parallel<T, V>(
    walker: &WalkBuilder,
    root: &SearchRoot,
    cancel: &CancellationToken,
    tool: &str,
    make_visitor: impl Fn() -> V + Sync,
) -> Result<Walked<T>, FsError>
where
    T: Send,
    V: FnMut(&DirEntry) -> Visit<T> + Send,
{
    let hits: Mutex<Vec<(PathBuf, T)>> = Mutex::new(Vec::new());
    let skipped: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
    let failure: Mutex<Option<FsError>> = Mutex::new(None);
    let fail = |error: FsError| {
        let mut slot = dsh_sync::lock(&failure);
        if slot.is_none() {
            *slot = Some(error);
        }
        WalkState::Quit
    };
    walker.build_parallel().run(|| {
        let mut visit = make_visitor();
        let (hits, skipped, fail) = (&hits, &skipped, &fail);
        Box::new(move |entry| {
            if cancel.is_cancelled() {
                return fail(aborted(tool));
            }
            let entry = match entry {
                Ok(entry) => entry,
                Err(err) => {
                    let key = match &err {
                        ignore::Error::WithPath { path, .. } => path.display().to_string(),
                        other => other.to_string(),
                    };
                    dsh_sync::lock(skipped).push((key, skipped_entry(root, &err)));
                    return WalkState::Continue;
                }
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            match visit(&entry) {
                Visit::Skip => WalkState::Continue,
                Visit::Hit(value) => {
                    dsh_sync::lock(hits).push((entry.into_path(), value));
                    WalkState::Continue
                }
                Visit::Fail(error) => fail(error),
            }
        })
    });
    if let Some(error) = dsh_sync::into_inner(failure) {
        return Err(error);
    }
    let mut hits = dsh_sync::into_inner(hits);
    // `Path`'s order compares component by component: the name-sorted depth-first order.
    hits.sort_by(|a, b| a.0.cmp(&b.0));
    let mut skipped = dsh_sync::into_inner(skipped);
    skipped.sort();
    skipped.dedup();
    Ok(Walked {
        hits,
        skipped: skipped.into_iter().map(|(_, shown)| shown).collect(),
    })
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

/// Test fixtures shared by the grep and glob tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use std::path::Path;

    use rustix::fs::Mode;
    use rustix::fs::OFlags;

    /// Builds `<base>/deep/<255 × 'd'>/…` past `PATH_MAX`, so the walk cannot open the
    /// innermost folders by path — an unreadable folder even for root. Returns the displayed
    /// path (relative to `base`) of the first folder the walk cannot read.
    pub fn unreadable_tree(base: &Path) -> String {
        let name = "d".repeat(255);
        std::fs::create_dir(base.join("deep")).unwrap();
        let mut dir = rustix::fs::open(
            base.join("deep"),
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        let mut shown = "deep".to_owned();
        let mut first_unreadable = None;
        let base_len = base.as_os_str().len();
        for _ in 0..20 {
            rustix::fs::mkdirat(&dir, name.as_str(), Mode::from_raw_mode(0o755)).unwrap();
            dir = rustix::fs::openat(
                &dir,
                name.as_str(),
                OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .unwrap();
            shown.push('/');
            shown.push_str(&name);
            if first_unreadable.is_none() && base_len + 1 + shown.len() >= 4096 {
                first_unreadable = Some(shown.clone());
            }
        }
        let file = rustix::fs::openat(
            &dir,
            "hidden.txt",
            OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .unwrap();
        rustix::io::write(&file, b"needle deep\n").unwrap();
        first_unreadable.unwrap()
    }
}
