//! One-shot in-process children through the `subagent` tool: child sessions, inheritance,
//! depth, foreground results and failures (subagent-spec §1.3–§1.7, §2.1).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use dsh_subagent::DELEGATION_CONTEXT;
use dsh_subagent::DESCRIPTOR_KIND;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;
use support::*;

fn foreground(prompt: &str) -> Vec<dsh_protocol::StreamChunk> {
    call(
        "call-1",
        "subagent",
        json!({"description": "Say hi", "prompt": prompt, "run_in_background": false}),
    )
}

#[tokio::test]
async fn a_foreground_child_has_its_own_session_and_returns_its_answer() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn"})).unwrap();
    let events = rig.record_events();
    rig.script(
        "P-MAIN",
        vec![foreground("C-ONE reply hi"), text_response("PARENT_DONE")],
    );
    rig.script("C-ONE", vec![text_response("hi there")]);
    let parent = rig.parent();
    prompt(&parent, "P-MAIN delegate").await;

    // §2.1.4: the tool result is the child's final text.
    assert_eq!(
        tool_results(&parent.log().events().unwrap()),
        vec![("hi there".to_owned(), false)]
    );
    let children = rig.child_logs();
    assert_eq!(children.len(), 1);
    let child = &children[0];
    // §1.3.1 header (checklist 6).
    assert_eq!(child.header.parent_session.as_deref(), Some(parent.id()));
    assert_eq!(child.header.origin.as_deref(), Some("subagent"));
    assert_eq!(child.header.delegation_depth, 1);
    assert_eq!(child.header.cwd, parent.log().header().cwd);
    assert_eq!(child.header.seed_length, None);
    // A sibling of the parent's directory (same project key), never nested.
    let parent_dir = parent.log().path().unwrap();
    assert_eq!(
        child.path.parent().unwrap().parent(),
        parent_dir.parent().unwrap().parent()
    );
    // §1.3.3 event order (checklists 9 and 12).
    let kinds = kinds(&child.events);
    assert_eq!(
        kinds[..8],
        [
            "approval/policy",
            "agent/inbox/spliced",
            "turn/start",
            "agent/inbox/spliced",
            DESCRIPTOR_KIND,
            "step/start",
            "user/message",
            "user/message",
        ]
    );
    assert_eq!(
        child.events[0].data,
        json!({"policy": "never", "source": "delegation"})
    );
    let descriptors: Vec<&Value> = child
        .events
        .iter()
        .filter(|e| e.kind == DESCRIPTOR_KIND)
        .map(|e| e.data.value())
        .collect();
    assert_eq!(
        descriptors,
        vec![&json!({"version": 2, "mode": "one-shot", "provider": "spawn", "label": "Say hi"})]
    );
    // §1.4 (checklist 14): the statement follows the sandbox and approval sentences.
    let snapshot = child.events[7]
        .data
        .pointer("/content/0/text")
        .unwrap()
        .as_str()
        .unwrap();
    let approval = snapshot.find("Approval prompts are disabled").unwrap();
    let sandbox = snapshot.find("Sandbox:").unwrap();
    let statement = snapshot.find(DELEGATION_CONTEXT).unwrap();
    assert!(sandbox < approval && approval < statement, "{snapshot}");
    for event in parent.log().events().unwrap().iter() {
        assert!(
            !event
                .data
                .to_string()
                .contains("You are a delegated subagent")
        );
    }
    // §5.1 (checklist 4): start precedes end, same run and child.
    let events = events.lock().unwrap().clone();
    let lifecycle: Vec<_> = events
        .iter()
        .filter(|(name, _, _)| name.starts_with("subagent/s") || name == "subagent/end")
        .collect();
    assert_eq!(lifecycle.len(), 2);
    assert_eq!(lifecycle[0].0, "subagent/start");
    assert_eq!(lifecycle[1].0, "subagent/end");
    assert_eq!(lifecycle[0].1, child.header.id);
    let run_id = lifecycle[0].2.clone().unwrap();
    assert_eq!(
        lifecycle[1].2.clone().unwrap(),
        format!("{run_id}:completed")
    );
}

