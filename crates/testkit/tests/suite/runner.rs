//! Runs the real runner against `tests/fixtures/fake-dsh.sh` on copied conformance scenarios.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use dsh_testkit::runner::{RunReport, run_all};
use dsh_testkit::{RunnerOptions, Status};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Copies the fake into a temp dir with mode 0755 (checkouts may drop the bit).
fn fake_bin(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let bin = dir.join("fake-dsh");
    std::fs::copy(fixtures().join("fake-dsh.sh"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

fn copy_scenario(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

fn edit_scenario(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("scenario.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&path, v.to_string()).unwrap();
}

async fn run(bin: PathBuf, dirs: &[PathBuf]) -> (RunReport, Vec<String>) {
    let mut opts = RunnerOptions::new(bin);
    opts.wait = Duration::from_secs(5);
    opts.headless_limit = Duration::from_secs(20);
    let mut lines = Vec::new();
    let report = run_all(dirs, &opts, |r| lines.push(r.line())).await;
    (report, lines)
}

#[tokio::test]
async fn handshake_and_reject_extra_dirs_pass_against_a_conforming_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = fake_bin(tmp.path());
    let (report, lines) = run(bin, &[fixtures().join("scenarios")]).await;
    assert_eq!(
        lines,
        vec![
            "PASS acp/handshake",
            "PASS acp/reject-extra-dirs",
            "PASS headless/missing-credential",
        ],
        "{report:#?}"
    );
    assert_eq!(report.summary_line(), "3 passed, 0 failed, 0 skipped");
}

#[tokio::test]
async fn a_failing_session_new_fails_the_scenario() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = fake_bin(tmp.path());
    let dir = tmp.path().join("handshake");
    copy_scenario(&fixtures().join("scenarios/acp/handshake"), &dir);
    edit_scenario(&dir, |v| v["env"]["FAKE_MODE"] = "fail-new".into());
    let (report, lines) = run(bin, &[dir]).await;
    assert_eq!(report.failed, 1);
    assert_eq!(
        lines,
        vec![
            "FAIL acp/handshake: session/new: expected success, got error -32603 Internal error: fake refused session/new"
        ]
    );
}

#[tokio::test]
async fn headless_judges_env_precedence_output_and_exit_code() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = fake_bin(tmp.path());
    let dir = tmp.path().join("missing-credential");
    copy_scenario(
        &fixtures().join("scenarios/headless/missing-credential"),
        &dir,
    );
    // Without the scenario's empty key the runner's replay key is used and the fake succeeds.
    edit_scenario(&dir, |v| v["env"] = serde_json::json!({}));
    let (report, _) = run(bin, &[dir]).await;
    let r = &report.scenarios[0];
    assert_eq!(r.status, Status::Fail);
    assert_eq!(
        r.failures,
        vec![
            "result output Some(\"pong\"), expected Some(\"\")".to_owned(),
            "last turn/end completed, expected error MISSING_CREDENTIAL".to_owned(),
        ]
    );
}

#[tokio::test]
async fn features_on_the_skip_list_skip_and_missing_binaries_fail() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("skipped");
    copy_scenario(&fixtures().join("scenarios/acp/handshake"), &dir);
    edit_scenario(&dir, |v| {
        v["features"] = serde_json::json!(["bash", "dynamic-packages", "pwsh"])
    });
    let (report, lines) = run(
        tmp.path().join("no-such-dsh"),
        &[dir, fixtures().join("scenarios/acp/handshake")],
    )
    .await;
    assert_eq!(lines[0], "SKIP acp/handshake: needs dynamic-packages, pwsh");
    assert!(
        lines[1].starts_with("FAIL acp/handshake: cannot start"),
        "{lines:?}"
    );
    assert_eq!(report.summary_line(), "0 passed, 1 failed, 1 skipped");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["scenarios"][0]["status"], "skip");
    assert_eq!(json["scenarios"][1]["status"], "fail");
}

fn python3_available() -> bool {
    std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Prompts, model replay, permission answers, cancel, turn-end waits and tool-result judging,
/// end to end against `fake-acp-agent.py` (a tiny real ACP agent that calls the replay server).
#[tokio::test]
async fn model_turns_permissions_and_cancel_pass_against_a_replaying_agent() {
    if !python3_available() {
        eprintln!("python3 not found; skipping the replaying-agent test");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    let bin = tmp.path().join("fake-acp-agent.py");
    std::fs::copy(fixtures().join("fake-acp-agent.py"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (report, lines) = run(bin, &[fixtures().join("e2e")]).await;
    assert_eq!(
        lines,
        vec![
            "PASS acp/cancel",
            "PASS acp/error-finish",
            "PASS acp/escalation-rejected",
            "PASS acp/multi-turn",
            "PASS acp/text-turn",
            "PASS acp/tool-call-turn",
        ],
        "{report:#?}"
    );
    assert_eq!(report.parity.total, 2);
    assert_eq!(report.parity.matched, 2);
}

#[tokio::test]
async fn an_unoffered_permission_kind_fails_the_scenario() {
    if !python3_available() {
        eprintln!("python3 not found; skipping the replaying-agent test");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    let bin = tmp.path().join("fake-acp-agent.py");
    std::fs::copy(fixtures().join("fake-acp-agent.py"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = tmp.path().join("escalation");
    copy_scenario(&fixtures().join("e2e/acp/escalation-rejected"), &dir);
    edit_scenario(&dir, |v| {
        v["permission_answers"] = serde_json::json!([{"kind": "allow_always"}])
    });
    let (report, _) = run(bin, &[dir]).await;
    let r = &report.scenarios[0];
    assert_eq!(r.status, Status::Fail);
    assert_eq!(
        r.failures,
        vec!["permission answer \"allow_always\" is not among the offered options".to_owned()]
    );
}
