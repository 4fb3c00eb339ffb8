use std::sync::Arc;
use std::sync::Mutex;

use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_protocol::StreamChunk;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::data::AssistantChunk;
use crate::data::AssistantMessage;
use crate::data::StepStart;
use crate::data::ToolCall;
use crate::data::ToolResult;
use crate::data::TurnEnd;
use crate::data::TurnEndReason;
use crate::data::TurnStart;
use crate::data::UserMessage;

fn log() -> SessionLog {
    let log = SessionLog::in_memory(SessionHeader::new("s", None));
    log.set_clock(Arc::new(|| 7));
    log
}

fn user(text: &str) -> UserMessage {
    let mut m = Message::user_text(text);
    m.id = format!("id-{text}");
    UserMessage(m)
}

fn assistant(turn: u64, step: u64, content: Vec<ContentBlock>) -> AssistantMessage {
    let message = Message::assistant(
        content,
        MessageSource::model("deepseek-official", "deepseek-v4-flash"),
    );
    AssistantMessage {
        turn,
        step,
        message,
        interrupted: false,
        usage: None,
    }
}

fn tool_result(call: &str) -> ToolResult {
    let message = Message::tool_result(call, vec![ContentBlock::text("ok")], false);
    ToolResult {
        turn: 1,
        step: 1,
        message,
        error: None,
        meta: None,
    }
}

#[test]
fn seq_is_the_log_length_and_lines_keep_upstream_key_order() {
    let log = log();
    let a = log.append_data(&TurnStart { turn: 1 }, None).unwrap();
    let b = log
        .append_data(&StepStart { turn: 1, step: 1 }, None)
        .unwrap();
    let c = log
        .append_data(&user("hi"), Some(SurfaceIntent::append()))
        .unwrap();
    assert_eq!((a.seq, b.seq, c.seq), (0, 1, 2));
    assert_eq!(log.len(), 3);
    assert_eq!(
        a.to_json_line(),
        r#"{"type":"turn/start","seq":0,"time":7,"data":{"turn":1}}"#
    );
    assert_eq!(
        c.to_json_line(),
        r#"{"type":"user/message","seq":2,"time":7,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"id-hi"},"surfaceOp":"append"}"#
    );
    let ignorable = log.append_ignorable("x/custom", json!({})).unwrap();
    assert_eq!(
        ignorable.to_json_line(),
        r#"{"type":"x/custom","seq":3,"time":7,"data":{},"ignorable":true}"#
    );
}

#[test]
fn lossy_data_is_rejected_and_the_log_is_unchanged() {
    let log = log();
    log.append_data(&TurnStart { turn: 1 }, None).unwrap();
    let err = log.append("x/y", json!({"n": -0.0}), None).unwrap_err();
    assert!(matches!(err, SessionError::NotLossless { .. }), "{err}");
    assert_eq!(log.len(), 1);
    assert_eq!(log.append("x/y", json!({"n": 0}), None).unwrap().seq, 1);
}

#[test]
fn surface_intent_is_required_exactly_on_surface_types() {
    let log = log();
    let err = log.append_data(&user("a"), None).unwrap_err();
    assert!(matches!(err, SessionError::Surface { .. }), "{err}");
    let err = log
        .append_data(&TurnStart { turn: 1 }, Some(SurfaceIntent::append()))
        .unwrap_err();
    assert!(matches!(err, SessionError::Surface { .. }), "{err}");
    assert!(log.is_empty());
}

