//! Continuable children (subagent-spec §1.8, §2.2–§2.5): start, settlement notices, follow-ups,
//! cold resume, interrupts, reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use dsh_protocol::ContentBlock;
use dsh_subagent::ContinuableStart;
use dsh_subagent::StartRequest;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;
use support::*;
use tokio_util::sync::CancellationToken;

fn continuable(rig: &Rig) {
    rig.tool(json!({"provider": "spawn", "backgroundMode": "continuable", "maxDepth": 3}))
        .unwrap();
}

fn start(prompt: &str) -> Vec<dsh_protocol::StreamChunk> {
    call(
        "start",
        "subagent",
        json!({"description": "Background task", "prompt": prompt}),
    )
}

fn child_id_from(text: &str) -> String {
    text.strip_prefix("started subagent ").unwrap().to_owned()
}

async fn settled(rig: &Rig) {
    eventually("every activation to settle", || {
        rig.subagents.resident().is_empty()
    })
    .await;
}

#[tokio::test]
async fn a_background_child_starts_at_once_and_its_settlement_wakes_the_idle_parent() {
    let rig = Rig::new();
    continuable(&rig);
    rig.script(
        "P-BG",
        vec![
            start("C-BG work"),
            text_response("STARTED"),
            text_response("NOTED"),
        ],
    );
    // The child waits at a gate until the parent's turn is over, so its settlement finds the
    // parent idle (the case this test is about) however the two threads are scheduled.
    let gates = rig.gates();
    rig.script(
        "C-BG",
        vec![
            call("g", "gate", json!({"name": "parent-idle"})),
            text_response("child answer"),
        ],
    );
    let parent = rig.parent();
    prompt(&parent, "P-BG go").await;
    gates.open("parent-idle");
    settled(&rig).await;
    eventually("the parent's notice turn", || {
        parent.status() == dsh_agent::AgentStatus::Idle && parent.log().turn_state().last_turn == 2
    })
    .await;
    parent.when_idle().await;
    // Checklist 34.
    let results = tool_results(&parent.log().events().unwrap());
    let id = child_id_from(&results[0].0);
    let child = &rig.child_logs()[0];
    assert_eq!(child.header.id, id);
    // Checklist 10 and 11.
    assert_eq!(child.header.seed_length, None);
    assert_eq!(child.events[0].kind, "subagent/descriptor");
    assert_eq!(child.events[1].kind, "session/end-seed");
    assert_eq!(
        child.events[0].data,
        json!({
            "version": 2, "mode": "continuable", "provider": "spawn", "label": "Background task",
            "agentProvider": "mock", "agentModel": "mock-model"
        })
    );
    // Checklist 12: the pinned policy before the first turn.
    let policy = child
        .events
        .iter()
        .position(|e| e.kind == "approval/policy")
        .unwrap();
    let first_turn = child
        .events
        .iter()
        .position(|e| e.kind == "turn/start")
        .unwrap();
    assert!(policy < first_turn);
    // Checklist 38 and 41: one notice with the summary, the marker and the closing message.
    let notices = user_messages(&parent.log().events().unwrap(), "subagent-settled");
    assert_eq!(notices.len(), 1);
    let summary = format!(
        "Background subagent {id} finished and will do no further work unless you send it more."
    );
    assert_eq!(
        notices[0]["content"],
        json!([
            {"type": "text", "text": summary},
            {"type": "text", "text": "Its closing message:"},
            {"type": "text", "text": "child answer"}
        ])
    );
    assert_eq!(
        notices[0]["source"],
        json!({"kind": "subagent-settled", "form": "notice", "summary": summary, "senderSessionId": id})
    );
    // Checklist 42: an idle parent runs exactly one new turn for it.
    assert_eq!(parent.log().turn_state().last_turn, 2);
}

