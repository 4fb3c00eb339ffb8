//! The local `@file` candidate service (§3.2): live directory listing for path-like queries,
//! fuzzy ranking over a bounded breadth-first index otherwise. Never follows directory
//! symlinks and never leaves the session's root.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::path::Component;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;

use dsh_session::SessionLog;
use dsh_session::kind;
use serde::Serialize;
use serde_json::Map;
use serde_json::Value;

/// The system-prompt section name of the model-visible guidance (order 99).
pub const FILE_REFERENCE_SECTION: &str = "context:file-reference";
/// The section's order.
pub const FILE_REFERENCE_ORDER: f64 = 99.0;
/// The guidance, shown only when the agent can `read`.
pub const FILE_REFERENCE_GUIDANCE: &str = "Paths prefixed with @ are files explicitly referenced by the user. Use the read tool when their contents are needed; do not claim to have inspected a file before reading it.";

/// The section text for an agent: the guidance when `read` is visible, else empty.
pub fn file_reference_guidance(read_visible: bool) -> &'static str {
    if read_visible {
        FILE_REFERENCE_GUIDANCE
    } else {
        ""
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CandidateKind {
    File,
    Directory,
}

/// `{path, kind}`; `path` is relative to the root, with `/` separators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileCandidate {
    pub path: String,
    pub kind: CandidateKind,
}

/// `file-reference-local` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileReferenceConfig {
    pub max_results: usize,
    pub max_entries: usize,
    pub excluded_directories: Vec<String>,
}

impl Default for FileReferenceConfig {
    fn default() -> Self {
        Self {
            max_results: 20,
            max_entries: 10_000,
            excluded_directories: vec![".git".into(), "node_modules".into()],
        }
    }
}

/// A load error with upstream's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FileReferenceConfigError(pub String);

impl FileReferenceConfig {
    pub fn parse(value: &Value) -> Result<Self, FileReferenceConfigError> {
        const PREFIX: &str = "file-reference-local";
        let empty = Map::new();
        let map = value.as_object().unwrap_or(&empty);
        let mut config = Self::default();
        for (key, value) in map {
            match key.as_str() {
                "maxResults" | "max_results" | "maxEntries" | "max_entries" => {
                    let name = if key.contains("esult") {
                        "maxResults"
                    } else {
                        "maxEntries"
                    };
                    let n = value
                        .as_u64()
                        .filter(|n| *n > 0 && *n < (1u64 << 53))
                        .ok_or_else(|| {
                            FileReferenceConfigError(format!(
                                "{PREFIX}: {name} must be a positive safe integer"
                            ))
                        })?;
                    let n = usize::try_from(n).unwrap_or(usize::MAX);
                    if name == "maxResults" {
                        config.max_results = n;
                    } else {
                        config.max_entries = n;
                    }
                }
                "excludedDirectories" | "excluded_directories" => {
                    let bad = || {
                        FileReferenceConfigError(format!(
                            "{PREFIX}: excludedDirectories entries must be non-empty directory basenames"
                        ))
                    };
                    let list = value.as_array().ok_or_else(bad)?;
                    let mut names = Vec::new();
                    for entry in list {
                        let name = entry.as_str().ok_or_else(bad)?;
                        if name.is_empty() || name.contains(['/', '\\']) {
                            return Err(bad());
                        }
                        names.push(name.to_owned());
                    }
                    config.excluded_directories = names;
                }
                other => {
                    return Err(FileReferenceConfigError(format!(
                        "{PREFIX}: unknown key \"{other}\""
                    )));
                }
            }
        }
        Ok(config)
    }
}

