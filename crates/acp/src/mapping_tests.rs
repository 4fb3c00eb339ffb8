use dsh_kernel::Scope;
use dsh_protocol::LlmFailure;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_protocol::StreamChunk;
use dsh_session::SurfaceOp;
use dsh_session::data::AssistantChunk;
use dsh_session::data::EventData;
use dsh_session::data::LlmRetry;
use dsh_session::data::RetryMode;
use dsh_session::data::SessionTitle;
use dsh_session::data::TitleSource;
use dsh_session::data::ToolCall;
use dsh_session::data::ToolResult;
use dsh_session::data::UserMessage;
use dsh_tool_todo::Todo;
use dsh_tool_todo::TodoStatus;
use dsh_tool_todo::TodoWrite;
use dsh_tools::ToolRegistry;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn event<T: EventData>(seq: u64, data: &T, surface_op: Option<SurfaceOp>) -> Event {
    Event::new(
        T::KIND,
        seq,
        1_796_015_251_123,
        serde_json::to_value(data).unwrap(),
    )
    .with_surface(surface_op, None)
}

/// The presenters the todo plugin registers when it mounts (the plan is its event).
fn presentation(tools: Option<(Arc<dsh_tools::ToolRegistry>, dsh_kernel::Scope)>) -> Presentation {
    let presenters = Arc::new(dsh_transcript::EventPresenters::new());
    let root = dsh_kernel::Scope::root();
    presenters
        .register(
            &root,
            dsh_tool_todo::TodoWrite::KIND,
            dsh_tool_todo::present,
        )
        .unwrap();
    let (tools, scope) = match tools {
        Some((tools, scope)) => (Some(tools), Some(scope)),
        None => (None, Some(root)),
    };
    Presentation {
        tools,
        scope,
        presenters: Some(presenters),
    }
}

fn presenter() -> Presenter {
    Presenter::new(
        RenderContext {
            cwd: "/ws".into(),
            terminal_output: false,
        },
        presentation(None),
    )
}

fn wire(updates: Vec<SessionUpdate>) -> Vec<Value> {
    updates
        .iter()
        .map(|u| serde_json::to_value(u).unwrap())
        .collect()
}

#[test]
fn chunks_become_message_and_thought_chunks() {
    let mut p = presenter();
    let text = AssistantChunk {
        turn: 1,
        step: 1,
        chunk: StreamChunk::TextDelta {
            index: 0,
            text: "Hi".into(),
        },
    };
    let thought = AssistantChunk {
        turn: 1,
        step: 1,
        chunk: StreamChunk::ReasoningDelta {
            index: 0,
            text: "hmm".into(),
        },
    };
    let start = AssistantChunk {
        turn: 1,
        step: 1,
        chunk: StreamChunk::BlockStart {
            index: 0,
            block_type: "text".into(),
        },
    };
    assert_eq!(
        wire(p.map(&event(1, &text, None), false)),
        vec![
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hi"}, "messageId": "message-1-1"})
        ]
    );
    assert_eq!(
        wire(p.map(&event(2, &thought, None), false)),
        vec![
            json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}, "messageId": "thought-1-1"})
        ]
    );
    assert!(p.map(&event(3, &start, None), false).is_empty());
}

#[test]
fn a_retry_is_a_thought_not_message_text() {
    let retry = LlmRetry {
        retry_id: "r".into(),
        turn: 1,
        step: 1,
        provider: "p".into(),
        mode: RetryMode::Normal,
        policy_key: "[]".into(),
        retry: 1,
        max_retries: Some(2),
        delay_ms: 1,
        failure: LlmFailure::new("EMPTY_RESPONSE", "empty completion"),
    };
    assert_eq!(
        wire(presenter().map(&event(4, &retry, None), false)),
        vec![
            json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text",
            "text": "\n\n[Previous model attempt discarded; retrying 1/2 in 1ms: empty completion]\n\n"},
            "messageId": "notice-4"})
        ]
    );
}

