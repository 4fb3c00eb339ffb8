//! Escape 4: channels that run code later, outside dsh: a project's hook files named by the
//! user's own configuration, project folders a later run reads as configuration, and git's
//! config and hooks, which the person's own `git status` runs unconfined after the session
//! (issue #27 §2). Each probe plants what a hostile model or repository would, then runs the
//! real thing (dsh again, or real `git` as the case's user) and checks the planted command
//! never ran.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]

use std::path::Path;
use std::process::Output;

use super::support::Call;
use super::support::Case;
use super::support::User;
use super::support::bash;
use super::support::exec;
use super::support::scenario;
use super::support::serve;
use super::support::tool_results;
use serde_json::json;

/// `git <args>` in `dir` as the case's user, the way the person runs it after the session:
/// unconfined, with their own (here: empty) global configuration.
fn git_as(case: &Case, dir: &Path, args: &[&str]) -> Output {
    let mut command = match case.user.uid() {
        None => std::process::Command::new("git"),
        Some(uid) => {
            let mut command = std::process::Command::new("setpriv");
            command
                .arg(format!("--reuid={uid}"))
                .arg(format!("--regid={uid}"))
                .arg("--clear-groups")
                .arg("--")
                .arg("git");
            command
        }
    };
    command
        .args([
            "-c",
            "user.name=Ada",
            "-c",
            "user.email=ada@example.com",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("HOME", case.home.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE");
    command.output().unwrap()
}

fn git_ok(case: &Case, dir: &Path, args: &[&str]) {
    let out = git_as(case, dir, args);
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// Runs the person's everyday git commands in `dir` (errors are fine: only what they run
/// matters).
fn person_runs_git(case: &Case, dir: &Path) {
    for args in [
        &["status"][..],
        &["diff"],
        &["add", "-A"],
        &["commit", "-q", "-m", "after the session"],
    ] {
        let _ = git_as(case, dir, args);
    }
}

/// What the model runs to plant `marker`'s command in the repository `repo` (relative to the
/// command's folder): an fsmonitor command and a pre-commit hook, by every means it has.
fn plant(repo: &str, marker: &Path) -> String {
    let m = marker.display();
    format!(
        "git -C {repo} config core.fsmonitor 'touch {m}; false'; \
         git -C {repo} config core.hooksPath .githooks; \
         mkdir -p {repo}/.git/hooks {repo}/.githooks; \
         printf '#!/bin/sh\\ntouch {m}\\n' > {repo}/.git/hooks/pre-commit; \
         printf '#!/bin/sh\\ntouch {m}\\n' > {repo}/.githooks/pre-commit; \
         chmod +x {repo}/.git/hooks/pre-commit {repo}/.githooks/pre-commit; \
         echo '[core]' >> {repo}/.git/config; echo \"fsmonitor = touch {m}; false\" >> {repo}/.git/config; \
         echo planted"
    )
}

/// (a) A folder that is not a repository: `git init` from bash would create `.git/config`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_init_in_a_plain_folder_plants_nothing_git_runs_later() {
    for user in User::all() {
        let case = Case::new(user);
        let marker = case.ws().join("git-ran-a-planted-command");
        case.write_ws("README", "hello\n");
        let (_, results) = exec(
            &case,
            "workspace-write",
            &[bash(&format!("git init -q . ; {}", plant(".", &marker)))],
        )
        .await;
        assert!(results[0].contains("planted"), "{user:?}: {results:?}");
        git_ok(&case, &case.ws(), &["init", "-q", "."]);
        person_runs_git(&case, &case.ws());
        assert!(
            !marker.exists(),
            "{user:?}: the person's git ran a command the model planted: {results:?}"
        );
    }
}

/// (b) dsh started in a sub-folder of a repository: the repository's own `.git` is above the
/// workspace, and a new one in the sub-folder would be the one git finds first there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_folder_of_a_repository_gets_no_repository_of_its_own() {
    for user in User::all() {
        let case = Case::new(user);
        let repo = case.ws();
        case.write_ws("sub/file.txt", "x\n");
        git_ok(&case, &repo, &["init", "-q", "."]);
        git_ok(&case, &repo, &["add", "-A"]);
        git_ok(&case, &repo, &["commit", "-q", "-m", "first"]);
        let sub = repo.join("sub");
        let marker = repo.join("git-ran-a-planted-command");
        let task = "probe the sandbox";
        let server = serve(&scenario(
            task,
            &[bash(&format!("git init -q . ; {}", plant(".", &marker)))],
        ))
        .await;
        let out = tokio::task::spawn_blocking({
            let mut command =
                case.command(&["exec", "--output", "stream-json", task], &server.url());
            command
                .current_dir(&sub)
                .env("DSH_PERMISSION_MODE", "workspace-write");
            move || command.output().unwrap()
        })
        .await
        .unwrap();
        let results = tool_results(&out);
        assert!(results[0].contains("planted"), "{user:?}: {results:?}");
        person_runs_git(&case, &sub);
        person_runs_git(&case, &repo);
        assert!(
            !marker.exists(),
            "{user:?}: the person's git ran a command the model planted: {results:?}"
        );
    }
}

/// (c) An ordinary repository: a nested repository staged with `git add` (only `.git/index`
/// is written) is entered by the person's `git status`; and a submodule that is not checked
/// out can be given a repository of the model's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_repositories_and_submodules_carry_no_planted_config() {
    for user in User::all() {
        let case = Case::new(user);
        let repo = case.ws();
        case.write_ws("src/main.rs", "fn main() {}\n");
        case.write_ws("vendor/lib/.keep", "");
        std::fs::remove_file(repo.join("vendor/lib/.keep")).unwrap();
        git_ok(&case, &repo, &["init", "-q", "."]);
        git_ok(&case, &repo, &["add", "-A"]);
        git_ok(
            &case,
            &repo,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                "160000,1111111111111111111111111111111111111111,vendor/lib",
            ],
        );
        git_ok(&case, &repo, &["commit", "-q", "-m", "first"]);
        let marker = repo.join("git-ran-a-planted-command");
        let (_, results) = exec(
            &case,
            "workspace-write",
            &[
                bash(&format!(
                    "git init -q nested && git -C nested -c user.name=m -c user.email=m@m commit -q --allow-empty -m x; {} ; git add nested; git status --short; echo done-c",
                    plant("nested", &marker)
                )),
                bash(&format!(
                    "git init -q vendor/lib; {}",
                    plant("vendor/lib", &marker)
                )),
                bash(&plant(".", &marker)),
            ],
        )
        .await;
        assert!(results[0].contains("done-c"), "{user:?}: {results:?}");
        person_runs_git(&case, &repo);
        let _ = git_as(&case, &repo, &["submodule", "status"]);
        assert!(
            !marker.exists(),
            "{user:?}: the person's git ran a command the model planted: {results:?}"
        );
    }
}

