//! How the top-level command line is read: global flags before a subcommand keep the
//! subcommand, and options that belong after it are refused with a clear message.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn dsh(args: &[&str]) -> std::process::Output {
    let home = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_dsh"))
        .args(args)
        .current_dir(home.path())
        .env("DSH_HOME", home.path())
        .env_remove("DEEPSEEK_API_KEY")
        .env_remove("DEEPSEEK_BASE_URL")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_global_flag_before_the_subcommand_keeps_the_subcommand() {
    // Once read as the UI's prompt "exec hi", which then refused to start without a terminal.
    let out = dsh(&["--trust-project", "exec", "hi"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(!stderr.contains("interactive UI"), "{stderr}");
    assert!(
        stderr.contains("DEEPSEEK_API_KEY"),
        "exec ran and asked for the key: {stderr}"
    );

    let listed = dsh(&["--trust-project", "mcp", "list"]);
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success(), "{stdout}");
    assert!(stdout.contains("no MCP servers configured"), "{stdout}");
}

#[test]
fn ui_options_before_a_subcommand_are_refused_by_name() {
    let out = dsh(&["-m", "some-model", "exec", "hi"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("go after the command"), "{stderr}");
}
