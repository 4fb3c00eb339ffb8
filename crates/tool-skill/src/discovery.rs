//! Filesystem skills: the ranked roots, the two layouts and the frontmatter rules.

use std::path::Path;
use std::path::PathBuf;

/// One discovered skill. The body is not kept: it is re-read on every load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub when_to_use: Option<String>,
    pub model_invocable: bool,
    pub user_invocable: bool,
    /// The `SKILL.md` / `<name>.md` file.
    pub file: PathBuf,
    /// The directory relative resources resolve against.
    pub base_dir: PathBuf,
}

/// Where skills are looked for, besides the session's project.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillRoots {
    /// `customSkillDirs`, ranked after the project and before the user homes.
    pub custom_dirs: Vec<PathBuf>,
    /// `$DSH_HOME` (else `~/.dsh`).
    pub dsh_home: Option<PathBuf>,
    /// `$DSH_AGENTS_HOME` (else `~/.agents`).
    pub agents_home: Option<PathBuf>,
}

impl SkillRoots {
    /// The homes from the environment, as upstream resolves them.
    pub fn from_env() -> Self {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let var = |key: &str| {
            std::env::var_os(key)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Self {
            custom_dirs: Vec::new(),
            dsh_home: var("DSH_HOME").or_else(|| home.as_ref().map(|h| h.join(".dsh"))),
            agents_home: var("DSH_AGENTS_HOME")
                .or_else(|| home.as_ref().map(|h| h.join(".agents"))),
        }
    }

    /// The skill directories for a session in `cwd`, highest precedence first.
    pub fn dirs_for(&self, cwd: &Path) -> Vec<PathBuf> {
        let project = project_root(cwd);
        let mut dirs = vec![
            project.join(".dsh").join("skills"),
            project.join(".agents").join("skills"),
        ];
        dirs.extend(self.custom_dirs.iter().cloned());
        dirs.extend(self.dsh_home.iter().map(|h| h.join("skills")));
        dirs.extend(self.agents_home.iter().map(|h| h.join("skills")));
        dirs
    }

    /// Every skill visible from `cwd`, sorted by name; a name keeps its highest-ranked source.
    pub fn discover(&self, cwd: &Path) -> Vec<Skill> {
        discover(&self.dirs_for(cwd))
    }
}

/// The nearest ancestor of `cwd` (itself included) holding `.git`, else `cwd`. An empty `.git`
/// folder is no repository (git passes over it; the sandbox leaves one as a placeholder).
pub fn project_root(cwd: &Path) -> PathBuf {
    cwd.ancestors()
        .find(|dir| {
            let git = dir.join(".git");
            git.exists()
                && !std::fs::read_dir(&git).is_ok_and(|mut entries| entries.next().is_none())
        })
        .unwrap_or(cwd)
        .to_path_buf()
}

/// Skills of `dirs` (highest precedence first), sorted by name, duplicates dropped.
pub fn discover(dirs: &[PathBuf]) -> Vec<Skill> {
    let mut found: Vec<Skill> = Vec::new();
    for dir in dirs {
        for skill in scan_dir(dir) {
            if !found.iter().any(|seen| seen.name == skill.name) {
                found.push(skill);
            }
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// `<name>/SKILL.md` and `<name>.md`, one level deep, in file-name order.
fn scan_dir(dir: &Path) -> Vec<Skill> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            if path.is_dir() {
                let file = path.join("SKILL.md");
                file.is_file().then_some((file, path))
            } else if path.extension().is_some_and(|ext| ext == "md") && path.is_file() {
                Some((path, dir.to_path_buf()))
            } else {
                None
            }
        })
        .filter_map(|(file, base_dir)| read_skill(&file, base_dir))
        .collect()
}

/// Parses one skill file; an unreadable or invalid one is skipped (logged).
pub fn read_skill(file: &Path, base_dir: PathBuf) -> Option<Skill> {
    let text = std::fs::read_to_string(file).ok()?;
    match parse_skill(&text) {
        Ok(meta) => Some(Skill {
            name: meta.name,
            description: meta.description,
            when_to_use: meta.when_to_use,
            model_invocable: meta.model_invocable,
            user_invocable: meta.user_invocable,
            file: file.to_path_buf(),
            base_dir,
        }),
        Err(error) => {
            tracing::debug!(file = %file.display(), %error, "skipping an invalid skill");
            None
        }
    }
}

/// Why a skill file was dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillFileError {
    #[error("no frontmatter")]
    NoFrontmatter,
    #[error("missing required field `{0}`")]
    Missing(&'static str),
    #[error("invalid skill name {0:?}")]
    InvalidName(String),
    #[error("invalid boolean for `{key}`: {value:?}")]
    InvalidBool { key: String, value: String },
}

/// The frontmatter fields the harness reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillMeta {
    pub name: String,
    pub description: String,
    pub when_to_use: Option<String>,
    pub model_invocable: bool,
    pub user_invocable: bool,
}

