//! The shadow store: one bare git object store per workspace under
//! `$DSH_HOME/checkpoints/<hash>.git`, with the workspace as its work tree and its own index.
//!
//! Git is a channel the model attacks (a workspace can carry `.gitattributes`, nested
//! repositories, a `.git` of its own), so every git run here: reads no system or user
//! configuration, has hooks and the fsmonitor switched off on its command line, sees an
//! `info/attributes` that turns off every filter and line-ending conversion (content is stored
//! and restored byte for byte), and runs with a scrubbed environment in which no `GIT_*`
//! variable of ours points at the user's repository. The store's own `config` and
//! `info/attributes` are checked before every use and rewritten when they differ. The user's
//! `.git` is only ever read (its `info/exclude`), never written.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Component;
use std::path::Path;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::time::Duration;

use sha2::Digest;
use sha2::Sha256;

use crate::CheckpointError;

/// The store's configuration, rewritten whenever it differs.
const CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n\tbare = true\n\tfilemode = true\n\tsymlinks = true\n\tautocrlf = false\n\tfsmonitor = false\n\thooksPath = /dev/null\n\tuntrackedCache = false\n[gc]\n\tauto = 0\n";

/// Overrides every attribute a workspace's `.gitattributes` could use to run a program or
/// rewrite content (`info/attributes` has the highest precedence).
const ATTRIBUTES: &str = "* -text !eol !filter !diff !merge !ident !working-tree-encoding\n";

/// Options passed on every git command line, whatever the store's config says.
const SAFE_OPTIONS: [&str; 8] = [
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.autocrlf=false",
    "-c",
    "protocol.allow=never",
];

/// What a snapshot leaves out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Files larger than this are not snapshotted (and so never restored).
    pub max_file_bytes: u64,
    /// Extra ignore rules in `.gitignore` syntax (`node_modules/`, `target/`).
    pub ignore: Vec<String>,
    /// How long one git run may take before its process group is killed and the snapshot or
    /// restore fails (a file system in the workspace that stopped answering).
    pub git_deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_file_bytes: crate::DEFAULT_MAX_FILE_BYTES,
            ignore: crate::default_ignore(),
            git_deadline: crate::DEFAULT_GIT_DEADLINE,
        }
    }
}

/// A file's state in one tree: git mode and blob id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub mode: String,
    pub blob: String,
}

/// One path that differs between two trees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    /// `None`: absent on that side.
    pub old: Option<Entry>,
    pub new: Option<Entry>,
}

/// One workspace's shadow store.
#[derive(Debug, Clone)]
pub struct Store {
    git_dir: PathBuf,
    work_tree: PathBuf,
    limits: Limits,
    /// One snapshot or restore at a time per store in this process (git's index lock would
    /// refuse the second).
    lock: Arc<Mutex<()>>,
}

fn store_locks() -> &'static Mutex<HashMap<PathBuf, Arc<Mutex<()>>>> {
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = OnceLock::new();
    LOCKS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The store directory of `workspace` under `home`: `<home>/checkpoints/<hash>.git`.