#[tokio::test]
async fn a_child_without_output_and_each_stop_reason_gets_its_summary() {
    let rig = Rig::new();
    continuable(&rig);
    // A child whose only response is a model failure: error, no closing message.
    rig.script(
        "P-ERR",
        vec![
            start("C-ERR"),
            text_response("STARTED"),
            text_response("NOTED"),
        ],
    );
    rig.script(
        "C-ERR",
        vec![dsh_agent::scripted::error_response(
            dsh_protocol::LlmFailure::new("INVALID_REQUEST", "nope"),
        )],
    );
    let parent = rig.parent();
    prompt(&parent, "P-ERR").await;
    settled(&rig).await;
    eventually("the notice", || {
        !user_messages(&parent.log().events().unwrap(), "subagent-settled").is_empty()
    })
    .await;
    let notice = &user_messages(&parent.log().events().unwrap(), "subagent-settled")[0];
    let id = child_id_from(&tool_results(&parent.log().events().unwrap())[0].0);
    // Checklists 39 and 40.
    assert_eq!(
        notice["content"],
        json!([
            {"type": "text", "text": format!("Background subagent {id} failed before it finished.")},
            {"type": "text", "text": "It left no closing message."}
        ])
    );
    parent.when_idle().await;

    let rig = Rig::new();
    continuable(&rig);
    rig.script(
        "P-MAXT",
        vec![
            start("C-MAXT"),
            text_response("STARTED"),
            text_response("NOTED"),
        ],
    );
    rig.script("C-MAXT", vec![max_tokens_response("half")]);
    let parent = rig.parent();
    prompt(&parent, "P-MAXT").await;
    settled(&rig).await;
    eventually("the notice", || {
        !user_messages(&parent.log().events().unwrap(), "subagent-settled").is_empty()
    })
    .await;
    let notice = &user_messages(&parent.log().events().unwrap(), "subagent-settled")[0];
    let id = child_id_from(&tool_results(&parent.log().events().unwrap())[0].0);
    assert_eq!(
        notice["content"][0]["text"],
        format!("Background subagent {id} ran out of room before it finished.")
    );
    assert_eq!(notice["content"][2]["text"], "half");
    parent.when_idle().await;
}

#[tokio::test]
async fn a_refused_prompt_reports_declined_the_task() {
    let rig = Rig::new();
    continuable(&rig);
    // A pre-step policy that blocks this child's prompt (the turn ends `blocked`).
    rig.hooks.pre_step.register(&rig.root, |input, next| {
        Box::pin(async move {
            let refuse = input
                .messages
                .iter()
                .any(|m| dsh_protocol::text_of(&m.content).contains("C-REFUSE"));
            if refuse {
                Ok(dsh_agent::PreStepDecision::Reject)
            } else {
                next.run(input).await
            }
        })
    });
    rig.script(
        "P-REF",
        vec![
            start("C-REFUSE"),
            text_response("STARTED"),
            text_response("NOTED"),
        ],
    );
    let parent = rig.parent();
    prompt(&parent, "P-REF").await;
    settled(&rig).await;
    eventually("the notice", || {
        !user_messages(&parent.log().events().unwrap(), "subagent-settled").is_empty()
    })
    .await;
    let notice = &user_messages(&parent.log().events().unwrap(), "subagent-settled")[0];
    let id = child_id_from(&tool_results(&parent.log().events().unwrap())[0].0);
    assert_eq!(
        notice["content"][0]["text"],
        format!("Background subagent {id} declined the task.")
    );
    parent.when_idle().await;
}

#[tokio::test]
async fn simultaneous_notices_join_one_step_of_a_running_parent() {
    let rig = Rig::new();
    continuable(&rig);
    let gates = rig.gates();
    rig.script(
        "P-TWO",
        vec![
            dsh_agent::scripted::tool_calls_response(&[
                (
                    "s1",
                    "subagent",
                    &json!({"description": "one", "prompt": "C-TWO-A"}).to_string(),
                ),
                (
                    "s2",
                    "subagent",
                    &json!({"description": "two", "prompt": "C-TWO-B"}).to_string(),
                ),
                ("g", "gate", &json!({"name": "parent"}).to_string()),
            ]),
            text_response("BOTH NOTED"),
        ],
    );
    rig.script("C-TWO-A", vec![text_response("answer A")]);
    rig.script("C-TWO-B", vec![text_response("answer B")]);
    let parent = rig.parent();
    parent
        .followup(dsh_protocol::Message::user_text("P-TWO"))
        .unwrap();
    settled(&rig).await;
    eventually("both notices spliced", || parent.pending().1.len() == 2).await;
    gates.open("parent");
    tokio::time::timeout(Duration::from_secs(5), parent.when_idle())
        .await
        .unwrap();
    // Checklist 42: both notices are claimed by the same step of turn 1.
    let events = parent.log().events().unwrap();
    assert_eq!(parent.log().turn_state().last_turn, 1);
    let notice_seqs: Vec<u64> = events
        .iter()
        .filter(|e| e.kind == "user/message")
        .filter(|e| {
            e.data.pointer("/source/kind").and_then(Value::as_str) == Some("subagent-settled")
        })
        .map(|e| e.seq)
        .collect();
    assert_eq!(notice_seqs.len(), 2);
    let step_of = |seq: u64| {
        events[..seq as usize]
            .iter()
            .rev()
            .find(|e| e.kind == "step/start")
            .map(|e| e.data.value().clone())
    };
    assert_eq!(step_of(notice_seqs[0]), step_of(notice_seqs[1]));
}

