//! Running the real `dsh` binary against the replay model, as root and as an unprivileged user.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
// Not every test module uses every helper.
#![allow(dead_code)]

use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::process::Output;
use std::sync::OnceLock;

use dsh_testkit::replay::ReplayServer;
use dsh_testkit::scenario::ModelEntry;
use dsh_testkit::scenario::Scenario;
use dsh_testkit::scenario::ScenarioSpec;
use serde_json::Value;
use serde_json::json;

/// The unprivileged account the tests switch to (as root).
pub const NOBODY: u32 = 65534;

/// Who runs dsh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum User {
    /// The test process's own user (root on CI).
    Current,
    /// `uid`/`gid` through `setpriv`, with no supplementary groups.
    Unprivileged(u32),
}

impl User {
    /// Every user a test must pass for: the current one, and an unprivileged one. When the
    /// tests already run unprivileged, that is the same user, run once.
    pub fn all() -> Vec<User> {
        if !rustix::process::geteuid().is_root() {
            return vec![User::Current];
        }
        assert!(
            Path::new("/usr/bin/setpriv").exists() || which("setpriv").is_some(),
            "setpriv (util-linux) is needed to run the escape tests as an unprivileged user"
        );
        vec![User::Current, User::Unprivileged(NOBODY)]
    }

    pub fn uid(self) -> Option<u32> {
        match self {
            Self::Current => None,
            Self::Unprivileged(uid) => Some(uid),
        }
    }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The `dsh` binary, reachable by an unprivileged user: the target dir may live under a folder
/// only root can enter (`/root/.cache/...`), so the binary is linked (or copied) into a
/// world-readable folder once per test process, with its guard executable beside it.
pub fn dsh_for(user: User) -> PathBuf {
    let built = built_dsh();
    if user == User::Current {
        return built;
    }
    static SHARED: OnceLock<PathBuf> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            let dir = shared_bin_dir("with-guard");
            if let Some(guard) = dsh_tool_guard::next_to(&built) {
                link_into(&dir, &guard);
            }
            link_into(&dir, &built)
        })
        .clone()
}

/// `dsh` alone in a world-readable folder, without `dsh-tool-guard` beside it: it must guard
/// unconfined commands by re-executing itself.
pub fn dsh_alone() -> PathBuf {
    static ALONE: OnceLock<PathBuf> = OnceLock::new();
    ALONE
        .get_or_init(|| link_into(&shared_bin_dir("alone"), &built_dsh()))
        .clone()
}

fn built_dsh() -> PathBuf {
    // `DSH_SECURITY_TEST_BIN` runs these tests against another build (e.g. an older one, to
    // see them fail there).
    std::env::var_os("DSH_SECURITY_TEST_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_dsh")), PathBuf::from)
}

fn shared_bin_dir(name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    static CLEANED: OnceLock<()> = OnceLock::new();
    CLEANED.get_or_init(remove_stale_links);
    let root = std::env::temp_dir().join(format!("dsh-bin-{}", std::process::id()));
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for folder in [&root, &dir] {
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

/// Hard-links (or copies) `file` into `dir`, executable by everyone; the new path.
fn link_into(dir: &Path, file: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let target = dir.join(file.file_name().unwrap());
    let _ = std::fs::remove_file(&target);
    if std::fs::hard_link(file, &target).is_err() {
        std::fs::copy(file, &target).unwrap();
    }
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
    target
}

/// Links left by earlier test processes hold on to their (since rebuilt) binaries.
fn remove_stale_links() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("dsh-bin-")) else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A workspace and a dsh home, owned by `user`.
pub struct Case {
    pub user: User,
    /// Run [`dsh_alone`] (no guard executable beside it) instead of [`dsh_for`].
    pub alone: bool,
    pub workspace: tempfile::TempDir,
    pub home: tempfile::TempDir,
}

impl Case {
    pub fn new(user: User) -> Self {
        let case = Self {
            user,
            alone: false,
            workspace: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
        };
        // The replay scripts hold only the calls under test: no title request, and no
        // compaction request when a huge argument fills the context window.
        case.write_home(
            "config.toml",
            "[plugins.session-title]\nenabled = false\n\n[plugins.compaction]\nenabled = false\n",
        );
        case.give(case.workspace.path());
        case.give(case.home.path());
        case
    }

    /// The canonical workspace path.
    pub fn ws(&self) -> PathBuf {
        std::fs::canonicalize(self.workspace.path()).unwrap()
    }

    pub fn home_path(&self) -> PathBuf {
        std::fs::canonicalize(self.home.path()).unwrap()
    }

    /// Hands `path` (and everything below it) to the case's user.
    pub fn give(&self, path: &Path) {
        let Some(uid) = self.user.uid() else { return };
        chown_tree(path, uid);
    }

    pub fn write_home(&self, rel: &str, text: &str) {
        let path = self.home.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        self.give(self.home.path());
    }

    pub fn write_ws(&self, rel: &str, text: &str) {
        let path = self.workspace.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        self.give(self.workspace.path());
    }

    /// `dsh <args>` in the workspace as the case's user, with the model at `base_url`.
    pub fn command(&self, args: &[&str], base_url: &str) -> Command {
        self.command_under(&[], args, base_url)
    }

    /// [`Case::command`] with `dsh` started by `wrapper` (e.g. `strace -f -o FILE`); the case's
    /// user still applies to the wrapper and dsh alike.
    pub fn command_under(&self, wrapper: &[&str], args: &[&str], base_url: &str) -> Command {
        let dsh = if self.alone {
            dsh_alone()
        } else {
            dsh_for(self.user)
        };
        let mut command = match self.user.uid() {
            None if wrapper.is_empty() => Command::new(&dsh),
            None => {
                let mut command = Command::new(wrapper[0]);
                command.args(&wrapper[1..]).arg(&dsh);
                command
            }
            Some(uid) => {
                let mut command = Command::new("setpriv");
                command
                    .arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={uid}"))
                    .arg("--clear-groups")
                    .arg("--")
                    .args(wrapper)
                    .arg(&dsh);
                command
            }
        };
        command
            .args(args)
            .current_dir(self.workspace.path())
            .env("HOME", self.home.path())
            .env("DSH_HOME", self.home.path())
            .env("DEEPSEEK_API_KEY", "sk-replay-secret-key-0123456789")
            .env("DEEPSEEK_BASE_URL", base_url)
            .env_remove("DSH_LOG")
            .env_remove("DSH_PERMISSION_MODE");
        command
    }
}

fn chown_tree(path: &Path, uid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path(), uid);
        }
    }
}

