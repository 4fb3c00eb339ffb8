//! A child of dsh sees none of dsh's secrets, and a variable that is not UTF-8 costs no panic.
//! The test re-runs itself with a hostile environment (a registered secret value under an
//! innocent name, credential-like names, a URL with a password, an agent socket, a non-UTF-8
//! value and name) and, inside, starts a child each way `dsh-process` offers.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods, reason = "the test re-runs itself")]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const KEY: &str = "sk-hostile-probe-key-0123456789";
const INSIDE: &str = "HOSTILE_ENV_PROBE_INSIDE";

fn hostile(command: &mut std::process::Command) {
    command
        .env("DEEPSEEK_API_KEY", KEY)
        .env("INNOCENT_LOOKING", format!("prefix {KEY} suffix"))
        .env("GITHUB_TOKEN", "ghp-probe")
        .env("DATABASE_URL", "postgres://app:hunter2@db:5432/app")
        .env("SSH_AUTH_SOCK", "/tmp/probe-agent.sock")
        .env("LATIN1_VALUE", OsStr::from_bytes(b"caf\xe9"))
        .env(OsStr::from_bytes(b"LATIN1_\xe9_NAME"), "x")
        .env("PLAIN_KEEP", "kept")
        .env(INSIDE, "1");
}

/// What a child saw, one `NAME=value` per line.
fn assert_clean(seen: &str, how: &str) {
    assert!(seen.contains("PLAIN_KEEP=kept"), "{how}: {seen}");
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
            "{how}: {gone} reached the child: {seen}"
        );
    }
}

#[test]
fn no_child_sees_a_secret_or_panics_on_non_utf8() {
    if std::env::var_os(INSIDE).is_some() {
        return inside();
    }
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command.args([
        "--exact",
        "no_child_sees_a_secret_or_panics_on_non_utf8",
        "--nocapture",
        "--test-threads=1",
    ]);
    hostile(&mut command);
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("probed 3 ways"));
}

fn inside() {
    // dsh registers the provider key at start-up; so does this stand-in.
    dsh_secrets::register_secret(KEY);
    let env = dsh_process::ChildEnv::inherited();
    let sh = env.resolve("sh", Path::new("/")).expect("sh on PATH");

    let out = dsh_process::std_command(&sh, &env)
        .args(["-c", "env"])
        .output()
        .unwrap();
    assert_clean(&String::from_utf8_lossy(&out.stdout), "std_command");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let out = dsh_process::command(&sh, &env)
            .args(["-c", "env"])
            .output()
            .await
            .unwrap();
        assert_clean(&String::from_utf8_lossy(&out.stdout), "command");

        let dir = tempfile::tempdir().unwrap();
        let dump = dir.path().join("env.txt");
        let script = format!("env > {}", dump.display());
        let spawned = dsh_process::piped::spawn(
            "sh",
            &["-c".to_owned(), script],
            dir.path(),
            &dsh_process::ChildEnv::inherited(),
        )
        .unwrap();
        drop(spawned.stdin);
        dsh_process::piped::reap(
            spawned.child,
            spawned.pgid,
            std::time::Duration::from_secs(5),
            std::time::Duration::from_millis(100),
        )
        .await;
        assert_clean(&std::fs::read_to_string(&dump).unwrap(), "piped::spawn");
    });
    println!("probed 3 ways");
}
