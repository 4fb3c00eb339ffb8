//! Issue #27 §1: the hidden areas and the temp directories. A hidden area (dsh's home, the
//! credential folders) stays hidden whatever the working directory: with `DSH_HOME` and `HOME`
//! under `/tmp` (as in CI), a `workdir` there once re-exposed them through the bind that keeps a
//! working directory visible inside the private `/tmp`. And the file tools follow the rule
//! `bash` does: in `workspace-write` neither writes the host's `/tmp`.

use serde_json::json;

use super::support::Call;
use super::support::Case;
use super::support::User;
use super::support::exec;

const HOME_MARKER: &str = "HOME-SECRET-MARKER";
const SSH_MARKER: &str = "SSH-SECRET-MARKER";

fn bash_in(command: &str, workdir: &std::path::Path) -> Call {
    Call {
        tool: "bash",
        args: json!({
            "command": command,
            "description": "Probe the sandbox",
            "workdir": workdir.display().to_string(),
        }),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workdir_never_reexposes_a_hidden_area() {
    for user in User::all() {
        for mode in ["read-only", "workspace-write"] {
            let case = Case::new(user);
            // The case's HOME and DSH_HOME are one folder under the temp directory.
            let home = case.home_path();
            assert!(home.starts_with(std::fs::canonicalize(std::env::temp_dir()).unwrap()));
            case.write_home("notes.txt", HOME_MARKER);
            case.write_home(".ssh/id_ed25519", SSH_MARKER);
            case.write_home("sessions/other/log.jsonl", HOME_MARKER);
            let parent = home.parent().unwrap().to_path_buf();
            let read_all = format!(
                "cat {h}/notes.txt {h}/.ssh/id_ed25519 {h}/sessions/other/log.jsonl {h}/config.toml 2>&1; \
                 cat notes.txt .ssh/id_ed25519 2>&1; ls -a {h} 2>&1; echo probed",
                h = home.display()
            );
            let calls = [
                bash_in(&read_all, &home),
                bash_in(&read_all, &home.join(".ssh")),
                bash_in(&read_all, &parent),
            ];
            let (out, results) = exec(&case, mode, &calls).await;
            assert!(
                out.status.success(),
                "{user:?} {mode}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(results.len(), calls.len(), "{user:?} {mode}: {results:?}");
            for (index, result) in results.iter().enumerate() {
                assert!(
                    result.contains("probed"),
                    "{user:?} {mode} call {index}: the probe did not run: {result}"
                );
                for marker in [HOME_MARKER, SSH_MARKER, "session-title"] {
                    assert!(
                        !result.contains(marker),
                        "{user:?} {mode} call {index}: a hidden area showed through: {result}"
                    );
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_tools_do_not_write_the_hosts_tmp() {
    for user in User::all() {
        let case = Case::new(user);
        let target = std::env::temp_dir().join(format!(
            "dsh-probe-{}-{}.txt",
            std::process::id(),
            user.uid().unwrap_or(0)
        ));
        let _ = std::fs::remove_file(&target);
        let calls = [Call {
            tool: "write",
            args: json!({"file_path": target.display().to_string(), "content": "planted"}),
        }];
        let (out, results) = exec(&case, "workspace-write", &calls).await;
        let written = target.exists();
        let _ = std::fs::remove_file(&target);
        assert!(out.status.success(), "{user:?}");
        assert!(
            !written,
            "{user:?}: the write tool wrote the host's temp directory: {results:?}"
        );
        assert!(
            results[0].contains("[sandbox: file access denied under workspace-write mode]"),
            "{user:?}: {results:?}"
        );
    }
}