#[test]
fn source_event_seqs_must_be_earlier_distinct_and_non_empty() {
    let log = log();
    log.append_data(&TurnStart { turn: 1 }, None).unwrap();
    log.append_data(&StepStart { turn: 1, step: 1 }, None)
        .unwrap();
    let future = log
        .append_data(&tool_result("c"), Some(SurfaceIntent::append_from(vec![2])))
        .unwrap_err();
    assert!(future.to_string().contains("not earlier"), "{future}");
    let dup = log
        .append_data(
            &tool_result("c"),
            Some(SurfaceIntent::append_from(vec![1, 0, 1])),
        )
        .unwrap_err();
    assert!(dup.to_string().contains("distinct"), "{dup}");
    let empty = log
        .append_data(&tool_result("c"), Some(SurfaceIntent::append_from(vec![])))
        .unwrap_err();
    assert!(empty.to_string().contains("empty"), "{empty}");
    // `[]` is the "known empty stream" of an assistant message.
    let ok = log
        .append_data(
            &assistant(1, 1, vec![]),
            Some(SurfaceIntent::append_from(vec![])),
        )
        .unwrap();
    assert_eq!(
        ok.to_json_line()
            .ends_with(r#""sourceEventSeqs":[],"surfaceOp":"append"}"#),
        true
    );
    assert_eq!(log.len(), 3);
}

#[test]
fn surface_data_must_be_a_message_of_the_right_role() {
    let log = log();
    let err = log
        .append(
            "user/message",
            json!({"text": "x"}),
            Some(SurfaceIntent::append()),
        )
        .unwrap_err();
    assert!(matches!(err, SessionError::InvalidEvent { .. }), "{err}");
    let mut no_route = assistant(1, 1, vec![ContentBlock::text("x")]);
    no_route.message.source = MessageSource::from_map(serde_json::Map::from_iter([(
        "kind".into(),
        json!("model"),
    )]))
    .unwrap();
    let err = log
        .append_data(&no_route, Some(SurfaceIntent::append()))
        .unwrap_err();
    assert!(err.to_string().contains("provider and model"), "{err}");
    let header = json!({"header": {"config": {"model": "m"}}, "reason": "initial"});
    let err = log.append("request/header", header, None).unwrap_err();
    assert!(err.to_string().contains("provider and model"), "{err}");
    assert!(log.is_empty());
}

#[test]
fn derive_messages_projects_the_surface_only() {
    let log = log();
    log.append_data(&TurnStart { turn: 1 }, None).unwrap();
    log.append_data(&StepStart { turn: 1, step: 1 }, None)
        .unwrap();
    log.append_data(&user("hi"), Some(SurfaceIntent::append()))
        .unwrap();
    let chunk = AssistantChunk {
        turn: 1,
        step: 1,
        chunk: StreamChunk::TextDelta {
            index: 0,
            text: "yo".into(),
        },
    };
    let c = log.append_data(&chunk, None).unwrap();
    let call = ContentBlock::ToolCall {
        id: "c1".into(),
        name: "bash".into(),
        arguments: "{}".into(),
    };
    let a = log
        .append_data(
            &assistant(1, 1, vec![call]),
            Some(SurfaceIntent::append_from(vec![c.seq])),
        )
        .unwrap();
    let tc = ToolCall {
        turn: 1,
        step: 1,
        call_id: "c1".into(),
        name: "bash".into(),
        arguments: "{}".into(),
    };
    let tc = log.append_data(&tc, None).unwrap();
    log.append_data(
        &tool_result("c1"),
        Some(SurfaceIntent::append_from(vec![tc.seq])),
    )
    .unwrap();
    // A content-less assistant message stays on the surface but not in history.
    let empty = log
        .append_data(
            &assistant(1, 2, vec![]),
            Some(SurfaceIntent::append_from(vec![])),
        )
        .unwrap();

    let messages = log.derive_messages();
    let kinds: Vec<_> = messages
        .iter()
        .map(|m| (m.role, m.content[0].kind().to_owned()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (dsh_protocol::Role::User, "text".to_owned()),
            (dsh_protocol::Role::Assistant, "tool-call".to_owned()),
            (dsh_protocol::Role::User, "tool-result".to_owned()),
        ]
    );
    assert_eq!(*messages[0], user("hi").0);
    assert_eq!(log.surface_seqs(), vec![2, a.seq, tc.seq + 1, empty.seq]);
}

#[test]
fn replace_shadows_a_span_and_bumps_the_generation() {
    let log = log();
    let a = log
        .append_data(&user("a"), Some(SurfaceIntent::append()))
        .unwrap();
    let b = log
        .append_data(&user("b"), Some(SurfaceIntent::append()))
        .unwrap();
    let c = log
        .append_data(&user("c"), Some(SurfaceIntent::append()))
        .unwrap();
    let err = log
        .append_data(
            &user("x"),
            Some(SurfaceIntent::replace(b.seq, a.seq, vec![0, 1])),
        )
        .unwrap_err();
    assert!(err.to_string().contains("after end"), "{err}");
    let err = log
        .append_data(
            &user("x"),
            Some(SurfaceIntent::replace(a.seq, b.seq, vec![0])),
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("missing from sourceEventSeqs"),
        "{err}"
    );
    let err = log
        .append_data(&user("x"), Some(SurfaceIntent::replace(a.seq, 9, vec![0])))
        .unwrap_err();
    assert!(err.to_string().contains("current surface nodes"), "{err}");
    assert_eq!(log.replace_generation(), 0);

    let s = log
        .append_data(
            &user("summary"),
            Some(SurfaceIntent::replace(a.seq, b.seq, vec![a.seq, b.seq])),
        )
        .unwrap();
    assert_eq!(
        s.to_json_line().ends_with(
            r#""sourceEventSeqs":[0,1],"surfaceOp":{"op":"replace","start":0,"end":1}}"#
        ),
        true
    );
    assert_eq!(log.surface_seqs(), vec![s.seq, c.seq]);
    assert_eq!(log.replace_generation(), 1);
    let texts: Vec<_> = log
        .derive_messages()
        .iter()
        .map(|m| dsh_protocol::text_of(&m.content))
        .collect();
    assert_eq!(texts, vec!["summary", "c"]);
    // A shadowed node is no longer a valid replace end.
    let err = log
        .append_data(
            &user("y"),
            Some(SurfaceIntent::replace(a.seq, a.seq, vec![a.seq])),
        )
        .unwrap_err();
    assert!(matches!(err, SessionError::Surface { .. }));
}

#[test]
fn a_tool_result_replacement_rewrites_content_only() {
    check_tool_result_replacement(&log(), |_, _| {});
}

/// The checks of a `tool/result` replacement on `log`, with `between` run after the original
/// result is appended and before it is replaced.
fn check_tool_result_replacement(log: &SessionLog, between: impl FnOnce(&SessionLog, u64)) {
    let u = log
        .append_data(&user("u"), Some(SurfaceIntent::append()))
        .unwrap();
    let original = tool_result("c1");
    let r = log
        .append_data(&original, Some(SurfaceIntent::append_from(vec![u.seq])))
        .unwrap();
    between(log, r.seq);
    let mut other_id = original.clone();
    other_id.message.id = "other".into();
    let err = log
        .append_data(
            &other_id,
            Some(SurfaceIntent::replace(r.seq, r.seq, vec![r.seq])),
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("only the message content"),
        "{err}"
    );
    let err = log
        .append_data(
            &original,
            Some(SurfaceIntent::replace(u.seq, r.seq, vec![u.seq, r.seq])),
        )
        .unwrap_err();
    assert!(err.to_string().contains("exactly one tool/result"), "{err}");
    let mut pruned = original.clone();
    pruned.message.content = vec![ContentBlock::ToolResult {
        tool_call_id: "c1".into(),
        content: vec![ContentBlock::text("[pruned]")],
        is_error: Some(false),
    }];
    log.append_data(
        &pruned,
        Some(SurfaceIntent::replace(r.seq, r.seq, vec![r.seq])),
    )
    .unwrap();
    assert_eq!(*log.derive_messages()[1], pruned.message);
}

#[test]
fn listeners_run_after_commit_and_cannot_append() {
    let log = log();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (weak, record) = (log.downgrade(), seen.clone());
    let _first = log.on_event(move |event| {
        let probe = weak.upgrade().unwrap();
        // The event is already committed when listeners run.
        record.lock().unwrap().push((
            event.seq,
            probe.len(),
            probe.get(event.seq).unwrap().is_some(),
        ));
        let err = probe.append("x/y", json!({}), None).unwrap_err();
        assert!(matches!(err, SessionError::Reentrant { .. }));
    });
    let _panics = log.on_event(|_| panic!("listener failure"));
    let later = Arc::new(Mutex::new(0));
    let counter = later.clone();
    let sub = log.on_event(move |_| *counter.lock().unwrap() += 1);
    let mut rx = log.subscribe();

    let e = log.append_data(&TurnStart { turn: 1 }, None).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![(0, 1, true)]);
    assert_eq!(
        *later.lock().unwrap(),
        1,
        "a panicking listener does not stop later ones"
    );
    assert_eq!(rx.try_recv().unwrap(), e);
    assert_eq!(log.len(), 1, "the reentrant append was refused");

    drop(sub);
    log.append_data(
        &TurnEnd {
            turn: 1,
            reason: TurnEndReason::Completed,
        },
        None,
    )
    .unwrap();
    assert_eq!(
        *later.lock().unwrap(),
        1,
        "dropping the subscription unregisters"
    );
    assert_eq!(rx.try_recv().unwrap().seq, 1);
    let weak = log.downgrade();
    drop(log);
    assert!(
        weak.upgrade().is_none(),
        "listeners holding weak handles do not leak the log"
    );
}

