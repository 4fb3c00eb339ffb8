//! Soak: one `dsh exec` turn of many bash steps, twice.
//!
//! - Against the replay server (the tool-loop model of `scripts/bench-scaling.py`: each step
//!   streams a reasoning text and one `bash` call, then the model answers `DONE`) in the default
//!   1M-token window: the history the model sees grows with every step, nothing is compacted.
//! - Against the long-session model in a 32,000-token window, each command printing 20 KB: the
//!   session lives by compaction and pruning, as a whole working day does. Here nothing may
//!   grow with the session's length.
//!
//! It checks behaviour only: every step's call and result arrive in order on the stream, the
//! answer is `DONE`, and the session log is whole (every line parses, seqs are contiguous, every
//! `tool/call` has its `tool/result`, every `step/start` its `step/end`, the store loads it with
//! nothing to repair). It prints, without asserting them (the machine is shared and noisy), the
//! peak RSS, the resident size after the first and the last tenth, and the mean step time of
//! the first and the last tenth.
//!
//! CI runs a small size. At full size, by hand (a release build: `--release`):
//! `DSH_SOAK_STEPS=2000 cargo test --release -p dsh --test soak -- --nocapture`.
//! `DSH_SOAK_BIN=/path/to/dsh` runs another `dsh` binary (a release build measured from a debug
//! test build; `dsh-tool-guard` must sit beside it).
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::BufRead;
use std::io::BufReader;
use std::path::Path;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

use dsh_session::SurfaceOp;
use dsh_testkit::long_session::LONG_SESSION_PROMPT;
use dsh_testkit::long_session::LongSessionPlan;
use dsh_testkit::long_session::LongSessionServer;
use dsh_testkit::replay::ReplayServer;
use dsh_testkit::synthetic::TOOL_LOOP_PROMPT;
use dsh_testkit::synthetic::ToolLoop;
use serde_json::Value;

/// Steps in CI: enough for the first and last tenth to be a dozen steps each.
const CI_STEPS: usize = 120;

