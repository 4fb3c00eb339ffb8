//! End to end: every recorded scenario in `../shared/conformance` replayed through the real
//! `dsh` binary by the conformance runner. A scenario fails the test unless it passes or is
//! skipped for a feature the runner lists as not implemented; the visible tool results must
//! reach full text parity.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use dsh_testkit::runner::RunnerOptions;
use dsh_testkit::runner::Status;
use dsh_testkit::runner::run_all;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_scenarios_replay() {
    let root = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/conformance"
    ));
    assert!(
        root.is_dir(),
        "the shared conformance scenarios are missing at {}",
        root.display()
    );
    let options = RunnerOptions::new(PathBuf::from(env!("CARGO_BIN_EXE_dsh")));
    let report = run_all(&[root], &options, |scenario| {
        eprintln!(
            "{:?} {}: {}",
            scenario.status,
            scenario.name,
            scenario.reason.clone().unwrap_or_default()
        );
    })
    .await;
    let failed: Vec<String> = report
        .scenarios
        .iter()
        .filter(|s| s.status == Status::Fail)
        .map(|s| format!("{}: {}", s.name, s.failures.join("; ")))
        .collect();
    assert!(
        failed.is_empty(),
        "failing scenarios:\n{}",
        failed.join("\n")
    );
    assert!(
        report.passed >= 19,
        "only {} scenarios passed",
        report.passed
    );
    assert_eq!(
        report.parity.matched, report.parity.total,
        "text parity {:?}",
        report.parity
    );
}
