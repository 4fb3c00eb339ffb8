//! `list_agents` (subagent-spec §2.4) and crash recovery with children (§5.4).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::PathBuf;

use dsh_session::CreateOptions;
use pretty_assertions::assert_eq;
use serde_json::json;
use support::*;

/// A stored child of `parent` with an optional descriptor payload.
fn stored_child(rig: &Rig, id: &str, parent: &str, descriptor: Option<serde_json::Value>) {
    let store = rig.store.as_ref().unwrap();
    let log = store
        .create(CreateOptions {
            id: Some(id.into()),
            cwd: Some(rig.cwd.clone()),
            parent_session: Some(parent.into()),
            origin: Some("subagent".into()),
            delegation_depth: 1,
            ..CreateOptions::default()
        })
        .unwrap();
    if let Some(descriptor) = descriptor {
        log.append("subagent/descriptor", descriptor, None).unwrap();
    }
    log.append("session/end-seed", json!({}), None).unwrap();
    log.flush().unwrap();
    // Created-at order is the listing order; keep it distinct.
    std::thread::sleep(std::time::Duration::from_millis(3));
}

fn ordinary(rig: &Rig, id: &str, parent: &str) {
    let store = rig.store.as_ref().unwrap();
    let log = store
        .create(CreateOptions {
            id: Some(id.into()),
            cwd: Some(rig.cwd.clone()),
            parent_session: Some(parent.into()),
            ..CreateOptions::default()
        })
        .unwrap();
    log.append("session/end-seed", json!({}), None).unwrap();
    log.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(3));
}

fn continuable(label: &str) -> serde_json::Value {
    json!({"version": 2, "mode": "continuable", "provider": "spawn", "label": label})
}

fn one_shot() -> serde_json::Value {
    json!({"version": 2, "mode": "one-shot", "provider": "spawn"})
}

fn list(rig: &Rig, key: &str, args: serde_json::Value) {
    rig.script(
        key,
        vec![call("l", "list_agents", args), text_response("listed")],
    );
}

#[tokio::test]
async fn list_agents_renders_children_in_order_and_hides_one_shot_ones() {
    let rig = Rig::new();
    rig.control_tools(Default::default());
    let parent = rig.parent_with(Some("p"), None);
    // Checklist 55.
    list(&rig, "P-LIST", json!({}));
    prompt(&parent, "P-LIST empty").await;
    assert_eq!(
        tool_results(&parent.log().events().unwrap()),
        vec![("(no subagents)".to_owned(), false)]
    );
    stored_child(&rig, "c-b", "p", Some(continuable("second")));
    stored_child(&rig, "c-once", "p", Some(one_shot()));
    stored_child(&rig, "c-a", "p", Some(continuable("third")));
    stored_child(&rig, "other", "q", Some(continuable("not mine")));
    // Checklist 56: createdAt order (then id), one-shot children omitted.
    list(&rig, "P-LIST", json!({}));
    prompt(&parent, "P-LIST again").await;
    assert_eq!(
        tool_results(&parent.log().events().unwrap())[1],
        (
            "c-b [ready] — second\nc-a [ready] — third".to_owned(),
            false
        )
    );
}

#[tokio::test]
async fn descendants_walk_the_tree_through_one_shot_and_ordinary_sessions() {
    let rig = Rig::new();
    rig.control_tools(Default::default());
    let parent = rig.parent_with(Some("p"), None);
    stored_child(&rig, "c1", "p", Some(continuable("waiting branch")));
    stored_child(&rig, "c2", "c1", Some(continuable("nested leaf")));
    stored_child(&rig, "once", "p", Some(one_shot()));
    ordinary(&rig, "forked", "once");
    stored_child(&rig, "deep", "forked", Some(continuable("under a fork")));
    list(&rig, "P-DESC", json!({"scope": "descendants"}));
    prompt(&parent, "P-DESC").await;
    // Checklist 58.
    assert_eq!(
        tool_results(&parent.log().events().unwrap()),
        vec![(
            "c1 [ready] parent=p depth=1 — waiting branch\nc2 [ready] parent=c1 depth=2 — nested leaf\ndeep [ready] parent=forked depth=3 — under a fork"
                .to_owned(),
            false
        )]
    );
}