#[tokio::test]
async fn the_callers_signal_stops_mattering_after_acceptance() {
    let rig = Rig::new();
    rig.script("C-SIGNAL", vec![text_response("finished anyway")]);
    let parent = rig.parent();
    let signal = CancellationToken::new();
    let request = StartRequest::new(
        parent.clone(),
        vec![ContentBlock::text("C-SIGNAL")],
        signal.clone(),
    );
    let accepted = rig
        .subagents
        .start_continuable(ContinuableStart {
            provider: "spawn".into(),
            label: "l".into(),
            child_id: None,
            request,
        })
        .await
        .unwrap();
    // Checklist 36.
    signal.cancel();
    settled(&rig).await;
    let notices = user_messages(&parent.log().events().unwrap(), "subagent-settled");
    assert_eq!(notices.len(), 1);
    assert!(
        notices[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains(&format!("{} finished", accepted.child_id))
    );
    parent.cancel(dsh_agent::AbortReason::User, false);
    parent.when_idle().await;
}

#[tokio::test]
async fn a_failure_before_acceptance_leaves_nothing_behind() {
    let rig = Rig::new();
    let parent = rig.parent();
    let mut request = StartRequest::new(
        parent.clone(),
        vec![ContentBlock::text("C-NEVER")],
        CancellationToken::new(),
    );
    request.tool_filter = Some(dsh_subagent::ToolFilterSpec {
        allow: None,
        deny: Some(vec!["no_such_tool".into()]),
    });
    let error = rig
        .subagents
        .start_continuable(ContinuableStart {
            provider: "spawn".into(),
            label: "l".into(),
            child_id: Some("reserved-child".into()),
            request,
        })
        .await
        .unwrap_err();
    assert!(error.message.contains("no_such_tool"), "{error}");
    // Checklist 37: no live agent, no session, no notice.
    assert!(rig.directory.get("reserved-child").is_none());
    assert!(rig.store.as_ref().unwrap().load("reserved-child").is_err());
    assert!(rig.subagents.resident().is_empty());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(user_messages(&parent.log().events().unwrap(), "subagent-settled").is_empty());
    assert_eq!(parent.log().len(), 0);
}

#[tokio::test]
async fn without_persistence_continuable_start_fails() {
    let rig = Rig::with(Options {
        persist: false,
        ..Options::default()
    });
    continuable(&rig);
    rig.script("P-NOPERSIST", vec![start("C-X"), text_response("ok")]);
    let parent = rig.parent();
    prompt(&parent, "P-NOPERSIST").await;
    // Checklist 35.
    assert_eq!(
        tool_results(&parent.log().events().unwrap()),
        vec![(
            "Error: continuable subagents require session persistence (load a dsh-session-persistence backend)"
                .to_owned(),
            true
        )]
    );
}

#[tokio::test]
async fn a_continuable_parent_waits_for_the_children_it_owns() {
    let rig = Rig::new();
    continuable(&rig);
    let events = rig.record_events();
    rig.script(
        "P-TREE",
        vec![
            start("C-MID"),
            text_response("STARTED"),
            text_response("TOP NOTED"),
        ],
    );
    rig.script(
        "C-MID",
        vec![
            start("C-LEAF"),
            text_response("mid started leaf"),
            text_response("mid saw leaf"),
        ],
    );
    rig.script("C-LEAF", vec![text_response("leaf answer")]);
    let parent = rig.parent();
    prompt(&parent, "P-TREE").await;
    settled(&rig).await;
    eventually("the top notice", || {
        !user_messages(&parent.log().events().unwrap(), "subagent-settled").is_empty()
    })
    .await;
    parent.when_idle().await;
    let children = rig.child_logs();
    assert_eq!(children.len(), 2);
    let (mid, leaf) = (&children[0], &children[1]);
    assert_eq!(
        leaf.header.parent_session.as_deref(),
        Some(mid.header.id.as_str())
    );
    assert_eq!(leaf.header.delegation_depth, 2);
    // Checklist 44: the middle child ended only after its leaf, and saw the leaf's notice.
    let ends: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .filter(|(name, _, _)| name == "subagent/end")
        .map(|(_, id, _)| id.clone())
        .collect();
    assert_eq!(ends, vec![leaf.header.id.clone(), mid.header.id.clone()]);
    let mid_notices = user_messages(&mid.events, "subagent-settled");
    assert_eq!(mid_notices.len(), 1);
    let top = user_messages(&parent.log().events().unwrap(), "subagent-settled");
    assert_eq!(top.len(), 1);
    assert_eq!(top[0]["content"][2]["text"], "mid saw leaf");
}

#[tokio::test]
async fn send_message_queues_a_later_turn_and_cold_resumes_a_settled_child() {
    let rig = Rig::new();
    rig.tool(json!({
        "provider": "spawn",
        "backgroundMode": "continuable",
        "persona": "You are the resumable persona.",
        "agentOptions": {"model": "child-model"},
        "toolFilter": {"deny": ["gate"]}
    }))
    .unwrap();
    rig.control_tools(Default::default());
    let gates = rig.gates();
    rig.script(
        "P-SEND",
        vec![
            start("C-SEND"),
            text_response("STARTED"),
            text_response("NOTED 1"),
        ],
    );
    let child_model = rig.script(
        "C-SEND",
        vec![
            text_response("first answer"),
            text_response("second answer"),
        ],
    );
    let parent = rig.parent();
    prompt(&parent, "P-SEND").await;
    settled(&rig).await;
    eventually("notice 1", || parent.log().turn_state().last_turn == 2).await;
    parent.when_idle().await;
    let id = child_id_from(&tool_results(&parent.log().events().unwrap())[0].0);
    let child_len = rig.store.as_ref().unwrap().load(&id).unwrap().events.len();
    // Checklist 46: the settled child is cold-resumed by a later send_message.
    rig.script(
        "P-SEND",
        vec![
            call(
                "m1",
                "send_message",
                json!({"subagent_id": id, "message": "please continue"}),
            ),
            text_response("SENT"),
            text_response("NOTED 2"),
        ],
    );
    let _ = gates;
    prompt(&parent, "P-SEND again").await;
    let results = tool_results(&parent.log().events().unwrap());
    // Checklist 45.
    assert_eq!(
        results[1],
        (
            format!("message queued as the next turn for subagent {id}"),
            false
        )
    );
    settled(&rig).await;
    eventually("notice 2", || {
        user_messages(&parent.log().events().unwrap(), "subagent-settled").len() == 2
    })
    .await;
    parent.when_idle().await;
    let child = rig.store.as_ref().unwrap().load(&id).unwrap();
    let resumed = &child.events[child_len..];
    // No descriptor and no delegation policy events are re-appended on resume.
    assert!(
        !resumed
            .iter()
            .any(|e| e.kind == "subagent/descriptor" || e.kind == "approval/policy")
    );
    // Checklist 50: the delivery is a coordinator relay, claimed by its own turn 2.
    let relayed = user_messages(&child.events, "coordinator");
    assert_eq!(relayed.len(), 1);
    assert_eq!(
        relayed[0]["source"],
        json!({"kind": "coordinator", "form": "relay", "senderSessionId": parent.id()})
    );
    let turn2 = child
        .events
        .iter()
        .position(|e| e.kind == "turn/start" && e.data["turn"] == 2)
        .unwrap();
    let relay_seq = child
        .events
        .iter()
        .position(|e| {
            e.kind == "user/message"
                && e.data.pointer("/source/kind") == Some(&json!("coordinator"))
        })
        .unwrap();
    assert!(relay_seq > turn2);
    // The resumed child keeps the descriptor's persona, filter and model.
    let second = &child_model.requests()[1];
    assert_eq!(second.model, "child-model");
    assert!(
        second
            .system
            .clone()
            .unwrap()
            .contains("You are the resumable persona.")
    );
    assert!(!second.tools.iter().any(|t| t.name == "gate"));
    let notices = user_messages(&parent.log().events().unwrap(), "subagent-settled");
    assert_eq!(notices[1]["content"][2]["text"], "second answer");
}

#[tokio::test]
async fn send_message_refuses_strangers_unknown_ids_and_one_shot_children() {
    let rig = Rig::new();
    continuable(&rig);
    rig.tool(json!({"provider": "spawn", "toolName": "subagent_once"}))
        .unwrap();
    rig.control_tools(Default::default());
    let owner_model = rig.script(
        "P-OWNER",
        vec![
            start("C-OWNED"),
            call(
                "o1",
                "subagent_once",
                json!({"description": "x", "prompt": "C-ONCE"}),
            ),
            text_response("STARTED"),
            text_response("NOTED"),
        ],
    );
    rig.script("C-OWNED", vec![text_response("owned answer")]);
    rig.script("C-ONCE", vec![text_response("once")]);
    let owner = rig.parent();
    prompt(&owner, "P-OWNER").await;
    settled(&rig).await;
    eventually("notice", || {
        user_messages(&owner.log().events().unwrap(), "subagent-settled").len() == 1
            && owner.status() == dsh_agent::AgentStatus::Idle
    })
    .await;
    // The continuable child may settle while the owner's first turn still runs (its notice is
    // then spliced into that turn) or after it (the notice opens a turn of its own, which
    // answers "NOTED"). Either order is right; in the first, "NOTED" is still queued, so one
    // filler prompt consumes it before the turn this test scripts next.
    if owner_model.remaining() == 1 {
        prompt(&owner, "P-OWNER filler").await;
    }
    let continuable_id = child_id_from(&tool_results(&owner.log().events().unwrap())[0].0);
    let one_shot_id = rig
        .child_logs()
        .iter()
        .find(|c| c.header.id != continuable_id)
        .unwrap()
        .header
        .id
        .clone();
    rig.script(
        "P-STRANGER",
        vec![
            call(
                "s1",
                "send_message",
                json!({"subagent_id": continuable_id, "message": "hi"}),
            ),
            call(
                "s2",
                "send_message",
                json!({"subagent_id": "no-such-child", "message": "hi"}),
            ),
            text_response("done"),
        ],
    );
    let stranger = rig.parent();
    prompt(&stranger, "P-STRANGER").await;
    rig.script(
        "P-OWNER",
        vec![
            call(
                "s3",
                "send_message",
                json!({"subagent_id": one_shot_id, "message": "hi"}),
            ),
            text_response("done"),
        ],
    );
    prompt(&owner, "P-OWNER once more").await;
    // Checklists 47, 48 and 49.
    let stranger_results = tool_results(&stranger.log().events().unwrap());
    assert_eq!(
        stranger_results,
        vec![
            (
                format!("Error: subagent \"{continuable_id}\" belongs to another parent session"),
                true
            ),
            (
                "Error: subagent \"no-such-child\" is unavailable".to_owned(),
                true
            ),
        ]
    );
    assert_eq!(
        tool_results(&owner.log().events().unwrap()).last().unwrap(),
        &(
            format!(
                "Error: subagent \"{one_shot_id}\" has no supported continuation state and cannot be resumed; do not retry send_message with this id"
            ),
            true
        )
    );
}

#[tokio::test]
async fn interrupt_cancels_the_current_turn_and_parks_queued_messages() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn", "backgroundMode": "continuable", "maxDepth": 3}))
        .unwrap();
    rig.control_tools(Default::default());
    let gates = rig.gates();
    rig.script("P-INT", vec![start("C-INT"), text_response("STARTED")]);
    rig.script(
        "C-INT",
        vec![
            dsh_agent::scripted::tool_calls_response(&[
                (
                    "sub",
                    "subagent",
                    &json!({"description": "leaf", "prompt": "LEAF-INT"}).to_string(),
                ),
                ("g", "gate", &json!({"name": "never"}).to_string()),
            ]),
            text_response("after interrupt"),
        ],
    );
    rig.script(
        "LEAF-INT",
        vec![
            call("lg", "gate", json!({"name": "leaf"})),
            text_response("leaf done"),
        ],
    );
    let parent = rig.parent();
    prompt(&parent, "P-INT").await;
    let id = child_id_from(&tool_results(&parent.log().events().unwrap())[0].0);
    eventually("the child and its leaf to be resident", || {
        rig.subagents.resident().len() == 2
    })
    .await;
    let leaf = rig
        .subagents
        .resident()
        .into_iter()
        .find(|r| *r != id)
        .unwrap();
    eventually("the leaf to wait at its gate", || {
        rig.directory.get(&leaf).is_some_and(|l| {
            l.log()
                .events()
                .unwrap()
                .iter()
                .any(|e| e.kind == "tool/call")
        })
    })
    .await;
    rig.script(
        "P-INT",
        vec![
            call(
                "q",
                "send_message",
                json!({"subagent_id": id, "message": "queued work"}),
            ),
            call("i", "interrupt_agent", json!({"agent_id": id})),
            call("i2", "interrupt_agent", json!({"agent_id": "nobody"})),
            text_response("INTERRUPTED"),
        ],
    );
    prompt(&parent, "P-INT stop it").await;
    let results = tool_results(&parent.log().events().unwrap());
    // Checklists 51 and 54.
    assert_eq!(
        results[2],
        (format!("interrupt requested for agent {id}"), false)
    );
    assert_eq!(
        results[3],
        ("interrupt requested for agent nobody".to_owned(), false)
    );
    let child = rig.directory.get(&id).unwrap();
    eventually("the child's turn to end", || {
        child.status() == dsh_agent::AgentStatus::Idle
            && child
                .log()
                .events()
                .unwrap()
                .iter()
                .any(|e| e.kind == "turn/end")
    })
    .await;
    let end = child
        .log()
        .events()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e.kind == "turn/end")
        .unwrap()
        .data
        .clone();
    assert_eq!(
        end["reason"],
        json!({"kind": "aborted", "reason": {"kind": "parent"}})
    );
    // The queued message stays parked, the leaf keeps running, the child stays resident.
    assert_eq!(child.pending().0.len(), 1);
    assert!(rig.subagents.resident().contains(&id));
    assert!(rig.subagents.resident().contains(&leaf));
    // A later waking send runs the parked message and the new one.
    rig.script(
        "P-INT",
        vec![
            call(
                "q2",
                "send_message",
                json!({"subagent_id": id, "message": "go on"}),
            ),
            text_response("SENT"),
        ],
    );
    rig.script(
        "C-INT",
        vec![text_response("ran parked work"), text_response("ran go on")],
    );
    prompt(&parent, "P-INT resume").await;
    gates.open("leaf");
    eventually("two more child turns", || {
        child.log().turn_state().last_turn >= 3
    })
    .await;
    parent.cancel(dsh_agent::AbortReason::User, false);
    rig.subagents.drain().await.unwrap();
}