#[test]
fn a_failed_append_is_not_published() {
    let log = log();
    let mut rx = log.subscribe();
    assert!(
        log.append("x/y", json!({}), Some(SurfaceIntent::append()))
            .is_err()
    );
    assert!(rx.try_recv().is_err());
}

#[test]
fn snapshots_never_grow_and_turn_state_folds() {
    let log = log();
    log.append_data(&TurnStart { turn: 1 }, None).unwrap();
    let before = log.events().unwrap();
    assert!(
        Arc::ptr_eq(&before, &log.events().unwrap()),
        "cached between appends"
    );
    log.append_data(&StepStart { turn: 1, step: 1 }, None)
        .unwrap();
    assert_eq!(before.len(), 1);
    assert_eq!(log.events().unwrap().len(), 2);
    assert_eq!(
        log.turn_state(),
        TurnState {
            last_turn: 1,
            open_turn: Some(1),
            open_step: Some((1, 1))
        }
    );
    let header =
        json!({"header": {"config": {"provider": "p", "model": "m"}}, "reason": "initial"});
    let h = log.append("request/header", header, None).unwrap();
    assert_eq!(log.request_header(), Some(h));
    assert_eq!(log.events_since(1).unwrap().len(), 2);
}

#[test]
fn seeds_are_validated_and_marked() {
    let source = log();
    source.append_data(&TurnStart { turn: 1 }, None).unwrap();
    source
        .append_data(&user("a"), Some(SurfaceIntent::append()))
        .unwrap();
    source
        .append_data(
            &TurnEnd {
                turn: 1,
                reason: TurnEndReason::Completed,
            },
            None,
        )
        .unwrap();
    let seed: Vec<Event> = source
        .events()
        .unwrap()
        .iter()
        .map(|e| (**e).clone())
        .collect();

    let child = SessionLog::from_seed(SessionHeader::new("c", None), seed.clone()).unwrap();
    assert_eq!(child.first_live_seq(), 3);
    assert_eq!(child.last().unwrap().kind, kind::END_SEED);
    assert_eq!(child.derive_messages(), source.derive_messages());
    assert_eq!(child.turn_state().last_turn, 1);
    // Re-opening an untouched seed does not grow it.
    let again: Vec<Event> = child
        .events()
        .unwrap()
        .iter()
        .map(|e| (**e).clone())
        .collect();
    let reopened = SessionLog::from_seed(SessionHeader::new("c", None), again).unwrap();
    assert_eq!(reopened.len(), 4);
    // An explicit empty seed gets its marker at seq 0.
    let empty = SessionLog::from_seed(SessionHeader::new("e", None), Vec::new()).unwrap();
    assert_eq!(empty.get(0).unwrap().unwrap().kind, kind::END_SEED);

    let mut gap = seed;
    gap.remove(1);
    assert!(matches!(
        SessionLog::from_seed(SessionHeader::new("g", None), gap),
        Err(SessionError::SeedGap { index: 1, seq: 2 })
    ));
}

