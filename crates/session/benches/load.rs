//! Session-log load speed for a 100,000-event log: `cargo bench -p dsh-session`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write;

use criterion::Criterion;
use criterion::criterion_group;
use criterion::criterion_main;
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

criterion_group!(benches, load);
criterion_main!(benches);
