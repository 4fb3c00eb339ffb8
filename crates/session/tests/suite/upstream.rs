//! Real upstream logs: every unpacked line re-serialises byte for byte, packed rows expand to
//! contiguous chunk events, and the events rebuild a valid surface.

use std::path::Path;
use std::path::PathBuf;

use dsh_session::SessionLog;
use dsh_session::check_invariants;
use dsh_session::read_log_file;
use pretty_assertions::assert_eq;
use serde_json::Value;

/// Checks one upstream file; returns the number of events it holds.
fn check(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    let loaded = read_log_file(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(loaded.dropped_bytes, 0);
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    assert_eq!(loaded.header.to_json_line(), header, "{}", path.display());
    let mut next = 0usize;
    for line in lines {
        let row: Value = serde_json::from_str(line).unwrap();
        if let Some(seq0) = row.get("seq0").and_then(Value::as_u64) {
            let data = &row["data"];
            let members = data
                .get("texts")
                .or_else(|| data.get("args"))
                .and_then(Value::as_array)
                .unwrap();
            assert_eq!(seq0 as usize, next);
            let mut time = row["time0"].as_i64().unwrap();
            for (k, member) in members.iter().enumerate() {
                let event = &loaded.events[next + k];
                if k > 0 {
                    time += data["dt"][k - 1].as_i64().unwrap();
                }
                assert_eq!(event.kind, "assistant/chunk");
                assert_eq!(event.time as i64, time);
                let chunk = &event.data["chunk"];
                let delta = chunk
                    .get("text")
                    .or_else(|| chunk.get("argumentsDelta"))
                    .unwrap();
                assert_eq!(delta, member);
                assert_eq!(chunk["index"], data["index"]);
            }
            next += members.len();
        } else {
            assert_eq!(
                loaded.events[next].to_json_line(),
                line,
                "{}",
                path.display()
            );
            next += 1;
        }
    }
    assert_eq!(next, loaded.events.len());
    for (i, event) in loaded.events.iter().enumerate() {
        assert_eq!(event.seq, i as u64);
    }
    assert!(
        loaded.repair.is_empty(),
        "{}: recorded runs end balanced",
        path.display()
    );
    assert_eq!(
        check_invariants(&loaded.events),
        Vec::<String>::new(),
        "{}",
        path.display()
    );

    let seed = loaded.events.iter().map(|e| (**e).clone()).collect();
    let log = SessionLog::from_seed(loaded.header.clone(), seed)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let surface_events = loaded
        .events
        .iter()
        .filter(|e| e.surface_op().is_some())
        .count();
    let replaced = loaded
        .events
        .iter()
        .filter(|e| matches!(e.surface_op(), Some(dsh_session::SurfaceOp::Replace { .. })))
        .count();
    assert_eq!(log.surface_seqs().len(), surface_events - replaced);
    assert_eq!(log.replace_generation(), replaced as u64);
    loaded.events.len()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[test]
fn upstream_bash_tool_turn_round_trips() {
    let path = fixture("bash-tool-turn.jsonl");
    assert_eq!(check(&path), 102);
    let loaded = read_log_file(&path).unwrap();
    // Packed members carry the tool id and name on every delta.
    assert_eq!(
        loaded.events[29].to_json_line(),
        r#"{"type":"assistant/chunk","seq":29,"time":1783352051820,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"call_00_fkbBRJsUrGKd1pWVc4Gn8233","name":"bash","argumentsDelta":""}}}"#
    );
    let log = SessionLog::from_seed(
        loaded.header.clone(),
        loaded.events.iter().map(|e| (**e).clone()).collect(),
    )
    .unwrap();
    let roles: Vec<_> = log
        .derive_messages()
        .iter()
        .map(|m| m.content[0].kind().to_owned())
        .collect();
    assert_eq!(
        roles,
        ["text", "text", "reasoning", "tool-result", "reasoning"]
    );
}

#[test]
fn upstream_replace_ops_round_trip() {
    check(&fixture("agent-instructions.jsonl"));
}

#[test]
fn every_recorded_conformance_log_loads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance");
    let Ok(suites) = std::fs::read_dir(&root) else {
        eprintln!("skipped: no conformance folder at {}", root.display());
        return;
    };
    let mut checked = 0;
    for suite in suites.flatten() {
        for scenario in std::fs::read_dir(suite.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let path = scenario.path().join("upstream/session.jsonl");
            if path.is_file() {
                check(&path);
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 20,
        "only {checked} logs found under {}",
        root.display()
    );
}
