//! The fold and the presenter registry as a front-end and a plugin use them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use dsh_kernel::Scope;
use dsh_session::Event;
use dsh_transcript::EventPresenters;
use dsh_transcript::Fold;
use dsh_transcript::Item;
use dsh_transcript::Notice;
use dsh_transcript::NoticeLevel;
use dsh_transcript::Presentation;
use dsh_transcript::PresenterError;
use serde_json::json;

fn event(seq: u64, kind: &str, data: serde_json::Value) -> Arc<Event> {
    Arc::new(Event::new(kind, seq, 1000 + seq, data))
}

fn log() -> Vec<Arc<Event>> {
    vec![
        event(0, "turn/start", json!({"turn": 1})),
        event(
            1,
            "assistant/chunk",
            json!({"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"Hi"}}),
        ),
        event(
            2,
            "tool/call",
            json!({"turn":1,"step":1,"callId":"c1","name":"mystery","arguments":"{oops"}),
        ),
        event(3, "plugin/status", json!({"text": "working"})),
        event(
            4,
            "turn/end",
            json!({"turn":1,"reason":{"kind":"completed"}}),
        ),
    ]
}

fn status_presenters(scope: &Scope) -> Arc<EventPresenters> {
    let presenters = Arc::new(EventPresenters::new());
    presenters
        .register(scope, "plugin/status", |event| {
            vec![Item::Notice(Notice {
                level: NoticeLevel::Info,
                source: "status".into(),
                text: event.data["text"].as_str().unwrap_or_default().to_owned(),
            })]
        })
        .unwrap();
    presenters
}

#[test]
fn items_carry_their_seq_and_arguments_are_parsed_once_keeping_the_raw_string() {
    let root = Scope::root();
    let presentation = Presentation {
        presenters: Some(status_presenters(&root)),
        ..Presentation::default()
    };
    let items = Fold::items_of(&presentation, log().iter());
    let seqs: Vec<u64> = items.iter().map(|item| item.seq).collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4]);
    match &items[2].item {
        Item::ToolCall(call) => assert_eq!(*call.arguments, json!("{oops")),
        other => panic!("not a call: {other:?}"),
    }
    assert!(matches!(&items[3].item, Item::Notice(n) if n.text == "working"));
    assert_eq!(items[3].time, 1003);
}

#[test]
fn live_one_event_at_a_time_equals_replay_and_a_cursor_resumes_after_it() {
    let root = Scope::root();
    let presentation = Presentation {
        presenters: Some(status_presenters(&root)),
        ..Presentation::default()
    };
    let replay = Fold::items_of(&presentation, log().iter());
    let mut live = Fold::new();
    let mut streamed = Vec::new();
    for event in log() {
        streamed.extend(live.apply(&presentation, &event));
        // A re-delivered event (a subscription overlapping a replay) yields nothing.
        assert!(live.apply(&presentation, &event).is_empty());
    }
    assert_eq!(streamed, replay);
    let mut resumed = Fold::after(2);
    let tail: Vec<_> = log()
        .iter()
        .flat_map(|event| resumed.apply(&presentation, event))
        .collect();
    assert_eq!(tail, replay[3..]);
}

#[test]
fn a_presenter_lives_as_long_as_its_scope_and_core_kinds_are_not_for_plugins() {
    let root = Scope::root();
    let plugin = root.child(dsh_kernel::ScopeKind::Plugin, "status").unwrap();
    let presenters = status_presenters(&plugin);
    assert!(presenters.presents("plugin/status"));
    assert_eq!(
        presenters
            .register(&plugin, "tool/call", |_| Vec::new())
            .unwrap_err(),
        PresenterError::CoreKind("tool/call".into())
    );
    plugin.dispose();
    assert!(!presenters.presents("plugin/status"));
    assert!(presenters.present(&log()[3]).is_empty());
    assert!(matches!(
        presenters.register(&plugin, "plugin/status", |_| Vec::new()),
        Err(PresenterError::Disposed(_))
    ));
}