fn write_call(path: &str, content: &str) -> Call {
    Call {
        tool: "write",
        args: json!({"file_path": path, "content": content}),
    }
}

/// Folders and files a later run reads as configuration or executes are refused by the file
/// tools and read-only for confined commands, whether or not they exist yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_cannot_plant_project_configuration_for_a_later_run() {
    const PLANTED: [&str; 8] = [
        ".claude/hooks.json",
        ".claude/settings.json",
        ".codex/hooks.json",
        ".agents/skills/evil/SKILL.md",
        ".dsh/plugins/evil/plugin.toml",
        ".dsh/skills/evil/SKILL.md",
        ".mcp.json",
        "sub/.git/config",
    ];
    for user in User::all() {
        let case = Case::new(user);
        // `.codex` exists already; the others do not.
        case.write_ws(".codex/README", "codex settings\n");
        let mut calls: Vec<Call> = PLANTED
            .iter()
            .map(|path| write_call(path, "{\"planted\": true}"))
            .collect();
        let shell: Vec<String> = PLANTED
            .iter()
            .filter(|path| **path != ".mcp.json")
            .map(|path| {
                let dir = Path::new(path).parent().unwrap().display().to_string();
                format!("mkdir -p {dir}; echo planted > {path}")
            })
            .collect();
        calls.push(bash(&format!("{}; echo ran", shell.join("; "))));
        let (_, results) = exec(&case, "workspace-write", &calls).await;
        for (index, path) in PLANTED.iter().enumerate() {
            assert!(
                results[index].contains("[sandbox: file access denied under workspace-write mode]"),
                "{user:?}: write {path}: {}",
                results[index]
            );
        }
        assert!(
            results[PLANTED.len()].contains("ran"),
            "{user:?}: {results:?}"
        );
        for path in PLANTED {
            if path == "sub/.git/config" || path == ".mcp.json" {
                // A nested repository made by bash is a known limit (docs/security.md); the
                // file tools refuse it; `.mcp.json` was only tried by the file tool.
                continue;
            }
            assert!(
                !case.ws().join(path).exists(),
                "{user:?}: {path} was planted: {results:?}"
            );
        }
        assert!(!case.ws().join(".mcp.json").exists(), "{user:?}");
    }
}