#[test]
fn the_handle_is_shareable_across_tasks() {
    fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
    assert_send_sync::<SessionLog>();
    assert_send_sync::<Arc<Event>>();
}

fn plugin_user(text: &str, plugin: &str) -> UserMessage {
    let mut m = Message::user(
        vec![ContentBlock::text(text)],
        MessageSource::plugin(plugin),
    );
    m.id = format!("id-{text}");
    UserMessage(m)
}

#[test]
fn the_derived_history_grows_in_place_and_a_replace_renews_only_the_replaced_part() {
    let log = log();
    let a = log
        .append_data(&user("a"), Some(SurfaceIntent::append()))
        .unwrap();
    let b = log
        .append_data(&user("b"), Some(SurfaceIntent::append()))
        .unwrap();
    let before = log.derive_messages();
    let lineage = before.lineage();
    drop(before);
    log.append_data(&user("c"), Some(SurfaceIntent::append()))
        .unwrap();
    let grown = log.derive_messages();
    assert_eq!(grown.lineage(), lineage, "appends grow the same list");
    assert_eq!(grown.len(), 3);

    // A held list is not changed by later appends.
    log.append_data(&user("d"), Some(SurfaceIntent::append()))
        .unwrap();
    assert_eq!(grown.len(), 3);
    let after = log.derive_messages();
    assert_eq!(after.len(), 4);
    assert!(Arc::ptr_eq(&grown[2], &after[2]));

    log.append_data(
        &user("summary"),
        Some(SurfaceIntent::replace(a.seq, b.seq, vec![a.seq, b.seq])),
    )
    .unwrap();
    let replaced = log.derive_messages();
    assert_ne!(replaced.lineage(), after.lineage());
    let texts: Vec<_> = replaced
        .iter()
        .map(|m| dsh_protocol::text_of(&m.content))
        .collect();
    assert_eq!(texts, ["summary", "c", "d"]);
    // The messages after the replaced span are the same objects as before.
    assert!(Arc::ptr_eq(&replaced[1], &after[2]));
    assert!(Arc::ptr_eq(&replaced[2], &after[3]));
}

