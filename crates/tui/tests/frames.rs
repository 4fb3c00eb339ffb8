//! Rendered frames of real turns: a scripted model drives the real agent loop and real tools;
//! the UI folds the committed events and draws into ratatui's `TestBackend`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::TestHost;
use common::frame;
use common::key;
use common::type_text;
use common::until;
use crossterm::event::KeyCode;
use dsh_agent::AgentStatus;
use dsh_agent::scripted::Script;
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_protocol::ContentBlock;
use dsh_protocol::FinishReason;
use dsh_protocol::StreamChunk;
use dsh_protocol::TokenUsage;
use dsh_tui::Controller;
use dsh_tui::Start;
use dsh_tui::TuiApp;
use dsh_tui::model::Entry;
use dsh_tui::model::ToolState;
use ratatui::style::Color;

fn app(factory: &Arc<TestHost>, start: Start) -> TuiApp {
    factory.app(start)
}

/// The workspace sits at a fixed path, so frames showing it are stable.
fn controller(factory: &Arc<TestHost>, start: Start) -> Controller {
    app(factory, start).controller().unwrap()
}

fn idle(controller: &Controller) -> bool {
    controller.agent().status() == AgentStatus::Idle && !controller.state.transcript.turn_open
}

async fn send(controller: &mut Controller, prompt: &str) {
    type_text(controller, prompt);
    controller.on_key(key(KeyCode::Enter));
    until(controller, "the turn to start", |c| {
        c.state.transcript.turn_open || c.agent().status() == AgentStatus::Running
    })
    .await;
}

fn reasoning_then_markdown() -> Vec<StreamChunk> {
    let thinking = "The user wants a greeting.\nKeep it short.";
    let text = "# Hello\n\nHere is **dsh** with `inline code`:\n\n- one item\n- another *item*\n\n```rust\nfn main() {\n    println!(\"hi\"); // greet\n}\n```";
    vec![
        StreamChunk::BlockStart {
            index: 0,
            block_type: "reasoning".into(),
        },
        StreamChunk::ReasoningDelta {
            index: 0,
            text: thinking.into(),
        },
        StreamChunk::BlockEnd {
            index: 0,
            block: ContentBlock::Reasoning {
                text: thinking.into(),
            },
        },
        StreamChunk::BlockStart {
            index: 1,
            block_type: "text".into(),
        },
        StreamChunk::TextDelta {
            index: 1,
            text: text[..20].into(),
        },
        StreamChunk::TextDelta {
            index: 1,
            text: text[20..].into(),
        },
        StreamChunk::BlockEnd {
            index: 1,
            block: ContentBlock::text(text),
        },
        StreamChunk::Usage {
            usage: TokenUsage {
                input_tokens: 400,
                output_tokens: 120,
                cache_read_tokens: Some(1600),
                cache_write_tokens: None,
                reasoning_tokens: None,
            },
        },
        StreamChunk::Finish {
            reason: FinishReason::Stop,
            replay_state: None,
        },
    ]
}

#[tokio::test]
async fn a_text_turn_renders_markdown_and_dimmed_reasoning() {
    let dir = common::workspace("text-turn");
    let factory = TestHost::with_model(&dir, "deepseek-v4-flash");
    factory.adapter.push_chunks(reasoning_then_markdown());
    let mut ui = controller(&factory, Start::New);
    send(&mut ui, "say hello").await;
    until(&mut ui, "the turn to end", idle).await;
    insta::assert_snapshot!("text_turn", frame(&ui.state, 80, 26).backend());
    insta::assert_snapshot!("text_turn_narrow", frame(&ui.state, 60, 30).backend());
    // Reasoning expands with ctrl-t.
    ui.on_key(crossterm::event::KeyEvent::new(
        KeyCode::Char('t'),
        crossterm::event::KeyModifiers::CONTROL,
    ));
    let expanded = frame(&ui.state, 80, 30);
    let text = format!("{}", expanded.backend());
    assert!(text.contains("│ Keep it short."), "{text}");
    // Usage: 400 + 1600 prompt tokens, 80% from cache.
    assert!(text.contains("↑2.0k ↓120 · cache 80%"), "{text}");
}

