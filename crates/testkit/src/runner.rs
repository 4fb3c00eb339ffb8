//! The conformance runner: discovers scenarios, skips those needing unimplemented features,
//! runs the rest through the harness against the replay server, and judges each.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::harness::RunContext;
use crate::judge::{self, Parity};
use crate::normalize::Normalizer;
use crate::replay::ReplayServer;
use crate::scenario::{Scenario, read_jsonl};
use crate::session_log::LoggedResult;
use crate::{acp, headless, workspace};

/// Scenario features `dsh` does not implement yet. A scenario needing any of them is skipped.
/// This is the one place to edit as features land.
pub const NOT_IMPLEMENTED: &[&str] = &["dynamic-packages", "pwsh", "product-subagent"];

#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// The `dsh` binary under test.
    pub bin: PathBuf,
    /// Default wait for every ACP step (README: 10 s).
    pub wait: Duration,
    /// Upper bound for one headless run.
    pub headless_limit: Duration,
}

impl RunnerOptions {
    /// `bin` may be relative to the current directory; the harness runs elsewhere (in the
    /// workspace), so a path with a directory part is made absolute here. A bare name is left
    /// for the `PATH` lookup.
    pub fn new(bin: PathBuf) -> Self {
        let bin = if bin.components().count() > 1 && bin.is_relative() {
            std::path::absolute(&bin).unwrap_or(bin)
        } else {
            bin
        };
        Self {
            bin,
            wait: Duration::from_secs(10),
            headless_limit: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Skip,
}

/// The outcome of one scenario (one line on stdout, one object in the report file).
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioReport {
    pub name: String,
    pub dir: PathBuf,
    pub status: Status,
    /// Why it failed or was skipped (first finding).
    pub reason: Option<String>,
    /// Every finding, for `--verbose` and the report file.
    pub failures: Vec<String>,
    pub parity: Option<Parity>,
    /// Tail of the harness's stderr on failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
}

impl ScenarioReport {
    /// The stdout line: `PASS name`, `FAIL name: why`, `SKIP name: needs F`.
    pub fn line(&self) -> String {
        match (self.status, &self.reason) {
            (Status::Pass, _) => format!("PASS {}", self.name),
            (Status::Fail, r) => {
                format!("FAIL {}: {}", self.name, r.as_deref().unwrap_or("failed"))
            }
            (Status::Skip, r) => {
                format!("SKIP {}: {}", self.name, r.as_deref().unwrap_or("skipped"))
            }
        }
    }
}

/// The whole run, as written by `--report`.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub parity: Parity,
    pub scenarios: Vec<ScenarioReport>,
}

impl RunReport {
    pub fn new(scenarios: Vec<ScenarioReport>) -> Self {
        let count = |s| scenarios.iter().filter(|r| r.status == s).count();
        let mut parity = Parity::default();
        for p in scenarios.iter().filter_map(|r| r.parity) {
            parity.matched += p.matched;
            parity.total += p.total;
        }
        Self {
            passed: count(Status::Pass),
            failed: count(Status::Fail),
            skipped: count(Status::Skip),
            parity,
            scenarios,
        }
    }