pub fn store_dir(home: &Path, workspace: &Path) -> PathBuf {
    let digest = Sha256::digest(workspace.as_os_str().as_encoded_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    home.join("checkpoints").join(format!("{hex}.git"))
}

impl Store {
    /// Opens (creating when missing) the store of `workspace`.
    pub fn open(home: &Path, workspace: &Path, limits: Limits) -> Result<Self, CheckpointError> {
        let work_tree = std::fs::canonicalize(workspace).map_err(|e| CheckpointError::Io {
            what: format!("cannot resolve the workspace {}", workspace.display()),
            source: e,
        })?;
        if !work_tree.is_dir() {
            return Err(CheckpointError::Refused(format!(
                "{} is not a directory",
                work_tree.display()
            )));
        }
        let git_dir = store_dir(home, &work_tree);
        let lock = dsh_sync::lock(store_locks())
            .entry(git_dir.clone())
            .or_default()
            .clone();
        let store = Self {
            git_dir,
            work_tree,
            limits,
            lock,
        };
        store.prepare()?;
        Ok(store)
    }

    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    pub fn work_tree(&self) -> &Path {
        &self.work_tree
    }

    fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> CheckpointError {
        let what = what.into();
        move |source| CheckpointError::Io { what, source }
    }

    /// Lays out the bare store by hand (no `git init`: no templates, no sample hooks) and
    /// checks its configuration.
    fn prepare(&self) -> Result<(), CheckpointError> {
        let dir = &self.git_dir;
        for sub in [
            "objects/info",
            "objects/pack",
            "refs/heads",
            "refs/tags",
            "info",
        ] {
            std::fs::create_dir_all(dir.join(sub)).map_err(Self::io(format!(
                "cannot create {}",
                dir.join(sub).display()
            )))?;
        }
        let head = dir.join("HEAD");
        if !head.exists() {
            write_if_changed(&head, "ref: refs/heads/main\n")?;
        }
        write_if_changed(
            &dir.join("dsh-workspace"),
            &format!("{}\n", self.work_tree.display()),
        )?;
        self.check_config()
    }

    /// Rewrites the store's `config` and `info/attributes` if anything changed them.
    fn check_config(&self) -> Result<(), CheckpointError> {
        write_if_changed(&self.git_dir.join("config"), CONFIG)?;
        write_if_changed(&self.git_dir.join("info/attributes"), ATTRIBUTES)?;
        let mut exclude = String::from("# written by dsh: the checkpoint ignore rules\n");
        for rule in &self.limits.ignore {
            exclude.push_str(rule);
            exclude.push('\n');
        }
        // The user's own excludes are honoured (read, never written).
        let user = self.work_tree.join(".git/info/exclude");
        if let Ok(text) = std::fs::read_to_string(&user) {
            exclude.push_str(&text);
            exclude.push('\n');
        }
        write_if_changed(&self.git_dir.join("info/exclude"), &exclude)
    }

    /// Runs git on this store. The one place this crate spawns a process.
    fn git(
        &self,
        args: &[&str],
        index: Option<&Path>,
        stdin: Option<&[u8]>,
    ) -> Result<Vec<u8>, CheckpointError> {
        let path_var = dsh_process::ChildEnv::inherited()
            .get("PATH")
            .map(str::to_owned)
            .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".to_owned());
        let program = dsh_secrets::resolve_program("git", Some(&path_var), &self.work_tree)
            .ok_or(CheckpointError::NoGit)?;
        let index = index
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.git_dir.join("index"));
        // Nothing of dsh's environment: only what is set here.
        let mut command = dsh_process::std_command(program, &dsh_process::ChildEnv::default());
        command
            .env("PATH", &path_var)
            .env("HOME", &self.git_dir)
            .env("LC_ALL", "C")
            .env("GIT_DIR", &self.git_dir)
            .env("GIT_WORK_TREE", &self.work_tree)
            .env("GIT_INDEX_FILE", &index)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_ATTR_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_LITERAL_PATHSPECS", "1")
            .current_dir(&self.work_tree)
            .args(SAFE_OPTIONS)
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Its own process group, so the deadline ends whatever git started too.
        command.process_group(0);
        let mut child = command.spawn().map_err(Self::io("cannot run git"))?;
        let writer = match (stdin, child.stdin.take()) {
            (Some(bytes), Some(mut pipe)) => {
                let bytes = bytes.to_vec();
                Some(std::thread::spawn(move || pipe.write_all(&bytes)))
            }
            _ => None,
        };
        let stdout = child.stdout.take().map(read_all);
        let stderr = child.stderr.take().map(read_all);
        let pid = child.id();
        let (done, exited) = std::sync::mpsc::channel();
        // The wait runs on its own thread: a git stuck in the kernel cannot pin the caller.
        std::thread::spawn(move || {
            let _ = done.send(child.wait());
        });
        let status = match exited.recv_timeout(self.limits.git_deadline) {
            Ok(status) => status.map_err(Self::io("cannot run git"))?,
            Err(_) => {
                kill_group(pid);
                // A killed git cannot remove its index lock; left there, it would refuse
                // every later checkpoint of this store.
                let mut lock = index.clone().into_os_string();
                lock.push(".lock");
                let _ = std::fs::remove_file(lock);
                // The waiting and reading threads finish when the killed git is reaped; one
                // that cannot be (a mount that ignores even SIGKILL) is left behind, not
                // waited for.
                return Err(CheckpointError::Timeout {
                    command: args.first().copied().unwrap_or_default().to_owned(),
                    millis: u64::try_from(self.limits.git_deadline.as_millis()).unwrap_or(u64::MAX),
                });
            }
        };
        if let Some(writer) = writer {
            // A git that exits early closes the pipe; its exit status says what went wrong.
            let _ = writer.join();
        }
        let output = std::process::Output {
            status,
            stdout: joined(stdout),
            stderr: joined(stderr),
        };
        if !output.status.success() {
            return Err(CheckpointError::Git {
                command: args.first().copied().unwrap_or_default().to_owned(),
                message: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            });
        }
        Ok(output.stdout)
    }

    fn git_text(&self, args: &[&str]) -> Result<String, CheckpointError> {
        let out = self.git(args, None, None)?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    }

    /// Records the workspace as it is and returns the id of its tree. An unchanged workspace
    /// costs two git runs and no copy: git's index stat cache finds nothing to hash.
    pub fn snapshot(&self) -> Result<String, CheckpointError> {
        let _guard = dsh_sync::lock(&self.lock);
        self.check_config()?;
        // Another file system mounted inside the workspace is not snapshotted: git never
        // enters it (one that stopped answering would hang the walk), and what an earlier
        // snapshot held under it leaves the index before anything is compared.
        let mounts = mounts_inside(&self.work_tree);
        let mut excludes = Vec::new();
        for mount in &mounts {
            let held = self.git(&["ls-files", "-z", "--", mount], None, None)?;
            let held: Vec<&[u8]> = held.split(|b| *b == 0).filter(|p| !p.is_empty()).collect();
            if !held.is_empty() {
                self.git(
                    &["update-index", "-z", "--force-remove", "--stdin"],
                    None,
                    Some(&nul_joined(&held)),
                )?;
            }
            excludes.push(format!("--exclude={}", exclude_pattern(mount)));
        }
        let mut args = vec![
            "ls-files",
            "-z",
            "-t",
            "-o",
            "-m",
            "-d",
            "--exclude-standard",
        ];
        args.extend(excludes.iter().map(String::as_str));
        let listing = self.git(&args, None, None)?;
        let mut update = Vec::new();
        let mut remove = Vec::new();
        for item in listing.split(|b| *b == 0).filter(|s| s.len() > 2) {
            let (tag, path) = (item[0], &item[2..]);
            // A nested repository (a submodule) is listed as `dir/`: its files are its own
            // repository's business, never snapshotted or restored here.
            if path.ends_with(b"/") {
                continue;
            }
            let Ok(text) = std::str::from_utf8(path) else {
                tracing::warn!("checkpoint: a file name that is not UTF-8 is left out");
                continue;
            };
            let full = self.work_tree.join(text);
            match std::fs::symlink_metadata(&full) {
                Err(_) => remove.push(path),
                Ok(meta) if meta.is_dir() => remove.push(path),
                Ok(meta) if meta.is_file() && meta.len() > self.limits.max_file_bytes => {
                    // Too large: not snapshotted; a tracked one leaves the index.
                    if tag != b'?' {
                        remove.push(path);
                    }
                }
                Ok(_) => update.push(path),
            }
        }
        if !update.is_empty() {
            self.git(
                &["update-index", "-z", "--add", "--remove", "--stdin"],
                None,
                Some(&nul_joined(&update)),
            )?;
        }
        if !remove.is_empty() {
            self.git(
                &["update-index", "-z", "--force-remove", "--stdin"],
                None,
                Some(&nul_joined(&remove)),
            )?;
        }
        self.git_text(&["write-tree"])
    }

    /// Keeps `tree` from pruning under a ref named after the time and the session.
    pub fn keep(&self, tree: &str, name: &str) -> Result<(), CheckpointError> {
        let name = format!("refs/dsh/{name}");
        self.git(&["update-ref", &name, tree], None, None)?;
        Ok(())
    }

    /// The paths that differ between two trees (no rename detection: a rename is a delete and
    /// an add). Nested repositories are left out.
    pub fn diff(&self, from: &str, to: &str) -> Result<Vec<Change>, CheckpointError> {
        if from == to {
            return Ok(Vec::new());
        }
        let out = self.git(
            &["diff-tree", "-r", "-z", "--no-renames", "--raw", from, to],
            None,
            None,
        )?;
        let mut parts = out.split(|b| *b == 0);
        let mut changes = Vec::new();
        while let Some(meta) = parts.next() {
            if meta.is_empty() {
                continue;
            }
            let Some(path) = parts.next() else { break };
            let meta = String::from_utf8_lossy(meta);
            let fields: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
            let [old_mode, new_mode, old_blob, new_blob, ..] = fields.as_slice() else {
                continue;
            };
            let side = |mode: &str, blob: &str| {
                (mode != "000000").then(|| Entry {
                    mode: mode.to_owned(),
                    blob: blob.to_owned(),
                })
            };
            if *old_mode == "160000" || *new_mode == "160000" {
                continue;
            }
            changes.push(Change {
                path: String::from_utf8_lossy(path).into_owned(),
                old: side(old_mode, old_blob),
                new: side(new_mode, new_blob),
            });
        }
        Ok(changes)
    }

    /// A blob's bytes.
    pub fn blob(&self, id: &str) -> Result<Vec<u8>, CheckpointError> {
        self.git(&["cat-file", "blob", id], None, None)
    }

    /// Makes the workspace's `write` paths what they are in `tree` and deletes its `delete`
    /// paths. Files are written by `git checkout-index` from a private index of `tree` (it
    /// refuses to write through a symlinked directory). Nothing else is touched.
    pub fn apply(
        &self,
        tree: &str,
        write: &[String],
        delete: &[String],
    ) -> Result<(), CheckpointError> {
        if write.is_empty() && delete.is_empty() {
            return Ok(());
        }
        let _guard = dsh_sync::lock(&self.lock);
        self.check_config()?;
        for path in write.iter().chain(delete) {
            check_relative(path)?;
        }
        for path in delete {
            self.delete(path)?;
        }
        if write.is_empty() {
            return Ok(());
        }
        let index = self.git_dir.join(format!(
            "restore-index-{}-{}",
            std::process::id(),
            crate::now_ms()
        ));
        let result = self
            .git(&["read-tree", tree], Some(&index), None)
            .and_then(|_| {
                let list: Vec<&[u8]> = write.iter().map(|p| p.as_bytes()).collect();
                self.git(
                    &["checkout-index", "-f", "-z", "--stdin"],
                    Some(&index),
                    Some(&nul_joined(&list)),
                )
            });
        let _ = std::fs::remove_file(&index);
        result.map(|_| ())
    }

    /// Deletes one workspace file (never a directory, never through a symlinked directory),
    /// then its parent directories that became empty.
    fn delete(&self, path: &str) -> Result<(), CheckpointError> {
        let full = self.work_tree.join(path);
        let mut parent = full.parent();
        while let Some(dir) = parent {
            if dir == self.work_tree {
                break;
            }
            match std::fs::symlink_metadata(dir) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(CheckpointError::Refused(format!(
                        "{path}: a parent directory is a symbolic link"
                    )));
                }
                Ok(_) => {}
                Err(_) => return Ok(()),
            }
            parent = dir.parent();
        }
        match std::fs::symlink_metadata(&full) {
            Ok(meta) if meta.is_dir() => return Ok(()),
            Ok(_) => {
                std::fs::remove_file(&full).map_err(Self::io(format!("cannot delete {path}")))?
            }
            Err(_) => return Ok(()),
        }
        let mut dir = full.parent();
        while let Some(d) = dir {
            if d == self.work_tree || std::fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
        Ok(())
    }

    /// The entry of `path` in `tree`, if any.
    pub fn entry(&self, tree: &str, path: &str) -> Result<Option<Entry>, CheckpointError> {
        let out = self.git(&["ls-tree", "-z", tree, "--", path], None, None)?;
        let Some(line) = out.split(|b| *b == 0).find(|s| !s.is_empty()) else {
            return Ok(None);
        };
        let line = String::from_utf8_lossy(line);
        let mut fields = line.split(['\t', ' ']);
        let (Some(mode), Some(_kind), Some(blob)) = (fields.next(), fields.next(), fields.next())
        else {
            return Ok(None);
        };
        Ok(Some(Entry {
            mode: mode.to_owned(),
            blob: blob.to_owned(),
        }))
    }

    /// The bytes on disk of the store: objects (loose and packed) and the index. Counted
    /// by `git count-objects`, which reads the object directories, not every file.
    pub fn disk_bytes(&self) -> Result<u64, CheckpointError> {
        let (_, kib) = self.objects()?;
        let index = std::fs::metadata(self.git_dir.join("index"))
            .map(|m| m.len())
            .unwrap_or(0);
        Ok(kib * 1024 + index)
    }

    /// (loose object count, KiB of all objects).
    fn objects(&self) -> Result<(u64, u64), CheckpointError> {
        let text = self.git_text(&["count-objects", "-v"])?;
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        Ok((
            field("count:"),
            field("size:") + field("size-pack:") + field("size-garbage:"),
        ))
    }

    /// Packs loose objects once there are more than `limit` (a first snapshot of a big tree
    /// leaves one file per blob). Returns whether it packed.
    pub fn pack_if_loose(&self, limit: u64) -> Result<bool, CheckpointError> {
        let (loose, _) = self.objects()?;
        if loose <= limit {
            return Ok(false);
        }
        let _guard = dsh_sync::lock(&self.lock);
        self.git(&["repack", "-d", "-q"], None, None)?;
        self.git(&["prune-packed", "-q"], None, None)?;
        Ok(true)
    }

    /// Drops the oldest kept trees until the store fits `budget` bytes, keeping at least
    /// `keep_newest` refs; returns how many were dropped.
    pub fn prune(&self, budget: u64, keep_newest: usize) -> Result<usize, CheckpointError> {
        if self.disk_bytes()? <= budget {
            return Ok(0);
        }
        let _guard = dsh_sync::lock(&self.lock);
        let refs = self.git_text(&["for-each-ref", "--format=%(refname)", "refs/dsh/"])?;
        // Ref names start with a zero-padded time: sorting by name is oldest first.
        let mut names: Vec<&str> = refs.lines().filter(|l| !l.is_empty()).collect();
        names.sort_unstable();
        let mut dropped = 0;
        let droppable = names.len().saturating_sub(keep_newest);
        // Drop the oldest half of what may go, then collect; repeat while still over.
        let mut start = 0;
        while start < droppable {
            let end = (start + (droppable - start).div_ceil(2)).min(droppable);
            let mut script = String::new();
            for name in &names[start..end] {
                script.push_str(&format!("delete {name}\n"));
            }
            self.git(&["update-ref", "--stdin"], None, Some(script.as_bytes()))?;
            dropped += end - start;
            start = end;
            self.git(&["repack", "-a", "-d", "-q"], None, None)?;
            self.git(&["prune", "--expire=now"], None, None)?;
            if self.disk_bytes()? <= budget {
                break;
            }
        }
        Ok(dropped)
    }
}