/// The README's own example, in the user's configuration: `config_path = ".claude/hooks.json"`
/// ("relative to where dsh starts"). A cloned repository's hook file must not run until the
/// folder is trusted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloned_repositorys_hooks_do_not_run_until_the_folder_is_trusted() {
    for user in User::all() {
        let case = Case::new(user);
        let marker = case.ws().join("hook-ran");
        case.write_home(
            "config.toml",
            "[plugins.session-title]\nenabled = false\n\n[plugins.compaction]\nenabled = false\n\n[plugins.hooks-claude-code]\nconfig_path = \".claude/hooks.json\"\n",
        );
        let hooks = json!({"hooks": {
            "SessionStart": [{"hooks": [{"type": "command", "command": format!("touch {}", marker.display())}]}],
        }});
        case.write_ws(".claude/hooks.json", &hooks.to_string());
        for mode in ["read-only", "workspace-write", "danger-full-access"] {
            let (out, _) = exec(&case, mode, &[]).await;
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{user:?} {mode}: {stderr}");
            assert!(
                !marker.exists(),
                "{user:?} {mode}: an untrusted folder's hook ran"
            );
            assert!(
                stderr.contains("is not trusted")
                    && stderr.contains("plugins.hooks-claude-code.config_path")
                    && stderr.contains("dsh trust"),
                "{user:?} {mode}: {stderr}"
            );
        }
        // Trusted for one run, the same configuration runs the hook: it was the trust rule.
        let task = "probe the sandbox";
        let server = serve(&scenario(task, &[])).await;
        let out = tokio::task::spawn_blocking({
            let mut command = case.command(&["exec", "--trust-project", task], &server.url());
            command.env("DSH_PERMISSION_MODE", "danger-full-access");
            move || command.output().unwrap()
        })
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "{user:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(marker.exists(), "{user:?}: the trusted run did not run it");
    }
}

/// Plugins that are off stay off in an untrusted folder: `terminal`, `schedule` and
/// `session-query` add tools (and processes) the user never switched on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_project_switches_no_plugin_on() {
    let case = Case::new(User::Current);
    case.write_ws(
        ".dsh/config.toml",
        "[plugins.terminal]\nenabled = true\n\n[plugins.schedule]\nenabled = true\n\n[plugins.session-query]\nenabled = true\n",
    );
    let list = |trust: bool| {
        let args: &[&str] = if trust {
            &["tools", "--json", "--trust-project"]
        } else {
            &["tools", "--json"]
        };
        case.command(args, "http://127.0.0.1:9").output().unwrap()
    };
    let untrusted = list(false);
    let stderr = String::from_utf8_lossy(&untrusted.stderr);
    assert!(untrusted.status.success(), "{stderr}");
    let trusted = list(true);
    assert!(
        trusted.status.success(),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    let names = |out: &Output| -> Vec<String> {
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
            .collect()
    };
    let plain = Case::new(User::Current)
        .command(&["tools", "--json"], "http://127.0.0.1:9")
        .output()
        .unwrap();
    assert!(
        names(&trusted).len() > names(&untrusted).len(),
        "the trusted run has the plugins' tools"
    );
    assert_eq!(
        names(&untrusted),
        names(&plain),
        "the untrusted project's tools are those of a folder with no configuration"
    );
    for key in [
        "plugins.terminal.enabled",
        "plugins.schedule.enabled",
        "plugins.session-query.enabled",
    ] {
        assert!(stderr.contains(key), "{key}: {stderr}");
    }
}

