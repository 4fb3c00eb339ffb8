//! Headless driver: runs `dsh exec --output stream-json TASK` once and captures its output.

use std::time::Duration;

use serde_json::Value;

use crate::harness::RunContext;
use crate::scenario::ScenarioSpec;

/// What one headless run produced.
#[derive(Debug, Default)]
pub struct HeadlessRun {
    pub lines: Vec<Value>,
    pub failures: Vec<String>,
    pub stderr: String,
    pub exit_code: Option<i32>,
    /// False when the harness process could not be spawned at all.
    pub started: bool,
}

/// The task text: the invocation's words joined by spaces, else the single prompt step.
pub fn task_of(spec: &ScenarioSpec) -> String {
    match &spec.invocation {
        Some(inv) if !inv.args.is_empty() => inv.args.join(" "),
        _ => spec
            .prompt_steps
            .iter()
            .find_map(|s| s.str_arg("text"))
            .unwrap_or_default()
            .to_owned(),
    }
}

pub async fn run(ctx: &RunContext<'_>, task: &str, limit: Duration) -> HeadlessRun {
    let mut cmd = ctx.command(&["exec", "--output", "stream-json", task]);
    cmd.stdin(std::process::Stdio::null());
    let child = match crate::harness::spawn_retrying(&mut cmd) {
        Ok(c) => c,
        Err(e) => {
            return HeadlessRun {
                failures: vec![format!("cannot start {} exec: {e}", ctx.bin.display())],
                ..HeadlessRun::default()
            };
        }
    };
    // kill_on_drop ends the harness when the timeout drops the future.
    let output = match tokio::time::timeout(limit, child.wait_with_output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => {
            return HeadlessRun {
                started: true,
                failures: vec![format!("waiting for the harness: {e}")],
                ..HeadlessRun::default()
            };
        }
        Err(_) => {
            return HeadlessRun {
                started: true,
                failures: vec![format!(
                    "harness did not finish within {} s",
                    limit.as_secs()
                )],
                ..HeadlessRun::default()
            };
        }
    };
    let mut run = HeadlessRun {
        started: true,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        exit_code: output.status.code(),
        ..HeadlessRun::default()
    };
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(v) => run.lines.push(v),
            Err(_) => run
                .failures
                .push(format!("stdout line is not JSON: {line:?}")),
        }
    }
    run
}