fn steps() -> usize {
    std::env::var("DSH_SOAK_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n >= 10)
        .unwrap_or(CI_STEPS)
}

/// `VmRSS` and `VmHWM` (the peak mark) of a live process, in KiB; `None` once it has exited.
fn memory_of(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// CPU time of a live process so far, its reaped children (the bash commands) included, in
/// milliseconds (`/proc/<pid>/stat` counts in USER_HZ ticks, 100 per second on Linux).
fn cpu_ms_of(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; the fields after it are plain numbers.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // utime, stime, cutime, cstime are fields 14-17 of the line, 12-15 after the name.
    let ticks: u64 = fields
        .get(11..15)?
        .iter()
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    Some(ticks * 10)
}

/// One stream line, when it arrived, and the process's memory and CPU time read right then.
struct Seen {
    at: Instant,
    line: Value,
    memory: Option<(u64, u64)>,
    cpu_ms: Option<u64>,
}

/// What one soak run saw: every stream line, the process's memory at its end, how it ended.
struct Run {
    dsh: std::path::PathBuf,
    seen: Vec<Seen>,
    peak_at_end: Option<(u64, u64)>,
    wall: Duration,
}

/// Runs `dsh exec --output stream-json PROMPT` against the model at `url`, reading the stream on
/// a thread (the test's own runtime keeps serving the model) and sampling the process at each
/// `step/start`. Asserts a clean exit.
async fn run_exec(workspace: &Path, home: &Path, url: &str, prompt: &str) -> Run {
    let started = Instant::now();
    let dsh = std::env::var_os("DSH_SOAK_BIN").map_or_else(
        || env!("CARGO_BIN_EXE_dsh").into(),
        std::path::PathBuf::from,
    );
    let mut child = Command::new(&dsh)
        .args(["exec", "--output", "stream-json", prompt])
        .current_dir(workspace)
        .env("DSH_HOME", home)
        .env("DEEPSEEK_BASE_URL", url)
        .env("DEEPSEEK_API_KEY", "replay-key")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    // Read on threads so the test's own runtime keeps serving the model.
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let line: Value = serde_json::from_str(&line.unwrap()).expect("stream line is JSON");
            let step_start = line["event"]["type"] == "step/start";
            seen.push(Seen {
                at: Instant::now(),
                memory: step_start.then(|| memory_of(pid)).flatten(),
                cpu_ms: step_start.then(|| cpu_ms_of(pid)).flatten(),
                line,
            });
        }
        seen
    });
    let errors = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let seen = tokio::task::spawn_blocking(move || reader.join().unwrap())
        .await
        .unwrap();
    let peak_at_end = memory_of(pid);
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    let wall = started.elapsed();
    let errors = errors.join().unwrap();
    assert!(status.success(), "dsh exec failed: {status}\n{errors}");
    Run {
        dsh,
        seen,
        peak_at_end,
        wall,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_turn_keeps_every_step_in_order_and_a_whole_log() {
    let steps = steps();
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let scenario = ToolLoop::echo(steps).scenario();
    let server = ReplayServer::start(
        &scenario,
        ([127, 0, 0, 1], 0).into(),
        Some(workspace.path().to_path_buf()),
    )
    .await
    .unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[plugins.sandbox]\nmode = \"danger-full-access\"\n",
    )
    .unwrap();
    let run = run_exec(
        workspace.path(),
        home.path(),
        &server.url(),
        TOOL_LOOP_PROMPT,
    )
    .await;
    let seen = &run.seen;

    // The stream: the final result, and each step's call and result in model order.
    let result = &seen.last().expect("no output").line;
    assert_eq!(result["type"], "result", "{result}");
    assert_eq!(result["output"], "DONE");
    let session = result["sessionId"].as_str().unwrap().to_owned();
    let events: Vec<&Value> = seen
        .iter()
        .filter(|s| s.line["type"] == "session_event" && s.line["sessionId"] == session)
        .map(|s| &s.line["event"])
        .collect();
    let calls: Vec<&Value> = events
        .iter()
        .copied()
        .filter(|e| e["type"] == "tool/call")
        .collect();
    let results: Vec<&Value> = events
        .iter()
        .copied()
        .filter(|e| e["type"] == "tool/result")
        .collect();
    assert_eq!(calls.len(), steps);
    assert_eq!(results.len(), steps);
    for (i, (call, result)) in calls.iter().zip(&results).enumerate() {
        let id = format!("call_{i:05}");
        assert_eq!(call["data"]["callId"], id.as_str(), "call {i}: {call}");
        assert_eq!(
            result["data"]["message"]["source"]["callId"],
            id.as_str(),
            "result {i}: {result}"
        );
        let text = result["data"]["message"].to_string();
        assert!(
            text.contains(&format!("step-{i}\\n")),
            "result {i} is not its command's output: {result}"
        );
    }
    for pair in events.windows(2) {
        assert_eq!(
            pair[1]["seq"].as_u64(),
            pair[0]["seq"].as_u64().map(|s| s + 1),
            "the stream skipped or reordered an event"
        );
    }
    assert!(
        server.unanswered().is_empty(),
        "requests the model could not answer: {:?}",
        server.unanswered()
    );
    assert!(
        server.unconsumed().iter().all(|u| u.route != "main"),
        "steps the model never served: {:?}",
        server.unconsumed()
    );

    // The stream printed what the log holds, from the prompt on (events committed before the
    // printer subscribed are in the log only).
    let logged = check_log(home.path(), &session, steps);
    let first = events[0]["seq"].as_u64().unwrap() as usize;
    assert_eq!(
        first + events.len(),
        logged.len(),
        "the stream stopped early"
    );
    for (event, kind) in events.iter().zip(&logged[first..]) {
        assert_eq!(event["type"], kind.as_str());
    }

    println!("soak: binary {}", run.dsh.display());
    report(steps, run.wall, seen, run.peak_at_end);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_turn_in_a_small_window_lives_by_compaction_and_stays_flat() {
    let steps = steps();
    let workspace = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let plan = LongSessionPlan {
        steps,
        result_bytes: 20_000,
        context_window: 32_000,
    };
    let server = LongSessionServer::start(plan, ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[plugins.sandbox]\nmode = \"danger-full-access\"\n\n\
         [plugins.session-title]\nenabled = false\n\n\
         [[model.catalog]]\nid = \"deepseek-v4-flash\"\ncontext_window = 32000\n",
    )
    .unwrap();
    let run = run_exec(
        workspace.path(),
        home.path(),
        &server.url(),
        LONG_SESSION_PROMPT,
    )
    .await;
    let result = &run.seen.last().expect("no output").line;
    assert_eq!(result["type"], "result", "{result}");
    assert_eq!(result["output"], "DONE");
    let session = result["sessionId"].as_str().unwrap().to_owned();
    let served = server.served();
    assert!(
        served.iter().all(|s| s.kind != "overflow"),
        "a request went past the window"
    );
    let compactions = served.iter().filter(|s| s.kind == "compaction").count();
    assert!(
        compactions >= steps / 20,
        "{compactions} compactions in {steps} steps of 20 KB results in a 32k window"
    );
    let logged = check_log(home.path(), &session, steps);
    assert!(logged.iter().any(|k| k == "compaction/summary"));
    println!(
        "soak (small window): binary {}; {compactions} compactions",
        run.dsh.display()
    );
    report(steps, run.wall, &run.seen, run.peak_at_end);
}

/// Checks the stored log line by line and through the store; returns its event types.
fn check_log(home: &Path, session: &str, steps: usize) -> Vec<String> {
    let store = dsh_session::JsonlStore::new(home);
    let path = store
        .find(session)
        .unwrap()
        .expect("the session log exists");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'), "the log ends in a torn line");
    let lines: Vec<Value> = text
        .lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("log line {}: {e}", i + 1))
        })
        .collect();
    assert_eq!(lines[0]["type"], "session");

    let loaded = store.load(session).unwrap();
    assert_eq!(loaded.dropped_bytes, 0);
    assert!(
        loaded.repair.is_empty(),
        "a finished log needs repair: {:?}",
        loaded.repair
    );
    let mut open_calls: HashMap<String, u64> = HashMap::new();
    let mut open_step: Option<u64> = None;
    let (mut step_pairs, mut turns_ended) = (0usize, 0usize);
    for (index, event) in loaded.events.iter().enumerate() {
        assert_eq!(event.seq, index as u64, "seq must equal the index");
        let data = event.data.value();
        match &*event.kind {
            "step/start" => {
                assert_eq!(open_step, None, "step/start inside an open step");
                open_step = event.step();
            }
            "step/end" => {
                assert_eq!(open_step.take(), event.step(), "step/end of another step");
                step_pairs += 1;
            }
            "tool/call" => {
                let id = data["callId"].as_str().unwrap().to_owned();
                assert!(open_step.is_some(), "tool/call outside a step");
                assert!(open_calls.insert(id, event.seq).is_none(), "call id reused");
            }
            // A pruned result replaces its original in place: it answers no new call.
            "tool/result" if matches!(event.surface_op(), Some(SurfaceOp::Replace { .. })) => {}
            "tool/result" => {
                let id = data["message"]["source"]["callId"].as_str().unwrap();
                let call = open_calls.remove(id).expect("a result without its call");
                assert!(call < event.seq);
            }
            "turn/end" => {
                assert_eq!(open_step, None, "turn/end inside an open step");
                assert_eq!(data["reason"]["kind"], "completed");
                turns_ended += 1;
            }
            _ => {}
        }
    }
    assert!(
        open_calls.is_empty(),
        "calls without results: {open_calls:?}"
    );
    assert_eq!(open_step, None);
    assert_eq!(step_pairs, steps + 1, "one step per call plus the answer");
    assert_eq!(turns_ended, 1);
    loaded.events.iter().map(|e| e.kind.to_string()).collect()
}

