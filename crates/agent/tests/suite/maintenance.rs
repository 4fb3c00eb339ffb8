//! Maintenance admission (ALS §2.4 `runMaintenance`), used by manual compaction.

use dsh_agent::AgentError;
use dsh_agent::AgentStatus;
use dsh_agent::CancelCause;
use dsh_agent::scripted::text_response;
use dsh_protocol::Message;
use pretty_assertions::assert_eq;

use super::support::Rig;
use super::support::idle;

#[tokio::test]
async fn a_prompt_sent_during_maintenance_waits_and_runs_after_release() {
    let rig = Rig::new();
    rig.adapter.push_chunks(text_response("later"));
    let guard = rig.agent.begin_maintenance().unwrap();
    assert_eq!(rig.agent.status(), AgentStatus::Idle);
    // A second reservation, or a busy agent, is refused.
    assert!(matches!(
        rig.agent.begin_maintenance(),
        Err(AgentError::NotIdle(_))
    ));
    let prompt = Message::user_text("queued");
    rig.agent.followup(prompt.clone()).unwrap();
    tokio::task::yield_now().await;
    // Queued, not started: no turn was opened.
    assert_eq!(rig.kinds(), ["agent/inbox/spliced"]);
    assert_eq!(rig.agent.pending().0, vec![prompt]);
    drop(guard);
    idle(&rig.agent).await;
    assert_eq!(rig.adapter.remaining(), 0);
    assert_eq!(rig.of("turn/start").len(), 1);
}

#[tokio::test]
async fn maintenance_is_refused_while_running_or_with_queued_work() {
    let rig = Rig::new();
    rig.adapter
        .set_chunk_delay(Some(std::time::Duration::from_millis(50)));
    rig.adapter.push_chunks(text_response("slow"));
    rig.agent.followup(Message::user_text("go")).unwrap();
    assert!(matches!(
        rig.agent.begin_maintenance(),
        Err(AgentError::NotIdle(_))
    ));
    idle(&rig.agent).await;
    let guard = rig.agent.begin_maintenance().unwrap();
    drop(guard);
}

#[tokio::test]
async fn cancel_fires_the_maintenance_token_and_when_idle_waits_for_release() {
    let rig = Rig::new();
    let guard = rig.agent.begin_maintenance().unwrap();
    let token = guard.token().clone();
    rig.agent.cancel(CancelCause::User, false);
    assert!(token.is_cancelled());
    let agent = rig.agent.clone();
    let waiter = tokio::spawn(async move { agent.when_idle().await });
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert!(!waiter.is_finished());
    drop(guard);
    waiter.await.unwrap();
}

#[tokio::test]
async fn pending_items_can_be_prepended_replaced_and_removed_durably() {
    let rig = Rig::new();
    let a = Message::user_text("a");
    let b = Message::user_text("b");
    let c = Message::user_text("c");
    rig.agent.inject(a.clone()).unwrap();
    rig.agent.prepend_next_step(b.clone()).unwrap();
    assert_eq!(rig.agent.pending().1, vec![b.clone(), a.clone()]);
    let replaced = rig.agent.remove_pending(&a.id, Some(c.clone())).unwrap();
    assert_eq!(replaced, Some(a.clone()));
    assert_eq!(rig.agent.pending().1, vec![b.clone(), c.clone()]);
    assert_eq!(
        rig.agent.remove_pending(&b.id, None).unwrap(),
        Some(b.clone())
    );
    assert_eq!(rig.agent.remove_pending("missing", None).unwrap(), None);
    assert_eq!(rig.agent.pending().1, vec![c.clone()]);
    let splices = rig.of("agent/inbox/spliced");
    assert_eq!(splices.len(), 4);
    assert_eq!(splices[1].data["start"], 0);
    assert_eq!(
        splices[2].data,
        serde_json::json!({"target": "next-step", "start": 1, "removedCount": 1,
            "inserted": [serde_json::to_value(&c).unwrap()], "outcome": "canceled"})
    );
    assert_eq!(splices[3].data["outcome"], "canceled");
    // A resumed inbox replays the same lists.
    let log = dsh_session::SessionLog::from_seed(
        rig.log().header().clone(),
        rig.log()
            .events()
            .unwrap()
            .iter()
            .map(|e| e.as_ref().clone())
            .collect(),
    )
    .unwrap();
    let resumed = Rig::with(super::support::Options {
        log: Some(log),
        ..Default::default()
    });
    assert_eq!(resumed.agent.pending().1, vec![c]);
}