fn name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Case-insensitive score (`+25` for directories); `None` = not a match.
fn score(candidate: &FileCandidate, query: &str) -> Option<u32> {
    let q = query.to_lowercase();
    let path = candidate.path.to_lowercase();
    let base = name_of(&path);
    let base_score = if base == q {
        1000
    } else if base.starts_with(&q) {
        900
    } else if base.contains(&q) {
        700
    } else if path.contains(&q) {
        500
    } else {
        let mut chars = path.chars().enumerate();
        let mut first = None;
        let mut last = 0usize;
        for wanted in q.chars() {
            let (at, _) = chars.find(|(_, c)| *c == wanted)?;
            first.get_or_insert(at);
            last = at;
        }
        let span = first.map_or(0, |f| last - f + 1);
        let gaps = span.saturating_sub(q.chars().count());
        300 + 100u32.saturating_sub(u32::try_from(gaps).unwrap_or(u32::MAX))
    };
    Some(
        base_score
            + if candidate.kind == CandidateKind::Directory {
                25
            } else {
                0
            },
    )
}

fn rank(mut scored: Vec<(u32, FileCandidate)>, non_empty: bool, max: usize) -> Vec<FileCandidate> {
    scored.sort_by(|(sa, a), (sb, b)| {
        sb.cmp(sa)
            .then_with(|| {
                (b.kind == CandidateKind::Directory).cmp(&(a.kind == CandidateKind::Directory))
            })
            .then_with(|| {
                if non_empty {
                    a.path.len().cmp(&b.path.len())
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .then_with(|| a.path.cmp(&b.path))
    });
    scored.into_iter().take(max).map(|(_, c)| c).collect()
}

/// Entries of one directory, sorted by name; symlinks to directories are left out.
fn entries(dir: &Path) -> Vec<(String, CandidateKind)> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, CandidateKind)> = read
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let kind = entry.file_type().ok()?;
            let kind = if kind.is_symlink() {
                let target = std::fs::metadata(entry.path()).ok()?;
                if target.is_dir() {
                    return None;
                }
                CandidateKind::File
            } else if kind.is_dir() {
                CandidateKind::Directory
            } else {
                CandidateKind::File
            };
            Some((name, kind))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A bounded breadth-first listing of a root.
#[derive(Debug, Clone, Default)]
pub struct FileIndex {
    entries: Vec<FileCandidate>,
}

impl FileIndex {
    pub fn build(root: &Path, config: &FileReferenceConfig) -> Self {
        let mut out = Vec::new();
        let mut queue: VecDeque<String> = VecDeque::from([String::new()]);
        'walk: while let Some(rel) = queue.pop_front() {
            for (name, kind) in entries(&root.join(&rel)) {
                if kind == CandidateKind::Directory && config.excluded_directories.contains(&name) {
                    continue;
                }
                let path = if rel.is_empty() {
                    name
                } else {
                    format!("{rel}/{name}")
                };
                if kind == CandidateKind::Directory {
                    queue.push_back(path.clone());
                }
                out.push(FileCandidate { path, kind });
                if out.len() >= config.max_entries {
                    break 'walk;
                }
            }
        }
        Self { entries: out }
    }

    pub fn entries(&self) -> &[FileCandidate] {
        &self.entries
    }
}

/// `fileReferences.list(query)` over `root`.
pub fn list_candidates(
    root: &Path,
    index: &FileIndex,
    query: &str,
    config: &FileReferenceConfig,
) -> Vec<FileCandidate> {
    let query = query.replace('\\', "/");
    if query.is_empty() || query.contains('/') {
        return list_directory(root, &query, config);
    }
    let show_hidden = query.starts_with('.') || query.contains("/.");
    let scored = index
        .entries
        .iter()
        .filter(|c| show_hidden || !c.path.split('/').any(|seg| seg.starts_with('.')))
        .filter_map(|c| score(c, &query).map(|s| (s, c.clone())))
        .collect();
    rank(scored, true, config.max_results)
}

/// Lists `query`'s directory part live, filtered by the fragment after the last slash.
fn list_directory(root: &Path, query: &str, config: &FileReferenceConfig) -> Vec<FileCandidate> {
    let split = query.rfind('/').map_or(0, |i| i + 1);
    let (dir, fragment) = query.split_at(split);
    let mut at = root.to_path_buf();
    for component in Path::new(dir).components() {
        match component {
            Component::Normal(part) => {
                at.push(part);
                // Never through a symlink.
                match std::fs::symlink_metadata(&at) {
                    Ok(meta) if meta.is_dir() => {}
                    _ => return Vec::new(),
                }
            }
            Component::CurDir => {}
            _ => return Vec::new(),
        }
    }
    let show_hidden = fragment.starts_with('.');
    let scored = entries(&at)
        .into_iter()
        .filter(|(name, _)| show_hidden || !name.starts_with('.'))
        .filter(|(name, kind)| {
            *kind != CandidateKind::Directory || !config.excluded_directories.contains(name)
        })
        .filter_map(|(name, kind)| {
            let candidate = FileCandidate {
                path: format!("{dir}{name}"),
                kind,
            };
            if fragment.is_empty() {
                return Some((0, candidate));
            }
            let probe = FileCandidate { path: name, kind };
            score(&probe, fragment).map(|s| (s, candidate))
        })
        .collect();
    rank(scored, !fragment.is_empty(), config.max_results)
}

/// The service: one index per session, invalidated by any `tool/result` in its log.
#[derive(Debug, Default)]
pub struct FileReferences {
    config: FileReferenceConfig,
    indexes: Mutex<HashMap<String, (Arc<FileIndex>, u64)>>,
}

impl FileReferences {
    pub fn new(config: FileReferenceConfig) -> Self {
        Self {
            config,
            indexes: Mutex::new(HashMap::new()),
        }
    }

    /// Candidates for `query` in the session's `root` (blocking file-system reads).
    pub fn list(&self, log: &SessionLog, root: &Path, query: &str) -> Vec<FileCandidate> {
        let index = self.index(log, root);
        list_candidates(root, &index, query, &self.config)
    }

    fn index(&self, log: &SessionLog, root: &Path) -> Arc<FileIndex> {
        let mut indexes = dsh_sync::lock(&self.indexes);
        let key = format!("{}\u{0}{}", log.id(), root.display());
        if let Some((index, built_at)) = indexes.get(&key) {
            // An unreadable history counts as a change: the index is rebuilt.
            let stale = log.events_since(*built_at).map_or(true, |events| {
                events.iter().any(|e| e.kind == kind::TOOL_RESULT)
            });
            if !stale {
                let index = index.clone();
                indexes.insert(key, (index.clone(), log.len()));
                return index;
            }
        }
        let index = Arc::new(FileIndex::build(root, &self.config));
        indexes.insert(key, (index.clone(), log.len()));
        index
    }
}

/// A root for a session: its cwd, else the process's.
pub fn session_root(cwd: Option<&str>) -> PathBuf {
    cwd.map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn tree(paths: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for path in paths {
            let full = dir.path().join(path);
            if path.ends_with('/') {
                std::fs::create_dir_all(&full).unwrap();
            } else {
                std::fs::create_dir_all(full.parent().unwrap()).unwrap();
                std::fs::write(full, "x").unwrap();
            }
        }
        dir
    }

    fn paths(list: Vec<FileCandidate>) -> Vec<String> {
        list.into_iter()
            .map(|c| match c.kind {
                CandidateKind::Directory => format!("{}/", c.path),
                CandidateKind::File => c.path,
            })
            .collect()
    }

    #[test]
    fn fuzzy_ranking_prefers_names_then_paths_then_subsequences() {
        let dir = tree(&[
            "main.rs",
            "src/main.rs",
            "src/domain.rs",
            "src/mainframe/x.rs",
            "docs/m_a_i_n.md",
            ".hidden/main.rs",
            "node_modules/main.rs",
        ]);
        let config = FileReferenceConfig::default();
        let index = FileIndex::build(dir.path(), &config);
        assert_eq!(
            paths(list_candidates(dir.path(), &index, "main", &config)),
            [
                "src/mainframe/",
                "main.rs",
                "src/main.rs",
                "src/domain.rs",
                "src/mainframe/x.rs",
                "docs/m_a_i_n.md",
            ]
        );
        // Hidden paths show only for a dot query; excluded folders never.
        assert_eq!(
            paths(list_candidates(dir.path(), &index, ".hid", &config)),
            [".hidden/", ".hidden/main.rs"]
        );
        assert!(
            !paths(list_candidates(dir.path(), &index, "main", &config))
                .iter()
                .any(|p| p.contains("node_modules"))
        );
    }

    #[test]
    fn path_queries_list_the_directory_live() {
        let dir = tree(&["src/a.rs", "src/b/", "src/.env", "top.txt"]);
        let config = FileReferenceConfig::default();
        let index = FileIndex::default();
        assert_eq!(
            paths(list_candidates(dir.path(), &index, "", &config)),
            ["src/", "top.txt"]
        );
        assert_eq!(
            paths(list_candidates(dir.path(), &index, "src/", &config)),
            ["src/b/", "src/a.rs"]
        );
        assert_eq!(
            paths(list_candidates(dir.path(), &index, "src\\.e", &config)),
            ["src/.env"]
        );
        assert_eq!(
            paths(list_candidates(dir.path(), &index, "src/a", &config)),
            ["src/a.rs"]
        );
        // Outside the root, or through a symlink: nothing.
        assert!(list_candidates(dir.path(), &index, "../", &config).is_empty());
        std::os::unix::fs::symlink(dir.path().join("src"), dir.path().join("link")).unwrap();
        assert!(list_candidates(dir.path(), &index, "link/", &config).is_empty());
        let index = FileIndex::build(dir.path(), &config);
        assert!(
            !paths(index.entries().to_vec())
                .iter()
                .any(|p| p.starts_with("link"))
        );
    }

    #[test]
    fn the_index_is_bounded_and_results_are_cut() {
        let names: Vec<String> = (0..50).map(|i| format!("f{i:02}.txt")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let dir = tree(&refs);
        let config = FileReferenceConfig {
            max_entries: 10,
            max_results: 3,
            ..FileReferenceConfig::default()
        };
        let index = FileIndex::build(dir.path(), &config);
        assert_eq!(index.entries().len(), 10);
        assert_eq!(list_candidates(dir.path(), &index, "f", &config).len(), 3);
    }

    #[test]
    fn config_errors_use_upstream_texts() {
        let err = |v: Value| FileReferenceConfig::parse(&v).unwrap_err().0;
        assert_eq!(
            err(json!({"maxResults": 0})),
            "file-reference-local: maxResults must be a positive safe integer"
        );
        assert_eq!(
            err(json!({"maxEntries": 1.5})),
            "file-reference-local: maxEntries must be a positive safe integer"
        );
        assert_eq!(
            err(json!({"excludedDirectories": ["a/b"]})),
            "file-reference-local: excludedDirectories entries must be non-empty directory basenames"
        );
        assert_eq!(
            FileReferenceConfig::parse(&json!({"max_results": 5}))
                .unwrap()
                .max_results,
            5
        );
    }

    #[test]
    fn guidance_needs_a_visible_read_tool() {
        // Checklist B25 (the text; the prompt section is registered by the plugin).
        assert_eq!(file_reference_guidance(true), FILE_REFERENCE_GUIDANCE);
        assert_eq!(file_reference_guidance(false), "");
    }

    #[test]
    fn a_tool_result_invalidates_the_session_index() {
        use dsh_protocol::Message;
        use dsh_session::SessionHeader;
        use dsh_session::SurfaceIntent;
        let dir = tree(&["one.txt"]);
        let service = FileReferences::new(FileReferenceConfig::default());
        let log = SessionLog::in_memory(SessionHeader::new("s", None));
        assert_eq!(paths(service.list(&log, dir.path(), "one")), ["one.txt"]);
        std::fs::write(dir.path().join("onex.txt"), "x").unwrap();
        // Cached: the new file is not seen yet.
        assert_eq!(paths(service.list(&log, dir.path(), "one")), ["one.txt"]);
        let call = log.append("tool/call", json!({}), None).unwrap();
        log.append_data(
            &dsh_session::data::ToolResult {
                turn: 1,
                step: 1,
                message: Message::tool_result("c", vec![], false),
                error: None,
                meta: None,
            },
            Some(SurfaceIntent::append_from(vec![call.seq])),
        )
        .unwrap();
        assert_eq!(
            paths(service.list(&log, dir.path(), "one")),
            ["one.txt", "onex.txt"]
        );
    }
}