#[tokio::test]
async fn unreadable_and_malformed_children_are_diagnostics() {
    let rig = Rig::new();
    rig.control_tools(Default::default());
    let parent = rig.parent_with(Some("p"), None);
    stored_child(&rig, "good", "p", Some(continuable("fine")));
    stored_child(&rig, "nodesc", "p", None);
    stored_child(
        &rig,
        "baddesc",
        "p",
        Some(json!({"version": 2, "mode": "continuable"})),
    );
    stored_child(&rig, "torn", "p", Some(continuable("broken later")));
    // Its directory no longer matches its id: the header is listed, the log cannot be opened.
    let store = rig.store.as_ref().unwrap();
    let path: PathBuf = store.load("torn").unwrap().path;
    let dir = path.parent().unwrap();
    std::fs::rename(dir, dir.with_file_name("moved-away")).unwrap();
    list(&rig, "P-DIAG", json!({}));
    prompt(&parent, "P-DIAG").await;
    // Checklist 59.
    assert_eq!(
        tool_results(&parent.log().events().unwrap()),
        vec![(
            "good [ready] — fine\nnodesc [diagnostic: corrupt]\nbaddesc [diagnostic: corrupt]\ntorn [diagnostic: unavailable]"
                .to_owned(),
            false
        )]
    );
}

#[tokio::test]
async fn listing_needs_the_projection_registry() {
    let rig = Rig::with(Options {
        projections: false,
        ..Options::default()
    });
    rig.control_tools(Default::default());
    let parent = rig.parent();
    list(&rig, "P-NOPROJ", json!({}));
    prompt(&parent, "P-NOPROJ").await;
    // Checklist 60 (no children at all).
    assert_eq!(
        tool_results(&parent.log().events().unwrap()),
        vec![(
            "Error: listing subagents requires the sessionProjections registry (load @deepseek-ai/dsh-session-projection)"
                .to_owned(),
            true
        )]
    );
    let result = parent
        .log()
        .events()
        .unwrap()
        .iter()
        .find_map(|e| e.decode::<dsh_session::data::ToolResult>())
        .unwrap()
        .unwrap();
    assert_eq!(
        result.error.unwrap().code,
        "SUBAGENT_CONTROL_PROJECTIONS_UNAVAILABLE"
    );
}

#[tokio::test]
async fn status_comes_from_the_live_registry() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn", "backgroundMode": "continuable", "maxDepth": 3}))
        .unwrap();
    rig.control_tools(Default::default());
    let gates = rig.gates();
    let parent = rig.parent();
    rig.script(
        "P-STATUS",
        vec![
            call(
                "a",
                "subagent",
                json!({"description": "busy one", "prompt": "C-BUSY"}),
            ),
            call(
                "b",
                "subagent",
                json!({"description": "waiting one", "prompt": "C-WAITER"}),
            ),
            text_response("started"),
        ],
    );
    rig.script(
        "C-BUSY",
        vec![
            call("g", "gate", json!({"name": "busy"})),
            text_response("x"),
        ],
    );
    rig.script(
        "C-WAITER",
        vec![
            call(
                "s",
                "subagent",
                json!({"description": "grandchild", "prompt": "LEAF-W"}),
            ),
            text_response("waiting for leaf"),
            text_response("leaf seen"),
        ],
    );
    rig.script(
        "LEAF-W",
        vec![
            call("g", "gate", json!({"name": "leaf"})),
            text_response("leaf"),
        ],
    );
    prompt(&parent, "P-STATUS").await;
    eventually("three activations", || rig.subagents.resident().len() == 3).await;
    let waiter_id = tool_results(&parent.log().events().unwrap())[1]
        .0
        .strip_prefix("started subagent ")
        .unwrap()
        .to_owned();
    let waiter = rig.directory.get(&waiter_id).unwrap();
    eventually("the waiter to idle", || {
        waiter.status() == dsh_agent::AgentStatus::Idle && waiter.log().turn_state().last_turn == 1
    })
    .await;
    list(&rig, "P-STATUS", json!({}));
    prompt(&parent, "P-STATUS list").await;
    // Checklist 57: running, idle (live, waiting on its own child) and later ready.
    let text = tool_results(&parent.log().events().unwrap())[2].0.clone();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].ends_with("[running] — busy one"), "{text}");
    assert!(lines[1].ends_with("[idle] — waiting one"), "{text}");
    gates.open("busy");
    gates.open("leaf");
    eventually("all settled", || rig.subagents.resident().is_empty()).await;
    parent.cancel(dsh_agent::AbortReason::User, false);
    parent.when_idle().await;
    rig.script(
        "P-STATUS",
        vec![call("l", "list_agents", json!({})), text_response("listed")],
    );
    prompt(&parent, "P-STATUS final").await;
    let results = tool_results(&parent.log().events().unwrap());
    let last = &results.last().unwrap().0;
    assert!(last.lines().all(|l| l.contains("[ready]")), "{last}");
}