/// A tool call the scripted model makes.
pub struct Call {
    pub tool: &'static str,
    pub args: Value,
}

pub fn bash(command: &str) -> Call {
    Call {
        tool: "bash",
        args: json!({"command": command, "description": "Probe the sandbox"}),
    }
}

/// A scenario whose model makes `calls` one per step, then answers `done`.
pub fn scenario(task: &str, calls: &[Call]) -> Scenario {
    let spec: ScenarioSpec = serde_json::from_value(json!({
        "suite": "headless",
        "name": "security",
        "sessions": [{"session": 0, "first_user_text": task}]
    }))
    .unwrap();
    let mut entries: Vec<ModelEntry> = Vec::new();
    for (index, call) in calls.iter().enumerate() {
        let id = format!("call_{index}");
        let arguments = call.args.to_string();
        entries.push(
            serde_json::from_value(json!({
                "session": 0, "route": "main", "index": index, "kind": "response",
                "tool_calls": [{"id": id, "name": call.tool, "arguments": arguments}],
                "finish_reason": "tool_calls",
                "stream": [{"tool_call": 0, "id": id, "name": call.tool, "arguments": arguments}]
            }))
            .unwrap(),
        );
    }
    entries.push(
        serde_json::from_value(json!({
            "session": 0, "route": "main", "index": calls.len(), "kind": "response",
            "content": "done", "finish_reason": "stop"
        }))
        .unwrap(),
    );
    Scenario::from_parts(spec, entries)
}

pub async fn serve(scenario: &Scenario) -> ReplayServer {
    ReplayServer::start(scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap()
}

/// Runs `dsh exec` with `calls` under `mode` and returns the output and the tool results'
/// texts, in order.
pub async fn exec(case: &Case, mode: &str, calls: &[Call]) -> (Output, Vec<String>) {
    let task = "probe the sandbox";
    let server = serve(&scenario(task, calls)).await;
    let out = tokio::task::spawn_blocking({
        let mut command = case.command(&["exec", "--output", "stream-json", task], &server.url());
        command.env("DSH_PERMISSION_MODE", mode);
        move || command.output().unwrap()
    })
    .await
    .unwrap();
    let results = tool_results(&out);
    (out, results)
}

/// The text of every `tool/result` in a stream-json output.
pub fn tool_results(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["event"]["type"] == "tool/result")
        .map(|line| {
            let parts = line["event"]["data"]["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            parts
                .iter()
                .flat_map(|part| part["content"].as_array().cloned().unwrap_or_default())
                .filter_map(|block| block["text"].as_str().map(str::to_owned))
                .collect::<String>()
        })
        .collect()
}

/// A folder outside every temp area (a confined command sees it, read-only), owned by `user`.
pub fn outside(case: &Case) -> tempfile::TempDir {
    let tmp = std::fs::canonicalize(std::env::temp_dir()).unwrap();
    for base in [
        Path::new("/var/tmp"),
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    ] {
        let visible = std::fs::canonicalize(base)
            .is_ok_and(|real| !real.starts_with("/tmp") && !real.starts_with(&tmp));
        if visible && let Ok(dir) = tempfile::tempdir_in(base) {
            case.give(dir.path());
            return dir;
        }
    }
    panic!("no writable folder outside the temp areas on this host");
}