#[tokio::test]
async fn the_child_inherits_the_route_and_overrides_win() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn"})).unwrap();
    rig.tool(json!({
        "provider": "spawn",
        "toolName": "subagent_big",
        "agentOptions": {"model": "big-model", "maxTokens": 77}
    }))
    .unwrap();
    rig.script(
        "P-ROUTE",
        vec![
            call(
                "c1",
                "subagent",
                json!({"description": "a", "prompt": "C-INHERIT"}),
            ),
            call(
                "c2",
                "subagent_big",
                json!({"description": "b", "prompt": "C-OVERRIDE"}),
            ),
            text_response("done"),
        ],
    );
    let inherit = rig.script("C-INHERIT", vec![text_response("x")]);
    let overridden = rig.script("C-OVERRIDE", vec![text_response("y")]);
    let parent = rig.parent_with(None, Some(500));
    prompt(&parent, "P-ROUTE").await;
    // Checklist 15.
    let first = &inherit.requests()[0];
    assert_eq!(first.model, "mock-model");
    assert_eq!(first.max_tokens, Some(500));
    let second = &overridden.requests()[0];
    assert_eq!(second.model, "big-model");
    assert_eq!(second.max_tokens, Some(77));
}

#[tokio::test]
async fn persona_and_tool_filter_apply_to_the_child_only() {
    let rig = Rig::new();
    rig.tool(json!({
        "provider": "spawn",
        "persona": "You are the reviewer persona.",
        "toolFilter": {"deny": ["send_message"]}
    }))
    .unwrap();
    rig.control_tools(Default::default());
    rig.script(
        "P-FILTER",
        vec![
            call(
                "c1",
                "subagent",
                json!({"description": "a", "prompt": "C-FILTERED"}),
            ),
            text_response("done"),
        ],
    );
    let child_model = rig.script(
        "C-FILTERED",
        vec![
            call(
                "x1",
                "send_message",
                json!({"subagent_id": "a", "message": "b"}),
            ),
            text_response("ok"),
        ],
    );
    let parent_model = rig.model.route("P-FILTER");
    let parent = rig.parent();
    prompt(&parent, "P-FILTER").await;
    let child_request = &child_model.requests()[0];
    let parent_request = &parent_model.requests()[0];
    // Checklist 17: the persona shadows the deployment persona in the child only.
    let child_system = child_request.system.clone().unwrap();
    assert!(child_system.contains("You are the reviewer persona."));
    assert!(!child_system.contains("You are the deployment persona."));
    assert!(
        parent_request
            .system
            .clone()
            .unwrap()
            .contains("You are the deployment persona.")
    );
    // Checklist 16: hidden and blocked in the child, untouched in the parent.
    let names =
        |r: &dsh_llm::ModelRequest| r.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    assert!(!names(child_request).contains(&"send_message".to_owned()));
    assert!(names(parent_request).contains(&"send_message".to_owned()));
    let child = &rig.child_logs()[0];
    let results = tool_results(&child.events);
    assert!(results[0].1, "{results:?}");
    assert!(results[0].0.contains("send_message"), "{results:?}");
}

#[tokio::test]
async fn depth_limits_reject_per_attempt_and_the_tool_stays_listed() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn", "maxDepth": 1}))
        .unwrap();
    rig.script(
        "P-DEPTH",
        vec![
            call(
                "c1",
                "subagent",
                json!({"description": "a", "prompt": "C-DEEP"}),
            ),
            text_response("done"),
        ],
    );
    let child_model = rig.script(
        "C-DEEP",
        vec![
            call(
                "c2",
                "subagent",
                json!({"description": "b", "prompt": "C-DEEPER"}),
            ),
            text_response("could not"),
        ],
    );
    let parent = rig.parent();
    prompt(&parent, "P-DEPTH").await;
    // Checklist 18.
    let child = &rig.child_logs()[0];
    assert_eq!(
        tool_results(&child.events),
        vec![(
            "Error: subagent depth 2 exceeds maxDepth 1".to_owned(),
            true
        )]
    );
    let offered: Vec<String> = child_model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(offered.contains(&"subagent".to_owned()));
    assert_eq!(rig.child_logs().len(), 1, "no grandchild session");
}

