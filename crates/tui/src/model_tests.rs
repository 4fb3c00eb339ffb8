use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn event(seq: u64, kind: &str, data: Value) -> Arc<Event> {
    Arc::new(Event::new(kind, seq, 1000 + seq * 100, data))
}

fn fold(events: &[Arc<Event>]) -> Transcript {
    Transcript::from_events(events.iter(), &Presenters::default())
}

#[test]
fn chunks_stream_into_a_live_entry_that_the_message_replaces() {
    let user = serde_json::to_value(Message::user_text("hi")).unwrap();
    let mut events = vec![
        event(0, "turn/start", json!({"turn": 1})),
        event(1, "user/message", user),
        event(
            2,
            "assistant/chunk",
            json!({"turn":1,"step":1,"chunk":{"type":"reasoning-delta","index":0,"text":"hm"}}),
        ),
        event(
            3,
            "assistant/chunk",
            json!({"turn":1,"step":1,"chunk":{"type":"text-delta","index":1,"text":"Hel"}}),
        ),
        event(
            4,
            "assistant/chunk",
            json!({"turn":1,"step":1,"chunk":{"type":"text-delta","index":1,"text":"lo"}}),
        ),
    ];
    let live = fold(&events);
    assert_eq!(
        live.entries[1],
        Entry::Assistant(AssistantEntry {
            turn: 1,
            step: 1,
            parts: vec![Part::Reasoning("hm".into()), Part::Text("Hello".into())],
            streaming: true,
            interrupted: false,
        })
    );
    let message = Message::assistant(
        vec![
            ContentBlock::Reasoning { text: "hm".into() },
            ContentBlock::text("Hello"),
        ],
        MessageSource::model("p", "m"),
    );
    events.push(event(
        5,
        "assistant/message",
        json!({"turn":1,"step":1,"message": message, "usage": {"inputTokens": 10, "outputTokens": 3, "cacheReadTokens": 30}}),
    ));
    events.push(event(
        6,
        "turn/end",
        json!({"turn":1,"reason":{"kind":"completed"}}),
    ));
    let done = fold(&events);
    assert_eq!(done.entries.len(), 2);
    assert!(matches!(&done.entries[1], Entry::Assistant(a) if !a.streaming && a.parts.len() == 2));
    assert_eq!(done.usage.prompt_total(), 40);
    assert_eq!(done.usage.cache_hit_percent(), Some(75));
    assert!(!done.turn_open);
}

#[test]
fn model_facing_user_messages_are_not_shown() {
    let snapshot = Message::user(
        vec![ContentBlock::text("<env>…</env>")],
        MessageSource::plugin("runtime-context"),
    );
    let t = fold(&[event(
        0,
        "user/message",
        serde_json::to_value(snapshot).unwrap(),
    )]);
    assert!(t.entries.is_empty());
}

#[test]
fn tool_calls_fold_into_cards_with_state_and_timing() {
    let result = Message::tool_result("c1", vec![ContentBlock::text("boom")], true);
    let events = [
        event(
            0,
            "tool/call",
            json!({"turn":1,"step":1,"callId":"c1","name":"mystery","arguments":"{\"x\":1}"}),
        ),
        event(
            1,
            "tool/result",
            json!({"turn":1,"step":1,"message": result}),
        ),
    ];
    let running = fold(&events[..1]);
    assert_eq!(running.running_calls().count(), 1);
    let done = fold(&events);
    let Entry::Tool(tool) = &done.entries[0] else {
        panic!("expected a tool entry: {:?}", done.entries);
    };
    assert_eq!(
        tool.call,
        ToolCallView::fallback("mystery", &json!({"x": 1}))
    );
    assert_eq!(tool.state, ToolState::Failed);
    assert_eq!(tool.output.as_deref(), Some("boom"));
    assert_eq!((tool.started_ms, tool.ended_ms), (1000, Some(1100)));
}