#[tokio::test]
async fn after_a_crash_notices_are_restored_and_children_repaired() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn", "backgroundMode": "continuable"}))
        .unwrap();
    let gates = rig.gates();
    rig.script(
        "P-CRASH",
        vec![dsh_agent::scripted::tool_calls_response(&[
            (
                "a",
                "subagent",
                &json!({"description": "finishes", "prompt": "C-DONE"}).to_string(),
            ),
            (
                "b",
                "subagent",
                &json!({"description": "hangs", "prompt": "C-HUNG"}).to_string(),
            ),
            ("g", "gate", &json!({"name": "never"}).to_string()),
        ])],
    );
    rig.script("C-DONE", vec![text_response("done before the crash")]);
    rig.script_raw("C-HUNG", vec![dsh_agent::scripted::Script::Hang]);
    let parent = rig.parent();
    parent
        .followup(dsh_protocol::Message::user_text("P-CRASH"))
        .unwrap();
    eventually("the notice to be spliced", || parent.pending().1.len() == 1).await;
    let hung_id = rig.subagents.resident().into_iter().next().unwrap();
    let hung = rig.directory.get(&hung_id).unwrap();
    eventually("the hung child to stream", || {
        hung.log()
            .events()
            .unwrap()
            .iter()
            .any(|e| e.kind == "step/start")
    })
    .await;
    // "Crash": the disk as it is now, opened by a fresh process.
    let crashed = tempfile::tempdir().unwrap();
    copy_dir(&rig.dir.path().join("home"), crashed.path());
    let store = dsh_session::JsonlStore::new(crashed.path());
    // Checklist 85, parent: the durable but unclaimed notice is restored on resume.
    let resumed = store.resume(parent.id()).unwrap();
    let inbox_kinds: Vec<String> = {
        let other = Rig::new();
        let agent = other.agent_on(resumed, true, None);
        agent
            .pending()
            .1
            .iter()
            .map(|m| m.source.kind().to_owned())
            .collect()
    };
    assert_eq!(inbox_kinds, vec!["subagent-settled".to_owned()]);
    // Checklist 85, child: its open turn is repaired as interrupted.
    let loaded = store.load(&hung_id).unwrap();
    let end = loaded.repair.last().unwrap();
    assert_eq!(end.kind, "turn/end");
    assert_eq!(end.data["reason"], json!({"kind": "interrupted"}));
    let child = store.resume(&hung_id).unwrap();
    assert_eq!(child.header().delegation_depth, 1);
    assert_eq!(
        child
            .events()
            .unwrap()
            .iter()
            .rev()
            .find(|e| e.kind == "turn/end")
            .unwrap()
            .data["reason"],
        json!({"kind": "interrupted"})
    );
    drop(child);
    gates.open("never");
    let _ = rig.subagents.drain().await;
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
