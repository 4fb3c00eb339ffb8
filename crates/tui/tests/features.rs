//! The controller and frames of what a person touches: the command palette (with commands
//! from the shared registry), `/model` switching the running session, the `/resume` picker,
//! overlays that pass typing on, the render cache (finished entries rendered once per width, no
//! redraw while idle), and cards (todos, failed bash, Markdown tables).

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
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_commands::CommandCall;
use dsh_commands::CommandResult;
use dsh_commands::CommandSpec;
use dsh_tui::Controller;
use dsh_tui::Start;
use dsh_tui::model::Entry;

fn controller(factory: &Arc<TestHost>, start: Start) -> Controller {
    factory.app(start).controller().unwrap()
}

fn idle(c: &Controller) -> bool {
    c.agent().status() == AgentStatus::Idle && !c.state.transcript.turn_open
}

async fn send(ui: &mut Controller, prompt: &str) {
    type_text(ui, prompt);
    ui.on_key(key(KeyCode::Enter));
    until(ui, "the turn to end", |c| {
        idle(c)
            && c.state
                .transcript
                .entries
                .iter()
                .any(|e| matches!(e, Entry::Assistant(_)))
    })
    .await;
}

fn screen(ui: &Controller, width: u16, height: u16) -> String {
    format!("{}", frame(&ui.state, width, height).backend())
}

