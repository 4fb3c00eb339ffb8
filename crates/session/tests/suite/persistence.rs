//! JSONL format, write-through, torn tails, I/O failures, load speed.

use std::io::Write;
use std::time::Instant;

use dsh_session::CreateOptions;
use dsh_session::JsonlStore;
use dsh_session::SessionError;
use dsh_session::data::StepStart;
use dsh_session::data::TurnStart;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::common::*;

#[test]
fn header_then_one_line_per_event_round_trips() {
    let (_home, store) = store();
    let log = store
        .create(CreateOptions {
            id: Some("s1".into()),
            cwd: Some("/work/proj".into()),
            ..Default::default()
        })
        .unwrap();
    assert!(
        log.path().is_some_and(|p| !p.exists()),
        "nothing is written before the first append"
    );
    fixed_clock(&log, 1_700_000_000_000);
    full_turn(&log, 1);

    let path = log.path().unwrap();
    assert!(
        path.ends_with("sessions/--work-proj--/s1/session.jsonl"),
        "{}",
        path.display()
    );
    let lines = file_lines(&log);
    let created = log.header().created_at;
    assert_eq!(
        lines[0],
        format!(
            r#"{{"type":"session","version":0,"id":"s1","createdAt":{created},"cwd":"/work/proj","delegationDepth":0}}"#
        )
    );
    let events = log.events().unwrap();
    assert_eq!(lines.len(), events.len() + 1);
    for (line, event) in lines[1..].iter().zip(events.iter()) {
        assert_eq!(*line, event.to_json_line());
    }

    let loaded = store.load("s1").unwrap();
    assert_eq!(loaded.header, *log.header());
    assert_eq!(loaded.events, events.to_vec());
    assert_eq!(loaded.dropped_bytes, 0);
    assert!(loaded.repair.is_empty(), "a balanced log needs no repair");
}

#[test]
fn a_torn_last_line_is_dropped_and_truncated_on_resume() {
    let (_home, store) = store();
    let log = store
        .create(CreateOptions {
            id: Some("torn".into()),
            ..Default::default()
        })
        .unwrap();
    full_turn(&log, 1);
    let path = log.path().unwrap();
    let stored = log.len();
    drop(log);
    let good_len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(br#"{"type":"turn/start","seq":"#)
        .unwrap();

    let loaded = store.load("torn").unwrap();
    assert_eq!(loaded.events.len() as u64, stored);
    assert_eq!(loaded.dropped_bytes, 27);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        good_len + 27,
        "load never writes"
    );

    let resumed = store.resume("torn").unwrap();
    assert_eq!(
        resumed.len(),
        stored + 1,
        "only the end-seed marker is added"
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.ends_with("\"data\":{}}\n"),
        "the torn bytes are gone: {text}"
    );
    resumed.append_data(&TurnStart { turn: 2 }, None).unwrap();
    assert_eq!(store.load("torn").unwrap().events.len() as u64, stored + 2);
}

#[test]
fn an_unreadable_line_before_a_turn_end_is_corruption() {
    let (_home, store) = store();
    let log = store
        .create(CreateOptions {
            id: Some("bad".into()),
            ..Default::default()
        })
        .unwrap();
    full_turn(&log, 1);
    let path = log.path().unwrap();
    drop(log);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[3] = "{not json";
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let err = store.load("bad").unwrap_err();
    assert!(
        matches!(err, SessionError::Corrupt { line: 4, .. }),
        "{err}"
    );

    // The same damage after the last turn/end is an unacknowledged tail: dropped.
    let mut lines: Vec<&str> = text.lines().collect();
    lines.push(r#"{"type":"turn/start","seq":99,"time":1,"data":{"turn":2}}"#);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let loaded = store.load("bad").unwrap();
    assert_eq!(loaded.events.len(), lines.len() - 2);
    assert!(loaded.dropped_bytes > 0);
}

#[test]
fn other_versions_are_refused_and_unknown_types_kept_opaque() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    std::fs::write(
        &path,
        "{\"type\":\"session\",\"version\":1,\"id\":\"x\",\"createdAt\":0,\"delegationDepth\":0}\n",
    )
    .unwrap();
    let err = dsh_session::read_log_file(&path).unwrap_err();
    assert!(err.to_string().contains("newer harness"), "{err}");

    let header =
        "{\"type\":\"session\",\"version\":0,\"id\":\"x\",\"createdAt\":0,\"delegationDepth\":0}\n";
    std::fs::write(
        &path,
        format!("{header}{{\"type\":\"mystery/event\",\"seq\":0,\"time\":0,\"data\":{{}}}}\n"),
    )
    .unwrap();
    // A type outside the core vocabulary (another plugin's, another version's) is kept as an
    // opaque event, byte for byte: reading never depends on which plugins are built. Refusing
    // to resume it is the host's check (`EventVocabulary`).
    let loaded = dsh_session::read_log_file(&path).unwrap();
    assert_eq!(loaded.events.len(), 1);
    assert_eq!(loaded.events[0].kind, "mystery/event");
    assert!(!loaded.events[0].ignorable());
    assert_eq!(
        loaded.events[0].to_json_line(),
        "{\"type\":\"mystery/event\",\"seq\":0,\"time\":0,\"data\":{}}"
    );

    let ignorable =
        "{\"type\":\"mystery/event\",\"seq\":0,\"time\":0,\"data\":{},\"ignorable\":true}";
    std::fs::write(&path, format!("{header}{ignorable}\n")).unwrap();
    let loaded = dsh_session::read_log_file(&path).unwrap();
    assert_eq!(loaded.events[0].to_json_line(), ignorable);

    std::fs::write(&path, format!("{header}{{\"type\":\"x/y\",\"seq\":0,\"time\":0,\"data\":{{\"n\":-0}},\"ignorable\":true}}\n")).unwrap();
    assert!(
        dsh_session::read_log_file(&path).is_err(),
        "-0 is not lossless"
    );
}

