//! The checkpoint service against real workspaces and real git: turns are driven the way the
//! loop drives them (a checkpoint before each step and at the turn's end), the files are
//! changed the way tools change them (plain file system calls, as `bash` and the file tools
//! do), and the user's `.git` is compared byte for byte before and after.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(
    clippy::disallowed_methods,
    reason = "tests run git and mount directly"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use dsh_checkpoints::Action;
use dsh_checkpoints::Checkpoints;
use dsh_checkpoints::Limits;
use dsh_checkpoints::RestoreStarted;
use dsh_checkpoints::engine;
use dsh_checkpoints::timeline::kind;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use serde_json::json;

struct Bench {
    home: tempfile::TempDir,
    work: tempfile::TempDir,
    log: SessionLog,
    checkpoints: Checkpoints,
}

impl Bench {
    fn new() -> Self {
        Self::with_limits(Limits::default())
    }

    fn with_limits(limits: Limits) -> Self {
        Self::with_budget(limits, u64::MAX)
    }

    fn with_budget(limits: Limits, budget: u64) -> Self {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let checkpoints = Checkpoints::new(home.path().to_path_buf(), limits, budget);
        Self {
            home,
            work,
            log: SessionLog::in_memory(SessionHeader::new("s-1", None)),
            checkpoints,
        }
    }

    fn root(&self) -> &Path {
        self.work.path()
    }

    fn write(&self, path: &str, text: impl AsRef<[u8]>) {
        let full = self.root().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }

    fn read(&self, path: &str) -> Option<Vec<u8>> {
        std::fs::read(self.root().join(path)).ok()
    }

    /// One agent turn: a checkpoint before its step, the changes, the end checkpoint.
    fn turn(&self, n: u64, prompt: &str, tools: &[&str], change: impl FnOnce(&Path)) {
        self.checkpoints
            .checkpoint(&self.log, self.root(), n, Some(1), Some(prompt.into()))
            .unwrap();
        for tool in tools {
            self.log
                .append(
                    "tool/call",
                    json!({"turn": n, "step": 1, "call_id": format!("c{n}"), "name": tool, "arguments": "{}"}),
                    None,
                )
                .unwrap();
        }
        change(self.root());
        self.checkpoints
            .checkpoint(&self.log, self.root(), n, None, None)
            .unwrap();
    }

    fn undo(&self) -> String {
        self.checkpoints.undo(&self.log, self.root()).unwrap()
    }

    fn redo(&self) -> String {
        self.checkpoints.redo(&self.log, self.root()).unwrap()
    }

    fn store_dir(&self) -> std::path::PathBuf {
        dsh_checkpoints::store::store_dir(
            self.home.path(),
            &std::fs::canonicalize(self.root()).unwrap(),
        )
    }

    fn kinds(&self) -> Vec<String> {
        self.log
            .events()
            .unwrap()
            .iter()
            .map(|e| e.kind.as_str().to_owned())
            .filter(|k| k.starts_with("checkpoint/"))
            .collect()
    }
}

/// Every file under `dir` (`.git` included) with its bytes; symlinks as their target.
fn tree_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            let rel = path
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(rel, target.to_string_lossy().as_bytes().to_vec());
            } else if meta.is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                stack.push(path);
            } else {
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// The workspace without its `.git` (what undo promises to restore).
fn files_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    tree_of(dir)
        .into_iter()
        .filter(|(k, _)| !k.starts_with(".git/") && k != ".git/" && !k.ends_with('/'))
        .collect()
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "protocol.file.allow=always",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(status.status.success(), "git {args:?}: {status:?}");
}

fn user_repo(bench: &Bench) {
    bench.write("src/main.rs", "fn main() {}\n");
    bench.write("README.md", "readme\n");
    bench.write(".gitignore", "build/\n*.log\n");
    git(bench.root(), &["init", "-q"]);
    git(bench.root(), &["add", "-A"]);
    git(bench.root(), &["commit", "-q", "-m", "first"]);
    // Something staged but not committed: the index must stay exactly as it is.
    bench.write("staged.txt", "staged\n");
    git(bench.root(), &["add", "staged.txt"]);
}

fn git_dir_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    tree_of(&dir.join(".git"))
}