#[tokio::test]
async fn interrupt_authority_follows_the_live_lineage() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn", "backgroundMode": "continuable", "maxDepth": 3}))
        .unwrap();
    rig.control_tools(Default::default());
    let gates = rig.gates();
    rig.script("P-AUTH", vec![start("C-AUTH"), text_response("STARTED")]);
    rig.script(
        "C-AUTH",
        vec![
            call(
                "sub",
                "subagent",
                json!({"description": "leaf", "prompt": "LEAF-AUTH"}),
            ),
            call("g", "gate", json!({"name": "mid"})),
            text_response("mid done"),
        ],
    );
    rig.script(
        "LEAF-AUTH",
        vec![
            call("lg", "gate", json!({"name": "leaf"})),
            text_response("leaf done"),
        ],
    );
    let parent = rig.parent();
    prompt(&parent, "P-AUTH").await;
    let mid = child_id_from(&tool_results(&parent.log().events().unwrap())[0].0);
    eventually("both resident", || rig.subagents.resident().len() == 2).await;
    let leaf = rig
        .subagents
        .resident()
        .into_iter()
        .find(|r| *r != mid)
        .unwrap();
    let mid_agent = rig.directory.get(&mid).unwrap();
    // Checklist 52, through the service with the same authority the tool uses.
    let own = rig
        .subagents
        .interrupt(
            &mid,
            &dsh_subagent::InterruptAuthority::Ancestor(mid_agent.clone()),
        )
        .unwrap_err();
    assert_eq!(
        own.message,
        format!("agent \"{mid}\" cannot interrupt itself")
    );
    // Checklist 53: a stranger may not; the grandparent (not only the parent) may.
    let stranger = rig.parent();
    let denied = rig
        .subagents
        .interrupt(
            &leaf,
            &dsh_subagent::InterruptAuthority::Ancestor(stranger.clone()),
        )
        .unwrap_err();
    assert_eq!(
        denied.message,
        format!(
            "subagent \"{leaf}\" is not a live descendant of agent \"{}\"",
            stranger.id()
        )
    );
    rig.subagents
        .interrupt(
            &leaf,
            &dsh_subagent::InterruptAuthority::Ancestor(parent.clone()),
        )
        .unwrap();
    let leaf_agent = rig.directory.get(&leaf).unwrap();
    eventually("the leaf turn to abort", || {
        leaf_agent
            .log()
            .events()
            .unwrap()
            .iter()
            .any(|e| e.kind == "turn/end")
    })
    .await;
    gates.open("mid");
    gates.open("leaf");
    rig.subagents.drain().await.unwrap();
    let _ = stranger;
}