#[test]
fn an_unwritable_home_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file.txt");
    std::fs::write(&file, "not a directory").unwrap();
    // Tests run as root, where permission bits are ignored; a path under a file fails anyway.
    let store = JsonlStore::new(file.join("sub"));
    let err = store
        .create(CreateOptions {
            id: Some("s".into()),
            ..Default::default()
        })
        .unwrap_err();
    let SessionError::Io { path, source } = &err else {
        panic!("{err}")
    };
    assert!(path.starts_with(&file), "{}", path.display());
    assert_eq!(source.kind(), std::io::ErrorKind::NotADirectory);
    assert!(
        err.to_string().starts_with("session log I/O failed at "),
        "{err}"
    );
    assert!(store.list().is_err());
}

/// The write-through refused the failing append itself. With the log writer thread an append
/// never does I/O, so the same guarantee takes this form: the failed write is reported by the
/// durability barrier (the loop's step or turn end then fails instead of counting the events as
/// stored), every later append is refused, uncommitted and unpublished, while the failed batch is
/// queued, and once the disk recovers the queued events are written, in order, exactly once.
#[test]
fn a_failed_write_is_not_committed() {
    let (_home, store) = store();
    let log = store
        .create(CreateOptions {
            id: Some("w".into()),
            ..Default::default()
        })
        .unwrap();
    let dir = log.path().unwrap().parent().unwrap().to_path_buf();
    // Replace the session directory by a file: materializing the log now fails with ENOTDIR.
    std::fs::remove_dir(&dir).unwrap();
    std::fs::write(&dir, "x").unwrap();
    let mut rx = log.subscribe();
    let first = log.append_data(&TurnStart { turn: 1 }, None).unwrap();
    assert_eq!(rx.try_recv().unwrap().seq, first.seq);
    let err = log.flush().unwrap_err();
    assert!(matches!(err, SessionError::Io { .. }), "{err}");
    assert!(
        err.to_string().starts_with("session log I/O failed at "),
        "{err}"
    );

    let err = log
        .append_data(&StepStart { turn: 1, step: 1 }, None)
        .unwrap_err();
    assert!(matches!(err, SessionError::Io { .. }), "{err}");
    assert_eq!(log.len(), 1, "the refused append is not committed");
    assert!(rx.try_recv().is_err(), "nor published");
    assert!(dir.is_file(), "and nothing was written");

    std::fs::remove_file(&dir).unwrap();
    log.flush().unwrap();
    assert_eq!(
        file_lines(&log).len(),
        2,
        "the log recovers once the disk does: header and the queued event"
    );
    assert_eq!(
        log.append_data(&StepStart { turn: 1, step: 1 }, None)
            .unwrap()
            .seq,
        1
    );
    drop(log);
    let loaded = store.load("w").unwrap();
    assert_eq!(loaded.events.len(), 2);
    assert_eq!(loaded.dropped_bytes, 0);
}