    pub fn summary_line(&self) -> String {
        format!(
            "{} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )
    }
}

/// Expands each argument: a directory holding `scenario.json` is a scenario, any other
/// directory is searched recursively. Sorted, deduplicated.
pub fn discover(dirs: &[PathBuf]) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        if dir.join("scenario.json").is_file() {
            out.push(dir.to_path_buf());
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut subdirs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        subdirs.sort();
        for d in subdirs {
            walk(&d, out);
        }
    }
    let mut out = Vec::new();
    for d in dirs {
        walk(d, &mut out);
    }
    out.dedup();
    out
}

/// The fixture name of a `fixture_plugins` entry (its first word).
pub fn fixture_name(entry: &str) -> &str {
    entry.split_whitespace().next().unwrap_or_default()
}

/// The features of `features` that are in [`NOT_IMPLEMENTED`].
pub fn missing_features(features: &[String]) -> Vec<String> {
    features
        .iter()
        .filter(|f| NOT_IMPLEMENTED.contains(&f.as_str()))
        .cloned()
        .collect()
}

fn failed(name: String, dir: &Path, failures: Vec<String>) -> ScenarioReport {
    ScenarioReport {
        name,
        dir: dir.to_path_buf(),
        status: Status::Fail,
        reason: failures.first().cloned(),
        failures,
        parity: None,
        stderr: None,
    }
}

fn tail(s: &str, max: usize) -> String {
    let start = s.len().saturating_sub(max);
    let start = (start..=s.len())
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(s.len());
    s[start..].to_owned()
}

/// Loads, runs and judges one scenario directory.
pub async fn run_scenario(dir: &Path, opts: &RunnerOptions) -> ScenarioReport {
    let fallback_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let scenario = match Scenario::load(dir) {
        Ok(s) => s,
        Err(e) => {
            return failed(
                fallback_name,
                dir,
                vec![format!("cannot load scenario: {e}")],
            );
        }
    };
    let name = format!("{}/{}", scenario.spec.suite, scenario.spec.name);
    let missing = missing_features(&scenario.spec.features);
    if !missing.is_empty() {
        return ScenarioReport {
            name,
            dir: dir.to_path_buf(),
            status: Status::Skip,
            reason: Some(format!("needs {}", missing.join(", "))),
            failures: Vec::new(),
            parity: None,
            stderr: None,
        };
    }
    match execute(&scenario, opts).await {
        Ok((failures, parity, stderr)) => ScenarioReport {
            name,
            dir: dir.to_path_buf(),
            status: if failures.is_empty() {
                Status::Pass
            } else {
                Status::Fail
            },
            reason: failures.first().map(|f| {
                let mut reason = f.clone();
                if failures.len() > 1 {
                    reason.push_str(&format!(" (+{} more)", failures.len() - 1));
                }
                if let Some(last) = stderr.lines().rev().find(|l| !l.trim().is_empty()) {
                    let last: String = last.chars().take(200).collect();
                    reason.push_str(&format!(" [stderr: {last}]"));
                }
                reason
            }),
            stderr: (!failures.is_empty() && !stderr.is_empty()).then(|| tail(&stderr, 4000)),
            failures,
            parity: Some(parity),
        },
        Err(e) => failed(name, dir, vec![e.to_string()]),
    }
}

fn expected_lines(scenario: &Scenario, key: &str) -> Result<Vec<Value>, RunError> {
    let file = scenario
        .spec
        .expected
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| RunError::NoExpected(key.to_owned()))?;
    Ok(read_jsonl(&scenario.dir.join(file))?)
}

type Outcome = (Vec<String>, Parity, String);