#[test]
fn a_cancelled_turn_leaves_a_notice_and_stops_streaming() {
    let events = [
        event(0, "turn/start", json!({"turn": 1})),
        event(
            1,
            "assistant/chunk",
            json!({"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"par"}}),
        ),
        event(
            2,
            "turn/end",
            json!({"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}),
        ),
        event(
            3,
            "todo/write",
            json!({"todos":[{"content":"a","status":"in_progress"}]}),
        ),
    ];
    // The plan is the todo plugin's event: the TUI shows whatever its presenter says.
    let presenters = Arc::new(dsh_transcript::EventPresenters::new());
    let root = dsh_kernel::Scope::root();
    presenters
        .register(&root, "todo/write", |_| {
            vec![dsh_transcript::Item::Plan(vec![
                dsh_transcript::PlanEntry {
                    content: "a".into(),
                    status: dsh_transcript::PlanStatus::InProgress,
                },
            ])]
        })
        .unwrap();
    let presentation = Presenters {
        presenters: Some(presenters),
        ..Presenters::default()
    };
    let t = Transcript::from_events(events.iter(), &presentation);
    assert!(matches!(&t.entries[0], Entry::Assistant(a) if !a.streaming && a.interrupted));
    assert_eq!(
        t.entries[1],
        Entry::Notice {
            level: NoticeLevel::Warning,
            text: "turn cancelled by you".into()
        }
    );
    assert_eq!(t.plan.len(), 1);
    // Without the plugin's presenter there is no plan.
    assert!(fold(&events).plan.is_empty());
}

#[test]
fn redelivered_events_are_ignored() {
    let user = serde_json::to_value(Message::user_text("once")).unwrap();
    let e = event(4, "user/message", user);
    let mut t = Transcript::new();
    t.apply(&e, &Presenters::default());
    t.apply(&e, &Presenters::default());
    assert_eq!(t.entries, [Entry::User("once".into())]);
}

#[test]
fn live_output_accumulates_until_the_result_lands() {
    let call = event(
        0,
        "tool/call",
        json!({"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{}"}),
    );
    let mut t = fold(std::slice::from_ref(&call));
    t.append_output("c1", "one\n");
    t.append_output("c1", "two\n");
    t.append_output("nope", "x");
    assert!(
        matches!(&t.entries[0], Entry::Tool(tool) if tool.output.as_deref() == Some("one\ntwo\n"))
    );
    let result = Message::tool_result("c1", vec![ContentBlock::text("final")], false);
    t.apply(
        &event(
            1,
            "tool/result",
            json!({"turn":1,"step":1,"message": result}),
        ),
        &Presenters::default(),
    );
    t.append_output("c1", "late");
    assert!(matches!(&t.entries[0], Entry::Tool(tool) if tool.output.as_deref() == Some("final")));
}

#[test]
fn live_output_keeps_a_bounded_tail() {
    let call = event(
        0,
        "tool/call",
        json!({"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{}"}),
    );
    let mut t = fold(std::slice::from_ref(&call));
    let line = "é".repeat(1000);
    for _ in 0..100 {
        t.append_output("c1", &line);
    }
    t.append_output("c1", "end");
    let Entry::Tool(tool) = &t.entries[0] else {
        panic!("not a tool entry");
    };
    let output = tool.output.as_deref().unwrap();
    assert!(
        output.len() <= crate::model::LIVE_TAIL_BYTES,
        "{}",
        output.len()
    );
    assert!(output.len() > crate::model::LIVE_TAIL_BYTES - 4);
    assert!(output.ends_with("éend"));
}

#[test]
fn a_delegation_card_follows_the_childs_live_progress() {
    let call = event(
        0,
        "tool/call",
        json!({"turn":1,"step":1,"callId":"c1","name":"subagent","arguments":"{\"prompt\":\"look\"}"}),
    );
    let mut t = fold(std::slice::from_ref(&call));
    let summary = |t: &Transcript| {
        let Entry::Tool(tool) = &t.entries[0] else {
            panic!("not a tool entry");
        };
        let ctx = crate::cards::CardContext {
            expanded: false,
            now_ms: 1000,
            awaiting_approval: false,
        };
        let lines = crate::cards::card_lines(tool, ctx);
        let text: Vec<String> = lines
            .iter()
            .map(|(l, _)| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        text[1..].join("\n")
    };
    // What the subagent tool streams to the call's output sink as the child works.
    t.append_output("c1", "▸ read src/lib.rs\n");
    t.append_output("c1", "▸ bash ls\n");
    assert_eq!(
        summary(&t),
        "  ▸ 2 tool calls · running · bash ls  (ctrl-o to expand)"
    );
    t.append_output("c1", "▸ grep foo\n");
    assert_eq!(
        summary(&t),
        "  ▸ 3 tool calls · running · grep foo  (ctrl-o to expand)"
    );
    let result = Message::tool_result(
        "c1",
        vec![ContentBlock::text(
            "▸ read src/lib.rs\n▸ bash ls\n▸ grep foo\n\nfound it",
        )],
        false,
    );
    t.apply(
        &event(
            1,
            "tool/result",
            json!({"turn":1,"step":1,"message": result}),
        ),
        &Presenters::default(),
    );
    assert_eq!(
        summary(&t),
        "  ▸ 3 tool calls · done  (ctrl-o to expand)\n  found it"
    );
}