/// Appends only queue; the barriers wait for the writer thread, a reader in this process
/// sees what was committed, and dropping the last handle writes out what is queued.
#[tokio::test]
async fn barriers_wait_for_the_writer_and_a_dropped_log_loses_nothing() {
    let (_home, store) = store();
    let log = store
        .create(CreateOptions {
            id: Some("b".into()),
            ..Default::default()
        })
        .unwrap();
    let path = log.path().unwrap();
    log.append_data(&TurnStart { turn: 1 }, None).unwrap();
    for n in 0..2000 {
        log.append_ignorable("x/y", json!({ "n": n })).unwrap();
    }
    log.written().await.unwrap();
    let lines = std::fs::read_to_string(&path).unwrap().lines().count();
    assert_eq!(
        lines, 2002,
        "header and every event appended before the barrier"
    );
    log.sync().await.unwrap();

    for n in 0..2000 {
        log.append_ignorable("x/y", json!({ "n": n })).unwrap();
    }
    assert_eq!(
        store.load("b").unwrap().events.len(),
        4001,
        "a reader in this process waits for the queue"
    );
    for n in 0..2000 {
        log.append_ignorable("x/y", json!({ "n": n })).unwrap();
    }
    drop(log);
    let loaded = store.load("b").unwrap();
    assert_eq!(loaded.events.len(), 6001);
    for (seq, event) in loaded.events.iter().enumerate() {
        assert_eq!(event.seq, seq as u64);
    }
}

#[test]
fn a_100k_event_log_loads_in_one_pass() {
    let (_home, store) = store();
    let path = store.path_for("big", None).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut out = String::with_capacity(20 << 20);
    out.push_str("{\"type\":\"session\",\"version\":0,\"id\":\"big\",\"createdAt\":1,\"delegationDepth\":0}\n");
    let mut seq = 0u64;
    let mut turn = 0;
    let push = |out: &mut String, seq: &mut u64, line: &dyn Fn(u64) -> String| {
        out.push_str(&line(*seq));
        out.push('\n');
        *seq += 1;
    };
    while seq < 100_000 {
        turn += 1;
        push(&mut out, &mut seq, &|s| {
            format!(r#"{{"type":"turn/start","seq":{s},"time":{s},"data":{{"turn":{turn}}}}}"#)
        });
        push(&mut out, &mut seq, &|s| {
            format!(
                r#"{{"type":"step/start","seq":{s},"time":{s},"data":{{"turn":{turn},"step":1}}}}"#
            )
        });
        push(&mut out, &mut seq, &|s| {
            json!({"type":"user/message","seq":s,"time":s,"data":{"content":[{"type":"text","text":"go on"}],"source":{"kind":"user"},"role":"user","id":format!("u{turn}")},"surfaceOp":"append"}).to_string()
        });
        let first = seq;
        for _ in 0..90 {
            push(&mut out, &mut seq, &|s| {
                format!(
                    r#"{{"type":"assistant/chunk","seq":{s},"time":{s},"data":{{"turn":{turn},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"some streamed words "}}}}}}"#
                )
            });
        }
        push(&mut out, &mut seq, &|s| {
            let sources: Vec<u64> = (first..s).collect();
            json!({"type":"assistant/message","seq":s,"time":s,"data":{"turn":turn,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"some streamed words"}],"source":{"kind":"model","provider":"p","model":"m"},"id":format!("a{turn}")}},"sourceEventSeqs":sources,"surfaceOp":"append"}).to_string()
        });
        push(&mut out, &mut seq, &|s| {
            format!(
                r#"{{"type":"step/end","seq":{s},"time":{s},"data":{{"turn":{turn},"step":1}}}}"#
            )
        });
        push(&mut out, &mut seq, &|s| {
            format!(
                r#"{{"type":"turn/end","seq":{s},"time":{s},"data":{{"turn":{turn},"reason":{{"kind":"completed"}}}}}}"#
            )
        });
    }
    std::fs::write(&path, &out).unwrap();

    let started = Instant::now();
    let loaded = store.load("big").unwrap();
    let load_time = started.elapsed();
    assert_eq!(loaded.events.len() as u64, seq);
    let started = Instant::now();
    let log = store.resume("big").unwrap();
    let resume_time = started.elapsed();
    assert_eq!(log.len(), seq + 1);
    assert_eq!(log.derive_messages().len() as u64, 2 * turn);
    assert_eq!(log.turn_state().last_turn, turn);
    eprintln!(
        "100k-event log ({} MB): load {load_time:?}, resume {resume_time:?}",
        out.len() >> 20
    );
}
