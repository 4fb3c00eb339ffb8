//! The real `dsh` binary in a pseudo-terminal against a recording chat-completions server:
//! `@file` completion, `/model` from the palette (the next request uses it), the `/resume`
//! picker, and what stays in the terminal's scrollback after exit (the conversation and the
//! command that reopens it). Skips with a notice when the binary is not built.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::path::PathBuf;

use common::pty::Pty;
use common::pty::target_dir;
use dsh_testkit::chat::ChatServer;
use dsh_testkit::chat::Reply;
use serde_json::Value;

fn dsh_bin() -> Option<PathBuf> {
    let bin = std::env::var_os("DSH_BIN").map_or_else(|| target_dir().join("dsh"), PathBuf::from);
    if bin.exists() {
        Some(bin)
    } else {
        eprintln!(
            "notice: {} is absent; build it (cargo build -p dsh) to run this test",
            bin.display()
        );
        None
    }
}

/// A project folder and a dsh home under `/tmp/dsh-tui-tests/<name>`.
fn dirs(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let dir = PathBuf::from("/tmp/dsh-tui-tests").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let project = dir.join("project");
    let home = dir.join("home");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    // Every model request is the conversation's: no title side request.
    std::fs::write(
        home.join("config.toml"),
        "[plugins.session-title]\nenabled = false\n",
    )
    .unwrap();
    (dir, project, home)
}

fn env(server: &ChatServer, dir: &Path, home: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("DEEPSEEK_BASE_URL", server.url()),
        ("DEEPSEEK_API_KEY", "test-key".to_owned()),
        ("DSH_HOME", home.to_string_lossy().into_owned()),
        ("HOME", dir.to_string_lossy().into_owned()),
    ]
}