/// Why a scenario could not be run to the judging (its one failure line).
#[derive(Debug, thiserror::Error)]
enum RunError {
    #[error(transparent)]
    Testkit(#[from] crate::TestkitError),
    #[error("cannot create DSH_HOME: {0}")]
    Home(#[source] std::io::Error),
    #[error("cannot write the dsh config: {0}")]
    Config(#[source] std::io::Error),
    #[error(transparent)]
    Aux(#[from] crate::aux_server::AuxServerError),
    #[error("scenario has no expected.{0}")]
    NoExpected(String),
    /// The driver's failures, joined: the harness never got going.
    #[error("{0}")]
    NotStarted(String),
    #[error("unknown suite {0:?}")]
    UnknownSuite(String),
}

async fn execute(scenario: &Scenario, opts: &RunnerOptions) -> Result<Outcome, RunError> {
    let spec = &scenario.spec;
    let ws = workspace::lay_out(&spec.workspace)?;
    let home = tempfile::Builder::new()
        .prefix("dsh-conformance-home-")
        .tempdir()
        .map_err(RunError::Home)?;
    let mut config = crate::composition::config_toml(spec, home.path());
    if config.contains("config_path = ") {
        // The recorded compositions read their hook files from the launch folder. In dsh a
        // user setting that runs the folder's files applies only in a trusted folder, and the
        // scenario's workspace is the person's own project here.
        let folder = ws
            .path()
            .canonicalize()
            .unwrap_or_else(|_| ws.path().to_path_buf());
        config.push_str(&format!(
            "[projects.{}]\ntrust = \"trusted\"\n",
            toml_string(&folder.to_string_lossy())
        ));
    }
    std::fs::write(home.path().join("config.toml"), config).map_err(RunError::Config)?;
    let replay = ReplayServer::start(
        scenario,
        std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        Some(ws.path().to_path_buf()),
    )
    .await?;
    // Held until the judged run is over; dropping it stops the servers.
    let _aux = crate::aux_server::start(&scenario.dir).await?;
    let env: Vec<(String, String)> = spec
        .env
        .iter()
        .map(|(k, v)| {
            let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            (k.clone(), v)
        })
        .collect();
    let ctx = RunContext {
        bin: opts.bin.clone(),
        workspace: ws.path().to_path_buf(),
        dsh_home: home.path().to_path_buf(),
        env,
        replay: &replay,
        wait: opts.wait,
    };
    let norm = Normalizer::new(ws.path());
    let mut failures = Vec::new();
    let stderr = match spec.suite.as_str() {
        "acp" => {
            let expected = expected_lines(scenario, "acp_stdout")?;
            let run = acp::run(&ctx, &spec.prompt_steps, &spec.permission_answers).await;
            if !run.started {
                return Err(RunError::NotStarted(run.failures.join("; ")));
            }
            failures.extend(run.failures);
            let kinds = judge::request_kinds(&spec.prompt_steps);
            judge::judge_acp(&kinds, &expected, &run.lines, &norm, &mut failures);
            acp_live_equals_load(&ctx, &run.lines, &mut failures).await;
            run.stderr
        }
        "headless" => {
            let expected = expected_lines(scenario, "stream_json")?;
            let task = headless::task_of(spec);
            let run = headless::run(&ctx, &task, opts.headless_limit).await;
            if !run.started {
                return Err(RunError::NotStarted(run.failures.join("; ")));
            }
            failures.extend(run.failures);
            judge::judge_headless(
                &expected,
                &run.lines,
                run.exit_code,
                &run.stderr,
                &norm,
                &mut failures,
            );
            crate::transcript_check::judge_live_equals_replay(
                &ctx.dsh_home,
                &run.lines,
                &mut failures,
            );
            run.stderr
        }
        other => return Err(RunError::UnknownSuite(other.to_owned())),
    };
    judge::judge_replay(&replay.unconsumed(), &replay.unanswered(), &mut failures);
    let logged: Vec<LoggedResult> = ctx.logs().iter().flat_map(|l| l.tool_results()).collect();
    let parity = judge::judge_tools(
        &scenario.tool_results,
        &spec.tool_results_missing,
        &logged,
        &norm,
        &mut failures,
    );
    Ok((failures, parity, stderr))
}

/// Live = replay over the wire: each session the live run created is loaded again by a fresh
/// `dsh acp` (`session/load`, as an editor reopening it), and its transcript updates must equal
/// the live ones (`transcript_check::acp_transcript` lists what may differ). Only for an agent
/// that offers `session/load` (`agentCapabilities.loadSession`; dsh does, and its ACP snapshot
/// tests pin the `initialize` answer).
async fn acp_live_equals_load(ctx: &RunContext<'_>, live: &[Value], failures: &mut Vec<String>) {
    let loads = live.iter().any(|line| {
        line.pointer("/result/agentCapabilities/loadSession")
            .and_then(Value::as_bool)
            == Some(true)
    });
    if !loads {
        return;
    }
    for session in crate::transcript_check::acp_sessions(live) {
        let steps: Vec<crate::scenario::Step> = match serde_json::from_value(serde_json::json!([
            {"op": "initialize"},
            {"op": "loadSession", "sessionId": session},
        ])) {
            Ok(steps) => steps,
            Err(error) => {
                failures.push(format!("acp: cannot script the load of {session}: {error}"));
                continue;
            }
        };
        let load = acp::run(ctx, &steps, &[]).await;
        if !load.failures.is_empty() {
            failures.extend(
                load.failures
                    .into_iter()
                    .map(|failure| format!("acp: loading {session}: {failure}")),
            );
            continue;
        }
        crate::transcript_check::judge_acp_live_equals_load(&session, live, &load.lines, failures);
    }
}

/// Runs every scenario in order, calling `on_report` as each finishes.
pub async fn run_all(
    dirs: &[PathBuf],
    opts: &RunnerOptions,
    mut on_report: impl FnMut(&ScenarioReport),
) -> RunReport {
    let mut reports = Vec::new();
    for dir in discover(dirs) {
        let report = run_scenario(&dir, opts).await;
        on_report(&report);
        reports.push(report);
    }
    RunReport::new(reports)
}

/// A TOML basic string holding `text`.
fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