#[tokio::test]
async fn report_reaches_the_direct_parent_before_the_settlement_notice() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn", "backgroundMode": "continuable", "toolFilter": {"allow": ["gate"]}}))
        .unwrap();
    rig.control_tools(Default::default());
    let gates = rig.gates();
    rig.script(
        "P-REP",
        vec![
            start("C-REP"),
            call("g", "gate", json!({"name": "parent"})),
            text_response("SEEN BOTH"),
        ],
    );
    let child_model = rig.script(
        "C-REP",
        vec![
            call("cg", "gate", json!({"name": "child"})),
            call("r", "report", json!({"output": "CHILD_REPORT_OK"})),
            text_response("Reported."),
        ],
    );
    let parent = rig.parent();
    parent
        .followup(dsh_protocol::Message::user_text("P-REP"))
        .unwrap();
    // The child reports only once the parent waits at its gate, so both the report and the
    // notice queue for the parent's next step however the two threads are scheduled.
    eventually("the parent at its gate", || {
        parent
            .log()
            .events()
            .unwrap()
            .iter()
            .any(|e| e.kind == "tool/call" && e.data.pointer("/name") == Some(&json!("gate")))
    })
    .await;
    gates.open("child");
    settled(&rig).await;
    eventually("report and notice spliced", || {
        parent.pending().1.len() == 2
    })
    .await;
    gates.open("parent");
    parent.when_idle().await;
    let id = child_id_from(&tool_results(&parent.log().events().unwrap())[0].0);
    // Checklist 61: report is offered although the filter allows only `gate`.
    let offered: Vec<String> = child_model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(offered, vec!["gate".to_owned(), "report".to_owned()]);
    // Checklist 62.
    let child = rig.store.as_ref().unwrap().load(&id).unwrap();
    let (report_text, is_error) = tool_results(&child.events)[1].clone();
    assert!(!is_error);
    assert!(report_text.starts_with("report accepted by the agent that started you as message "));
    let relays = user_messages(&parent.log().events().unwrap(), "subagent-report");
    assert_eq!(relays.len(), 1);
    assert_eq!(
        relays[0]["content"],
        json!([
            {"type": "text", "text": format!("Background subagent {id} reported:")},
            {"type": "text", "text": "CHILD_REPORT_OK"}
        ])
    );
    assert_eq!(
        relays[0]["source"],
        json!({"kind": "subagent-report", "form": "relay", "senderSessionId": id})
    );
    assert_eq!(
        report_text,
        format!(
            "report accepted by the agent that started you as message {}",
            relays[0]["id"].as_str().unwrap()
        )
    );
    // Checklist 64: the report precedes the notice.
    let order: Vec<String> = parent
        .log()
        .events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == "user/message")
        .filter_map(|e| {
            e.data
                .pointer("/source/kind")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .filter(|k| k.starts_with("subagent-"))
        .collect();
    assert_eq!(order, vec!["subagent-report", "subagent-settled"]);
}

#[tokio::test]
async fn report_delivery_next_step_wakes_and_quiet_does_not() {
    for (delivery, wakes) in [
        (dsh_subagent::ReportDelivery::NextStep, true),
        (dsh_subagent::ReportDelivery::Quiet, false),
    ] {
        let rig = Rig::new();
        rig.control_tools(dsh_subagent::tools::ReportConfig {
            report_delivery: delivery,
        });
        let gates = rig.gates();
        rig.script(
            "C-WAKE",
            vec![
                call("r", "report", json!({"output": "found"})),
                call("g", "gate", json!({"name": "child"})),
                text_response("bye"),
            ],
        );
        let parent = rig.parent();
        let accepted = rig
            .subagents
            .start_continuable(ContinuableStart {
                provider: "spawn".into(),
                label: "l".into(),
                child_id: None,
                request: StartRequest::new(
                    parent.clone(),
                    vec![ContentBlock::text("C-WAKE")],
                    CancellationToken::new(),
                ),
            })
            .await
            .unwrap();
        let child = rig.directory.get(&accepted.child_id).unwrap();
        eventually("the report", || {
            child
                .log()
                .events()
                .unwrap()
                .iter()
                .any(|e| e.kind == "tool/result")
        })
        .await;
        // Checklist 63 (the idle parent's only user message is the report).
        if wakes {
            eventually("the parent to wake", || {
                parent.log().turn_state().last_turn == 1
            })
            .await;
        } else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(parent.log().turn_state().last_turn, 0);
            assert_eq!(parent.pending().1.len(), 1);
        }
        // Checklist 65: once the parent is gone, a report is refused.
        parent.cancel(dsh_agent::AbortReason::User, false);
        parent.when_idle().await;
        rig.directory.unregister(&parent);
        let refused = rig
            .subagents
            .report_from(
                &child,
                vec![ContentBlock::text("late")],
                delivery,
                &CancellationToken::new(),
            )
            .unwrap_err();
        assert_eq!(
            refused.message,
            "direct parent is not live; report was not delivered"
        );
        assert_eq!(refused.code.as_deref(), Some("PARENT_UNAVAILABLE"));
        // Checklist 43: with no live parent the notice is dropped; teardown still completes.
        gates.open("child");
        settled(&rig).await;
        assert!(user_messages(&parent.log().events().unwrap(), "subagent-settled").is_empty());
    }
}

