//! Discovery (§2.2): the user-global file, the project root, and the candidate files of every
//! directory from the root down to the working directory (and below it, for touches).

use std::path::Component;
use std::path::Path;
use std::path::PathBuf;

use crate::config::InstructionsConfig;
use crate::fs::InstructionFs;

/// The scope directory key of the user-global file.
pub const USER_GLOBAL: &str = "user-global";

/// One place an instruction file may live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// `<dir>\u0000<file>`.
    pub scope: String,
    /// `user-global`, `.` or the project-relative directory.
    pub dir: String,
    pub file: String,
    pub path: PathBuf,
    /// Shown to the model: `~/.dsh/AGENTS.md`, `AGENTS.md`, `packages/app/AGENTS.md`.
    pub display: String,
}

impl Candidate {
    /// What "apply to work under `<scope>`" names.
    pub fn scope_label(&self) -> &str {
        &self.dir
    }
}

/// Where a session's instructions come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub cwd: PathBuf,
    pub root: PathBuf,
    global: Candidate,
}

/// Lexically normalised absolute path (no symlinks resolved).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn join_key(parts: &[String]) -> String {
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}

/// An empty `.git` folder is no repository (git itself passes over it): the sandbox leaves one
/// as a read-only placeholder where none was, which must not move the project root.
fn is_empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none())
}

impl Layout {
    /// Finds the project root: the first directory from `cwd` upwards holding any marker
    /// (a probe failure counts as absent); none ⇒ `cwd`.
    pub fn discover(fs: &dyn InstructionFs, cwd: &Path, config: &InstructionsConfig) -> Self {
        let cwd = normalize(cwd);
        let mut root = None;
        let mut dir = Some(cwd.as_path());
        while let Some(current) = dir {
            let found = config.project_root_markers.iter().any(|marker| {
                let path = current.join(marker);
                fs.exists(&path).unwrap_or(false) && !(marker == ".git" && is_empty_dir(&path))
            });
            if found {
                root = Some(current.to_path_buf());
                break;
            }
            dir = current.parent();
        }
        let global = Candidate {
            scope: format!("{USER_GLOBAL}\u{0}AGENTS.md"),
            dir: USER_GLOBAL.to_owned(),
            file: "AGENTS.md".to_owned(),
            path: config.dsh_home.path.join("AGENTS.md"),
            display: config.dsh_home.global_display().to_owned(),
        };
        Self {
            root: root.unwrap_or_else(|| cwd.clone()),
            cwd,
            global,
        }
    }

    pub fn global(&self) -> &Candidate {
        &self.global
    }

    /// The project-relative key of `dir` (`None` outside the root).
    fn dir_key(&self, dir: &Path) -> Option<String> {
        let rest = dir.strip_prefix(&self.root).ok()?;
        let parts: Vec<String> = rest
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        Some(join_key(&parts))
    }

    fn candidate(&self, dir: &Path, file: &str) -> Option<Candidate> {
        let key = self.dir_key(dir)?;
        let display = if key == "." {
            file.to_owned()
        } else {
            format!("{key}/{file}")
        };
        Some(Candidate {
            scope: format!("{key}\u{0}{file}"),
            dir: key,
            file: file.to_owned(),
            path: dir.join(file),
            display,
        })
    }

    /// Base candidates then local ones, in configured order, for one directory.
    pub fn dir_candidates(&self, dir: &Path, config: &InstructionsConfig) -> Vec<Candidate> {
        config
            .candidates
            .iter()
            .chain(&config.local_candidates)
            .filter_map(|file| self.candidate(dir, file))
            .collect()
    }

