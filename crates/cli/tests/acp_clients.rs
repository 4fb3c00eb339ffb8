//! `dsh acp` driven by ACP clients nobody on this project wrote: the official TypeScript SDK's
//! client (`acp_sdk/sdk_client.mjs`, every frame validated against the SDK's JSON schema of
//! protocol v1) and `acpx`. Both are installed by `npm ci --prefix crates/cli/tests/acp_sdk`
//! (`.ci/run` does it).
#![allow(
    clippy::disallowed_methods,
    reason = "tests start node, acpx and dsh directly"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::path::PathBuf;

use serde_json::Value;
use serde_json::json;
use support::model_server;
use support::sse;

fn clients() -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/acp_sdk"));
    if dir.join("node_modules/@agentclientprotocol/sdk").exists()
        && dir.join("node_modules/.bin/acpx").exists()
    {
        return Some(dir);
    }
    eprintln!(
        "SKIPPED: the ACP clients are not installed (run `npm ci --prefix crates/cli/tests/acp_sdk`)"
    );
    None
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".dsh")).unwrap();
    std::fs::write(
        dir.path().join(".dsh/config.toml"),
        "[plugins.session-title]\nenabled = false\n",
    )
    .unwrap();
    dir
}

fn dsh() -> String {
    std::env::var("DSH_TEST_ACP_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_dsh").to_owned())
}

async fn run(mut command: tokio::process::Command) -> std::process::Output {
    command.kill_on_drop(true);
    tokio::time::timeout(std::time::Duration::from_secs(120), command.output())
        .await
        .expect("the client finishes in time")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_client_runs_every_stable_method_and_every_frame_is_valid() {
    let Some(clients) = clients() else { return };
    let (url, bodies) = model_server(vec![sse(&[json!({"content": "read them"})], "stop")]).await;
    let work = workspace();
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new("node");
    command
        .arg(clients.join("sdk_client.mjs"))
        .current_dir(&clients)
        .env("DSH_BIN", dsh())
        .env("WORK", &cwd)
        .env("DSH_HOME", home.path())
        .env("DEEPSEEK_BASE_URL", &url);
    let output = run(command).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let failed: Vec<&Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] != true)
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert!(report["checks"].as_array().unwrap().len() >= 14, "{report}");
    assert_eq!(report["invalid"], json!([]), "every frame is valid");
    assert!(report["frames"].as_u64().unwrap() > 20, "{report}");
    let bodies = bodies.lock().unwrap().clone();
    assert!(
        bodies[0].to_string().contains("NOTE BODY"),
        "the embedded resource reached the model"
    );
}

/// acpx's own config and queue live under HOME.
fn acpx(
    clients: &Path,
    home: &Path,
    cwd: &Path,
    url: &str,
    args: &[&str],
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(clients.join("node_modules/.bin/acpx"));
    command
        .arg("--agent")
        .arg(format!("{} acp", dsh()))
        .arg("--cwd")
        .arg(cwd)
        .args(args)
        .current_dir(cwd)
        .env("HOME", home)
        .env("DSH_HOME", home)
        .env("DEEPSEEK_BASE_URL", url)
        .env("DEEPSEEK_API_KEY", "test-key");
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acpx_runs_a_prompt_against_dsh() {
    let Some(clients) = clients() else { return };
    let (url, _bodies) =
        model_server(vec![sse(&[json!({"content": "hello from dsh"})], "stop")]).await;
    let work = workspace();
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let output = run(acpx(
        &clients,
        home.path(),
        &cwd,
        &url,
        &[
            "--format",
            "json",
            "--approve-all",
            "--ttl",
            "0",
            "exec",
            "say hello",
        ],
    ))
    .await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}\n{stdout}");
    assert!(stdout.contains("hello from dsh"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acpx_keeps_a_session_across_its_processes() {
    let Some(clients) = clients() else { return };
    let (url, bodies) = model_server(vec![
        sse(&[json!({"content": "first answer"})], "stop"),
        sse(&[json!({"content": "second answer"})], "stop"),
    ])
    .await;
    let work = workspace();
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let step = |args: &'static [&'static str]| {
        let mut all = vec!["--format", "json", "--approve-all", "--ttl", "1"];
        all.extend_from_slice(args);
        acpx(&clients, home.path(), &cwd, &url, &all)
    };
    for (args, wanted) in [
        (&["sessions", "new"][..], None),
        (&["prompt", "one"][..], Some("first answer")),
        (&["prompt", "two"][..], Some("second answer")),
        (&["sessions", "close"][..], None),
    ] {
        let output = run(step(args)).await;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{args:?}: {stderr}\n{stdout}");
        if let Some(wanted) = wanted {
            assert!(stdout.contains(wanted), "{args:?}: {stdout}");
        }
        if args[0] == "prompt" {
            // The queue owner (and its `dsh acp`) idles out: the next prompt reopens the session.
            tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        }
    }
    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2);
    assert!(
        bodies[1].to_string().contains("first answer"),
        "the second prompt continues the conversation: {}",
        bodies[1]
    );
}