/// `^[a-z0-9]+(?:-[a-z0-9]+)*$`
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.split('-').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

fn parse_bool(key: &str, value: &str) -> Result<bool, SkillFileError> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Ok(true),
        "false" | "no" | "off" | "0" => Ok(false),
        _ => Err(SkillFileError::InvalidBool {
            key: key.to_owned(),
            value: value.to_owned(),
        }),
    }
}

/// Splits `---` frontmatter from the body: `(frontmatter lines, body after the closing line)`.
pub fn split_frontmatter(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

/// The body a load returns: the text after the frontmatter, trimmed.
pub fn skill_body(text: &str) -> Option<String> {
    split_frontmatter(text).map(|(_, body)| body.trim().to_owned())
}

/// Top-level `key: value` pairs of a simple YAML mapping. Quoted scalars are unquoted, block
/// scalars (`|`, `>`) are gathered from the indented lines that follow; nested maps (such as
/// `metadata`) are skipped, since the harness reads none of them.
pub fn frontmatter_pairs(frontmatter: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = frontmatter.lines().collect();
    let mut pairs = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if line.starts_with([' ', '\t', '#']) || line.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim().to_owned();
        let value = value.trim();
        if let Some(style) = value.chars().next().filter(|c| *c == '|' || *c == '>') {
            let mut block = Vec::new();
            while i < lines.len()
                && (lines[i].starts_with([' ', '\t']) || lines[i].trim().is_empty())
            {
                block.push(lines[i].trim());
                i += 1;
            }
            while block.last().is_some_and(|l| l.is_empty()) {
                block.pop();
            }
            let joined = if style == '|' {
                block.join("\n")
            } else {
                block.join(" ")
            };
            pairs.push((key, joined));
            continue;
        }
        pairs.push((key, unquote(value)));
    }
    pairs
}

fn unquote(value: &str) -> String {
    if value.len() >= 2 {
        if let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            return serde_json::from_str::<String>(value).unwrap_or_else(|_| inner.to_owned());
        }
        if let Some(inner) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
            return inner.replace("''", "'");
        }
    }
    value.to_owned()
}

/// Reads and checks the frontmatter of a skill file.
pub fn parse_skill(text: &str) -> Result<SkillMeta, SkillFileError> {
    let (frontmatter, _) = split_frontmatter(text).ok_or(SkillFileError::NoFrontmatter)?;
    let pairs = frontmatter_pairs(frontmatter);
    let get = |key: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    };
    let name = get("name").ok_or(SkillFileError::Missing("name"))?;
    if !is_valid_name(name) {
        return Err(SkillFileError::InvalidName(name.to_owned()));
    }
    let description = get("description").ok_or(SkillFileError::Missing("description"))?;
    let flag = |key: &str, default: bool| get(key).map_or(Ok(default), |v| parse_bool(key, v));
    let disable_model = flag("disable-model-invocation", false)?;
    let user_invocable = flag("user-invocable", true)?;
    Ok(SkillMeta {
        name: name.to_owned(),
        description: description.to_owned(),
        when_to_use: get("whenToUse").map(str::to_owned),
        model_invocable: !disable_model,
        user_invocable,
    })
}