fn notices(ui: &Controller) -> Vec<String> {
    ui.state
        .transcript
        .entries
        .iter()
        .filter_map(|e| match e {
            Entry::Notice { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_palette_completes_commands_and_model_names_and_model_switches_the_session_for_good() {
    let dir = common::workspace("palette");
    let factory = TestHost::new(&dir);
    factory.adapter.push_chunks(text_response("first"));
    factory.adapter.push_chunks(text_response("second"));
    let mut ui = controller(&factory, Start::New);
    send(&mut ui, "hello").await;

    type_text(&mut ui, "/mo");
    let palette = ui.state.palette.clone().expect("a palette for /mo");
    let labels: Vec<&str> = palette.items.iter().map(|i| i.label.as_str()).collect();
    assert_eq!(labels, ["/model [NAME]", "/mode native|code|both"]);
    let shown = screen(&ui, 80, 16);
    assert!(
        shown.contains("/model [NAME]") && shown.contains("switch this session's model"),
        "{shown}"
    );
    ui.on_key(key(KeyCode::Tab));
    assert_eq!(ui.state.editor.text(), "/model ");
    let models = ui.state.palette.clone().expect("model names after /model ");
    assert_eq!(models.title, "model");
    let names: Vec<&str> = models.items.iter().map(|i| i.label.as_str()).collect();
    assert_eq!(names, ["scripted-model", "scripted-pro"]);
    ui.on_key(key(KeyCode::Down));
    ui.on_key(key(KeyCode::Enter));
    assert_eq!(ui.state.model, "scripted-pro");
    assert!(
        notices(&ui).iter().any(|n| n.contains("scripted-pro")),
        "{:?}",
        notices(&ui)
    );
    assert!(screen(&ui, 80, 16).contains("scripted-pro"));

    type_text(&mut ui, "again");
    ui.on_key(key(KeyCode::Enter));
    until(&mut ui, "the second answer", |c| {
        idle(c)
            && c.state.transcript.entries.iter().any(|e| match e {
                Entry::Assistant(a) => format!("{:?}", a.parts).contains("second"),
                _ => false,
            })
    })
    .await;
    let requests = factory.adapter.requests();
    assert_eq!(requests[0].model, "scripted-model");
    assert_eq!(
        requests.last().unwrap().model,
        "scripted-pro",
        "the running session switched"
    );
    // An unknown name is refused and says what is known.
    type_text(&mut ui, "/model nope");
    ui.on_key(key(KeyCode::Enter));
    assert!(
        notices(&ui)
            .last()
            .unwrap()
            .contains("unknown model nope; known: scripted-model, scripted-pro")
    );

    // The switch is part of the session: reopened from its log, it keeps asking scripted-pro.
    let id = ui.agent().id().to_owned();
    ui.shutdown().await;
    drop(ui);
    factory.adapter.push_chunks(text_response("third"));
    let mut resumed = controller(&factory, Start::Resume(Some(id)));
    assert_eq!(resumed.state.model, "scripted-pro");
    send(&mut resumed, "once more").await;
    assert_eq!(
        factory.adapter.requests().last().unwrap().model,
        "scripted-pro",
        "the resumed session kept its model"
    );
}

#[tokio::test]
async fn registry_commands_are_in_the_palette_and_run_without_a_model_request() {
    let dir = common::workspace("registry-commands");
    let factory = TestHost::new(&dir);
    factory
        .commands
        .register(
            &factory.root,
            CommandSpec::new("greet", "Say hello", |call: CommandCall| async move {
                Ok(CommandResult::text(format!("hello {}", call.argument())))
            })
            .input("<name>"),
        )
        .unwrap();
    let mut ui = controller(&factory, Start::New);
    type_text(&mut ui, "/gr");
    let palette = ui.state.palette.clone().unwrap();
    assert_eq!(palette.items[0].label, "/greet <name>");
    assert_eq!(palette.items[0].detail, "Say hello");
    ui.on_key(key(KeyCode::Tab));
    type_text(&mut ui, "you");
    ui.on_key(key(KeyCode::Enter));
    until(&mut ui, "the command result", |c| {
        notices(c).iter().any(|n| n == "hello you")
    })
    .await;
    assert!(factory.adapter.requests().is_empty());
    // Help lists it too.
    type_text(&mut ui, "/help");
    ui.on_key(key(KeyCode::Enter));
    let help = ui.state.overlay.clone().unwrap();
    assert!(
        help.lines
            .iter()
            .any(|l| l.contains("/greet <name>") && l.contains("Say hello"))
    );
}

#[tokio::test]
async fn overlays_and_approvals_never_swallow_typing() {
    let dir = common::workspace("no-swallow");
    let factory = TestHost::new(&dir);
    let mut ui = controller(&factory, Start::New);
    type_text(&mut ui, "/help");
    ui.on_key(key(KeyCode::Enter));
    assert!(ui.state.overlay.is_some());
    type_text(&mut ui, "fix it");
    assert!(ui.state.overlay.is_none(), "typing closes the panel");
    assert_eq!(ui.state.editor.text(), "fix it", "and reaches the input");
    ui.handle(crossterm::event::Event::Paste(" please".into()));
    assert_eq!(ui.state.editor.text(), "fix it please");

    let ask = serde_json::json!({"command": "echo needs-approval"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_q", "bash", &ask, None));
    factory.adapter.push_chunks(text_response("ok"));
    ui.state.editor.clear();
    type_text(&mut ui, "go");
    ui.on_key(key(KeyCode::Enter));
    until(&mut ui, "the approval", |c| !c.state.approvals.is_empty()).await;
    ui.on_key(key(KeyCode::Char('z')));
    assert!(
        ui.state
            .hint
            .as_deref()
            .unwrap()
            .starts_with("answer the approval first")
    );
    assert!(screen(&ui, 90, 16).contains("answer the approval first"));
    ui.on_key(key(KeyCode::Char('y')));
    until(&mut ui, "the turn to end", idle).await;
    assert_eq!(
        ui.state.hint, None,
        "the note clears once the approval is answered, not on every later turn"
    );
}

/// "Allow for this session" (`a`), which the README and `/help` name, is offered in the
/// prompt and its note, and a later call of the same tool then runs without a prompt.
#[tokio::test]
async fn allow_for_the_session_is_offered_and_remembered() {
    let dir = common::workspace("allow-session");
    let factory = TestHost::new(&dir);
    let ask = serde_json::json!({"command": "echo needs-approval"}).to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_a", "bash", &ask, None));
    factory.adapter.push_chunks(text_response("ok"));
    factory
        .adapter
        .push_chunks(tool_call_response("call_b", "bash", &ask, None));
    factory.adapter.push_chunks(text_response("ok again"));
    let mut ui = controller(&factory, Start::New);
    type_text(&mut ui, "go");
    ui.on_key(key(KeyCode::Enter));
    until(&mut ui, "the approval", |c| !c.state.approvals.is_empty()).await;
    assert!(screen(&ui, 100, 16).contains("allow for this session"));
    ui.on_key(key(KeyCode::Char('z')));
    assert!(
        ui.state
            .hint
            .as_deref()
            .unwrap()
            .contains("a allow for this session"),
        "{:?}",
        ui.state.hint
    );
    ui.on_key(key(KeyCode::Char('a')));
    until(&mut ui, "the turn to end", idle).await;
    assert_eq!(ui.state.hint, None);
    type_text(&mut ui, "again");
    ui.on_key(key(KeyCode::Enter));
    until(&mut ui, "the second turn to end", |c| {
        idle(c) && c.state.approvals.is_empty() && factory.adapter.requests().len() >= 4
    })
    .await;
    assert!(ui.state.approvals.is_empty(), "no second prompt");
}

#[tokio::test]
async fn the_resume_picker_lists_filters_and_reopens() {
    let dir = common::workspace("picker");
    let factory = TestHost::new(&dir);
    factory.adapter.push_chunks(text_response("about apples"));
    factory.adapter.push_chunks(text_response("about pears"));
    let mut ui = controller(&factory, Start::New);
    send(&mut ui, "apples").await;
    let apples = ui.agent().id().to_owned();
    type_text(&mut ui, "/new");
    ui.on_key(key(KeyCode::Enter));
    send(&mut ui, "pears").await;
    let pears = ui.agent().id().to_owned();
    type_text(&mut ui, "/new");
    ui.on_key(key(KeyCode::Enter));

    type_text(&mut ui, "/resume");
    ui.on_key(key(KeyCode::Enter));
    let picker = ui.state.picker.clone().expect("the picker");
    let ids: Vec<&str> = picker.items.iter().map(|i| i.id.as_str()).collect();
    assert!(
        ids.contains(&apples.as_str()) && ids.contains(&pears.as_str()),
        "{ids:?}"
    );
    assert!(picker.items.iter().all(|i| i.here && i.when == "just now"));
    let shown = screen(&ui, 100, 20);
    assert!(shown.contains("resume a session"), "{shown}");
    assert!(shown.contains("just now"), "{shown}");
    // Typing filters (the id is matched too); enter reopens the selected one.
    type_text(&mut ui, &apples[apples.len() - 6..]);
    assert_eq!(ui.state.picker.as_ref().unwrap().visible().len(), 1);
    ui.on_key(key(KeyCode::Enter));
    assert!(ui.state.picker.is_none());
    assert_eq!(ui.agent().id(), apples);
    assert!(screen(&ui, 100, 20).contains("about apples"));
}

#[tokio::test]
async fn finished_entries_render_once_per_width_and_idle_ticks_draw_nothing() {
    let dir = common::workspace("render-cache");
    let factory = TestHost::new(&dir);
    factory
        .adapter
        .push_chunks(text_response("# Done\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"));
    let mut ui = controller(&factory, Start::New);
    send(&mut ui, "make a table").await;
    let first = screen(&ui, 60, 20);
    assert!(first.contains("│ a │ b │"), "{first}");
    let renders = ui.state.render_cache.borrow().renders();
    for _ in 0..5 {
        ui.tick();
        let _ = screen(&ui, 60, 20);
    }
    assert_eq!(
        ui.state.render_cache.borrow().renders(),
        renders,
        "no entry rendered again"
    );
    let _ = screen(&ui, 40, 20);
    assert!(
        ui.state.render_cache.borrow().renders() > renders,
        "a new width renders anew"
    );
    // Idle: nothing changes, so the event loop draws nothing.
    let _ = ui.take_dirty();
    ui.pump();
    ui.tick();
    assert!(!ui.take_dirty(), "an idle tick leaves the screen as it is");
    type_text(&mut ui, "x");
    assert!(ui.take_dirty());
}

#[tokio::test]
async fn cards_show_todos_descriptions_and_failures_without_fences() {
    let dir = common::workspace("cards");
    let factory = TestHost::new(&dir);
    let failing =
        serde_json::json!({"command": "echo oops >&2; exit 3", "description": "Fail on purpose"})
            .to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_f", "bash", &failing, None));
    // A call that cannot even start fails; its card shows the error text, unfenced.
    let broken = serde_json::json!({"command": "true", "workdir": "no-such-dir", "description": "Run nowhere"})
        .to_string();
    factory
        .adapter
        .push_chunks(tool_call_response("call_g", "bash", &broken, None));
    factory.adapter.push_chunks(text_response("It failed."));
    let mut ui = controller(&factory, Start::New);
    send(&mut ui, "fail").await;
    let shown = screen(&ui, 80, 30);
    assert!(shown.contains("Fail on purpose"), "{shown}");
    assert!(shown.contains("exit 3"), "{shown}");
    assert!(shown.contains("Run nowhere"), "{shown}");
    assert!(shown.contains("✗ $ true"), "{shown}");
    assert!(!shown.contains("```"), "no raw fences: {shown}");
}

fn user_texts(ui: &Controller) -> Vec<String> {
    ui.state
        .transcript
        .entries
        .iter()
        .filter_map(|e| match e {
            Entry::User(text) => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn at_paths_complete_as_the_context_spec_says_and_enter_on_a_complete_one_sends() {
    let dir = common::workspace("at-paths");
    let factory = TestHost::new(&dir);
    let ws = &factory.workspace;
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::create_dir_all(ws.join("my dir")).unwrap();
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(ws.join("src/domain.rs"), "\n").unwrap();
    std::fs::write(ws.join("my dir/notes.txt"), "n\n").unwrap();
    std::fs::write(ws.join(".hidden"), "h\n").unwrap();
    factory.adapter.push_chunks(text_response("read it"));
    factory.adapter.push_chunks(text_response("again"));
    let mut ui = controller(&factory, Start::New);

    // Fuzzy: the basename prefix ranks first; an `@` inside a word is no token.
    type_text(&mut ui, "mail me@ma");
    assert!(ui.state.completion.is_none());
    ui.state.editor.clear();
    type_text(&mut ui, "see @main");
    let items = ui.state.completion.clone().unwrap().items;
    assert_eq!(items[0], "@src/main.rs", "{items:?}");
    assert!(!items.iter().any(|i| i.contains(".hidden")));
    // Enter on a partial token completes it (a file gets a closing space)…
    ui.on_key(key(KeyCode::Enter));
    assert_eq!(ui.state.editor.text(), "see @src/main.rs ");
    assert!(ui.state.completion.is_none());

    // …a folder with a space is quoted and keeps completing inside…
    type_text(&mut ui, "and @my");
    ui.on_key(key(KeyCode::Tab));
    assert_eq!(ui.state.editor.text(), "see @src/main.rs and @\"my dir/");
    let inside = ui.state.completion.clone().unwrap().items;
    assert_eq!(inside, ["@\"my dir/notes.txt\""]);
    ui.on_key(key(KeyCode::Tab));
    assert_eq!(
        ui.state.editor.text(),
        "see @src/main.rs and @\"my dir/notes.txt\" "
    );

    // …and Enter on a token that is already complete sends the prompt.
    type_text(&mut ui, "@src/main.rs");
    assert!(ui.state.completion.is_some());
    ui.on_key(key(KeyCode::Enter));
    until(&mut ui, "the turn to end", |c| {
        idle(c) && !user_texts(c).is_empty()
    })
    .await;
    assert_eq!(
        user_texts(&ui),
        ["see @src/main.rs and @\"my dir/notes.txt\" @src/main.rs"]
    );
    // Path-only: the file's content is never attached or sent.
    let sent = serde_json::to_string(&factory.adapter.requests()[0].messages).unwrap();
    assert!(!sent.contains("fn main()"), "{sent}");
}

/// `/rewind` alone opens a picker of the session's prompts, then files, conversation or both;
/// `both` puts the files back to before that prompt and moves the view to a fork of the
/// conversation there, the session itself kept as it was.
#[tokio::test]
async fn rewind_picks_a_prompt_then_the_parts_and_switches_to_the_fork() {
    let dir = common::workspace("rewind-picker");
    let factory = TestHost::with_plugins(&dir, &["checkpoints"]);
    let file = |name: &str| factory.workspace.join(format!("{name}.txt"));
    std::fs::write(file("zero"), "zero\n").unwrap();
    for (n, text) in [(1, "one"), (2, "two")] {
        let arguments =
            serde_json::json!({"file_path": file(text), "content": format!("{text}\n")});
        factory.adapter.push_chunks(tool_call_response(
            &format!("call_{n}"),
            "write",
            &arguments.to_string(),
            None,
        ));
        factory
            .adapter
            .push_chunks(text_response(&format!("wrote {text}")));
    }
    let mut ui = controller(&factory, Start::New);
    send(&mut ui, "write one").await;
    until(&mut ui, "the first answer", |c| {
        idle(c) && screen(c, 100, 30).contains("wrote one")
    })
    .await;
    send(&mut ui, "write two").await;
    until(&mut ui, "the second answer", |c| {
        idle(c) && screen(c, 100, 30).contains("wrote two")
    })
    .await;
    assert!(
        file("one").exists() && file("two").exists(),
        "{}",
        screen(&ui, 100, 30)
    );
    let original = ui.agent().id().to_owned();

    type_text(&mut ui, "/rewind");
    ui.on_key(key(KeyCode::Enter));
    let prompts = ui.state.choices.clone().expect("the prompt picker");
    let labels: Vec<&str> = prompts.items.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, vec!["1. write one", "2. write two"]);
    let shown = screen(&ui, 100, 20);
    assert!(
        shown.contains("/rewind") && shown.contains("2. write two"),
        "{shown}"
    );
    ui.on_key(key(KeyCode::Down));
    ui.on_key(key(KeyCode::Enter));
    let parts = ui.state.choices.clone().expect("the parts picker");
    let labels: Vec<&str> = parts.items.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, vec!["files", "conversation", "both"]);
    ui.on_key(key(KeyCode::Down));
    ui.on_key(key(KeyCode::Down));
    ui.on_key(key(KeyCode::Enter));
    assert!(ui.state.choices.is_none());
    until(&mut ui, "the switch to the fork", |c| {
        c.agent().id() != original
            && notices(c)
                .iter()
                .any(|n| n.contains("Rewound the conversation to before prompt 2"))
    })
    .await;
    assert!(
        file("one").exists() && !file("two").exists(),
        "the files are back to before prompt 2"
    );
    let texts = user_texts(&ui);
    assert!(texts.iter().any(|t| t == "write one"), "{texts:?}");
    assert!(!texts.iter().any(|t| t == "write two"), "{texts:?}");
    let notice = notices(&ui).join("\n");
    assert!(
        notice.contains("Rewound the files to before turn 2"),
        "{notice}"
    );
    assert!(
        notice.contains(&original),
        "names the kept session: {notice}"
    );
    // The session itself still holds both prompts.
    let kept = factory.sessions().store().load(&original).unwrap();
    let prompts = kept
        .events
        .iter()
        .filter(|e| e.kind == "turn/start")
        .count();
    assert_eq!(prompts, 2);
    // Esc closes the picker without running anything.
    type_text(&mut ui, "/rewind");
    ui.on_key(key(KeyCode::Enter));
    assert!(ui.state.choices.is_some());
    ui.on_key(key(KeyCode::Esc));
    assert!(ui.state.choices.is_none());
}
