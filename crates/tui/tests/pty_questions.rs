//! The real `dsh` binary in a pseudo-terminal, with the shipped defaults (no plugin enabled
//! by hand): `ask_user_question` is an inline question with its options, and `/plan` then
//! `exit_plan_mode` shows the plan review, whose approval leaves plan mode. Skips with a
//! notice when the binary is not built.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::pty::Pty;
use common::pty::target_dir;
use dsh_testkit::chat::ChatServer;
use dsh_testkit::chat::Reply;
use serde_json::Value;
use serde_json::json;

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

fn system(request: &Value) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .map(|m| m["content"].to_string())
        .collect()
}

fn tool_results(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_and_the_plan_review_are_answered_inline() {
    let Some(bin) = dsh_bin() else { return };
    let dir = PathBuf::from("/tmp/dsh-tui-tests/pty-questions");
    let _ = std::fs::remove_dir_all(&dir);
    let (project, home) = (dir.join("project"), dir.join("home"));
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        "[plugins.session-title]\nenabled = false\n",
    )
    .unwrap();
    let question = json!({"questions": [{"id": "mode", "question": "Which mode should I use?",
        "header": "Choose Mode",
        "options": [{"label": "Fast (Recommended)", "description": "fewer checks"}, {"label": "Safe"}]}]});
    let plan = "# Tidy the notes\n\n1. Sort them by date.\n2. Drop duplicates.";
    let server = ChatServer::start(vec![
        Reply::tool_call("call_q", "ask_user_question", question),
        Reply::text("Going the safe way."),
        Reply::tool_call("call_p", "exit_plan_mode", json!({ "plan": plan })),
        Reply::text("Plan approved; sorting now."),
    ])
    .await
    .unwrap();
    let env = vec![
        ("DEEPSEEK_BASE_URL", server.url()),
        ("DEEPSEEK_API_KEY", "test-key".to_owned()),
        ("DSH_HOME", home.to_string_lossy().into_owned()),
        ("HOME", dir.to_string_lossy().into_owned()),
    ];
    let screens = tokio::task::spawn_blocking(move || {
        let mut pty = Pty::spawn(&bin, &[], &project, &env);
        pty.wait_for("ask anything");
        pty.type_text("pick a mode");
        pty.send("\r");
        let asked = pty.wait_for("Which mode should I use?");
        pty.wait_for("type an answer");
        // A key that is no answer gets the hint, and the question stays.
        pty.send("x");
        pty.wait_for("answer the question first");
        pty.send("2");
        pty.wait_for("Going the safe way.");
        pty.type_text("/plan");
        pty.send("\r");
        pty.wait_for("Plan mode on.");
        pty.type_text("make a plan");
        pty.send("\r");
        let review = pty.wait_for("Approve this plan and leave plan mode?");
        pty.wait_for("Drop duplicates.");
        // Approve is the first option.
        pty.send("\r");
        pty.wait_for("Plan approved; sorting now.");
        pty.send("\u{3}");
        pty.wait_for("press ctrl-c again to quit");
        pty.send("\u{3}");
        assert!(pty.wait_exit().success());
        pty.assert_restored();
        (asked, review)
    })
    .await
    .unwrap();
    assert!(screens.0.contains("Choose Mode"), "{}", screens.0);
    assert!(screens.0.contains("1. Fast (Recommended)"), "{}", screens.0);
    assert!(screens.0.contains("fewer checks"), "{}", screens.0);
    assert!(screens.0.contains("2. Safe"), "{}", screens.0);
    assert!(screens.1.contains("Plan review"), "{}", screens.1);
    assert!(screens.1.contains("# Tidy the notes"), "{}", screens.1);
    assert!(screens.1.contains("Keep planning"), "{}", screens.1);

    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{requests:?}");
    assert_eq!(
        tool_results(&requests[1]),
        [r#"{"answers":[{"id":"mode","selected":["Safe"]}]}"#]
    );
    assert!(!system(&requests[1]).contains("Plan mode is active."));
    assert!(system(&requests[2]).contains("Plan mode is active."));
    let results = tool_results(&requests[3]);
    assert_eq!(
        results.last().map(String::as_str),
        Some("Plan approved — plan mode exited; carry out the plan starting with your next step.")
    );
    assert!(
        !system(&requests[3]).contains("Plan mode is active."),
        "the approved plan is carried out outside plan mode"
    );
}
