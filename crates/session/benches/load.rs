//! Session-log load speed and peak memory for a 100,000-event log:
//! `cargo bench -p dsh-session --bench load`. The memory figures are printed first, measured in
//! this fresh process (the kernel's peak-RSS mark is reset before each load).
#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark starts its own processes to measure them"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write;

use criterion::Criterion;
use criterion::criterion_group;
use dsh_session::JsonlStore;

/// A loop-shaped log: turns of one prompt, 90 streamed chunks, one answer.
fn write_log(store: &JsonlStore, events: u64) {
    let path = store.path_for("big", None).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut out = String::from(
        "{\"type\":\"session\",\"version\":0,\"id\":\"big\",\"createdAt\":1,\"delegationDepth\":0}\n",
    );
    let (mut s, mut turn) = (0u64, 0u64);
    while s < events {
        turn += 1;
        let _ = writeln!(
            out,
            r#"{{"type":"turn/start","seq":{s},"time":{s},"data":{{"turn":{turn}}}}}"#
        );
        s += 1;
        let _ = writeln!(
            out,
            r#"{{"type":"step/start","seq":{s},"time":{s},"data":{{"turn":{turn},"step":1}}}}"#
        );
        s += 1;
        let _ = writeln!(
            out,
            r#"{{"type":"user/message","seq":{s},"time":{s},"data":{{"content":[{{"type":"text","text":"go on"}}],"source":{{"kind":"user"}},"role":"user","id":"u{turn}"}},"surfaceOp":"append"}}"#
        );
        s += 1;
        let first = s;
        for _ in 0..90 {
            let _ = writeln!(
                out,
                r#"{{"type":"assistant/chunk","seq":{s},"time":{s},"data":{{"turn":{turn},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"some streamed words "}}}}}}"#
            );
            s += 1;
        }
        let sources: Vec<String> = (first..s).map(|x| x.to_string()).collect();
        let sources = sources.join(",");
        let _ = writeln!(
            out,
            r#"{{"type":"assistant/message","seq":{s},"time":{s},"data":{{"turn":{turn},"step":1,"message":{{"role":"assistant","content":[{{"type":"text","text":"words"}}],"source":{{"kind":"model","provider":"p","model":"m"}},"id":"a{turn}"}}}},"sourceEventSeqs":[{sources}],"surfaceOp":"append"}}"#
        );
        s += 1;
        let _ = writeln!(
            out,
            r#"{{"type":"step/end","seq":{s},"time":{s},"data":{{"turn":{turn},"step":1}}}}"#
        );
        s += 1;
        let _ = writeln!(
            out,
            r#"{{"type":"turn/end","seq":{s},"time":{s},"data":{{"turn":{turn},"reason":{{"kind":"completed"}}}}}}"#
        );
        s += 1;
    }
    std::fs::write(path, out).unwrap();
}

fn load(c: &mut Criterion) {
    let home = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(home.path());
    write_log(&store, 100_000);
    let mut group = c.benchmark_group("session_log_100k");
    group.sample_size(20);
    group.bench_function("load", |b| {
        b.iter(|| store.load("big").unwrap().events.len())
    });
    // The first resume appends `session/end-seed`; later ones re-open an untouched log.
    group.bench_function("resume", |b| b.iter(|| store.resume("big").unwrap().len()));
    group.finish();
}

/// Resident set size and its peak mark, in bytes, from `/proc/self/status`.
fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Peak memory above the resident baseline while `f` runs (Linux: `clear_refs` 5 resets the
/// peak mark). `None` where the mark cannot be reset.
fn peak_during<T>(f: impl FnOnce() -> T) -> Option<(u64, T)> {
    std::fs::write("/proc/self/clear_refs", "5").ok()?;
    let (base, _) = rss();
    let out = f();
    let (_, peak) = rss();
    Some((peak.saturating_sub(base), out))
}

/// Measures one way of loading in a fresh copy of this process, so memory freed by an earlier
/// measurement cannot be reused unseen by a later one.
fn memory_report() {
    const VAR: &str = "DSH_BENCH_LOAD_MEMORY";
    if let Ok(what) = std::env::var(VAR) {
        let home = tempfile::tempdir().unwrap();
        let store = JsonlStore::new(home.path());
        write_log(&store, 100_000);
        let size = std::fs::metadata(store.path_for("big", None).unwrap())
            .unwrap()
            .len();
        let peak = match what.as_str() {
            "load" => peak_during(|| store.load("big").unwrap()).map(|(p, _)| p),
            _ => peak_during(|| store.resume("big").unwrap()).map(|(p, _)| p),
        };
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        match peak {
            Some(peak) => println!(
                "session_log_100k/{what}: file {:.1} MiB, peak {:.1} MiB above the baseline = {:.2}x the file",
                mib(size),
                mib(peak),
                peak as f64 / size as f64
            ),
            None => println!("session_log_100k/{what}: peak memory not measurable here"),
        }
        std::process::exit(0);
    }
    for what in ["load", "resume"] {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .env(VAR, what)
            .status()
            .unwrap();
        assert!(status.success());
    }
}

criterion_group!(benches, load);

fn main() {
    memory_report();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