#[test]
fn undo_twice_then_redo_restore_each_turn_and_never_touch_the_users_git() {
    let bench = Bench::new();
    user_repo(&bench);
    let git_before = git_dir_of(bench.root());
    let original = files_of(bench.root());
    bench.turn(1, "edit main", &["edit"], |root| {
        std::fs::write(
            root.join("src/main.rs"),
            "fn main() { println!(\"hi\"); }\n",
        )
        .unwrap();
        std::fs::write(root.join("new.txt"), "created\n").unwrap();
    });
    let after_one = files_of(bench.root());
    bench.turn(2, "rename and delete", &["bash"], |root| {
        std::fs::rename(root.join("README.md"), root.join("docs.md")).unwrap();
        std::fs::remove_file(root.join("staged.txt")).unwrap();
    });
    let after_two = files_of(bench.root());

    let text = bench.undo();
    assert!(
        text.starts_with("Undid turn 2 (\"rename and delete\"): 3 files changed back."),
        "{text}"
    );
    assert!(text.contains("recreated README.md"), "{text}");
    assert!(text.contains("deleted docs.md"), "{text}");
    assert!(text.contains("This turn ran bash"), "{text}");
    assert_eq!(files_of(bench.root()), after_one);
    let text = bench.undo();
    assert!(text.starts_with("Undid turn 1 (\"edit main\")"), "{text}");
    assert!(!text.contains("This turn ran"), "{text}");
    assert_eq!(files_of(bench.root()), original);
    assert_eq!(
        bench.undo(),
        "Nothing to undo: no turn of this session changed a file."
    );

    let text = bench.redo();
    assert!(text.starts_with("Redid turn 1"), "{text}");
    assert_eq!(files_of(bench.root()), after_one);
    bench.redo();
    assert_eq!(files_of(bench.root()), after_two);
    assert_eq!(bench.redo(), "Nothing to redo.");

    assert_eq!(
        git_dir_of(bench.root()),
        git_before,
        "the user's .git changed"
    );
    assert!(!bench.store_dir().starts_with(bench.root()));
    let kinds = bench.kinds();
    assert_eq!(
        kinds.iter().filter(|k| *k == kind::RESTORED).count(),
        4,
        "{kinds:?}"
    );
}

#[test]
fn a_file_the_person_changed_after_the_agent_is_a_conflict_with_a_copy() {
    let bench = Bench::new();
    bench.write("notes.md", "v1\n");
    bench.write("other.md", "o1\n");
    bench.turn(1, "edit both", &[], |root| {
        std::fs::write(root.join("notes.md"), "agent\n").unwrap();
        std::fs::write(root.join("other.md"), "o2\n").unwrap();
    });
    // The person edits between two agent turns.
    bench.write("notes.md", "person\n");
    bench.turn(2, "nothing", &[], |_| {});
    let text = bench.undo();
    assert!(text.contains("restored other.md"), "{text}");
    assert!(
        text.contains("Conflict: notes.md was changed after the agent's change; it was left as it is, and the version undo would restore is in notes.md.dsh-undo."),
        "{text}"
    );
    assert_eq!(bench.read("notes.md").unwrap(), b"person\n");
    assert_eq!(bench.read("notes.md.dsh-undo").unwrap(), b"v1\n");
    assert_eq!(bench.read("other.md").unwrap(), b"o1\n");
}