#[test]
fn the_latest_message_per_source_follows_appends_and_replaces() {
    let log = log();
    assert!(log.latest_message_of_kind("plugin").is_none());
    let first = log
        .append_data(&plugin_user("ctx-1", "ctx"), Some(SurfaceIntent::append()))
        .unwrap();
    log.append_data(&user("u"), Some(SurfaceIntent::append()))
        .unwrap();
    log.append_data(
        &plugin_user("other-1", "other"),
        Some(SurfaceIntent::append()),
    )
    .unwrap();
    let text = |m: Option<Arc<Message>>| m.map(|m| dsh_protocol::text_of(&m.content));
    assert_eq!(
        text(log.latest_message_from_plugin("ctx")).as_deref(),
        Some("ctx-1")
    );
    assert_eq!(
        text(log.latest_message_of_kind("plugin")).as_deref(),
        Some("other-1")
    );
    assert_eq!(
        text(log.latest_message_of_kind("user")).as_deref(),
        Some("u")
    );
    let second = log
        .append_data(&plugin_user("ctx-2", "ctx"), Some(SurfaceIntent::append()))
        .unwrap();
    assert_eq!(
        text(log.latest_message_from_plugin("ctx")).as_deref(),
        Some("ctx-2")
    );
    // Replacing the newer one (say, by a compaction summary) brings back no stale answer: the
    // index is rebuilt from what is still visible.
    log.append_data(
        &user("summary"),
        Some(SurfaceIntent::replace(
            second.seq,
            second.seq,
            vec![second.seq],
        )),
    )
    .unwrap();
    assert_eq!(
        text(log.latest_message_from_plugin("ctx")).as_deref(),
        Some("ctx-1")
    );
    log.append_data(
        &user("summary-2"),
        Some(SurfaceIntent::replace(
            first.seq,
            first.seq,
            vec![first.seq],
        )),
    )
    .unwrap();
    assert_eq!(log.latest_message_from_plugin("ctx"), None);
    // "summary-2" took the first node's place, so the later "summary" is still the latest.
    assert_eq!(
        text(log.latest_message_of_kind("user")).as_deref(),
        Some("summary")
    );
}

#[test]
fn the_last_event_of_each_type_is_one_lookup() {
    let log = log();
    assert!(log.last_of_kind(kind::TURN_START).is_none());
    log.append_data(&TurnStart { turn: 1 }, None).unwrap();
    log.append_data(&StepStart { turn: 1, step: 1 }, None)
        .unwrap();
    log.append_data(&StepStart { turn: 1, step: 2 }, None)
        .unwrap();
    assert_eq!(log.last_of_kind(kind::TURN_START).unwrap().seq, 0);
    assert_eq!(log.last_of_kind(kind::STEP_START).unwrap().seq, 2);
    log.append_ignorable("x/custom", json!({"n": 1})).unwrap();
    assert_eq!(log.last_of_kind("x/custom").unwrap().data, json!({"n": 1}));
}