#[test]
fn todos_become_a_plan_and_titles_session_info() {
    let todos = TodoWrite {
        todos: vec![
            Todo {
                content: "read".into(),
                status: TodoStatus::Completed,
            },
            Todo {
                content: "write".into(),
                status: TodoStatus::InProgress,
            },
        ],
    };
    assert_eq!(
        wire(presenter().map(&event(5, &todos, None), false)),
        vec![json!({"sessionUpdate": "plan", "entries": [
            {"content": "read", "priority": "medium", "status": "completed"},
            {"content": "write", "priority": "medium", "status": "in_progress"}
        ]})]
    );
    let title = SessionTitle {
        title: "Fix the build".into(),
        message_seqs: vec![1],
        source: TitleSource::Fallback,
    };
    assert_eq!(
        wire(presenter().map(&event(6, &title, None), false)),
        vec![
            json!({"sessionUpdate": "session_info_update", "title": "Fix the build", "updatedAt": "2026-11-30T05:07:31.123Z"})
        ]
    );
}

#[test]
fn user_messages_are_replayed_but_never_echoed_live() {
    let typed = UserMessage(Message::user_text("hello"));
    let snapshot = UserMessage(Message::user(
        vec![ContentBlock::text("ctx")],
        MessageSource::plugin("x"),
    ));
    let mut p = presenter();
    assert!(
        p.map(&event(1, &typed, Some(SurfaceOp::Append)), false)
            .is_empty()
    );
    assert_eq!(
        wire(p.map(&event(2, &typed, Some(SurfaceOp::Append)), true)),
        vec![
            json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hello"}})
        ]
    );
    assert!(
        p.map(&event(3, &snapshot, Some(SurfaceOp::Append)), true)
            .is_empty()
    );
}

#[test]
fn unknown_tools_get_generic_cards_and_replacements_no_update() {
    // `kind: other` is the schema default and omitted on the wire.
    let mut p = presenter();
    let call = ToolCall {
        turn: 1,
        step: 1,
        call_id: "c1".into(),
        name: "mystery".into(),
        arguments: "{\"a\":1}".into(),
    };
    assert_eq!(
        wire(p.map(&event(7, &call, None), false)),
        vec![
            json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "mystery",
            "status": "in_progress", "rawInput": {"a": 1}})
        ]
    );
    let message = Message::tool_result("c1", vec![ContentBlock::text("Error: boom")], true);
    let result = ToolResult {
        turn: 1,
        step: 1,
        message,
        error: None,
        meta: None,
    };
    let replaced = SurfaceOp::Replace { start: 0, end: 1 };
    assert!(p.map(&event(8, &result, Some(replaced)), false).is_empty());
    assert_eq!(
        wire(p.map(&event(9, &result, Some(SurfaceOp::Append)), false)),
        vec![
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "failed",
            "content": [{"type": "content", "content": {"type": "text", "text": "Error: boom"}}]})
        ]
    );
}

