//! §10 items 43–48: cancellation and disposal.

use std::sync::Arc;
use std::sync::Mutex;

use dsh_agent::AbortReason;
use dsh_agent::AgentError;
use dsh_agent::AgentEvent;
use dsh_agent::AgentStatus;
use dsh_agent::scripted::Script;
use dsh_agent::scripted::text_response;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_protocol::StreamChunk;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::Options;
use super::support::Rig;
use super::support::idle;
use super::support::text;
use super::support::until;

fn has_partial(rig: &Rig) -> bool {
    rig.of("assistant/chunk")
        .iter()
        .any(|e| e.data["chunk"]["type"] == "text-delta")
}

#[tokio::test]
async fn item_43_cancel_mid_stream_keeps_the_visible_prefix() {
    let rig = Rig::new();
    rig.adapter.push(Script::Hang);
    rig.agent.followup(Message::user_text("go")).unwrap();
    until(|| has_partial(&rig)).await;
    rig.agent.cancel(AbortReason::User, false);
    idle(&rig.agent).await;
    let message = &rig.of("assistant/message")[0];
    assert_eq!(message.data["interrupted"], true);
    assert_eq!(
        message.data["message"]["content"],
        json!([{"type": "text", "text": "partial"}])
    );
    let chunks: Vec<u64> = rig.of("assistant/chunk").iter().map(|e| e.seq).collect();
    assert_eq!(message.source_event_seqs(), Some(chunks.as_slice()));
    assert!(
        rig.of("assistant/chunk")
            .iter()
            .all(|e| e.data["chunk"]["type"] != "finish"),
        "a loop cancel logs no finish"
    );
    assert_eq!(
        rig.turn_ends(),
        [json!({"kind": "aborted", "reason": {"kind": "user"}})]
    );
    let kinds = rig.kinds();
    assert_eq!(
        kinds[kinds.len() - 3..],
        ["assistant/message", "step/end", "turn/end"]
    );

    // Nothing visible streamed: no message.
    rig.adapter
        .push(Script::HangAfter(vec![StreamChunk::BlockStart {
            index: 0,
            block_type: "text".into(),
        }]));
    rig.agent.followup(Message::user_text("again")).unwrap();
    until(|| rig.of("assistant/chunk").len() == 3).await;
    rig.agent.cancel(AbortReason::User, false);
    idle(&rig.agent).await;
    assert_eq!(rig.of("assistant/message").len(), 1);
    assert_eq!(rig.turn_ends()[1]["kind"], "aborted");
}

#[tokio::test]
async fn item_44_cancel_discards_pending_inbox_unless_kept() {
    let rig = Rig::new();
    let context = Message::user(vec![ContentBlock::text("ctx")], MessageSource::plugin("t"));
    rig.agent.inject(context.clone()).unwrap();
    rig.agent.cancel(AbortReason::User, false);
    let splices = rig.of("agent/inbox/spliced");
    assert_eq!(
        splices[1].data,
        json!({"target": "next-step", "start": 0, "removedCount": 1, "inserted": [], "outcome": "canceled"})
    );
    assert_eq!(rig.agent.pending(), (vec![], vec![]));
    assert!(rig.events.lock().unwrap().iter().any(
        |e| matches!(e, AgentEvent::InboxDiscarded { message, .. } if message.id == context.id)
    ));

    let kept = Message::user(vec![ContentBlock::text("kept")], MessageSource::plugin("t"));
    rig.agent.inject(kept.clone()).unwrap();
    rig.agent.cancel(AbortReason::User, true);
    assert_eq!(rig.agent.pending().1, vec![kept]);
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("go").await;
    let entered: Vec<String> = rig
        .of("user/message")
        .iter()
        .map(|e| text(&e.data))
        .collect();
    assert_eq!(entered, ["kept", "go"]);
}

#[tokio::test]
async fn item_46_a_waking_send_after_abort_runs_at_convergence() {
    let rig = Rig::new();
    rig.adapter.push(Script::Hang);
    rig.adapter.push_chunks(text_response("second"));
    rig.agent.followup(Message::user_text("first")).unwrap();
    until(|| has_partial(&rig)).await;
    rig.agent.cancel(AbortReason::User, false);
    // Still running (aborted): the steer is re-routed to next-turn and latched.
    rig.agent.steer(Message::user_text("late")).unwrap();
    assert_eq!(
        rig.of("agent/inbox/spliced").last().unwrap().data["target"],
        "next-turn"
    );
    idle(&rig.agent).await;
    assert_eq!(
        rig.turn_ends(),
        [
            json!({"kind": "aborted", "reason": {"kind": "user"}}),
            json!({"kind": "completed"})
        ]
    );
    assert_eq!(text(&rig.of("user/message")[1].data), "late");
}

#[tokio::test]
async fn item_47_cancel_from_a_running_status_listener_prevents_turn_start() {
    let rig = Rig::with(Options {
        setup: Some(Box::new(|root, hooks, cell| {
            let cell = cell.clone();
            hooks.events.register(root, move |event| {
                if let AgentEvent::Status {
                    status: AgentStatus::Running,
                    ..
                } = event
                    && let Some(agent) = cell.get()
                {
                    agent.cancel(AbortReason::User, true);
                }
                Ok(())
            });
        })),
        ..Options::default()
    });
    rig.agent.followup(Message::user_text("never")).unwrap();
    idle(&rig.agent).await;
    assert_eq!(rig.kinds(), ["agent/inbox/spliced"]);
    assert_eq!(rig.agent.pending().0.len(), 1);
    assert_eq!(rig.agent.status(), AgentStatus::Idle);
}

#[tokio::test]
async fn item_48_disposal_aborts_the_turn_and_never_starts_queued_work() {
    let rig = Rig::new();
    let order = Arc::new(Mutex::new(Vec::new()));
    let sink = order.clone();
    let log = rig.log().clone();
    rig.hooks.events.register(&rig.root, move |event| {
        if let AgentEvent::Disposed { .. } = event {
            sink.lock()
                .unwrap()
                .push(format!("disposed after {}", log.last().unwrap().kind));
        }
        Ok(())
    });
    rig.adapter.push(Script::Hang);
    rig.adapter.push_chunks(text_response("never"));
    rig.agent.followup(Message::user_text("first")).unwrap();
    rig.agent.followup(Message::user_text("queued")).unwrap();
    until(|| has_partial(&rig)).await;
    rig.agent.dispose().await;
    assert_eq!(
        rig.turn_ends(),
        [json!({"kind": "aborted", "reason": {"kind": "disposed"}})]
    );
    assert_eq!(rig.of("turn/start").len(), 1);
    assert_eq!(*order.lock().unwrap(), ["disposed after turn/end"]);
    assert!(rig.agent.scope().is_disposed());
    assert!(matches!(
        rig.agent.followup(Message::user_text("late")),
        Err(AgentError::Disposed(_))
    ));
    assert_eq!(rig.adapter.remaining(), 1);
}