/// Mean duration of the steps `range` (a step runs from its `step/start` to the next one).
fn mean_step(starts: &[Instant], range: std::ops::Range<usize>) -> Duration {
    let n = range.len() as u32;
    let total: Duration = range.map(|i| starts[i + 1] - starts[i]).sum();
    total / n.max(1)
}

fn report(steps: usize, wall: Duration, seen: &[Seen], peak_at_end: Option<(u64, u64)>) {
    let starts: Vec<(Instant, Option<(u64, u64)>)> = seen
        .iter()
        .filter(|s| s.line["event"]["type"] == "step/start")
        .map(|s| (s.at, s.memory))
        .collect();
    // `steps` tool steps, then the answer's step; the last `step/start` closes the last tool step.
    let times: Vec<Instant> = starts.iter().map(|(at, _)| *at).collect();
    let tenth = (steps / 10).max(1);
    let first = mean_step(&times, 0..tenth);
    let last = mean_step(&times, steps - tenth..steps);
    let mib = |kib: u64| kib as f64 / 1024.0;
    let rss_at = |i: usize| starts.get(i).and_then(|(_, m)| *m).map(|(rss, _)| mib(rss));
    let peak = starts
        .iter()
        .filter_map(|(_, m)| *m)
        .chain(peak_at_end)
        .map(|(_, hwm)| mib(hwm))
        .fold(0.0, f64::max);
    println!(
        "soak: {steps} steps in {:.2} s; mean step {:.2} ms in the first tenth, {:.2} ms in the last ({:.2}x)",
        wall.as_secs_f64(),
        first.as_secs_f64() * 1000.0,
        last.as_secs_f64() * 1000.0,
        last.as_secs_f64() / first.as_secs_f64().max(1e-9),
    );
    // The step time above includes the replay server, which runs in this (debug) test process
    // and parses every request body, so it grows with the history; dsh's own CPU leaves it out.
    let cpu: Vec<Option<u64>> = seen
        .iter()
        .filter(|s| s.line["event"]["type"] == "step/start")
        .map(|s| s.cpu_ms)
        .collect();
    let cpu_per_step = |from: usize, to: usize| match (cpu.get(from), cpu.get(to)) {
        (Some(Some(a)), Some(Some(b))) => Some(b.saturating_sub(*a) as f64 / (to - from) as f64),
        _ => None,
    };
    if let (Some(early), Some(late)) = (cpu_per_step(0, tenth), cpu_per_step(steps - tenth, steps))
    {
        println!(
            "soak: dsh CPU (with its bash children) {early:.2} ms per step in the first tenth, {late:.2} ms in the last ({:.2}x)",
            late / early.max(1e-9),
        );
    }
    println!(
        "soak: RSS {:.1} MiB after the first tenth, {:.1} MiB at the last step; peak {peak:.1} MiB",
        rss_at(tenth).unwrap_or(f64::NAN),
        rss_at(steps).unwrap_or(f64::NAN),
    );
}