#[test]
fn binary_files_are_byte_exact_and_large_ones_and_ignored_trees_are_left_out() {
    let bench = Bench::with_limits(Limits {
        max_file_bytes: 1024,
        ..Limits::default()
    });
    bench.write(".gitignore", "build/\n");
    let binary: Vec<u8> = (0..=255u8).cycle().take(900).collect();
    bench.write("image.bin", &binary);
    // Line-ending and filter attributes must not change what is stored or restored.
    bench.write(".gitattributes", "* text eol=crlf\n*.bin filter=evil\n");
    bench.write("crlf.txt", "a\nb\n");
    bench.write("target/debug/huge", "x");
    bench.write("node_modules/pkg/index.js", "x");
    bench.write("build/out.o", "x");
    bench.write("big.dat", vec![7u8; 4096]);
    bench.turn(1, "break things", &[], |root| {
        std::fs::write(root.join("image.bin"), b"\0garbage\xff").unwrap();
        std::fs::write(root.join("crlf.txt"), "c\n").unwrap();
        std::fs::write(root.join("target/debug/huge"), "y").unwrap();
        std::fs::write(root.join("build/out.o"), "y").unwrap();
        std::fs::write(root.join("big.dat"), vec![8u8; 4096]).unwrap();
    });
    let text = bench.undo();
    assert_eq!(bench.read("image.bin").unwrap(), binary);
    assert_eq!(bench.read("crlf.txt").unwrap(), b"a\nb\n");
    // Not snapshotted, so not restored, and said nowhere as changed back.
    assert_eq!(bench.read("target/debug/huge").unwrap(), b"y");
    assert_eq!(bench.read("build/out.o").unwrap(), b"y");
    assert_eq!(bench.read("big.dat").unwrap(), vec![8u8; 4096]);
    assert!(
        !text.contains("target/") && !text.contains("build/") && !text.contains("big.dat"),
        "{text}"
    );
    let refs = Command::new("git")
        .env("GIT_DIR", bench.store_dir())
        .args(["for-each-ref", "--format=%(objectname)", "refs/dsh/"])
        .output()
        .unwrap();
    let first = String::from_utf8(refs.stdout).unwrap();
    let first = first.lines().next().unwrap();
    let files = Command::new("git")
        .env("GIT_DIR", bench.store_dir())
        .args(["ls-tree", "-r", "--name-only", first])
        .output()
        .unwrap();
    let files = String::from_utf8(files.stdout).unwrap();
    let mut names: Vec<&str> = files.lines().collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [".gitattributes", ".gitignore", "crlf.txt", "image.bin"]
    );
}

#[test]
fn a_submodule_is_left_to_its_own_repository_and_both_gits_stay_byte_identical() {
    let bench = Bench::new();
    let upstream = tempfile::tempdir().unwrap();
    std::fs::write(upstream.path().join("lib.txt"), "lib\n").unwrap();
    git(upstream.path(), &["init", "-q"]);
    git(upstream.path(), &["add", "-A"]);
    git(upstream.path(), &["commit", "-q", "-m", "lib"]);
    user_repo(&bench);
    git(
        bench.root(),
        &[
            "submodule",
            "add",
            "-q",
            &upstream.path().to_string_lossy(),
            "vendor/lib",
        ],
    );
    git(bench.root(), &["commit", "-q", "-m", "submodule"]);
    let git_before = git_dir_of(bench.root());
    let sub_git_before = tree_of(&bench.root().join("vendor/lib"))
        .into_iter()
        .filter(|(k, _)| k == ".git")
        .collect::<Vec<_>>();
    bench.turn(1, "edit", &[], |root| {
        std::fs::write(root.join("src/main.rs"), "changed\n").unwrap();
        std::fs::write(root.join("vendor/lib/lib.txt"), "agent\n").unwrap();
    });
    let text = bench.undo();
    assert!(text.contains("restored src/main.rs"), "{text}");
    assert!(!text.contains("vendor"), "{text}");
    assert_eq!(bench.read("src/main.rs").unwrap(), b"fn main() {}\n");
    // The submodule's files are its own repository's: not snapshotted, not restored.
    assert_eq!(bench.read("vendor/lib/lib.txt").unwrap(), b"agent\n");
    assert_eq!(git_dir_of(bench.root()), git_before);
    let sub_git_after = tree_of(&bench.root().join("vendor/lib"))
        .into_iter()
        .filter(|(k, _)| k == ".git")
        .collect::<Vec<_>>();
    assert_eq!(sub_git_after, sub_git_before);
}

#[test]
fn a_workspace_that_is_not_a_git_repository_works_the_same() {
    let bench = Bench::new();
    bench.write("a.txt", "a\n");
    bench.write("dir/b.txt", "b\n");
    let original = files_of(bench.root());
    bench.turn(1, "make a mess", &["bash"], |root| {
        std::fs::remove_dir_all(root.join("dir")).unwrap();
        std::fs::write(root.join("c/d/e.txt"), "e").unwrap_or_else(|_| {
            std::fs::create_dir_all(root.join("c/d")).unwrap();
            std::fs::write(root.join("c/d/e.txt"), "e").unwrap();
        });
    });
    bench.undo();
    assert_eq!(files_of(bench.root()), original);
    // The directories the turn created and that are empty again are gone too.
    assert!(!bench.root().join("c").exists());
    assert!(!bench.root().join(".git").exists());
}