/// Reads a pipe to its end on a thread of its own.
fn read_all(
    mut pipe: impl std::io::Read + Send + 'static,
) -> std::thread::JoinHandle<std::io::Result<Vec<u8>>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        pipe.read_to_end(&mut bytes).map(|_| bytes)
    })
}

fn joined(reader: Option<std::thread::JoinHandle<std::io::Result<Vec<u8>>>>) -> Vec<u8> {
    reader
        .and_then(|r| r.join().ok())
        .and_then(Result::ok)
        .unwrap_or_default()
}

/// Kills the process group `pid` leads (git and anything it started).
fn kill_group(pid: u32) {
    if let Some(group) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        dsh_process::kill_group(group, rustix::process::Signal::KILL);
    }
}

/// The mount points strictly inside `root`, relative to it, from `/proc/self/mountinfo`
/// (read, not found by a walk: a stat of a mount that stopped answering would itself hang).
pub fn mounts_inside(root: &Path) -> Vec<String> {
    let Ok(table) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    mounts_in(&table, root)
}

fn mounts_in(table: &str, root: &Path) -> Vec<String> {
    table
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(unescape_mount_path)
        .filter_map(|point| {
            let rel = Path::new(&point).strip_prefix(root).ok()?;
            let rel = rel.to_str()?;
            (!rel.is_empty()).then(|| rel.to_owned())
        })
        .collect()
}

