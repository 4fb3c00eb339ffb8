//! The UI in a real pseudo-terminal: keys go in as bytes, the screen is read back through a
//! VT100 parser, and the session log on disk is checked afterwards.
//!
//! Two programs are driven: the crate's `tui_scripted` example (scripted model, real tools,
//! real event loop) and the real `dsh` binary against the replay model server. `dsh` is wired
//! by the CLI crate, so that test skips with a notice when `target/debug/dsh` is absent or
//! does not offer the UI yet.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::path::PathBuf;

use common::pty::Pty;
use common::pty::target_dir;
use serde_json::Value;
use serde_json::json;

fn session_events(home: &Path) -> Vec<Value> {
    let mut logs = Vec::new();
    let mut stack = vec![home.join("sessions")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                logs.push(path);
            }
        }
    }
    assert_eq!(
        logs.len(),
        1,
        "expected one session log under {}: {logs:?}",
        home.display()
    );
    std::fs::read_to_string(&logs[0])
        .unwrap()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .filter(|v: &Value| v.get("type").is_some_and(|t| t != "assistant/chunk"))
        .collect()
}

fn turn_ends(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| e["data"]["reason"].clone())
        .collect()
}

fn tool_result_text(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .map(|e| {
            e["data"]["message"]["content"][0]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

#[test]
fn the_scripted_ui_runs_a_turn_with_an_approval_in_a_real_terminal() {
    let example = target_dir().join("examples/tui_scripted");
    if !example.exists() {
        eprintln!(
            "notice: {} not built (cargo test builds examples); skipping",
            example.display()
        );
        return;
    }
    let dir = PathBuf::from("/tmp/dsh-tui-tests/pty-scripted");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("project")).unwrap();
    let mut pty = Pty::spawn(&example, &[dir.to_str().unwrap()], &dir, &[]);
    pty.wait_for("ask anything");
    pty.type_text("run the probe");
    pty.send("\r");
    let screen = pty.wait_for("approval needed");
    assert!(screen.contains("› run the probe"), "{screen}");
    assert!(screen.contains("$ echo needs-approval"), "{screen}");
    assert!(screen.contains("[y] allow once"), "{screen}");
    pty.send("y");
    let screen = pty.wait_for("All done.");
    assert!(screen.contains("✓ $ echo needs-approval"), "{screen}");
    assert!(screen.contains("│ needs-approval"), "{screen}");
    pty.send("\u{3}");
    pty.wait_for("press ctrl-c again to quit");
    pty.send("\u{3}");
    assert!(pty.wait_exit().success());
    pty.assert_restored();
    let events = session_events(&dir.join("home"));
    assert_eq!(turn_ends(&events), [json!({"kind": "completed"})]);
    assert_eq!(tool_result_text(&events), ["needs-approval\n"]);
}

#[test]
fn sigterm_restores_the_terminal() {
    let example = target_dir().join("examples/tui_scripted");
    if !example.exists() {
        eprintln!("notice: {} not built; skipping", example.display());
        return;
    }
    let dir = PathBuf::from("/tmp/dsh-tui-tests/pty-sigterm");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("project")).unwrap();
    let mut pty = Pty::spawn(&example, &[dir.to_str().unwrap()], &dir, &[]);
    pty.wait_for("ask anything");
    let pid = pty.child.process_id().unwrap();
    let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    assert!(pty.wait_exit().success());
    pty.assert_restored();
}

/// `dsh` in a project folder against the replay model server: the prompt asks for a sandbox
/// escalation, the person approves it in the UI, and the log records the call and the turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dsh_in_a_terminal_against_the_replay_server() {
    // `DSH_BIN` points at another build of the binary (e.g. a release build).
    let bin = std::env::var_os("DSH_BIN").map_or_else(|| target_dir().join("dsh"), PathBuf::from);
    if !bin.exists() {
        eprintln!(
            "notice: {} is absent; build it (cargo build -p dsh) to run this test",
            bin.display()
        );
        return;
    }
    let help = std::process::Command::new(&bin)
        .arg("--help")
        .output()
        .unwrap();
    if !String::from_utf8_lossy(&help.stdout).contains("resume") {
        eprintln!(
            "notice: {} has no interactive UI wired yet (no `resume` command); skipping",
            bin.display()
        );
        return;
    }
    let dir = PathBuf::from("/tmp/dsh-tui-tests/pty-dsh");
    let _ = std::fs::remove_dir_all(&dir);
    let project = dir.join("project");
    let home = dir.join("home");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    // The replay script holds only the main conversation: no title side request.
    std::fs::write(
        home.join("config.toml"),
        "[plugins.session-title]\nenabled = false\n",
    )
    .unwrap();
    let outside = dir.join("outside.txt");
    let prompt = "write the outside file";
    let command = format!(
        "printf 'escalated\\n' > {} && cat {}",
        outside.display(),
        outside.display()
    );
    let arguments = json!({
        "command": command,
        "description": "Write outside the workspace",
        "sandbox_permissions": "danger-full-access",
        "justification": "the user asked to write a file outside the workspace"
    });
    let spec = json!({
        "suite": "acp",
        "name": "tui-e2e",
        "sessions": [{"session": 0, "first_user_text": prompt}],
    });
    let model = json!([
        {"kind": "response", "index": 0, "content": null, "finish_reason": "tool_calls",
         "tool_calls": [{"id": "call_esc", "name": "bash", "arguments": arguments.to_string()}],
         "usage": {"prompt_tokens": 1500, "completion_tokens": 40, "total_tokens": 1540,
                   "prompt_cache_hit_tokens": 1200, "prompt_cache_miss_tokens": 300}},
        {"kind": "response", "index": 1, "content": "The file is written.", "finish_reason": "stop",
         "usage": {"prompt_tokens": 1600, "completion_tokens": 8, "total_tokens": 1608,
                   "prompt_cache_hit_tokens": 1500, "prompt_cache_miss_tokens": 100}}
    ]);
    let scenario = dsh_testkit::scenario::Scenario::from_parts(
        serde_json::from_value(spec).unwrap(),
        serde_json::from_value(model).unwrap(),
    );
    let server = dsh_testkit::replay::ReplayServer::start(
        &scenario,
        std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        Some(project.clone()),
    )
    .await
    .unwrap();
    let env = [
        ("DEEPSEEK_BASE_URL", server.url()),
        ("DEEPSEEK_API_KEY", "test-key".to_owned()),
        ("DSH_HOME", home.to_string_lossy().into_owned()),
        ("DSH_PERMISSION_MODE", "workspace-write".to_owned()),
        ("HOME", dir.to_string_lossy().into_owned()),
    ];
    let result = tokio::task::spawn_blocking(move || {
        let mut pty = Pty::spawn(&bin, &[], &project, &env);
        pty.wait_for("ask anything");
        pty.type_text(prompt);
        pty.send("\r");
        let screen = pty.wait_for("approval needed");
        pty.send("y");
        let done = pty.wait_for("The file is written.");
        pty.send("\u{3}");
        pty.send("\u{3}");
        let status = pty.wait_exit();
        pty.assert_restored();
        (screen, done, status.success())
    })
    .await
    .unwrap();
    let (approval_screen, done_screen, exited) = result;
    eprintln!("approval screen:\n{approval_screen}\nfinal screen:\n{done_screen}");
    assert!(
        approval_screen.contains("bash wants to run"),
        "{approval_screen}"
    );
    assert!(done_screen.contains("│ escalated"), "{done_screen}");
    assert!(done_screen.contains("cache"), "{done_screen}");
    assert!(exited);
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "escalated\n");
    let events = session_events(&home);
    assert_eq!(turn_ends(&events), [json!({"kind": "completed"})]);
    assert_eq!(tool_result_text(&events).len(), 1);
    assert!(
        tool_result_text(&events)[0].contains("escalated"),
        "{events:?}"
    );
    assert!(server.unanswered().is_empty(), "{:?}", server.unanswered());
}

#[test]
fn without_a_terminal_it_points_to_dsh_exec_instead_of_drawing() {
    let example = target_dir().join("examples/tui_scripted");
    if !example.exists() {
        eprintln!("notice: {} not built; skipping", example.display());
        return;
    }
    let dir = PathBuf::from("/tmp/dsh-tui-tests/no-tty");
    let _ = std::fs::remove_dir_all(&dir);
    let output = std::process::Command::new(&example)
        .arg(&dir)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        output.stdout.is_empty(),
        "drew something: {:?}",
        output.stdout
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(dsh_tui::NOT_A_TERMINAL), "{stderr}");
}