    /// Directories from the root down to `cwd`, inclusive.
    pub fn chain_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.root.clone()];
        if let Ok(rest) = self.cwd.strip_prefix(&self.root) {
            let mut at = self.root.clone();
            for component in rest.components() {
                at.push(component.as_os_str());
                dirs.push(at.clone());
            }
        }
        dirs
    }

    /// The global file, then every chain directory's candidates (broad → specific).
    pub fn chain(&self, config: &InstructionsConfig) -> Vec<Candidate> {
        let mut out = vec![self.global.clone()];
        for dir in self.chain_dirs() {
            out.extend(self.dir_candidates(&dir, config));
        }
        out
    }

    /// Directories a touch of `file` makes applicable: strictly below `cwd`, down to the
    /// file's parent inclusive; nothing for files outside `cwd`.
    pub fn touched_dirs(&self, file: &Path) -> Vec<PathBuf> {
        let file = if file.is_absolute() {
            normalize(file)
        } else {
            normalize(&self.cwd.join(file))
        };
        let Some(parent) = file.parent() else {
            return Vec::new();
        };
        let Ok(rest) = parent.strip_prefix(&self.cwd) else {
            return Vec::new();
        };
        let mut dirs = Vec::new();
        let mut at = self.cwd.clone();
        for component in rest.components() {
            at.push(component.as_os_str());
            dirs.push(at.clone());
        }
        dirs
    }

    /// The candidate a scope key names (from a logged change).
    pub fn from_scope(&self, scope: &str) -> Option<Candidate> {
        let (dir, file) = scope.split_once('\u{0}')?;
        if dir == USER_GLOBAL {
            return (file == "AGENTS.md").then(|| self.global.clone());
        }
        if file.is_empty() || file.contains(['/', '\\']) || file == "." || file == ".." {
            return None;
        }
        let path = if dir == "." {
            self.root.clone()
        } else {
            if dir.split('/').any(|p| p == ".." || p.is_empty()) {
                return None;
            }
            self.root.join(dir)
        };
        self.candidate(&path, file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Environment;
    use crate::fs::LocalFs;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn config(markers: &[&str]) -> InstructionsConfig {
        InstructionsConfig::parse(
            &json!({"maxBytes": 65536, "projectRootMarkers": markers, "dshHome": "/h/.dsh"}),
            &Environment::default(),
        )
        .unwrap()
    }

    #[test]
    fn the_root_is_the_nearest_marked_ancestor_and_the_chain_goes_root_to_cwd() {
        // Checklist A4.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        let cwd = root.join("packages/app");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        // An empty `.git` (the sandbox's placeholder) in between is no repository.
        std::fs::create_dir(root.join("packages/.git")).unwrap();
        let git = config(&[".git"]);
        let layout = Layout::discover(&LocalFs, &cwd, &git);
        assert_eq!(layout.root, root);
        let chain: Vec<String> = layout.chain(&git).into_iter().map(|c| c.display).collect();
        assert_eq!(
            chain,
            [
                "$DSH_HOME/AGENTS.md",
                "AGENTS.md",
                "CLAUDE.md",
                "AGENTS.local.md",
                "CLAUDE.local.md",
                "packages/AGENTS.md",
                "packages/CLAUDE.md",
                "packages/AGENTS.local.md",
                "packages/CLAUDE.local.md",
                "packages/app/AGENTS.md",
                "packages/app/CLAUDE.md",
                "packages/app/AGENTS.local.md",
                "packages/app/CLAUDE.local.md",
            ]
        );
        let scopes: Vec<String> = layout.chain(&git).into_iter().map(|c| c.scope).collect();
        assert_eq!(scopes[0], "user-global\u{0}AGENTS.md");
        assert_eq!(scopes[1], ".\u{0}AGENTS.md");
        assert_eq!(scopes[9], "packages/app\u{0}AGENTS.md");
        // No marker anywhere: the root is cwd.
        let unmarked = Layout::discover(&LocalFs, &cwd, &config(&[".nope-marker"]));
        assert_eq!(unmarked.root, cwd);
    }

    #[test]
    fn touched_dirs_are_below_cwd_only() {
        let config = config(&[".git"]);
        let layout = Layout {
            cwd: PathBuf::from("/w"),
            root: PathBuf::from("/w"),
            global: Layout::discover(&LocalFs, Path::new("/"), &config).global,
        };
        assert_eq!(
            layout.touched_dirs(Path::new("packages/app/x.ts")),
            [
                PathBuf::from("/w/packages"),
                PathBuf::from("/w/packages/app")
            ]
        );
        assert_eq!(
            layout.touched_dirs(Path::new("/w/x.ts")),
            Vec::<PathBuf>::new()
        );
        assert_eq!(
            layout.touched_dirs(Path::new("/elsewhere/a/x.ts")),
            Vec::<PathBuf>::new()
        );
        assert_eq!(
            layout.touched_dirs(Path::new("a/../../x.ts")),
            Vec::<PathBuf>::new()
        );
        let from = layout.from_scope("nested\u{0}AGENTS.md").unwrap();
        assert_eq!(from.path, PathBuf::from("/w/nested/AGENTS.md"));
        assert_eq!(from.display, "nested/AGENTS.md");
        assert_eq!(layout.from_scope("../x\u{0}AGENTS.md"), None);
        assert_eq!(layout.from_scope(".\u{0}a/b"), None);
    }
}