/// Whether the workspace-relative `path` is one of `dirs` or lies under one.
pub fn is_under_any(path: &str, dirs: &[String]) -> bool {
    dirs.iter().any(|dir| {
        path.strip_prefix(dir.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// `/proc/self/mountinfo` writes space, tab, newline and backslash as `\ooo` (octal).
fn unescape_mount_path(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|digits| {
            let text = std::str::from_utf8(digits).ok()?;
            u8::from_str_radix(text, 8).ok()
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A workspace-relative directory as an anchored `.gitignore` pattern that matches it alone.
fn exclude_pattern(rel: &str) -> String {
    let mut pattern = String::from("/");
    for c in rel.chars() {
        if matches!(c, '*' | '?' | '[' | '\\' | ' ' | '!' | '#') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('/');
    pattern
}

fn nul_joined(paths: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for path in paths {
        out.extend_from_slice(path);
        out.push(0);
    }
    out
}

/// A workspace-relative path that names no `.git` and does not climb out.
pub fn check_relative(path: &str) -> Result<(), CheckpointError> {
    let bad = Path::new(path).components().any(|c| match c {
        Component::Normal(name) => name.eq_ignore_ascii_case(".git"),
        _ => true,
    });
    if bad || path.is_empty() {
        return Err(CheckpointError::Refused(format!(
            "{path:?} is not a workspace path"
        )));
    }
    Ok(())
}

fn write_if_changed(path: &Path, text: &str) -> Result<(), CheckpointError> {
    if std::fs::read(path).ok().as_deref() == Some(text.as_bytes()) {
        return Ok(());
    }
    // Replace, never write through: the file may have been swapped for a symlink.
    let _ = std::fs::remove_file(path);
    std::fs::write(path, text).map_err(|source| CheckpointError::Io {
        what: format!("cannot write {}", path.display()),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_inside_the_workspace_are_found_unescaped_and_relative() {
        let table = "\
22 1 8:1 / / rw - ext4 /dev/sda1 rw
40 22 0:50 / /w rw - tmpfs tmpfs rw
41 40 0:51 / /w/stuck rw - fuse dsh-stuck rw
42 40 0:52 / /w/a\\040b/c rw - tmpfs tmpfs rw
43 22 0:53 / /work rw - tmpfs tmpfs rw
";
        assert_eq!(
            mounts_in(table, Path::new("/w")),
            vec!["stuck".to_owned(), "a b/c".to_owned()]
        );
        assert!(mounts_in(table, Path::new("/nowhere")).is_empty());
        let mounts = vec!["stuck".to_owned()];
        assert!(is_under_any("stuck", &mounts));
        assert!(is_under_any("stuck/a.txt", &mounts));
        assert!(!is_under_any("stuck2/a.txt", &mounts));
        assert!(!is_under_any("a/stuck", &mounts));
    }

    #[test]
    fn a_mount_point_becomes_a_pattern_that_matches_it_alone() {
        assert_eq!(exclude_pattern("stuck"), "/stuck/");
        assert_eq!(exclude_pattern("a b/[x]*!"), "/a\\ b/\\[x]\\*\\!/");
    }
}