#[test]
fn an_unchanged_tree_costs_no_new_object_and_no_new_event() {
    let bench = Bench::new();
    for i in 0..50 {
        bench.write(&format!("f{i}.txt"), format!("{i}\n"));
    }
    let log = &bench.log;
    let first = bench
        .checkpoints
        .checkpoint(log, bench.root(), 1, Some(1), None)
        .unwrap();
    assert!(first.is_some());
    let objects = |dir: &Path| tree_of(&dir.join("objects")).len();
    let before = objects(&bench.store_dir());
    let again = bench
        .checkpoints
        .checkpoint(log, bench.root(), 1, Some(2), None)
        .unwrap();
    assert_eq!(again, None, "an unchanged step logs nothing");
    assert_eq!(objects(&bench.store_dir()), before);
    bench.write("f1.txt", "changed\n");
    let changed = bench
        .checkpoints
        .checkpoint(log, bench.root(), 1, Some(3), None)
        .unwrap()
        .unwrap();
    assert_eq!(changed.id, "1.3");
    assert_ne!(changed.tree, first.unwrap().tree);
}

#[test]
fn a_restore_cut_off_half_way_is_finished_on_the_next_use() {
    let bench = Bench::new();
    bench.write("a.txt", "a1\n");
    bench.write("b.txt", "b1\n");
    bench.turn(1, "edit", &[], |root| {
        std::fs::write(root.join("a.txt"), "a2\n").unwrap();
        std::fs::write(root.join("b.txt"), "b2\n").unwrap();
        std::fs::write(root.join("c.txt"), "c2\n").unwrap();
    });
    // The undo as a crash leaves it: its plan is logged, one file of three was written.
    let timeline = bench.checkpoints.timeline(&bench.log).unwrap();
    let turn = &timeline.turns[&1];
    let store = bench.checkpoints.store(bench.root()).unwrap();
    let current = store.snapshot().unwrap();
    let plan = engine::plan(
        &store,
        &engine::Target {
            action: Action::Undo,
            turn: Some(1),
            checkpoint: Some("1.1".into()),
            tree: turn.before.clone().unwrap(),
            from: turn.after.clone(),
        },
        &current,
    )
    .unwrap();
    assert_eq!(plan.write, ["a.txt", "b.txt"]);
    bench
        .log
        .append_data(&RestoreStarted(plan.clone()), None)
        .unwrap();
    store.apply(&plan.tree, &plan.write[..1], &[]).unwrap();
    assert_eq!(bench.read("b.txt").unwrap(), b"b2\n");

    // A new process (a fresh service over the same log) finishes it before anything else.
    let again = Checkpoints::new(bench.home.path().to_path_buf(), Limits::default(), u64::MAX);
    let text = again.undo(&bench.log, bench.root()).unwrap();
    assert_eq!(bench.read("a.txt").unwrap(), b"a1\n");
    assert_eq!(bench.read("b.txt").unwrap(), b"b1\n");
    assert!(!bench.root().join("c.txt").exists());
    assert_eq!(
        text,
        "Nothing to undo: no turn of this session changed a file."
    );
    let restored: Vec<_> = bench
        .log
        .events()
        .unwrap()
        .iter()
        .filter(|e| e.kind.as_str() == kind::RESTORED)
        .map(|e| e.data.value()["recovered"].clone())
        .collect();
    assert_eq!(restored, [json!(true)]);
}

#[test]
fn rewind_to_the_first_prompt_restores_the_files_of_every_later_turn() {
    let bench = Bench::new();
    bench.write("a.txt", "0\n");
    let original = files_of(bench.root());
    for n in 1..=3u64 {
        bench.turn(n, &format!("prompt {n}"), &[], |root| {
            std::fs::write(root.join("a.txt"), format!("{n}\n")).unwrap();
            std::fs::write(root.join(format!("n{n}.txt")), "x").unwrap();
        });
    }
    let text = bench
        .checkpoints
        .rewind(&bench.log, bench.root(), 1)
        .unwrap();
    assert!(
        text.starts_with("Rewound the files to before turn 1 (\"prompt 1\")"),
        "{text}"
    );
    assert_eq!(files_of(bench.root()), original);
    // Every rewound turn counts as undone: redo brings them back one by one.
    assert!(bench.redo().starts_with("Redid turn 1"));
    assert_eq!(bench.read("a.txt").unwrap(), b"1\n");
}

