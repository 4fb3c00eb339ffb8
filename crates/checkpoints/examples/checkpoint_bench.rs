//! Checkpoint cost on a big tree: `checkpoint_bench [FILES] [STEPS] [CHANGED]` (defaults
//! 100000, 50, 10). Builds a tree of FILES small files in a temporary folder, takes the first
//! checkpoint, then STEPS steps that each change CHANGED files and one unchanged step after
//! each, and prints the time per checkpoint (p50, p95, max) and the store's disk growth.
//! Run through `scripts/bench-checkpoints.sh`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use dsh_checkpoints::Checkpoints;
use dsh_checkpoints::Limits;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;

fn arg(n: usize, default: usize) -> usize {
    std::env::args()
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    let (files, steps, changed) = (arg(1, 100_000), arg(2, 50), arg(3, 10));
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let started = Instant::now();
    for i in 0..files {
        let dir = work
            .path()
            .join(format!("d{:03}/e{:02}", i % 1000, (i / 1000) % 10));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(format!("f{i}.txt")),
            format!("file {i}\n{}\n", "x".repeat(200)),
        )
        .unwrap();
    }
    println!(
        "tree: {files} files, written in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let service = Checkpoints::new(home.path().to_path_buf(), Limits::default(), u64::MAX);
    let log = SessionLog::in_memory(SessionHeader::new("bench", None));
    let store = service.store(work.path()).unwrap();
    let t = Instant::now();
    service
        .checkpoint(&log, work.path(), 1, Some(1), None)
        .unwrap();
    let first = t.elapsed().as_secs_f64() * 1000.0;
    store.pack_if_loose(0).unwrap();
    let base = store.disk_bytes().unwrap();
    println!(
        "first checkpoint: {first:.0} ms; store after packing: {:.1} MiB",
        base as f64 / 1048576.0
    );
    let mut changed_times = Vec::new();
    let mut unchanged_times = Vec::new();
    for step in 0..steps {
        for k in 0..changed {
            let i = (step * 7919 + k * 104_729) % files;
            let path =
                work.path()
                    .join(format!("d{:03}/e{:02}/f{i}.txt", i % 1000, (i / 1000) % 10));
            std::fs::write(path, format!("step {step} change {k}\n")).unwrap();
        }
        let t = Instant::now();
        let made = service
            .checkpoint(&log, work.path(), 1, Some(2 + 2 * step as u64), None)
            .unwrap();
        changed_times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(made.is_some());
        let t = Instant::now();
        let made = service
            .checkpoint(&log, work.path(), 1, Some(3 + 2 * step as u64), None)
            .unwrap();
        unchanged_times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(made.is_none());
    }
    let loose = store.disk_bytes().unwrap();
    store.pack_if_loose(0).unwrap();
    let packed = store.disk_bytes().unwrap();
    for (name, times) in [
        ("changed", &mut changed_times),
        ("unchanged", &mut unchanged_times),
    ] {
        times.sort_by(f64::total_cmp);
        println!(
            "{name} step ({changed} files): p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms over {} steps",
            percentile(times, 0.5),
            percentile(times, 0.95),
            times[times.len() - 1],
            times.len()
        );
    }
    println!(
        "disk growth over {steps} changed steps: {:.1} KiB loose ({:.1} KiB per step), {:.1} KiB once packed",
        (loose.saturating_sub(base)) as f64 / 1024.0,
        (loose.saturating_sub(base)) as f64 / 1024.0 / steps as f64,
        (packed.saturating_sub(base)) as f64 / 1024.0
    );
}