#[tokio::test]
async fn max_depth_zero_forbids_all_delegation() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn", "maxDepth": 0}))
        .unwrap();
    rig.script(
        "P-ZERO",
        vec![
            call(
                "c1",
                "subagent",
                json!({"description": "a", "prompt": "C-NEVER"}),
            ),
            text_response("done"),
        ],
    );
    let parent = rig.parent();
    prompt(&parent, "P-ZERO").await;
    // Checklist 19.
    assert_eq!(
        tool_results(&parent.log().events().unwrap()),
        vec![(
            "Error: subagent depth 1 exceeds maxDepth 0".to_owned(),
            true
        )]
    );
    assert!(rig.child_logs().is_empty());
}

#[tokio::test]
async fn a_max_tokens_child_fails_with_its_partial_text() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn"})).unwrap();
    rig.script(
        "P-MAX",
        vec![
            call(
                "c1",
                "subagent",
                json!({"description": "a", "prompt": "C-MAX"}),
            ),
            text_response("noted"),
        ],
    );
    rig.script("C-MAX", vec![max_tokens_response("partial assistant text")]);
    let parent = rig.parent();
    prompt(&parent, "P-MAX").await;
    // Checklist 26.
    assert_eq!(
        tool_results(&parent.log().events().unwrap()),
        vec![(
            "Error: subagent run hit its token limit before finishing\nPartial output before the run ended:\npartial assistant text"
                .to_owned(),
            true
        )]
    );
}

#[tokio::test]
async fn a_failing_child_model_yields_subagent_run_failed() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn"})).unwrap();
    rig.script(
        "P-FAIL",
        vec![
            call(
                "c1",
                "subagent",
                json!({"description": "a", "prompt": "C-CRASH"}),
            ),
            text_response("noted"),
        ],
    );
    rig.script(
        "C-CRASH",
        vec![dsh_agent::scripted::error_response(
            dsh_protocol::LlmFailure::new("INVALID_REQUEST", "bad request"),
        )],
    );
    let parent = rig.parent();
    prompt(&parent, "P-FAIL").await;
    // A crashing child gets the exact headline (checklist 28 / the fault list).
    assert_eq!(
        tool_results(&parent.log().events().unwrap()),
        vec![("Error: subagent run failed".to_owned(), true)]
    );
}

#[tokio::test]
async fn cancelling_the_parent_turn_settles_the_child_as_aborted() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn"})).unwrap();
    rig.script(
        "P-CANCEL",
        vec![call(
            "c1",
            "subagent",
            json!({"description": "a", "prompt": "C-HANG"}),
        )],
    );
    rig.script_raw("C-HANG", vec![dsh_agent::scripted::Script::Hang]);
    let parent = rig.parent();
    parent
        .followup(dsh_protocol::Message::user_text("P-CANCEL"))
        .unwrap();
    eventually("the child to start streaming", || {
        rig.child_logs()
            .first()
            .is_some_and(|c| c.events.iter().any(|e| e.kind == "step/start"))
    })
    .await;
    parent.cancel(dsh_agent::AbortReason::User, false);
    tokio::time::timeout(std::time::Duration::from_secs(5), parent.when_idle())
        .await
        .unwrap();
    let child = &rig.child_logs()[0];
    let end = child
        .events
        .iter()
        .rev()
        .find(|e| e.kind == "turn/end")
        .unwrap();
    assert_eq!(
        end.data,
        json!({"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "parent"}}})
    );
    assert!(child.repair.is_empty(), "the child log is closed");
    let results = tool_results(&parent.log().events().unwrap());
    assert_eq!(results.len(), 1);
    assert!(results[0].1);
    assert_eq!(rig.directory.len(), 1, "only the parent stays live");
}