#[test]
fn nothing_in_the_store_runs_code_from_the_workspace_or_its_own_config() {
    let bench = Bench::new();
    let marker = bench.home.path().join("pwned");
    // A workspace that asks git to run programs, and a store config tampered with.
    bench.write(".gitattributes", "* filter=evil diff=evil\n");
    bench.write("a.txt", "a\n");
    bench.checkpoints.store(bench.root()).unwrap();
    let config = bench.store_dir().join("config");
    let tampered = format!(
        "[core]\n\tfsmonitor = touch {0}\n\thooksPath = /tmp\n[filter \"evil\"]\n\tclean = touch {0}\n\tsmudge = touch {0}\n",
        marker.display()
    );
    std::fs::write(&config, tampered).unwrap();
    bench.turn(1, "edit", &[], |root| {
        std::fs::write(root.join("a.txt"), "b\n").unwrap()
    });
    bench.undo();
    assert_eq!(bench.read("a.txt").unwrap(), b"a\n");
    assert!(
        !marker.exists(),
        "git ran a program named by the workspace or the store"
    );
    assert!(!std::fs::read_to_string(&config).unwrap().contains("evil"));
}

/// A tmpfs mounted at `path`, unmounted when dropped.
struct TmpfsMount(std::path::PathBuf);

impl TmpfsMount {
    fn at(path: &Path) -> Self {
        assert!(
            rustix::process::geteuid().is_root(),
            "mounting a file system inside the workspace needs root (CI and this machine run tests as root)"
        );
        std::fs::create_dir_all(path).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "dsh-test"])
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success(), "mount -t tmpfs failed");
        Self(path.to_path_buf())
    }
}

impl Drop for TmpfsMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_file_system_mounted_inside_the_workspace_is_neither_snapshotted_nor_restored() {
    let bench = Bench::new();
    bench.write("a.txt", "a\n");
    bench.write("m/under.txt", "under the mount point\n");
    bench.turn(1, "first", &[], |root| {
        std::fs::write(root.join("a.txt"), "b\n").unwrap()
    });
    let mount = TmpfsMount::at(&bench.root().join("m"));
    bench.write("m/inside.txt", "on the mount\n");
    bench.turn(2, "second", &[], |root| {
        std::fs::write(root.join("a.txt"), "c\n").unwrap();
        std::fs::write(root.join("m/inside.txt"), "changed on the mount\n").unwrap();
    });
    let timeline = bench.checkpoints.timeline(&bench.log).unwrap();
    let last = &timeline.checkpoints.last().unwrap().tree;
    let listed = Command::new("git")
        .env("GIT_DIR", bench.store_dir())
        .args(["ls-tree", "-r", "--name-only", last])
        .output()
        .unwrap();
    assert!(listed.status.success());
    let names = String::from_utf8(listed.stdout).unwrap();
    assert!(
        names.lines().all(|name| !name.starts_with("m/")),
        "the mount was snapshotted: {names}"
    );
    assert!(names.lines().any(|name| name == "a.txt"), "{names}");

    // Back to before turn 1, whose tree still holds m/under.txt from before the mount: the
    // workspace's own files go back, nothing is written into (or deleted from) the mount.
    bench
        .checkpoints
        .rewind(&bench.log, bench.root(), 1)
        .unwrap();
    assert_eq!(bench.read("a.txt").unwrap(), b"a\n");
    assert_eq!(
        bench.read("m/inside.txt").unwrap(),
        b"changed on the mount\n"
    );
    assert_eq!(bench.read("m/under.txt"), None, "written into the mount");
    drop(mount);
    assert_eq!(
        bench.read("m/under.txt").unwrap(),
        b"under the mount point\n"
    );
}