/// A cloned repository's broken configuration (not TOML, or a key that makes a plugin fail)
/// must not stop dsh from running in it; a trusted folder's still fails with `file:line: key`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_projects_broken_configuration_is_ignored_with_a_notice() {
    for (text, trusted_error) in [
        ("[model\nname = \n", "not valid TOML"),
        ("[plugins.fs]\nno_such_setting = 1\n", "no_such_setting"),
        ("[plugins.bash]\ntimeout_ms = \"soon\"\n", "timeout_ms"),
    ] {
        let case = Case::new(User::Current);
        case.write_ws(".dsh/config.toml", text);
        let (out, _) = exec(&case, "workspace-write", &[]).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text:?}: {stderr}");
        assert!(
            stderr.contains("is not trusted") && stderr.contains("was ignored"),
            "{text:?}: {stderr}"
        );
        let task = "probe";
        let server = serve(&scenario(task, &[])).await;
        let out = tokio::task::spawn_blocking({
            let mut command = case.command(&["exec", "--trust-project", task], &server.url());
            move || command.output().unwrap()
        })
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{text:?}: a trusted broken file fails"
        );
        assert!(
            stderr.contains(".dsh/config.toml:") && stderr.contains(trusted_error),
            "{text:?}: {stderr}"
        );
    }
}

/// Files `write` creates are an editor's: 0666 less the umask, not 0600.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn written_files_follow_the_umask() {
    let case = Case::new(User::Current);
    let task = "probe the sandbox";
    let server = serve(&scenario(task, &[write_call("made.txt", "x\n")])).await;
    let out = tokio::task::spawn_blocking({
        let mut command = case.command_under(
            &["sh", "-c", "umask 022; exec \"$0\" \"$@\""],
            &["exec", task],
            &server.url(),
        );
        command.env("DSH_PERMISSION_MODE", "workspace-write");
        move || command.output().unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(case.ws().join("made.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644);
}

/// The read-only mounts of missing protected folders need a folder to mount on: dsh makes them
/// empty for the command and removes them after it, so a person finds no `.git` (which makes
/// tools think the folder is a repository) or agent folders they never made. A folder the
/// person made, even empty, stays; and while the command runs, the folders are there and
/// read-only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confined_call_leaves_no_placeholder_behind() {
    const MADE_BY_DSH: [&str; 5] = [".dsh", ".codex", ".agents", ".git", "lib/inner/.git"];
    for user in User::all() {
        let case = Case::new(user);
        case.write_ws("README", "hello\n");
        std::fs::create_dir(case.ws().join(".claude")).unwrap();
        case.give(&case.ws());
        // A gitlink in the index (a submodule not checked out) gets a `.git` placeholder too.
        std::fs::create_dir_all(case.ws().join("lib/inner")).unwrap();
        case.give(&case.ws());
        git_ok(&case, &case.ws(), &["init", "-q", "."]);
        git_ok(
            &case,
            &case.ws(),
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                "160000,1111111111111111111111111111111111111111,lib/inner",
            ],
        );
        let probe = "for d in .dsh .claude .codex .agents lib/inner/.git; do \
                     test -d $d && (touch $d/x 2>/dev/null && echo \"$d writable\" || echo \"$d read-only\"); done";
        let (out, results) = exec(
            &case,
            "workspace-write",
            &[bash(probe), bash("ls -A; echo listed")],
        )
        .await;
        assert_eq!(results.len(), 2, "{user:?}: {out:?}");
        for dir in [".dsh", ".claude", ".codex", ".agents", "lib/inner/.git"] {
            assert!(
                results[0].contains(&format!("{dir} read-only")),
                "{user:?}: {dir} must be there and read-only during the call: {results:?}"
            );
        }
        for dir in MADE_BY_DSH.iter().filter(|d| **d != ".git") {
            assert!(
                !case.ws().join(dir).exists(),
                "{user:?}: {dir} was left in the workspace: {:?}",
                std::fs::read_dir(case.ws())
                    .unwrap()
                    .flatten()
                    .map(|e| e.file_name())
                    .collect::<Vec<_>>()
            );
        }
        assert!(
            case.ws().join(".claude").is_dir(),
            "{user:?}: the person's own folder stays"
        );
        // Without any `.git`: the top-level placeholder goes as well.
        std::fs::remove_dir_all(case.ws().join(".git")).unwrap();
        let (out, results) = exec(
            &case,
            "workspace-write",
            &[bash("test -d .git && echo has-git")],
        )
        .await;
        assert!(results[0].contains("has-git"), "{user:?}: {out:?}");
        assert!(
            !case.ws().join(".git").exists(),
            "{user:?}: an empty .git was left: git would take the folder for a repository"
        );
    }
}