#[tokio::test]
async fn an_edit_turn_shows_a_coloured_diff() {
    let dir = common::workspace("edit-turn");
    let factory = TestHost::with_model(&dir, "deepseek-v4-flash");
    std::fs::create_dir_all(factory.workspace.join("src")).unwrap();
    std::fs::write(
        factory.workspace.join("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
    )
    .unwrap();
    let args = serde_json::json!({"file_path": "src/lib.rs", "old_string": "    a - b", "new_string": "    a + b"}).to_string();
    let read = serde_json::json!({"file_path": "src/lib.rs"}).to_string();
    factory.adapter.push_chunks(tool_call_response(
        "call_0",
        "read",
        &read,
        Some("Let me look."),
    ));
    factory.adapter.push_chunks(tool_call_response(
        "call_1",
        "edit",
        &args,
        Some("Fixing the sign."),
    ));
    factory
        .adapter
        .push_chunks(text_response("Fixed: `add` now adds."));
    let mut ui = controller(&factory, Start::New);
    send(&mut ui, "fix add in src/lib.rs").await;
    until(&mut ui, "the turn to end", idle).await;
    assert_eq!(
        std::fs::read_to_string(factory.workspace.join("src/lib.rs")).unwrap(),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
    );
    let terminal = frame(&ui.state, 80, 24);
    insta::assert_snapshot!("edit_turn", terminal.backend());
    // The added line is green, the removed one red.
    let buffer = terminal.backend().buffer();
    let colour_of = |needle: &str| {
        (0..buffer.area.height).find_map(|y| {
            let row: String = (0..buffer.area.width)
                .map(|x| buffer[(x, y)].symbol().to_owned())
                .collect();
            row.find(needle).map(|byte| {
                let x = row[..byte].chars().count() as u16;
                buffer[(x, y)].fg
            })
        })
    };
    assert_eq!(colour_of("+    a + b"), Some(Color::Green));
    assert_eq!(colour_of("-    a - b"), Some(Color::Red));
}

#[tokio::test]
async fn a_bash_call_renders_running_then_finished() {
    let dir = common::workspace("bash-turn");
    let factory = TestHost::with_model(&dir, "deepseek-v4-flash");
    let args = serde_json::json!({"command": "sleep 0.6; printf 'line %s\\n' 1 2 3 4 5 6 7 8", "description": "Count to eight"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_b", "bash", &args, None));
    factory.adapter.push_chunks(text_response("Eight lines."));
    let mut ui = controller(&factory, Start::New);
    send(&mut ui, "count to eight").await;
    until(&mut ui, "the bash call to run", |c| {
        c.state.transcript.running_calls().count() == 1
    })
    .await;
    let started = ui
        .state
        .transcript
        .running_calls()
        .next()
        .unwrap()
        .started_ms;
    // Live output a host streams in shows as the card's tail while the call runs.
    let sink = ui.output_sink();
    sink.send(("call_b".into(), "warming up\n".into())).unwrap();
    sink.send(("call_b".into(), "still going\n".into()))
        .unwrap();
    ui.pump();
    ui.state.now_ms = started + 2300;
    ui.state.busy_since_ms = Some(started);
    insta::assert_snapshot!("bash_running", frame(&ui.state, 80, 14).backend());
    until(&mut ui, "the turn to end", idle).await;
    let tool = ui.state.transcript.entries.iter().find_map(|e| match e {
        Entry::Tool(t) => Some(t.clone()),
        _ => None,
    });
    assert_eq!(tool.map(|t| t.state), Some(ToolState::Done));
    insta::assert_snapshot!("bash_finished", frame(&ui.state, 80, 18).backend());
    ui.state.expand_tools = true;
    let expanded = format!("{}", frame(&ui.state, 80, 24).backend());
    assert!(expanded.contains("│ line 1"), "{expanded}");
}

#[tokio::test]
async fn a_running_bash_card_shows_the_commands_own_output_live() {
    let dir = common::workspace("bash-live");
    let factory = TestHost::with_model(&dir, "deepseek-v4-flash");
    let args = serde_json::json!({"command": "printf 'first line\\n'; sleep 1.5; printf 'second line\\n'", "description": "Slow print"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_l", "bash", &args, None));
    factory.adapter.push_chunks(text_response("Printed."));
    let mut ui = controller(&factory, Start::New);
    send(&mut ui, "print slowly").await;
    // No host feeds the sink here: the bash tool finds the UI's sink on the agent's scope.
    until(&mut ui, "the first line while the call runs", |c| {
        c.state
            .transcript
            .running_calls()
            .any(|t| t.output.as_deref() == Some("first line\n"))
    })
    .await;
    let frame_text = format!("{}", frame(&ui.state, 80, 14).backend());
    assert!(frame_text.contains("│ first line"), "{frame_text}");
    assert!(!frame_text.contains("│ second line"), "{frame_text}");
    until(&mut ui, "the turn to end", idle).await;
    let tool = ui.state.transcript.entries.iter().find_map(|e| match e {
        Entry::Tool(t) => Some(t.clone()),
        _ => None,
    });
    // The finished card is the result again, not the live tail.
    assert_eq!(
        tool.and_then(|t| t.output),
        Some("first line\nsecond line\n".to_owned())
    );
}

#[tokio::test]
async fn an_approval_blocks_only_its_call_and_remembers_the_session_grant() {
    let dir = common::workspace("approval");
    let factory = TestHost::with_model(&dir, "deepseek-v4-flash");
    let ask =
        serde_json::json!({"command": "echo needs-approval", "description": "Probe"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_a", "bash", &ask, None));
    factory.adapter.push_chunks(text_response("Asked."));
    factory
        .adapter
        .push_chunks(tool_call_response("call_c", "bash", &ask, None));
    factory
        .adapter
        .push_chunks(text_response("Again, no prompt."));
    let mut ui = controller(&factory, Start::New);
    send(&mut ui, "run it").await;
    until(&mut ui, "the approval prompt", |c| {
        !c.state.approvals.is_empty()
    })
    .await;
    // The clock the status line and cards read: fixed for the snapshot.
    ui.state.busy_since_ms = Some(ui.state.now_ms);
    insta::assert_snapshot!("approval_prompt", frame(&ui.state, 80, 16).backend());
    ui.on_key(key(KeyCode::Char('a')));
    until(&mut ui, "the turn to end", idle).await;
    send(&mut ui, "again").await;
    until(&mut ui, "the second turn to end", idle).await;
    assert!(ui.state.approvals.is_empty());
    let outputs: Vec<String> = ui
        .state
        .transcript
        .entries
        .iter()
        .filter_map(|e| match e {
            Entry::Tool(t) => t.output.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(outputs.len(), 2);
    assert!(
        outputs.iter().all(|o| o.contains("needs-approval")),
        "{outputs:?}"
    );
    assert_eq!(ui.approval().granted(), ["bash"]);
}

#[tokio::test]
async fn a_rejected_call_fails_and_the_turn_goes_on() {
    let dir = common::workspace("reject");
    let factory = TestHost::with_model(&dir, "deepseek-v4-flash");
    let ask =
        serde_json::json!({"command": "echo needs-approval", "description": "Probe"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_r", "bash", &ask, None));
    factory.adapter.push_chunks(text_response("Understood."));
    let mut ui = controller(&factory, Start::New);
    send(&mut ui, "run it").await;
    until(&mut ui, "the approval prompt", |c| {
        !c.state.approvals.is_empty()
    })
    .await;
    ui.on_key(key(KeyCode::Char('n')));
    until(&mut ui, "the turn to end", idle).await;
    let failed = ui
        .state
        .transcript
        .entries
        .iter()
        .any(|e| matches!(e, Entry::Tool(t) if t.state == ToolState::Failed));
    assert!(failed);
}

#[tokio::test]
async fn esc_cancels_the_running_turn_and_the_log_records_it() {
    let dir = common::workspace("cancel");
    let factory = TestHost::with_model(&dir, "deepseek-v4-flash");
    factory.adapter.push(Script::Hang);
    let mut ui = controller(&factory, Start::New);
    send(&mut ui, "take your time").await;
    until(&mut ui, "streaming", |c| {
        c.state
            .transcript
            .entries
            .iter()
            .any(|e| matches!(e, Entry::Assistant(a) if a.streaming))
    })
    .await;
    // A prompt typed while the agent works waits for its own turn.
    type_text(&mut ui, "and then?");
    ui.on_key(key(KeyCode::Enter));
    ui.pump();
    assert_eq!(ui.state.queued, ["and then?"]);
    let text = format!("{}", frame(&ui.state, 60, 12).backend());
    assert!(text.contains("› and then?  (queued)"), "{text}");
    // Esc cancels the turn and drops what was queued (cancel(user, keep_inbox: false)).
    ui.on_key(key(KeyCode::Esc));
    until(&mut ui, "the turn to end", idle).await;
    assert!(ui.state.queued.is_empty());
    let ends: Vec<serde_json::Value> = ui
        .agent()
        .log()
        .events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == "turn/end")
        .map(|e| e.data.value().clone())
        .collect();
    assert_eq!(
        ends,
        [serde_json::json!({"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "user"}}})]
    );
    let text = format!("{}", frame(&ui.state, 60, 12).backend());
    assert!(text.contains("turn cancelled by you"), "{text}");
}

#[tokio::test]
async fn a_resumed_session_rebuilds_the_same_transcript() {
    let dir = common::workspace("resume");
    let factory = TestHost::with_model(&dir, "deepseek-v4-flash");
    std::fs::write(factory.workspace.join("notes.txt"), "alpha\nbeta\n").unwrap();
    let args =
        serde_json::json!({"file_path": "notes.txt", "old_string": "beta", "new_string": "gamma"})
            .to_string();
    let read = serde_json::json!({"file_path": "notes.txt"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_r", "read", &read, None));
    factory
        .adapter
        .push_chunks(tool_call_response("call_e", "edit", &args, None));
    factory
        .adapter
        .push_chunks(text_response("Renamed beta to gamma."));
    let mut live = controller(&factory, Start::New);
    send(&mut live, "rename beta").await;
    until(&mut live, "the turn to end", idle).await;
    let id = live.agent().id().to_owned();
    live.shutdown().await;
    let live_entries = live.state.transcript.entries.clone();
    // One live log per session id in a process: the first UI lets go before resuming.
    drop(live);

    let resumed = controller(&factory, Start::Resume(Some(id.clone())));
    let (replayed, notice) = resumed
        .state
        .transcript
        .entries
        .split_at(live_entries.len());
    assert_eq!(replayed, &live_entries[..]);
    assert_eq!(
        notice,
        [Entry::Notice {
            level: dsh_tui::model::NoticeLevel::Info,
            text: "session resumed from its log".into(),
        }]
    );
    assert_eq!(resumed.state.session_id, id);
    insta::assert_snapshot!("resumed_session", frame(&resumed.state, 80, 20).backend());
    resumed.shutdown().await;
    drop(resumed);
    // `dsh resume` without an id picks the newest session of this folder.
    let newest = controller(&factory, Start::Resume(None));
    assert_eq!(newest.state.session_id, id);
    assert_eq!(factory.sessions().list().unwrap().len(), 1);
}

#[tokio::test]
async fn slash_commands_and_completion() {
    let dir = common::workspace("commands");
    let factory = TestHost::with_model(&dir, "deepseek-v4-flash");
    std::fs::create_dir_all(factory.workspace.join("src")).unwrap();
    std::fs::write(factory.workspace.join("src/main.rs"), "fn main() {}\n").unwrap();
    let mut ui = controller(&factory, Start::New);
    type_text(&mut ui, "/help");
    ui.on_key(key(KeyCode::Enter));
    assert_eq!(
        ui.state.overlay.as_ref().map(|o| o.title.as_str()),
        Some("help")
    );
    insta::assert_snapshot!("help_overlay", frame(&ui.state, 60, 24).backend());
    ui.on_key(key(KeyCode::Esc));
    assert!(ui.state.overlay.is_none());

    type_text(&mut ui, "look at @src/ma");
    ui.on_key(key(KeyCode::Tab));
    assert_eq!(ui.state.editor.text(), "look at @src/main.rs ");
    ui.on_key(crossterm::event::KeyEvent::new(
        KeyCode::Char('u'),
        crossterm::event::KeyModifiers::CONTROL,
    ));

    let first = ui.agent().id().to_owned();
    type_text(&mut ui, "/new");
    ui.on_key(key(KeyCode::Enter));
    assert_ne!(ui.agent().id(), first);
    type_text(&mut ui, "/mode code");
    ui.on_key(key(KeyCode::Enter));
    assert_eq!(
        factory.registry.mode_for(Some(ui.agent().scope())),
        dsh_tools::PresentationMode::Code
    );
    type_text(&mut ui, "/approval auto");
    ui.on_key(key(KeyCode::Enter));
    assert_eq!(ui.approval().mode(), dsh_tui::ApprovalMode::Auto);
    type_text(&mut ui, "/quit");
    ui.on_key(key(KeyCode::Enter));
    assert!(ui.should_quit());
}

#[tokio::test]
async fn ctrl_c_twice_quits() {
    let dir = common::workspace("ctrl-c");
    let factory = TestHost::with_model(&dir, "deepseek-v4-flash");
    let mut ui = controller(&factory, Start::New);
    let ctrl_c = crossterm::event::KeyEvent::new(
        KeyCode::Char('c'),
        crossterm::event::KeyModifiers::CONTROL,
    );
    ui.on_key(ctrl_c);
    assert!(!ui.should_quit());
    assert!(
        format!("{}", frame(&ui.state, 80, 8).backend()).contains("press ctrl-c again to quit")
    );
    ui.on_key(ctrl_c);
    assert!(ui.should_quit());
}
