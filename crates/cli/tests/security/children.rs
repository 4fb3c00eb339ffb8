//! #28 §2 and #27 §3 "weaker environment scrubs": every child dsh starts gets dsh's
//! environment through the one filter. dsh runs here with a hostile environment: the provider
//! key (a registered secret) and its value under an innocent name, a token, a URL with a
//! password, an agent socket, and a variable whose value and another whose name are not UTF-8.
//! Each child (bash confined and unconfined, a hook, a language server, the tmux location
//! query) writes what it got to a file; none of it may be there, and dsh must not panic.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

use serde_json::json;

use super::support::Call;
use super::support::Case;
use super::support::User;
use super::support::bash;
use super::support::scenario;
use super::support::serve;
use super::support::tool_results;

const KEY: &str = "sk-replay-secret-key-0123456789";

/// Runs `dsh exec` in `mode` with the hostile environment (and `extra` variables).
async fn exec_hostile(
    case: &Case,
    mode: &str,
    calls: &[Call],
    extra: &[(&str, String)],
) -> (Output, Vec<String>) {
    let task = "probe the children";
    let server = serve(&scenario(task, calls)).await;
    let mut command = case.command(&["exec", "--output", "stream-json", task], &server.url());
    command
        .env("DSH_PERMISSION_MODE", mode)
        .env("INNOCENT_LOOKING", format!("prefix {KEY} suffix"))
        .env("GITHUB_TOKEN", "ghp-probe-token")
        .env("DATABASE_URL", "postgres://app:hunter2@db:5432/app")
        .env("SSH_AUTH_SOCK", "/tmp/probe-agent.sock")
        .env("LATIN1_VALUE", OsStr::from_bytes(b"caf\xe9"))
        .env(OsStr::from_bytes(b"LATIN1_\xe9_NAME"), "x")
        .env("PLAIN_KEEP", "kept");
    for (name, value) in extra {
        command.env(name, value);
    }
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let results = tool_results(&out);
    (out, results)
}

fn assert_no_panic(out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked"),
        "{what}: dsh panicked: {stderr}"
    );
    assert!(out.status.success(), "{what}: {stderr}");
}

/// What a child wrote of its environment holds none of the hostile variables.
fn assert_clean(dump: &Path, what: &str) {
    let seen = std::fs::read(dump).unwrap_or_else(|e| panic!("{what}: no dump ({e})"));
    let seen = String::from_utf8_lossy(&seen);
    assert!(seen.contains("PLAIN_KEEP=kept"), "{what}: {seen}");
    for gone in [
        KEY,
        "DEEPSEEK_API_KEY",
        "INNOCENT_LOOKING",
        "GITHUB_TOKEN",
        "hunter2",
        "SSH_AUTH_SOCK",
        "LATIN1",
    ] {
        assert!(
            !seen.contains(gone),
            "{what}: {gone} reached the child:\n{seen}"
        );
    }
}

fn write_script(case: &Case, rel: &str, body: &str) -> std::path::PathBuf {
    case.write_ws(rel, &format!("#!/bin/sh\n{body}\n"));
    let path = case.ws().join(rel);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_confined_and_unconfined_gets_the_filtered_environment() {
    for user in User::all() {
        for mode in ["workspace-write", "danger-full-access"] {
            let case = Case::new(user);
            let dump = case.ws().join("bash-env.txt");
            let (out, results) = exec_hostile(
                &case,
                mode,
                &[bash(&format!("env > {}; echo dumped", dump.display()))],
                &[],
            )
            .await;
            let what = format!("{user:?} {mode} bash");
            assert_no_panic(&out, &what);
            assert!(results[0].contains("dumped"), "{what}: {results:?}");
            assert_clean(&dump, &what);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_gets_the_filtered_environment() {
    for user in User::all() {
        let case = Case::new(user);
        let dump = case.ws().join("hook-env.txt");
        let hooks = json!({"hooks": {"PreToolUse": [{"matcher": "bash", "hooks": [
            {"type": "command", "command": format!("env > {}", dump.display())}
        ]}]}});
        case.write_ws("hooks.json", &hooks.to_string());
        case.write_home(
            "config.toml",
            &format!(
                "[plugins.session-title]\nenabled = false\n\n[plugins.hooks-claude-code]\nconfig_path = \"{}\"\n",
                case.ws().join("hooks.json").display()
            ),
        );
        let (out, _) = exec_hostile(&case, "workspace-write", &[bash("echo ran")], &[]).await;
        let what = format!("{user:?} hook");
        assert_no_panic(&out, &what);
        assert_clean(&dump, &what);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_language_server_gets_the_filtered_environment() {
    for user in User::all() {
        let case = Case::new(user);
        let dump = case.ws().join("lsp-env.txt");
        let server = write_script(&case, "fake-lsp.sh", &format!("env > {}", dump.display()));
        case.write_ws("app.py", "x = 1\n");
        case.write_home(
            "config.toml",
            &format!(
                "[plugins.session-title]\nenabled = false\n\n[plugins.lsp]\nenabled = true\n\n[plugins.lsp.servers.py]\ncommand = {:?}\nextension_to_language = {{ \".py\" = \"python\" }}\n",
                server.display().to_string()
            ),
        );
        let call = Call {
            tool: "lsp",
            args: json!({"operation": "hover", "file_path": "app.py", "line": 1, "character": 1}),
        };
        let (out, _) = exec_hostile(&case, "workspace-write", &[call], &[]).await;
        let what = format!("{user:?} language server");
        assert_no_panic(&out, &what);
        assert_clean(&dump, &what);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tmux_query_gets_the_filtered_environment() {
    for user in User::all() {
        let case = Case::new(user);
        let dump = case.ws().join("tmux-env.txt");
        // Stand-ins for `ps` and `tmux` that answer the location query and dump what they got.
        write_script(&case, "bin/ps", "echo pts/9");
        write_script(
            &case,
            "bin/tmux",
            &format!(
                "env > {}\ncase \"$*\" in *pane_tty*) echo /dev/pts/9 ;; *) printf 's\\t0\\tw\\t0\\t%%1\\t1\\t1\\tl\\n' ;; esac",
                dump.display()
            ),
        );
        case.write_home(
            "config.toml",
            "[plugins.session-title]\nenabled = false\n\n[plugins.tmux-context]\nenabled = true\n",
        );
        let path = format!(
            "{}:{}",
            case.ws().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let (out, _) = exec_hostile(
            &case,
            "workspace-write",
            &[bash("echo ran")],
            &[("PATH", path), ("TMUX_PANE", "%1".to_owned())],
        )
        .await;
        let what = format!("{user:?} tmux query");
        assert_no_panic(&out, &what);
        assert_clean(&dump, &what);
    }
}