#[test]
fn a_conversation_rewind_forks_before_the_prompt_and_leaves_the_session_as_it_was() {
    use dsh_session::data::TurnEnd;
    use dsh_session::data::TurnEndReason;
    use dsh_session::data::TurnStart;
    let sessions_home = tempfile::tempdir().unwrap();
    let sessions = dsh_session::JsonlStore::new(sessions_home.path());
    let mut bench = Bench::new();
    bench.log = sessions
        .create(dsh_session::CreateOptions {
            cwd: Some(bench.root().to_path_buf()),
            ..Default::default()
        })
        .unwrap();
    bench.write("a.txt", "one\n");
    for n in 1..=3u64 {
        bench.log.append_data(&TurnStart { turn: n }, None).unwrap();
        bench.turn(n, &format!("prompt {n}"), &["bash"], |root| {
            std::fs::write(root.join("a.txt"), format!("turn {n}\n")).unwrap();
        });
        bench
            .log
            .append_data(
                &TurnEnd {
                    turn: n,
                    reason: TurnEndReason::Completed,
                },
                None,
            )
            .unwrap();
    }
    bench.log.flush().unwrap();
    let before = bench.log.len();
    let fork = dsh_checkpoints::command::fork_before_turn(&sessions, &bench.log, 2).unwrap();
    assert_ne!(fork, bench.log.id());
    assert_eq!(bench.log.len(), before, "the session itself is not touched");
    let forked = sessions.load(&fork).unwrap();
    assert_eq!(
        forked.header.parent_session.as_deref(),
        Some(bench.log.id())
    );
    let turns: Vec<(String, Option<u64>)> = forked
        .events
        .iter()
        .filter(|e| e.kind.starts_with("turn/") || e.kind == "tool/call")
        .map(|e| (e.kind.to_string(), e.turn()))
        .collect();
    assert_eq!(
        turns,
        vec![
            ("turn/start".into(), Some(1)),
            ("tool/call".into(), Some(1)),
            ("turn/end".into(), Some(1)),
        ],
        "the fork holds the conversation before prompt 2, and nothing of it"
    );
    // Before the first prompt there is nothing: the fork starts empty, in the same folder.
    let empty = dsh_checkpoints::command::fork_before_turn(&sessions, &bench.log, 1).unwrap();
    let empty = sessions.load(&empty).unwrap();
    assert!(empty.events.iter().all(|e| !e.kind.starts_with("turn/")));
    assert_eq!(empty.header.cwd, bench.log.header().cwd);
    assert!(
        dsh_checkpoints::command::fork_before_turn(&sessions, &bench.log, 9)
            .unwrap_err()
            .to_string()
            .contains("turn 9 is not in this session's log")
    );
}

/// Bytes that do not compress (git would otherwise pack them to nothing).
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn the_disk_budget_prunes_the_oldest_checkpoints_first_and_keeps_the_newest() {
    const BUDGET: u64 = 1536 * 1024;
    let bench = Bench::with_budget(Limits::default(), BUDGET);
    bench.write("keep.txt", "base\n");
    let refs = || -> Vec<String> {
        let out = Command::new("git")
            .env("GIT_DIR", bench.store_dir())
            .args(["for-each-ref", "--format=%(refname)", "refs/dsh/"])
            .output()
            .unwrap();
        let mut names: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        names.sort_unstable();
        names
    };
    let mut created: Vec<String> = Vec::new();
    for n in 1..=16u64 {
        bench.turn(n, &format!("prompt {n}"), &[], |root| {
            std::fs::write(root.join(format!("blob{n}.bin")), noise(n, 256 * 1024)).unwrap();
        });
        for name in refs() {
            if !created.contains(&name) {
                created.push(name);
            }
        }
    }
    let kept = refs();
    assert_eq!(created.len(), 32, "two checkpoints a turn: {created:?}");
    assert!(
        kept.len() >= 8,
        "the newest eight are always kept: {kept:?}"
    );
    assert!(kept.len() < created.len(), "something was pruned");
    assert_eq!(
        kept,
        created[created.len() - kept.len()..],
        "what is left is the newest, in order"
    );
    let store =
        dsh_checkpoints::Store::open(bench.home.path(), bench.root(), Limits::default()).unwrap();
    assert!(
        store.disk_bytes().unwrap() <= BUDGET || kept.len() == 8,
        "within the budget, or down to the newest eight"
    );
    // The newest turn still undoes; the first prompt's checkpoint is gone, and rewinding to it
    // says so instead of guessing.
    assert!(bench.undo().starts_with("Undid turn 16"));
    assert!(!bench.root().join("blob16.bin").exists());
    let error = bench
        .checkpoints
        .rewind(&bench.log, bench.root(), 1)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("no longer in the store (pruned for the disk budget?)"),
        "{error}"
    );
    assert!(
        bench.root().join("blob15.bin").exists(),
        "a refused rewind touches nothing"
    );
}

#[test]
fn the_defaults_are_the_documented_ones() {
    let defaults = dsh_checkpoints::CheckpointSettings::default();
    assert_eq!(defaults.disk_budget_bytes, 1024 * 1024 * 1024);
    assert_eq!(defaults.max_file_bytes, 10 * 1024 * 1024);
    assert_eq!(defaults.git_timeout_ms, 20_000);
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    for said in ["1 GiB", "10 MiB", "node_modules"] {
        assert!(readme.contains(said), "README states the default {said}");
    }
}
