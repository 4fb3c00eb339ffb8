//! The stable ACP v1 surface through the real `dsh acp`, one test per method or behaviour:
//! `session/resume`, `session/close`, `session/delete`, `logout`, `$/cancel_request`, embedded
//! resources, `messageId`, the order of updates around the answers that create sessions, the
//! remembered "allow for this session", the `plan_mode` boolean option and `edit`'s locations.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;

use serde_json::Value;
use serde_json::json;
use support::Acp;
use support::model_server;
use support::sse;

const NO_TITLES: &str = "[plugins.session-title]\nenabled = false\n";

fn workspace(config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".dsh")).unwrap();
    std::fs::write(dir.path().join(".dsh/config.toml"), config).unwrap();
    dir
}

async fn initialize(acp: &mut Acp) -> Value {
    acp.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )
    .await
}

async fn new_session(acp: &mut Acp, id: u64, cwd: &Path) -> String {
    let created = acp
        .request(id, "session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    created["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned()
}

fn prompt(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

/// The position of the answer to request `id` among the frames.
fn answer_index(frames: &[Value], id: u64) -> usize {
    frames
        .iter()
        .position(|f| f["id"] == json!(id) && f.get("method").is_none())
        .unwrap_or_else(|| panic!("no answer to {id}"))
}

fn updates_of<'a>(frames: &'a [Value], kind: &str) -> Vec<&'a Value> {
    frames
        .iter()
        .filter(|f| {
            f["method"] == "session/update" && f["params"]["update"]["sessionUpdate"] == kind
        })
        .collect()
}

fn bash_call(id: &str, command: &str) -> String {
    let arguments = json!({"command": command, "description": "Say hello"}).to_string();
    sse(
        &[
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
            "function": {"name": "bash", "arguments": arguments}}]}),
        ],
        "tool_calls",
    )
}

/// A workspace whose Claude Code `PreToolUse` hook asks before every `bash` call (the hook
/// files live in the project, which the home configuration trusts), under `workspace-write`
/// so the approval policy asks the client.
fn asking_workspace(home: &Path) -> tempfile::TempDir {
    let work = workspace(&format!(
        "{NO_TITLES}\n[plugins.sandbox]\nmode = \"workspace-write\"\n"
    ));
    let root = work.path().canonicalize().unwrap();
    let hook = root.join("ask.sh");
    std::fs::write(
        &hook,
        "#!/bin/sh\ncat >/dev/null\necho '{\"hookSpecificOutput\": {\"hookEventName\": \"PreToolUse\", \"permissionDecision\": \"ask\", \"permissionDecisionReason\": \"a human must look\"}}'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        root.join("hooks.json"),
        json!({"hooks": {"PreToolUse": [{"matcher": "bash", "hooks": [{"type": "command", "command": hook}]}]}}).to_string(),
    )
    .unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[plugins.hooks-claude-code]\nconfig_path = \"hooks.json\"\n\n[projects.{}]\ntrust = \"trusted\"\n",
            json!(root.to_string_lossy())
        ),
    )
    .unwrap();
    work
}

fn is_permission_request(frame: &Value) -> bool {
    frame["method"] == "session/request_permission"
}