#[test]
fn cards_carry_absolute_paths_and_the_arguments_object() {
    use dsh_tools::FileDiff;
    use dsh_tools::FileLocation;
    use dsh_tools::Tool;
    use dsh_tools::ToolCallView;
    let registry = ToolRegistry::new(dsh_tools::RegistryConfig::default());
    let root = Scope::root();
    let edit = Tool::builder("edit")
        .description("Edit a file")
        .validated_parameters(
            json!({"type": "object", "properties": {"file_path": {"type": "string"}}}),
        )
        .present_call(|args: &Value| {
            let path = args["file_path"].as_str()?;
            let diff = FileDiff {
                path: path.into(),
                old_text: Some("a".into()),
                new_text: "b".into(),
            };
            Some(
                ToolCallView::diff(format!("Edit {path}"), vec![diff]).locations(vec![
                    FileLocation {
                        path: path.into(),
                        line: Some(3),
                    },
                ]),
            )
        })
        .raw_output(json!({"type": "object"}), |_, _| Ok(Vec::new()))
        .run(|_: Value, _| async { Ok(json!({})) })
        .build()
        .unwrap();
    let grep = Tool::builder("grep")
        .description("Search")
        .validated_parameters(
            json!({"type": "object", "properties": {"pattern": {"type": "string"}}}),
        )
        .present_call(|args: &Value| {
            Some(ToolCallView::generic("grep").raw_input(args["pattern"].clone()))
        })
        .raw_output(json!({"type": "object"}), |_, _| Ok(Vec::new()))
        .run(|_: Value, _| async { Ok(json!({})) })
        .build()
        .unwrap();
    registry.register(&root, edit).unwrap();
    registry.register(&root, grep).unwrap();
    let mut p = Presenter::new(
        RenderContext {
            cwd: "/ws".into(),
            terminal_output: false,
        },
        presentation(Some((registry, root))),
    );
    let call = |id: &str, name: &str, arguments: &str| ToolCall {
        turn: 1,
        step: 1,
        call_id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    };
    let edit = wire(p.map(
        &event(
            1,
            &call("c1", "edit", r#"{"file_path":"src/../lib.rs"}"#),
            None,
        ),
        false,
    ));
    assert_eq!(
        edit,
        vec![
            json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Edit src/../lib.rs",
            "kind": "edit", "status": "in_progress",
            "content": [{"type": "diff", "path": "/ws/lib.rs", "oldText": "a", "newText": "b"}],
            "locations": [{"path": "/ws/lib.rs", "line": 3}],
            "rawInput": {"file_path": "src/../lib.rs"}})
        ]
    );
    // A presenter's own (string) rawInput never reaches the wire: the arguments object does.
    let grep = wire(p.map(
        &event(2, &call("c2", "grep", r#"{"pattern":"fn main"}"#), None),
        false,
    ));
    assert_eq!(grep[0]["rawInput"], json!({"pattern": "fn main"}));
    // Arguments that are not JSON have no object to show.
    let broken = wire(p.map(&event(3, &call("c3", "grep", "{oops"), None), false));
    assert_eq!(broken[0].get("rawInput"), None, "{broken:?}");
}

/// Every kind of update the presenter and the bridge's own helpers produce validates against
/// the protocol crate's JSON Schema for `session/update` (the wire-level run covers the rest).
#[test]
fn every_update_kind_validates_against_the_acp_schema() {
    use agent_client_protocol::v1::schema::SessionNotification;
    use agent_client_protocol::v1::schema::ToolCallStatus;
    let schema = serde_json::to_value(schemars::schema_for!(SessionNotification)).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut p = Presenter::new(
        RenderContext {
            cwd: "/ws".into(),
            terminal_output: true,
        },
        presentation(None),
    );
    let chunk = |chunk: StreamChunk| AssistantChunk {
        turn: 1,
        step: 1,
        chunk,
    };
    let mut updates = Vec::new();
    let mut seq = 0;
    let mut feed = |p: &mut Presenter, e: Event, replay: bool| {
        updates.extend(p.map(&e, replay));
    };
    let mut next = || {
        seq += 1;
        seq
    };
    feed(
        &mut p,
        event(
            next(),
            &chunk(StreamChunk::TextDelta {
                index: 0,
                text: "Hi".into(),
            }),
            None,
        ),
        false,
    );
    feed(
        &mut p,
        event(
            next(),
            &chunk(StreamChunk::ReasoningDelta {
                index: 0,
                text: "hmm".into(),
            }),
            None,
        ),
        false,
    );
    let retry = LlmRetry {
        retry_id: "r".into(),
        provider: "p".into(),
        policy_key: "[]".into(),
        turn: 1,
        step: 1,
        retry: 1,
        max_retries: Some(3),
        delay_ms: 10,
        failure: LlmFailure::new("SERVER", "busy"),
        mode: RetryMode::Normal,
    };
    feed(&mut p, event(next(), &retry, None), false);
    let todos = TodoWrite {
        todos: vec![Todo {
            content: "ship".into(),
            status: TodoStatus::InProgress,
        }],
    };
    feed(&mut p, event(next(), &todos, None), false);
    let title = SessionTitle {
        title: "A title".into(),
        message_seqs: vec![1],
        source: TitleSource::Fallback,
    };
    feed(&mut p, event(next(), &title, None), false);
    feed(
        &mut p,
        event(next(), &UserMessage(Message::user_text("hello")), None),
        true,
    );
    let call = ToolCall {
        turn: 1,
        step: 1,
        call_id: "c1".into(),
        name: "mystery".into(),
        arguments: r#"{"a":1}"#.into(),
    };
    feed(&mut p, event(next(), &call, None), false);
    let result = ToolResult {
        turn: 1,
        step: 1,
        message: Message::tool_result("c1", vec![ContentBlock::text("boom")], true),
        error: None,
        meta: None,
    };
    feed(&mut p, event(next(), &result, None), false);
    let (shown, _) = {
        let call = ToolCall {
            call_id: "c2".into(),
            ..call.clone()
        };
        feed(&mut p, event(next(), &call, None), false);
        p.shown_call("c2")
            .map(|(c, a)| (c.clone(), a.clone()))
            .unwrap()
    };
    updates.push(SessionUpdate::ToolCallUpdate(
        crate::cards::permission_call(
            "c2",
            Some((
                &shown,
                &json!({"command": "ls", "sandbox_permissions": "danger-full-access"}),
            )),
            "bash",
            Some("escalate sandbox to danger-full-access: needs it"),
        ),
    ));
    updates.push(SessionUpdate::ToolCallUpdate(crate::cards::status_update(
        "c2",
        ToolCallStatus::InProgress,
    )));
    updates.push(SessionUpdate::ToolCallUpdate(
        p.attach_terminal("c2", "t1").unwrap(),
    ));
    updates.push(SessionUpdate::ToolCallUpdate(
        crate::cards::live_terminal_update("c2", "out"),
    ));
    updates.push(SessionUpdate::ToolCallUpdate(
        crate::cards::live_console_update("c2", "out"),
    ));
    updates.push(SessionUpdate::ToolCallUpdate(
        crate::cards::client_terminal_result("c2", false),
    ));
    let kinds: std::collections::BTreeSet<String> = wire(updates.clone())
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds.len(), 7, "{kinds:?}");
    for update in updates {
        let frame = serde_json::to_value(SessionNotification::new("s", update)).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&frame)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{frame}: {errors:?}");
    }
}

#[test]
fn replay_merges_text_chunks_of_one_message_only() {
    let id = || "message-1-1".to_owned();
    let mut held = message_chunk_of("hel".into(), id());
    assert!(is_text_chunk(&held));
    assert!(extend_text_chunk(
        &mut held,
        &message_chunk_of("lo".into(), id())
    ));
    assert!(!extend_text_chunk(
        &mut held,
        &thought_chunk_of("why".into(), id())
    ));
    assert!(
        !extend_text_chunk(
            &mut held,
            &message_chunk_of("next".into(), "message-1-2".into())
        ),
        "the next step's message keeps its own id"
    );
    let SessionUpdate::AgentMessageChunk(chunk) = &held else {
        panic!("not a message chunk: {held:?}");
    };
    assert!(matches!(&chunk.content, AcpBlock::Text(text) if text.text == "hello"));
    let mut thought = thought_chunk_of("a".into(), "thought-1-1".into());
    assert!(extend_text_chunk(
        &mut thought,
        &thought_chunk_of("b".into(), "thought-1-1".into())
    ));
    assert!(!extend_text_chunk(&mut thought, &message_chunk("c".into())));
}