#[test]
fn an_appended_event_keeps_its_data_as_text_until_read_as_a_tree() {
    let log = log();
    let data = json!({"turn": 1, "step": 2, "nested": {"b": [1, 2.5, "x"], "a": null}});
    let event = log.append("x/y", data.clone(), None).unwrap();
    assert!(
        !event.data.has_tree(),
        "no tree is kept for an appended event"
    );
    assert_eq!(event.data.to_string(), data.to_string());
    assert_eq!(
        event.to_json_line(),
        format!(r#"{{"type":"x/y","seq":0,"time":7,"data":{data}}}"#)
    );
    assert_eq!(event.turn_and_step(), (Some(1), Some(2)));
    assert_eq!(event.data.decode::<Value>().unwrap(), data);
    assert!(!event.data.has_tree(), "typed reads keep nothing");
    assert_eq!(*event.data, data);
    assert!(event.data.has_tree(), "a tree read builds it once");

    let chunk = AssistantChunk {
        turn: 1,
        step: 1,
        chunk: StreamChunk::TextDelta {
            index: 0,
            text: "hé \"quoted\"".into(),
        },
    };
    let event = log.append_data(&chunk, None).unwrap();
    assert!(!event.data.has_tree());
    assert_eq!(event.decode::<AssistantChunk>().unwrap().unwrap(), chunk);
}

/// A persisted log under a fresh home, with a fixed clock.
fn persisted(home: &std::path::Path, id: &str) -> SessionLog {
    let store = crate::store::JsonlStore::new(home);
    let log = store
        .create(crate::store::CreateOptions {
            id: Some(id.into()),
            ..Default::default()
        })
        .unwrap();
    log.set_clock(Arc::new(|| 7));
    log
}

/// Appends `n` ignorable events `{"n": i}`, waiting for the file every 256 so the writer never
/// lags far (eviction only drops what the file holds).
fn fill(log: &SessionLog, n: u64) {
    for i in 0..n {
        log.append_ignorable("x/fill", json!({ "n": i })).unwrap();
        if i % 256 == 255 {
            log.flush().unwrap();
        }
    }
    log.flush().unwrap();
}

#[test]
fn a_persisted_log_keeps_a_bounded_tail_in_memory_and_reads_the_rest_back() {
    let home = tempfile::tempdir().unwrap();
    let log = persisted(home.path(), "long");
    log.append_data(&TurnStart { turn: 1 }, None).unwrap();
    fill(&log, 10_000);
    log.append_ignorable("x/last", json!({})).unwrap();
    assert_eq!(log.len(), 10_002);
    assert!(
        log.resident_len() <= RESIDENT_HIGH.events,
        "{} events in memory",
        log.resident_len()
    );

    // Every read still sees the whole log, the evicted part from the file.
    let all = log.events().unwrap();
    assert_eq!(all.len(), 10_002);
    for (seq, event) in all.iter().enumerate() {
        assert_eq!(event.seq, seq as u64);
    }
    assert_eq!(all[5].data.get("n"), Some(&json!(4)));
    assert_eq!(log.get(0).unwrap().unwrap().kind, kind::TURN_START);
    assert_eq!(
        log.get(3_000).unwrap().unwrap().data.get("n"),
        Some(&json!(2_999))
    );
    assert!(log.get(10_002).unwrap().is_none());
    let since = log.events_since(9_000).unwrap();
    assert_eq!(since.len(), 1_002);
    assert_eq!(since[0].seq, 9_000);
    assert_eq!(log.events_since(20_000).unwrap().len(), 0);
    // The latest event of each type stays in memory however old it is.
    assert_eq!(log.last_of_kind(kind::TURN_START).unwrap().seq, 0);
    assert_eq!(log.turn_state().open_turn, Some(1));
    // A read-back event is the event that was appended.
    let file = std::fs::read_to_string(log.path().unwrap()).unwrap();
    let line = file.lines().nth(1 + 4_321).unwrap();
    assert_eq!(log.get(4_321).unwrap().unwrap().to_json_line(), line);
}

#[test]
fn the_open_step_stays_in_memory_until_it_ends() {
    let home = tempfile::tempdir().unwrap();
    let log = persisted(home.path(), "step");
    log.append_data(&TurnStart { turn: 1 }, None).unwrap();
    fill(&log, 1_000);
    let start = log
        .append_data(&StepStart { turn: 1, step: 1 }, None)
        .unwrap();
    fill(&log, 3 * RESIDENT_HIGH.events as u64);
    let in_step = log.len() - start.seq;
    assert!(
        log.resident_len() as u64 >= in_step,
        "the open step's {in_step} events must stay resident, {} are",
        log.resident_len()
    );
    log.append_ignorable("x/step-end-stand-in", json!({}))
        .unwrap();
    log.append_data(&crate::data::StepEnd { turn: 1, step: 1 }, None)
        .unwrap();
    fill(&log, RESIDENT_LOW.events as u64);
    assert!(
        log.resident_len() <= RESIDENT_HIGH.events,
        "{}",
        log.resident_len()
    );
    assert_eq!(log.events().unwrap().len() as u64, log.len());
}

#[test]
fn an_evicted_tool_result_can_still_be_replaced_and_is_still_checked() {
    let home = tempfile::tempdir().unwrap();
    let log = persisted(home.path(), "prune");
    check_tool_result_replacement(&log, |log, result| {
        fill(log, 3 * RESIDENT_HIGH.events as u64);
        assert!(log.resident_len() <= RESIDENT_HIGH.events);
        assert!(
            log.resident_len() < (log.len() - result) as usize,
            "the result to replace is only in the file"
        );
    });
}

#[test]
fn a_file_changed_under_the_live_log_is_an_error_not_a_shorter_history() {
    let home = tempfile::tempdir().unwrap();
    let log = persisted(home.path(), "changed");
    fill(&log, 3 * RESIDENT_HIGH.events as u64);
    let path = log.path().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();

    // Overwritten in place (same length): the rows no longer parse.
    std::fs::write(
        &path,
        text.replace("x/fill", "x!fill").replace("\"n\"", "\"n\"\""),
    )
    .unwrap();
    let err = log.events().unwrap_err();
    assert!(matches!(err, SessionError::ReadBack { .. }), "{err}");
    assert!(log.get(10).is_err());
    assert!(log.events_since(1).is_err());

    // Truncated: the events are gone.
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(10).unwrap();
    assert!(log.events().is_err());
    // What is in memory is still readable.
    let tail = log.len() - 5;
    assert_eq!(log.events_since(tail).unwrap().len(), 5);
}

#[test]
fn a_live_log_whose_directory_was_removed_still_reads_its_history() {
    let home = tempfile::tempdir().unwrap();
    let log = persisted(home.path(), "removed");
    fill(&log, 3 * RESIDENT_HIGH.events as u64);
    let dir = log.path().unwrap().parent().unwrap().to_path_buf();
    std::fs::remove_dir_all(&dir).unwrap();
    let all = log.events().unwrap();
    assert_eq!(all.len() as u64, log.len());
    assert_eq!(all[1].data.get("n"), Some(&json!(1)));
}

#[test]
fn a_resumed_long_log_keeps_a_bounded_tail_and_frees_the_load_buffer() {
    let home = tempfile::tempdir().unwrap();
    {
        let log = persisted(home.path(), "resumed");
        log.append_data(&TurnStart { turn: 1 }, None).unwrap();
        log.append_data(&user("first"), Some(SurfaceIntent::append()))
            .unwrap();
        fill(&log, 5_000);
    }
    let store = crate::store::JsonlStore::new(home.path());
    let log = store.resume("resumed").unwrap();
    // Whoever opens the resumed log reads it whole, from memory; then the session moves on.
    assert_eq!(log.resident_len() as u64, log.len());
    fill(&log, RESIDENT_LOW.events as u64);
    assert!(
        log.resident_len() <= RESIDENT_HIGH.events,
        "{}",
        log.resident_len()
    );
    assert!(
        !log.holds_load_buffer(),
        "the events kept in memory must not pin the whole file's buffer"
    );
    let all = log.events().unwrap();
    assert_eq!(all.len() as u64, log.len());
    assert_eq!(all[0].kind, kind::TURN_START);
    // Crash repair closed the open turn, after the stored events.
    assert_eq!(log.turn_state().open_turn, None);
    assert_eq!(log.derive_messages().len(), 1);
    log.append_ignorable("x/after", json!({})).unwrap();
    log.flush().unwrap();
    assert_eq!(log.get(1).unwrap().unwrap().kind, kind::USER_MESSAGE);
    assert_eq!(log.get(log.len() - 1).unwrap().unwrap().kind, "x/after");
}

#[test]
fn large_events_are_kept_in_memory_up_to_a_byte_budget() {
    let home = tempfile::tempdir().unwrap();
    let log = persisted(home.path(), "large");
    let big = "x".repeat(100_000);
    for i in 0..100u64 {
        log.append_ignorable("x/big", json!({ "n": i, "text": big }))
            .unwrap();
        log.flush().unwrap();
    }
    // 10 MB appended; far fewer than RESIDENT_LOW events, yet most are only in the file.
    assert!(
        log.resident_bytes() < RESIDENT_HIGH.bytes + 200_000,
        "{} bytes in memory",
        log.resident_bytes()
    );
    assert!(log.resident_len() < 30, "{}", log.resident_len());
    let all = log.events().unwrap();
    assert_eq!(all.len(), 100);
    assert_eq!(all[0].data.get("n"), Some(&json!(0)));
    assert_eq!(
        all[0]
            .data
            .get("text")
            .and_then(|t| t.as_str())
            .map(str::len),
        Some(100_000)
    );
}

#[derive(Default)]
struct CountFold {
    next_seq: u64,
    seen: Vec<u64>,
}

impl LogFold for CountFold {
    fn next_seq(&mut self) -> &mut u64 {
        &mut self.next_seq
    }

    fn apply(&mut self, event: &Event) {
        self.seen.push(event.seq);
    }
}

#[test]
fn a_fold_catches_up_from_the_file_then_only_on_what_is_new_and_restarts_on_another_log() {
    let home = tempfile::tempdir().unwrap();
    let log = persisted(home.path(), "fold");
    fill(&log, 3 * RESIDENT_HIGH.events as u64);
    let mut fold = CountFold::default();
    log.catch_up(&mut fold).unwrap();
    // The evicted part came back from the file, in order, once.
    assert_eq!(fold.seen, (0..log.len()).collect::<Vec<_>>());
    log.append_ignorable("x/new", json!({})).unwrap();
    log.catch_up(&mut fold).unwrap();
    assert_eq!(fold.seen.len() as u64, log.len());
    assert_eq!(fold.next_seq, log.len());
    // A shorter log under the same fold is another log: the fold starts over.
    let other = self::log();
    other.append_ignorable("x/a", json!({})).unwrap();
    other.catch_up(&mut fold).unwrap();
    assert_eq!(fold.seen, [0]);
    assert_eq!(fold.next_seq, 1);
}

#[test]
fn model_text_that_looks_like_log_lines_reads_back_as_the_same_one_event() {
    // A hostile model's output, logged verbatim: newlines, a forged row, a lone quote.
    let forged = "done\n{\"type\":\"turn/end\",\"seq\":1,\"time\":0,\"data\":{}}\n\"\r\n\u{2028}";
    let home = tempfile::tempdir().unwrap();
    let log = persisted(home.path(), "forged");
    let event = log
        .append_ignorable("x/model-text", json!({ "text": forged }))
        .unwrap();
    fill(&log, 3 * RESIDENT_HIGH.events as u64);
    assert!(
        log.resident_len() < log.len() as usize,
        "the event is evicted"
    );
    let back = log.get(event.seq).unwrap().unwrap();
    assert_eq!(back.kind, "x/model-text");
    assert_eq!(back.data.get("text").and_then(|t| t.as_str()), Some(forged));
    assert_eq!(back.to_json_line(), event.to_json_line());
    let all = log.events().unwrap();
    assert_eq!(all.len() as u64, log.len());
    assert_eq!(all[1].data.get("n"), Some(&json!(0)));
}
