//! `dsh config show`: validates first, then prints the effective configuration with the layer
//! each key came from (TOML), or the tree and each key's origin (`--json`).
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;

use serde_json::Value;

fn show(home: &Path, cwd: &Path, json: bool) -> Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_dsh"));
    for (name, _) in std::env::vars() {
        if name.starts_with("DEEPSEEK_") || name.starts_with("DSH_") {
            command.env_remove(name);
        }
    }
    command
        .args(["config", "show"])
        .args(json.then_some("--json"))
        .current_dir(cwd)
        .env("DSH_HOME", home)
        .output()
        .unwrap()
}

fn dirs(user: &str) -> (tempfile::TempDir, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), user).unwrap();
    (home, tempfile::tempdir().unwrap())
}

#[test]
fn every_key_is_printed_with_its_layer() {
    let (home, cwd) =
        dirs("[model]\nname = \"deepseek-v4-pro\"\n\n[plugins.bash]\ntimeout_ms = 1000\n");
    let output = show(home.path(), cwd.path(), false);
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    let file = home.path().join("config.toml");
    assert!(
        text.contains(&format!(
            "name = \"deepseek-v4-pro\"  # user ({}:2)",
            file.display()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("timeout_ms = 1000  # user ({}:5)", file.display())),
        "{text}"
    );
    assert!(
        text.contains("provider = \"deepseek-official\"  # default"),
        "{text}"
    );
    assert!(
        text.contains("run_in_background = true  # default"),
        "{text}"
    );
    for table in [
        "[model]",
        "[tools]",
        "[plugins.bash]",
        "[plugins.fs]",
        "[plugins.mcp]",
    ] {
        assert!(text.contains(table), "{table} missing:\n{text}");
    }
    // The output is itself a configuration dsh accepts.
    let parsed: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(parsed["model"]["name"].as_str(), Some("deepseek-v4-pro"));
}

#[test]
fn json_gives_the_tree_and_each_keys_origin() {
    let (home, cwd) = dirs("[plugins.sandbox]\nmode = \"read-only\"\n");
    let output = show(home.path(), cwd.path(), true);
    assert!(output.status.success(), "{output:?}");
    let value: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(value["config"]["plugins"]["sandbox"]["mode"], "read-only");
    let source = &value["sources"]["plugins.sandbox.mode"];
    assert_eq!(source["layer"], "user");
    assert_eq!(source["line"], 2);
    assert_eq!(value["sources"]["model.name"]["layer"], "default");
}

#[test]
fn an_invalid_configuration_is_refused_with_its_location() {
    let (home, cwd) = dirs("[plugins.sandbox]\nmode = \"yolo\"\n");
    let output = show(home.path(), cwd.path(), false);
    assert!(!output.status.success());
    assert!(
        output.stdout.is_empty(),
        "nothing is printed as if it applied"
    );
    let stderr = String::from_utf8(output.stderr).unwrap();
    let file = home.path().join("config.toml");
    assert!(
        stderr.contains(&format!(
            "{}:2: plugins.sandbox.mode: unknown variant `yolo`",
            file.display()
        )),
        "{stderr}"
    );
}

/// The README's `[model] provider` line names providers as `dsh config show` prints them: its
/// value is the default `config show` prints, and each alternative it lists is one of the ids
/// `config show` knows (taken from its own error for an unknown provider, so neither list can
/// go stale alone).
#[test]
fn the_readme_and_config_show_agree_on_provider_names() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("provider = \""))
        .expect("the README's [model] example names a provider");
    let (setting, comment) = line.split_once('#').unwrap();
    let value = setting
        .trim()
        .trim_start_matches("provider = ")
        .trim_matches('"');
    let listed: Vec<&str> = comment
        .split('(')
        .next()
        .unwrap()
        .split('|')
        .map(str::trim)
        .collect();

    let (home, cwd) = dirs("");
    let shown = String::from_utf8(show(home.path(), cwd.path(), false).stdout).unwrap();
    assert!(
        shown.contains(&format!("provider = \"{value}\"  # default")),
        "README: {line}\nconfig show:\n{shown}"
    );
    let (home, cwd) = dirs("[model]\nprovider = \"no-such-provider\"\n");
    let refused = show(home.path(), cwd.path(), false);
    let error = String::from_utf8(refused.stderr).unwrap();
    let known: Vec<&str> = error
        .split("(known: ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("{error}"))
        .split(", ")
        .collect();
    assert!(listed.len() >= 2, "{line}");
    for name in &listed {
        assert!(
            known.contains(name),
            "README lists {name:?}; config show knows {known:?}"
        );
    }
    for name in &known {
        assert!(listed.contains(name), "README omits {name:?}: {line}");
    }
}