fn user_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn quit(pty: &mut Pty) {
    pty.send("\u{3}");
    pty.wait_for("press ctrl-c again to quit");
    pty.send("\u{3}");
    assert!(pty.wait_exit().success());
    pty.assert_restored();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_file_completes_in_the_terminal_and_sends_the_path_only() {
    let Some(bin) = dsh_bin() else { return };
    let (dir, project, home) = dirs("pty-at-file");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(project.join("src/main.rs"), "fn secret_body() {}\n").unwrap();
    let server = ChatServer::start(vec![Reply::text("It is the entry point.")])
        .await
        .unwrap();
    let env = env(&server, &dir, &home);
    let screen = tokio::task::spawn_blocking(move || {
        let mut pty = Pty::spawn(&bin, &[], &project, &env);
        pty.wait_for("ask anything");
        pty.type_text("what is @mai");
        let popup = pty.wait_for("@src/main.rs");
        pty.send("\t");
        pty.wait_for("what is @src/main.rs");
        pty.send("\r");
        let done = pty.wait_for("It is the entry point.");
        quit(&mut pty);
        (popup, done)
    })
    .await
    .unwrap();
    assert!(screen.0.contains("@src/main.rs"), "{}", screen.0);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = user_text(&requests[0]);
    assert!(sent.contains("what is @src/main.rs"), "{sent}");
    assert!(!sent.contains("secret_body"), "path only: {sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_palette_and_model_switch_the_running_session() {
    let Some(bin) = dsh_bin() else { return };
    let (dir, project, home) = dirs("pty-model");
    let server = ChatServer::start(vec![Reply::text("one"), Reply::text("two")])
        .await
        .unwrap();
    let env = env(&server, &dir, &home);
    let screens = tokio::task::spawn_blocking(move || {
        let mut pty = Pty::spawn(&bin, &["first"], &project, &env);
        pty.wait_for("one");
        pty.type_text("/mo");
        let palette = pty.wait_for("/mode native|code|both");
        pty.send("\t");
        let models = pty.wait_for("deepseek-v4-pro");
        // Down to the second model, Enter switches.
        pty.send("\u{1b}[B");
        pty.send("\r");
        let switched = pty.wait_for("model: deepseek-v4-pro (from the next request)");
        pty.type_text("second");
        pty.send("\r");
        pty.wait_for("two");
        quit(&mut pty);
        (palette, models, switched)
    })
    .await
    .unwrap();
    assert!(screens.0.contains("/model [NAME]"), "{}", screens.0);
    assert!(
        screens.0.contains("switch this session's model"),
        "{}",
        screens.0
    );
    assert!(screens.1.contains("deepseek-v4-flash"), "{}", screens.1);
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0]["model"], "deepseek-v4-flash");
    assert_eq!(
        requests[1]["model"], "deepseek-v4-pro",
        "the same session, the new model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrollback_keeps_the_conversation_and_the_resume_picker_reopens_it() {
    let Some(bin) = dsh_bin() else { return };
    let (dir, project, home) = dirs("pty-resume");
    let server = ChatServer::start(vec![
        Reply::text("Apples are **red**."),
        Reply::text("Still red."),
    ])
    .await
    .unwrap();
    let env = env(&server, &dir, &home);
    let (after_exit, picker, reopened) = tokio::task::spawn_blocking(move || {
        // `dsh "prompt"` opens the UI with that first prompt.
        let mut first = Pty::spawn(&bin, &["tell me about apples"], &project, &env);
        first.wait_for("Apples are red.");
        quit(&mut first);
        let after_exit = first.contents();

        let mut second = Pty::spawn(&bin, &[], &project, &env);
        second.wait_for("ask anything");
        second.type_text("/resume");
        second.send("\r");
        let picker = second.wait_for("resume a session");
        second.send("\r");
        let reopened = second.wait_for("session resumed from its log");
        second.type_text("and now?");
        second.send("\r");
        second.wait_for("Still red.");
        quit(&mut second);
        (after_exit, picker, reopened)
    })
    .await
    .unwrap();
    // Back on the normal screen: the conversation, then how to come back.
    assert!(
        after_exit.contains("› tell me about apples"),
        "{after_exit}"
    );
    assert!(after_exit.contains("Apples are red."), "{after_exit}");
    let hint = after_exit
        .lines()
        .find(|l| l.contains("dsh resume "))
        .unwrap_or_else(|| panic!("no resume hint: {after_exit}"));
    let id = hint.split("dsh resume ").nth(1).unwrap().trim().to_owned();
    assert!(picker.contains("tell me about apples"), "{picker}");
    assert!(picker.contains("just now"), "{picker}");
    assert!(reopened.contains("Apples are red."), "{reopened}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    // The reopened session continues the stored conversation (same history, same id).
    assert!(user_text(&requests[1]).contains("tell me about apples"));
    assert!(user_text(&requests[1]).contains("and now?"));
    let stored = std::fs::read_dir(home.join("sessions")).unwrap().count();
    assert!(stored >= 1);
    assert!(!id.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_models_escape_sequences_reach_neither_the_live_view_nor_the_scrollback() {
    let Some(bin) = dsh_bin() else { return };
    let (dir, project, home) = dirs("pty-escapes");
    // OSC 52 (clipboard), OSC 0 and 2 (title), a screen clear, C1 CSI and OSC, a bidi override.
    let hostile = "Done \u{1b}]52;c;Y3VybCBldmlsLmV4YW1wbGV8c2g=\u{7}\u{1b}]0;owned\u{7}\u{1b}]2;owned\u{1b}\\\u{1b}[2J\u{9b}2J\u{9d}0;owned\u{9c}\u{202e}tail-marker";
    let server = ChatServer::start(vec![Reply::text(hostile)]).await.unwrap();
    let env = env(&server, &dir, &home);
    let (live, raw, after_exit) = tokio::task::spawn_blocking(move || {
        let mut pty = Pty::spawn(&bin, &["say it"], &project, &env);
        let live = pty.wait_for("tail-marker");
        quit(&mut pty);
        (live, pty.raw(), pty.contents())
    })
    .await
    .unwrap();
    let raw = String::from_utf8_lossy(&raw);
    for obeyed in ["\u{1b}]", "\u{9b}", "\u{9d}", "\u{9c}", "\u{202e}"] {
        assert!(
            !raw.contains(obeyed),
            "{obeyed:?} reached the terminal: {raw:?}"
        );
    }
    assert!(live.contains("\\u001b]52;c;"), "{live}");
    assert!(after_exit.contains("\\u001b]52;c;"), "{after_exit}");
}

/// A 1×1 red PNG.
const RED_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
    0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_mentioned_by_path_reaches_an_image_capable_model() {
    let Some(bin) = dsh_bin() else { return };
    for (model, expect_image) in [("vision-test", true), ("deepseek-v4-flash", false)] {
        let (dir, project, home) = dirs(&format!("pty-image-{expect_image}"));
        std::fs::write(project.join("red.png"), RED_PNG).unwrap();
        std::fs::write(
            home.join("config.toml"),
            format!(
                "[plugins.session-title]\nenabled = false\n\n[model]\nname = \"{model}\"\n\n[[model.catalog]]\nid = \"vision-test\"\ninput = [\"text\", \"image\"]\n"
            ),
        )
        .unwrap();
        let server = ChatServer::start(vec![Reply::text("A red pixel.")])
            .await
            .unwrap();
        let env = env(&server, &dir, &home);
        let bin = bin.clone();
        tokio::task::spawn_blocking(move || {
            let mut pty = Pty::spawn(&bin, &[], &project, &env);
            pty.wait_for("ask anything");
            pty.type_text("what is in @red.png");
            pty.send(" ");
            pty.send("\r");
            pty.wait_for("A red pixel.");
            quit(&mut pty);
        })
        .await
        .unwrap();
        let requests = server.requests();
        let body = requests[0].to_string();
        assert!(body.contains("what is in @red.png"), "{body}");
        assert_eq!(
            body.contains("data:image/png;base64,"),
            expect_image,
            "{model}: {body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_edit_is_reported_in_the_ui_with_its_location() {
    let Some(bin) = dsh_bin() else { return };
    let (dir, project, home) = dirs("pty-reload");
    let server = ChatServer::start(vec![]).await.unwrap();
    let env = env(&server, &dir, &home);
    let config = home.join("config.toml");
    let screen = tokio::task::spawn_blocking(move || {
        let mut pty = Pty::spawn(&bin, &[], &project, &env);
        pty.wait_for("ask anything");
        // A broken edit: refused with file:line, the running configuration stays.
        std::fs::write(
            &config,
            "[plugins.session-title]\nenabled = false\n\n[plugins.web]\nenabled = \"nope\"\n",
        )
        .unwrap();
        let refused = pty.wait_for("configuration not reloaded");
        // A good edit is applied and said so.
        std::fs::write(
            &config,
            "[plugins.session-title]\nenabled = false\n\n[plugins.web]\nenabled = false\n",
        )
        .unwrap();
        pty.wait_for("configuration reloaded: ");
        quit(&mut pty);
        refused
    })
    .await
    .unwrap();
    assert!(screen.contains("config.toml:5"), "{screen}");
    assert!(screen.contains("plugins.web.enabled"), "{screen}");
}
