//! The browser app of `dsh web` in real Chromium: starts `dsh web` against the replayed model
//! of `crates/web/tests/browser/scenario`, runs the browser suite (`run.mjs`: node,
//! `playwright-core`, Debian's `/usr/bin/chromium`) against it, then restarts the server on the
//! same `DSH_HOME` and runs the suite's resume phase: stored sessions open from disk.
//!
//! `.ci/run` installs Chromium and the suite's npm packages and sets `DSH_REQUIRE_BROWSER=1`,
//! so there a missing piece fails the test; elsewhere it says SKIPPED and what to install.
//! `DSH_WEB_SHOTS=<folder>` keeps the screenshots (`docs/web/*.png` are made so).
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh, node and their helpers directly"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use dsh_testkit::replay::ReplayServer;
use dsh_testkit::scenario::Scenario;
use tokio::io::AsyncBufReadExt;
use tokio::io::BufReader;

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../web/tests/browser")
}

fn chromium() -> PathBuf {
    std::env::var_os("CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from)
}

/// What the suite needs and this machine lacks, if anything.
fn missing(suite: &Path) -> Option<String> {
    let node = std::process::Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !node {
        return Some("node on PATH".to_owned());
    }
    if !suite.join("node_modules/playwright-core").is_dir() {
        return Some(format!(
            "playwright-core (npm ci --prefix {})",
            suite.display()
        ));
    }
    if !chromium().is_file() {
        return Some(format!(
            "Chromium at {} (apt-get install chromium)",
            chromium().display()
        ));
    }
    None
}

/// `dsh web --port 0` in `workspace`, and the URL it printed.
async fn start_web(
    home: &Path,
    dsh_home: &Path,
    workspace: &Path,
    model_url: &str,
) -> (tokio::process::Child, String) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_dsh"));
    for (name, _) in std::env::vars() {
        if name.starts_with("DEEPSEEK_") || name.starts_with("DSH_") {
            command.env_remove(name);
        }
    }
    let mut child = command
        .args(["web", "--port", "0", "-C"])
        .arg(workspace)
        .current_dir(workspace)
        .env("HOME", home)
        .env("DSH_HOME", dsh_home)
        .env("DEEPSEEK_API_KEY", "replay-key")
        .env("DEEPSEEK_BASE_URL", model_url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("dsh web prints its URL in time")
        .unwrap()
        .expect("dsh web printed a line");
    let url = line
        .strip_prefix("dsh web: ")
        .unwrap_or_else(|| panic!("the first line names the URL: {line:?}"))
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    // Keep reading, so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

/// Runs the node suite; its output goes to the test's output.
async fn run_suite(suite: &Path, url: &str, workspace: &Path, phase: &str) {
    let mut command = tokio::process::Command::new("node");
    command
        .arg(suite.join("run.mjs"))
        .current_dir(suite)
        .env("DSH_WEB_URL", url)
        .env("DSH_WEB_WORKSPACE", workspace)
        .env("DSH_WEB_PHASE", phase)
        .env("CHROMIUM", chromium())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(400), command.output())
        .await
        .expect("the browser suite ends in time")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "the browser suite ({phase}) failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("# all "),
        "the suite reported its end:\n{stdout}"
    );
}

async fn stop(mut web: tokio::process::Child) {
    if let Some(pid) = web.id() {
        // SIGTERM: the server ends its sessions cleanly (logs fsynced) before exiting.
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
    }
    let ended = tokio::time::timeout(Duration::from_secs(20), web.wait()).await;
    assert!(ended.is_ok(), "dsh web ends within 20 s of SIGTERM");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_app_works_in_chromium_and_resumes_after_a_restart() {
    let suite = suite_dir();
    if let Some(what) = missing(&suite) {
        assert!(
            std::env::var_os("DSH_REQUIRE_BROWSER").is_none(),
            "DSH_REQUIRE_BROWSER is set, and the browser tests need {what}"
        );
        eprintln!("SKIPPED: the browser tests need {what}; .ci/run installs it");
        return;
    }
    let scenario = Scenario::load(&suite.join("scenario")).unwrap();
    let model = ReplayServer::start(&scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap();
    // HOME holds the workspace (the folder browser's default root); DSH_HOME is apart from it,
    // as the file policy keeps tools out of dsh's own folder.
    let home = tempfile::tempdir().unwrap();
    let dsh_home = tempfile::tempdir().unwrap();
    std::fs::write(
        dsh_home.path().join("config.toml"),
        "[plugins.session-title]\nenabled = false\n",
    )
    .unwrap();
    // Inside the home folder: the folder browser's default root.
    let workspace = home.path().join("project");
    std::fs::create_dir(&workspace).unwrap();
    let workspace = workspace.canonicalize().unwrap();

    let (web, url) = start_web(home.path(), dsh_home.path(), &workspace, &model.url()).await;
    run_suite(&suite, &url, &workspace, "live").await;
    stop(web).await;
    assert!(model.unanswered().is_empty(), "{:?}", model.unanswered());
    assert!(model.unconsumed().is_empty(), "{:?}", model.unconsumed());

    let (web, url) = start_web(home.path(), dsh_home.path(), &workspace, &model.url()).await;
    run_suite(&suite, &url, &workspace, "resume").await;
    stop(web).await;
    assert!(model.unanswered().is_empty(), "{:?}", model.unanswered());
}