fn bwrap_missing() -> bool {
    if Path::new("/usr/bin/bwrap").exists() {
        return false;
    }
    eprintln!("SKIPPED: bubblewrap is not installed (workspace-write runs bash in it)");
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_advertises_the_stable_methods_dsh_serves() {
    let (url, _bodies) = model_server(vec![]).await;
    let work = workspace(NO_TITLES);
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut acp = Acp::start(&cwd, home.path(), &url);
    let init = initialize(&mut acp).await;
    let capabilities = &init["result"]["agentCapabilities"];
    let sessions = &capabilities["sessionCapabilities"];
    for method in ["list", "resume", "close", "delete"] {
        assert_eq!(sessions[method], json!({}), "{method}: {init}");
    }
    assert_eq!(capabilities["auth"]["logout"], json!({}), "{init}");
    assert_eq!(
        capabilities["promptCapabilities"]["embeddedContext"], true,
        "{init}"
    );
    acp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_resume_reattaches_without_replay_and_announces_commands_after_its_answer() {
    let (url, bodies) = model_server(vec![
        sse(&[json!({"content": "first answer"})], "stop"),
        sse(&[json!({"content": "second answer"})], "stop"),
    ])
    .await;
    let work = workspace(NO_TITLES);
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut first = Acp::start(&cwd, home.path(), &url);
    initialize(&mut first).await;
    let id = new_session(&mut first, 2, &cwd).await;
    let answer = first.request(3, "session/prompt", prompt(&id, "one")).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    first.stop().await;

    let mut second = Acp::start(&cwd, home.path(), &url);
    initialize(&mut second).await;
    let unknown = second
        .request(
            2,
            "session/resume",
            json!({"sessionId": "no-such-session", "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let resumed = second
        .request(
            3,
            "session/resume",
            json!({"sessionId": id, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert!(
        resumed["result"]["modes"]["currentModeId"].is_string(),
        "{resumed}"
    );
    assert_eq!(
        resumed["result"]["configOptions"][0]["id"], "model",
        "{resumed}"
    );
    let answered = second
        .request(4, "session/prompt", prompt(&id, "two"))
        .await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    let at = answer_index(&second.frames, 3);
    assert!(
        second.frames[..at]
            .iter()
            .all(|f| f["method"] != "session/update"),
        "nothing for the session before the answer that resumed it: {:#?}",
        &second.frames[..at]
    );
    let said: String = updates_of(&second.frames, "agent_message_chunk")
        .iter()
        .filter_map(|f| f["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(
        said, "second answer",
        "resume does not replay the conversation"
    );
    assert!(
        second.frames[at..]
            .iter()
            .any(|f| f["params"]["update"]["sessionUpdate"] == "available_commands_update"),
        "the commands are announced after resume"
    );
    second.stop().await;
    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2);
    assert!(
        bodies[1].to_string().contains("first answer"),
        "the resumed session keeps its history: {}",
        bodies[1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_close_cancels_a_waiting_prompt_and_frees_the_session() {
    if bwrap_missing() {
        return;
    }
    let (url, _bodies) = model_server(vec![
        bash_call("call_1", "echo HELLO"),
        sse(&[json!({"content": "stopped"})], "stop"),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let work = asking_workspace(home.path());
    let cwd = work.path().canonicalize().unwrap();
    let mut acp = Acp::start(&cwd, home.path(), &url);
    initialize(&mut acp).await;
    let id = new_session(&mut acp, 2, &cwd).await;
    acp.send_request(3, "session/prompt", prompt(&id, "use bash"))
        .await;
    let asked = acp.until(is_permission_request).await;
    let closed = acp
        .request(4, "session/close", json!({"sessionId": id}))
        .await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    let answered = acp.response(3).await;
    assert_eq!(answered["result"]["stopReason"], "cancelled", "{answered}");
    assert!(
        acp.frames
            .iter()
            .any(|f| f["method"] == "$/cancel_request" && f["params"]["requestId"] == asked["id"]),
        "the permission request is withdrawn"
    );
    let after = acp.request(5, "session/prompt", prompt(&id, "again")).await;
    assert_eq!(after["error"]["code"], -32602, "{after}");
    assert!(
        after["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown session"),
        "{after}"
    );
    let again = acp
        .request(6, "session/close", json!({"sessionId": id}))
        .await;
    assert_eq!(again["error"]["code"], -32002, "closing twice: {again}");
    // Closed, not deleted: the same process may load it again.
    let loaded = acp
        .request(
            7,
            "session/load",
            json!({"sessionId": id, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    acp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_request_cancels_a_prompt_and_withdraws_its_permission_request() {
    if bwrap_missing() {
        return;
    }
    let (url, _bodies) = model_server(vec![
        bash_call("call_1", "echo HELLO"),
        sse(&[json!({"content": "after"})], "stop"),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let work = asking_workspace(home.path());
    let cwd = work.path().canonicalize().unwrap();
    let mut acp = Acp::start(&cwd, home.path(), &url);
    initialize(&mut acp).await;
    let id = new_session(&mut acp, 2, &cwd).await;
    acp.send_request(3, "session/prompt", prompt(&id, "use bash"))
        .await;
    let asked = acp.until(is_permission_request).await;
    acp.notify("$/cancel_request", json!({"requestId": 3}))
        .await;
    let answered = acp.response(3).await;
    assert_eq!(answered["result"]["stopReason"], "cancelled", "{answered}");
    assert!(
        acp.frames
            .iter()
            .any(|f| f["method"] == "$/cancel_request" && f["params"]["requestId"] == asked["id"]),
        "the permission wait is cancelled with the prompt"
    );
    let next = acp.request(4, "session/prompt", prompt(&id, "go on")).await;
    assert_eq!(
        next["result"]["stopReason"], "end_turn",
        "the session lives on: {next}"
    );
    acp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_delete_removes_the_stored_session_and_closes_a_live_one() {
    let (url, _bodies) = model_server(vec![sse(&[json!({"content": "hello"})], "stop")]).await;
    let work = workspace(NO_TITLES);
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut acp = Acp::start(&cwd, home.path(), &url);
    initialize(&mut acp).await;
    let doomed = new_session(&mut acp, 2, &cwd).await;
    let answer = acp
        .request(3, "session/prompt", prompt(&doomed, "hi"))
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let kept = new_session(&mut acp, 4, &cwd).await;
    let deleted = acp
        .request(5, "session/delete", json!({"sessionId": doomed}))
        .await;
    assert_eq!(deleted["result"], json!({}), "{deleted}");
    let listed = acp.request(6, "session/list", json!({"cwd": cwd})).await;
    let ids: Vec<&str> = listed["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert_eq!(ids, [kept.as_str()], "{listed}");
    let gone = acp
        .request(7, "session/prompt", prompt(&doomed, "hi"))
        .await;
    assert_eq!(
        gone["error"]["code"], -32602,
        "a deleted session is closed: {gone}"
    );
    let unknown = acp
        .request(8, "session/delete", json!({"sessionId": doomed}))
        .await;
    assert_eq!(
        unknown["error"]["code"], -32002,
        "session not found: {unknown}"
    );
    acp.stop().await;
    // The session store keeps nothing of it (checkpoint refs named after it stay until the
    // checkpoint budget prunes them).
    let mut left = Vec::new();
    let mut dirs = vec![home.path().join("sessions")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.to_string_lossy().contains(&doomed) {
                left.push(path.clone());
            }
            if path.is_dir() {
                dirs.push(path);
            }
        }
    }
    assert!(
        left.is_empty(),
        "nothing of the deleted session is left: {left:?}"
    );

    let mut other = Acp::start(&cwd, home.path(), &url);
    initialize(&mut other).await;
    let load = other
        .request(
            2,
            "session/load",
            json!({"sessionId": doomed, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert_eq!(load["error"]["code"], -32602, "{load}");
    other.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logout_ends_authentication_until_the_client_authenticates_again() {
    let (url, _bodies) = model_server(vec![]).await;
    let work = workspace(NO_TITLES);
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut acp = Acp::start(&cwd, home.path(), &url);
    initialize(&mut acp).await;
    let id = new_session(&mut acp, 2, &cwd).await;
    let out = acp.request(3, "logout", json!({})).await;
    assert_eq!(out["result"], json!({}), "{out}");
    let refused = acp
        .request(4, "session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    assert_eq!(refused["error"]["code"], -32000, "auth_required: {refused}");
    let prompt_refused = acp.request(5, "session/prompt", prompt(&id, "hi")).await;
    assert_eq!(
        prompt_refused["error"]["code"], -32000,
        "a logged-out connection runs no prompt: {prompt_refused}"
    );
    let again = acp
        .request(6, "authenticate", json!({"methodId": "api-key-env"}))
        .await;
    assert!(again.get("error").is_none(), "{again}");
    new_session(&mut acp, 7, &cwd).await;
    acp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_for_this_session_is_remembered_and_kept_by_load() {
    if bwrap_missing() {
        return;
    }
    let (url, bodies) = model_server(vec![
        bash_call("call_1", "echo ONE"),
        sse(&[json!({"content": "ran one"})], "stop"),
        bash_call("call_2", "echo TWO"),
        sse(&[json!({"content": "ran two"})], "stop"),
        bash_call("call_3", "echo THREE"),
        sse(&[json!({"content": "ran three"})], "stop"),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let work = asking_workspace(home.path());
    let cwd = work.path().canonicalize().unwrap();
    let asked: std::sync::Arc<std::sync::Mutex<Vec<Value>>> = Default::default();
    let mut first = Acp::start(&cwd, home.path(), &url);
    let seen = asked.clone();
    first.answer = Box::new(move |request| {
        seen.lock().unwrap().push(request.clone());
        let always = request["params"]["options"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["kind"] == "allow_always")
            .expect("allow for this session is offered");
        Ok(json!({"outcome": {"outcome": "selected", "optionId": always["optionId"]}}))
    });
    initialize(&mut first).await;
    let id = new_session(&mut first, 2, &cwd).await;
    let one = first.request(3, "session/prompt", prompt(&id, "one")).await;
    assert_eq!(one["result"]["stopReason"], "end_turn", "{one}");
    let two = first.request(4, "session/prompt", prompt(&id, "two")).await;
    assert_eq!(two["result"]["stopReason"], "end_turn", "{two}");
    assert_eq!(
        asked.lock().unwrap().len(),
        1,
        "asked once, then remembered"
    );
    first.stop().await;

    let mut second = Acp::start(&cwd, home.path(), &url);
    initialize(&mut second).await;
    let loaded = second
        .request(
            2,
            "session/load",
            json!({"sessionId": id, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    let three = second
        .request(3, "session/prompt", prompt(&id, "three"))
        .await;
    assert_eq!(three["result"]["stopReason"], "end_turn", "{three}");
    assert!(
        !second.frames.iter().any(is_permission_request),
        "the loaded session keeps the grant"
    );
    second.stop().await;
    let bodies = bodies.lock().unwrap().clone();
    let last = bodies.last().unwrap().to_string();
    assert!(last.contains("THREE"), "the third call ran: {last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_resources_and_links_reach_the_model_and_binary_ones_are_refused() {
    let (url, bodies) = model_server(vec![sse(&[json!({"content": "read it"})], "stop")]).await;
    let work = workspace(NO_TITLES);
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut acp = Acp::start(&cwd, home.path(), &url);
    initialize(&mut acp).await;
    let id = new_session(&mut acp, 2, &cwd).await;
    let binary = acp
        .request(
            3,
            "session/prompt",
            json!({"sessionId": id, "prompt": [
                {"type": "text", "text": "look"},
                {"type": "resource", "resource": {"uri": "file:///w/app.bin", "mimeType": "application/octet-stream", "blob": "AAH/"}}
            ]}),
        )
        .await;
    assert_eq!(binary["error"]["code"], -32602, "{binary}");
    assert!(
        binary["error"]["message"]
            .as_str()
            .unwrap()
            .contains("file:///w/app.bin"),
        "the refusal names the resource: {binary}"
    );
    let answer = acp
        .request(
            4,
            "session/prompt",
            json!({"sessionId": id, "prompt": [
                {"type": "text", "text": "look at these"},
                {"type": "resource", "resource": {"uri": "file:///w/notes.md", "mimeType": "text/markdown", "text": "NOTE BODY"}},
                {"type": "resource", "resource": {"uri": "file:///w/data.csv", "mimeType": "text/csv", "blob": "YSxiCjEsMgo="}},
                {"type": "resource_link", "name": "main.rs", "uri": "file:///w/src/main.rs"}
            ]}),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    acp.stop().await;
    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1, "the refused prompt reached no model");
    let sent = bodies[0].to_string();
    for wanted in [
        "NOTE BODY",
        "file:///w/notes.md",
        "a,b\\n1,2",
        "file:///w/data.csv",
        "file:///w/src/main.rs",
    ] {
        assert!(sent.contains(wanted), "{wanted} in {sent}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_and_thought_chunks_carry_message_ids_that_load_repeats() {
    let (url, _bodies) = model_server(vec![
        sse(
            &[
                json!({"reasoning_content": "thinking "}),
                json!({"reasoning_content": "hard"}),
                json!({"content": "the "}),
                json!({"content": "answer"}),
            ],
            "stop",
        ),
        sse(&[json!({"content": "again"})], "stop"),
    ])
    .await;
    let work = workspace(NO_TITLES);
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut first = Acp::start(&cwd, home.path(), &url);
    initialize(&mut first).await;
    let id = new_session(&mut first, 2, &cwd).await;
    first.request(3, "session/prompt", prompt(&id, "one")).await;
    first.request(4, "session/prompt", prompt(&id, "two")).await;
    let ids = |frames: &[Value], kind: &str| -> Vec<String> {
        let mut ids: Vec<String> = updates_of(frames, kind)
            .iter()
            .map(|f| {
                f["params"]["update"]["messageId"]
                    .as_str()
                    .unwrap_or_else(|| panic!("a messageId on {f}"))
                    .to_owned()
            })
            .collect();
        ids.dedup();
        ids
    };
    let live_messages = ids(&first.frames, "agent_message_chunk");
    let live_thoughts = ids(&first.frames, "agent_thought_chunk");
    assert_eq!(
        live_messages.len(),
        2,
        "one id per message: {live_messages:?}"
    );
    assert_eq!(live_thoughts.len(), 1, "{live_thoughts:?}");
    assert_ne!(live_messages[0], live_messages[1]);
    first.stop().await;

    let mut second = Acp::start(&cwd, home.path(), &url);
    initialize(&mut second).await;
    second
        .request(
            2,
            "session/load",
            json!({"sessionId": id, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert_eq!(ids(&second.frames, "agent_message_chunk"), live_messages);
    assert_eq!(ids(&second.frames, "agent_thought_chunk"), live_thoughts);
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_precedes_the_answer_that_creates_a_session_and_mode_changes_reannounce_commands() {
    let (url, _bodies) = model_server(vec![]).await;
    let work = workspace(NO_TITLES);
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut acp = Acp::start(&cwd, home.path(), &url);
    initialize(&mut acp).await;
    let created = acp
        .request(2, "session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let id = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let at = answer_index(&acp.frames, 2);
    assert!(
        acp.frames[..at]
            .iter()
            .all(|f| f["method"] != "session/update"),
        "{:#?}",
        acp.frames
    );
    let modes: Vec<String> = created["result"]["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    let current = created["result"]["modes"]["currentModeId"]
        .as_str()
        .unwrap();
    let other = modes.iter().find(|m| *m != current).unwrap().clone();
    acp.request(
        3,
        "session/set_mode",
        json!({"sessionId": id, "modeId": other}),
    )
    .await;
    let at = answer_index(&acp.frames, 3);
    acp.request(4, "session/list", json!({})).await;
    assert!(
        acp.frames[at..]
            .iter()
            .any(|f| f["params"]["update"]["sessionUpdate"] == "available_commands_update"),
        "a mode change re-announces the commands: {:#?}",
        &acp.frames[at..]
    );
    acp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_mode_is_a_boolean_config_option_that_moves_the_mode() {
    let (url, _bodies) = model_server(vec![]).await;
    let work = workspace(NO_TITLES);
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut acp = Acp::start(&cwd, home.path(), &url);
    let without = initialize(&mut acp).await;
    assert!(without.get("result").is_some(), "{without}");
    let plain = acp
        .request(2, "session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    assert!(
        plain["result"]["configOptions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["type"] != "boolean"),
        "a client that does not take boolean options is offered none: {plain}"
    );
    acp.stop().await;
    let mut acp = Acp::start(&cwd, home.path(), &url);
    acp.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"session": {"configOptions": {"boolean": {}}}}}),
    )
    .await;
    let created = acp
        .request(2, "session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let id = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let option = created["result"]["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "plan_mode")
        .unwrap_or_else(|| panic!("a plan_mode option: {created}"))
        .clone();
    assert_eq!(option["type"], "boolean", "{option}");
    assert_eq!(option["currentValue"], false, "{option}");
    let wrong = acp
        .request(
            3,
            "session/set_config_option",
            json!({"sessionId": id, "configId": "plan_mode", "value": "on"}),
        )
        .await;
    assert_eq!(wrong["error"]["code"], -32602, "{wrong}");
    let set = acp
        .request(
            4,
            "session/set_config_option",
            json!({"sessionId": id, "configId": "plan_mode", "type": "boolean", "value": true}),
        )
        .await;
    let now = set["result"]["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "plan_mode")
        .unwrap()
        .clone();
    assert_eq!(now["currentValue"], true, "{set}");
    acp.request(5, "session/list", json!({})).await;
    let moved = updates_of(&acp.frames, "current_mode_update");
    assert!(
        moved.iter().any(|f| f["params"]["update"]["currentModeId"]
            .as_str()
            .is_some_and(|m| m.ends_with("+plan"))),
        "the mode follows: {:#?}",
        acp.frames
    );
    // A change the session makes itself (`/plan off`) reaches the option.
    let toggled = acp
        .request(6, "session/prompt", prompt(&id, "/plan off"))
        .await;
    assert_eq!(toggled["result"]["stopReason"], "end_turn", "{toggled}");
    let at = answer_index(&acp.frames, 4);
    let last_option = acp.frames[at..]
        .iter()
        .rev()
        .filter(|f| f["params"]["update"]["sessionUpdate"] == "config_option_update")
        .filter_map(|f| {
            f["params"]["update"]["configOptions"]
                .as_array()?
                .iter()
                .find(|o| o["id"] == "plan_mode")
                .cloned()
        })
        .next()
        .unwrap_or_else(|| {
            panic!(
                "a config_option_update after /plan: {:#?}",
                &acp.frames[at..]
            )
        });
    assert_eq!(last_option["currentValue"], false, "{last_option}");
    acp.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_call_carries_its_file_as_a_location() {
    let arguments =
        json!({"file_path": "notes.txt", "old_string": "old", "new_string": "new"}).to_string();
    let call = json!({"tool_calls": [{"index": 0, "id": "call_edit", "type": "function",
        "function": {"name": "edit", "arguments": arguments}}]});
    let (url, _bodies) = model_server(vec![
        sse(&[call], "tool_calls"),
        sse(&[json!({"content": "edited"})], "stop"),
    ])
    .await;
    let work = workspace(&format!(
        "{NO_TITLES}\n[plugins.sandbox]\nmode = \"danger-full-access\"\n"
    ));
    let cwd = work.path().canonicalize().unwrap();
    std::fs::write(cwd.join("notes.txt"), "old text\n").unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut acp = Acp::start(&cwd, home.path(), &url);
    initialize(&mut acp).await;
    let id = new_session(&mut acp, 2, &cwd).await;
    let answer = acp
        .request(3, "session/prompt", prompt(&id, "edit it"))
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let call = updates_of(&acp.frames, "tool_call")
        .into_iter()
        .find(|f| f["params"]["update"]["toolCallId"] == "call_edit")
        .expect("the edit card")
        .clone();
    assert_eq!(
        call["params"]["update"]["locations"],
        json!([{"path": cwd.join("notes.txt")}]),
        "{call}"
    );
    acp.stop().await;
}

const RED_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_prompts_follow_the_selected_model() {
    let (url, bodies) = model_server(vec![sse(&[json!({"content": "a red pixel"})], "stop")]).await;
    // The configured model takes text only; the catalog offers one that takes images.
    let work = workspace(&format!(
        "{NO_TITLES}\n[model]\nname = \"text-test\"\n\n[[model.catalog]]\nid = \"text-test\"\ninput = [\"text\"]\n\n[[model.catalog]]\nid = \"vision-test\"\ninput = [\"text\", \"image\"]\n"
    ));
    let cwd = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut acp = Acp::start(&cwd, home.path(), &url);
    let init = initialize(&mut acp).await;
    assert_eq!(
        init["result"]["agentCapabilities"]["promptCapabilities"]["image"], true,
        "a session can switch to a model that takes images: {init}"
    );
    let created = acp
        .request(2, "session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let id = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let vision = created["result"]["configOptions"][0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["value"] == "vision-test")
        .unwrap_or_else(|| panic!("{created}"))
        .clone();
    assert!(
        vision["description"]
            .as_str()
            .is_some_and(|d| d.contains("images")),
        "the option says which models take images: {vision}"
    );
    let image_prompt = json!({"sessionId": id, "prompt": [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "data": RED_PNG, "mimeType": "image/png"}
    ]});
    let refused = acp.request(3, "session/prompt", image_prompt.clone()).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("text-test"),
        "names the model that takes no images: {refused}"
    );
    let switched = acp
        .request(
            4,
            "session/set_config_option",
            json!({"sessionId": id, "configId": "model", "value": "vision-test"}),
        )
        .await;
    assert!(switched.get("error").is_none(), "{switched}");
    let answer = acp.request(5, "session/prompt", image_prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    acp.stop().await;
    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["model"], "vision-test");
    assert!(bodies[0].to_string().contains("data:image/png;base64,"));
}
