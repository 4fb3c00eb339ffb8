//! Key leaks 5 and 6: the provider key never reaches the model, the session log or a child.

use serde_json::json;

use super::support::Call;
use super::support::Case;
use super::support::User;
use super::support::bash;
use super::support::exec;

const KEY: &str = "sk-replay-secret-key-0123456789";

/// What the redaction writes in place of a secret.
const REDACTED: &str = "[redacted secret]";

fn tool(tool: &'static str, args: serde_json::Value) -> Call {
    Call { tool, args }
}

/// Every file below `dir`, concatenated.
fn all_text(dir: &std::path::Path) -> String {
    let mut text = String::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                text.push_str(&all_text(&path));
            } else if let Ok(bytes) = std::fs::read(&path) {
                text.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_tool_result_carries_the_key() {
    for user in User::all() {
        for mode in ["read-only", "workspace-write", "danger-full-access"] {
            let case = Case::new(user);
            let (out, results) = exec(
                &case,
                mode,
                &[
                    tool("read", json!({"file_path": "/proc/self/environ"})),
                    tool("grep", json!({"pattern": "DEEPSEEK", "path": "/proc/self/environ"})),
                    tool("grep", json!({"pattern": "DEEPSEEK", "path": "/proc/self/task"})),
                    tool("read", json!({"file_path": "/proc/thread-self/environ"})),
                    // From bash: the guard's (or the sandbox's) parent is dsh.
                    bash(
                        "P=$(cut -d' ' -f4 /proc/$PPID/stat); tr '\\0' '\\n' < /proc/$P/environ 2>&1 | grep -i deepseek; env | grep -ci deepseek_api; echo probed",
                    ),
                ],
            )
            .await;
            assert!(
                out.status.success(),
                "{user:?} {mode}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(results.len(), 5, "{user:?} {mode}: {results:?}");
            for (index, result) in results.iter().enumerate() {
                assert!(
                    !result.contains(KEY),
                    "{user:?} {mode} call {index}: {result}"
                );
            }
            for result in &results[..4] {
                assert!(
                    result.contains("is refused in every mode"),
                    "{user:?} {mode}: {result}"
                );
            }
            assert!(results[4].contains("probed"), "{results:?}");
            // Unconfined, bash can name dsh's pid, but the key is no longer in dsh's
            // environment (as root the name is left with an empty value; an ordinary user may
            // not read it at all): there is nothing to redact.
            assert!(
                !results[4].contains(REDACTED),
                "{user:?} {mode}: {}",
                results[4]
            );
            let stored = all_text(&case.home_path().join("sessions"));
            assert!(!stored.is_empty());
            assert!(
                !stored.contains(KEY),
                "{user:?} {mode}: the key is in the session log"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_commands_never_see_the_key() {
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
        let (out, results) = exec(&case, "workspace-write", &[bash("echo ran")]).await;
        assert!(
            out.status.success(),
            "{user:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(results[0].contains("ran"), "{results:?}");
        let env = std::fs::read_to_string(&dump).expect("the hook ran");
        assert!(env.contains("PATH="), "{env}");
        assert!(
            !env.contains(KEY) && !env.contains("DEEPSEEK_API_KEY"),
            "{user:?}: {env}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_logs_and_their_folders_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let case = Case::new(User::Current);
    let (out, _) = exec(&case, "workspace-write", &[bash("echo hi")]).await;
    assert!(out.status.success());
    let mut found = 0;
    let mut stack = vec![case.home_path().join("sessions")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            if path.is_dir() {
                assert_eq!(mode, 0o700, "{}", path.display());
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                assert_eq!(mode, 0o600, "{}", path.display());
                found += 1;
            }
        }
    }
    assert_eq!(found, 1);
}

/// Every way the key can show up that a literal match misses: reversed, and base64 at each of
/// the three byte alignments it can have inside a larger encoded text.
fn disguised_keys() -> Vec<String> {
    let mut forms = vec![KEY.chars().rev().collect::<String>()];
    for offset in 0..3 {
        let mut bytes = vec![b'x'; offset];
        bytes.extend_from_slice(KEY.as_bytes());
        let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &bytes);
        // The characters fixed by the key's bytes alone.
        forms.push(encoded[4..encoded.len() - 4].to_owned());
    }
    forms
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_transform_of_any_ancestors_environment_carries_the_key() {
    // Every ancestor of the command up to init: the guard, dsh, whatever started dsh.
    let walk = |body: &str| {
        format!(
            "p=$$; while [ \"$p\" -gt 1 ] 2>/dev/null; do {body}; p=$(sed 's/.*) //' /proc/$p/stat | cut -d' ' -f2); done; echo walked"
        )
    };
    let calls = [
        bash(&walk("base64 -w0 /proc/$p/environ 2>/dev/null; echo")),
        bash(&walk("tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | rev")),
        bash(&walk(
            "tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | grep -a DEEPSEEK_API_KEY | od -An -c | tr -d ' \\n'; echo",
        )),
    ];
    for user in User::all() {
        for mode in ["read-only", "workspace-write", "danger-full-access"] {
            let case = Case::new(user);
            let (out, results) = exec(&case, mode, &calls).await;
            assert!(out.status.success(), "{user:?} {mode}: {out:?}");
            assert_eq!(results.len(), 3, "{user:?} {mode}: {results:?}");
            let stored = all_text(&case.home_path().join("sessions"));
            for (index, result) in results.iter().enumerate() {
                assert!(
                    result.contains("walked"),
                    "{user:?} {mode} {index}: {result}"
                );
                for form in disguised_keys() {
                    assert!(
                        !result.contains(&form) && !stored.contains(&form),
                        "{user:?} {mode} call {index}: the key as {form:?} in {result}"
                    );
                }
                // `od -c` spells it one character at a time.
                let spelled: String = KEY.chars().map(|c| c.to_string()).collect();
                assert!(
                    !result.contains(&spelled[..20]),
                    "{user:?} {mode}: {result}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dsh_is_not_dumpable() {
    // Unconfined, the command can name dsh's pid: its memory and environment are the
    // process's own unless the caller may ptrace it (root may: see docs/security.md).
    let probe = || {
        bash(
            "g=$(sed 's/.*) //' /proc/$$/stat | cut -d' ' -f2); d=$(sed 's/.*) //' /proc/$g/stat | cut -d' ' -f2); \
         grep -a -c . /proc/$d/environ 2>&1 | head -1; \
         head -c 1 /proc/$d/mem 2>&1 | head -1; stat -c 'owner=%u' /proc/$d/status",
        )
    };
    for user in User::all() {
        let case = Case::new(user);
        let (out, results) = exec(&case, "danger-full-access", &[probe()]).await;
        assert!(out.status.success(), "{user:?}: {out:?}");
        // A non-dumpable process's /proc files belong to root.
        assert!(results[0].contains("owner=0"), "{user:?}: {results:?}");
        if user != User::Current || !rustix::process::geteuid().is_root() {
            assert!(
                results[0].matches("Permission denied").count() >= 1,
                "{user:?}: {results:?}"
            );
        }
    }
}