#[tokio::test]
async fn report_is_absent_from_roots_and_one_shot_children() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn"})).unwrap();
    rig.control_tools(Default::default());
    rig.script(
        "P-NOREPORT",
        vec![
            call(
                "s",
                "subagent",
                json!({"description": "x", "prompt": "C-NOREPORT"}),
            ),
            text_response("done"),
        ],
    );
    let child_model = rig.script("C-NOREPORT", vec![text_response("x")]);
    let parent_model = rig.model.route("P-NOREPORT");
    let parent = rig.parent();
    prompt(&parent, "P-NOREPORT").await;
    let names =
        |r: &dsh_llm::ModelRequest| r.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    assert!(!names(&parent_model.requests()[0]).contains(&"report".to_owned()));
    assert!(!names(&child_model.requests()[0]).contains(&"report".to_owned()));
}

#[tokio::test]
async fn the_report_fence_delivers_report_and_notice_to_the_spawn_turn() {
    let rig = Rig::new();
    continuable(&rig);
    rig.control_tools(Default::default());
    dsh_test_fixtures::install_report_fence(&rig.hooks, rig.directory.clone(), &rig.root);
    rig.script(
        "P-FENCE",
        vec![
            start("C-FENCE Call the report tool"),
            text_response("STARTED"),
            text_response("SUBAGENT_SETTLED_NOTED"),
        ],
    );
    rig.script(
        "C-FENCE",
        vec![
            call("r", "report", json!({"output": "CHILD_REPORT_OK"})),
            text_response("Reported."),
        ],
    );
    let parent_model = rig.model.route("P-FENCE");
    let parent = rig.parent();
    prompt(&parent, "P-FENCE go").await;
    // The parent stays busy after its spawn turn until the notice is in; its second turn
    // enters the report and the notice together.
    assert_eq!(parent.log().turn_state().last_turn, 2);
    let requests = parent_model.requests();
    assert_eq!(requests.len(), 3);
    let kinds: Vec<String> = requests[2]
        .messages
        .iter()
        .map(|m| m.source.kind().to_owned())
        .filter(|k| k.starts_with("subagent-"))
        .collect();
    assert_eq!(kinds, vec!["subagent-report", "subagent-settled"]);
    assert_eq!(
        tool_results(&parent.log().events().unwrap())[0].0,
        format!("started subagent {}", rig.child_logs()[0].header.id)
    );
}
