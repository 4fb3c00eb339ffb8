//! `run_once`, tool-side `inject`, inbox restoration on resume, and a multi-threaded race.

use std::sync::Arc;
use std::time::Duration;

use dsh_agent::TurnEndReason;
use dsh_agent::run_final;
use dsh_agent::run_once;
use dsh_agent::scripted::SCRIPT_EXHAUSTED;
use dsh_agent::scripted::error_response;
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_protocol::ContentBlock;
use dsh_protocol::LlmFailure;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_session::CreateOptions;
use dsh_session::JsonlStore;
use pretty_assertions::assert_eq;

use super::support::Options;
use super::support::Rig;
use super::support::idle;
use super::support::text;
use super::support::tool;

#[tokio::test]
async fn run_once_folds_the_last_non_empty_text_and_the_last_turn_end() {
    let rig = Rig::new();
    rig.register(super::support::echo());
    rig.adapter.push_chunks(tool_call_response(
        "c1",
        "echo",
        "{}",
        Some("Let me check."),
    ));
    rig.adapter
        .push_chunks(text_response("Done. The tool returned: echoed"));
    let outcome = run_once(&rig.agent, "Run it").await.unwrap();
    assert_eq!(outcome.text, "Done. The tool returned: echoed");
    assert_eq!(outcome.reason, Some(TurnEndReason::Completed));
    assert_eq!(outcome.session_id, "session-test");
    assert!(outcome.succeeded());

    // An error end: no text from this run, the failure is the reason.
    rig.adapter
        .push_chunks(error_response(LlmFailure::new("AUTH", "bad key")));
    let outcome = run_once(&rig.agent, "again").await.unwrap();
    assert_eq!(outcome.text, "");
    assert_eq!(
        outcome.reason,
        Some(TurnEndReason::Error {
            error: LlmFailure::new("AUTH", "bad key")
        })
    );
    assert!(!outcome.succeeded());

    // A drained script is an in-band failure, not a hang.
    let outcome = run_once(&rig.agent, "third").await.unwrap();
    let Some(TurnEndReason::Error { error }) = outcome.reason else {
        panic!("expected an error end")
    };
    assert_eq!(error.message, SCRIPT_EXHAUSTED);
}

#[tokio::test]
async fn a_tool_can_inject_context_for_the_next_request_without_waking() {
    let rig = Rig::new();
    rig.register(tool("notify", false, |_, run| async move {
        let agent = run.agent().cloned().expect("calls carry their agent");
        let note = Message::user(
            vec![ContentBlock::text("job finished")],
            MessageSource::plugin("jobs"),
        );
        agent
            .inject(note)
            .map_err(|e| dsh_tools::ToolError::new(e.to_string()))?;
        Ok("started".to_owned())
    }));
    rig.adapter
        .push_chunks(tool_call_response("c1", "notify", "{}", None));
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("go").await;
    let second = &rig.adapter.requests()[1];
    let texts: Vec<String> = second
        .messages
        .iter()
        .map(|m| dsh_protocol::text_of(&m.content))
        .collect();
    assert_eq!(texts.last().map(String::as_str), Some("job finished"));
    // The injected context follows the tool result it was produced by.
    let kinds = rig.kinds();
    let result = kinds.iter().position(|k| k == "tool/result").unwrap();
    assert!(kinds[result..].contains(&"user/message".to_owned()));
}

#[tokio::test]
async fn a_pending_injected_context_survives_resume_and_enters_the_next_turn() {
    let home = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(home.path());
    {
        let log = store
            .create(CreateOptions {
                id: Some("session-inbox".into()),
                ..Default::default()
            })
            .unwrap();
        let rig = Rig::with(Options {
            log: Some(log),
            ..Options::default()
        });
        let note = Message::user(
            vec![ContentBlock::text("remember me")],
            MessageSource::plugin("t"),
        );
        rig.agent.inject(note).unwrap();
    }
    let rig = Rig::with(Options {
        log: Some(store.resume("session-inbox").unwrap()),
        ..Options::default()
    });
    assert_eq!(rig.agent.pending().1.len(), 1);
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("go").await;
    let entered: Vec<String> = rig
        .of("user/message")
        .iter()
        .map(|e| text(&e.data))
        .collect();
    assert_eq!(entered, ["remember me", "go"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followups_racing_the_end_of_an_activity_are_never_stranded() {
    let rig = Arc::new(Rig::new());
    const N: usize = 40;
    for i in 0..N {
        rig.adapter.push_chunks(text_response(&format!("r{i}")));
    }
    let sender = rig.clone();
    let task = tokio::spawn(async move {
        for i in 0..N {
            sender
                .agent
                .followup(Message::user_text(format!("p{i}")))
                .unwrap();
            tokio::time::sleep(Duration::from_micros(((i * 37) % 5) as u64 * 150)).await;
        }
    });
    task.await.unwrap();
    for _ in 0..200 {
        idle(&rig.agent).await;
        if rig.turn_ends().len() == N {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(rig.turn_ends().len(), N);
    let prompts: Vec<String> = rig
        .of("user/message")
        .iter()
        .map(|e| text(&e.data))
        .collect();
    assert_eq!(prompts, (0..N).map(|i| format!("p{i}")).collect::<Vec<_>>());
    assert_eq!(rig.agent.pending(), (vec![], vec![]));
}

/// An idle listener that queues a followup, the way the goal-round driver and background-job
/// notices do — synchronously inside the idle notification (`sync`) or from a spawned task.
fn requeue_at_idle(rig: &Rig, sync: bool) -> Arc<std::sync::Mutex<Vec<String>>> {
    use dsh_agent::AgentEvent;
    use dsh_agent::AgentHandle;
    use dsh_agent::AgentStatus;
    let outcomes = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = outcomes.clone();
    let scope = rig.agent.scope().clone();
    rig.hooks.events.register(&rig.root, move |event| {
        if let AgentEvent::Status {
            status: AgentStatus::Idle,
            ..
        } = event
        {
            let (scope, sink) = (scope.clone(), sink.clone());
            let send = move || {
                let Some(agent) = AgentHandle::from_scope(&scope) else {
                    return;
                };
                if !dsh_sync::lock(&sink).is_empty() {
                    return;
                }
                let outcome = match agent.followup(Message::user_text("round 1")) {
                    Ok(()) => "queued".to_owned(),
                    Err(error) => error.to_string(),
                };
                dsh_sync::lock(&sink).push(outcome);
            };
            if sync {
                send();
            } else {
                tokio::spawn(async move { send() });
            }
        }
        Ok(())
    });
    outcomes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_final_closes_the_input_at_the_idle_that_ends_its_task() {
    for sync in [true, false] {
        let rig = Rig::new();
        let outcomes = requeue_at_idle(&rig, sync);
        rig.adapter.push_chunks(text_response("done"));
        rig.adapter.push_chunks(text_response("a second turn"));
        let outcome = run_final(&rig.agent, "the task").await.unwrap();
        assert_eq!(outcome.text, "done");
        assert!(outcome.succeeded());
        // Whenever the listener gets to run, the agent is already closed.
        super::support::until(|| !outcomes.lock().unwrap().is_empty()).await;
        assert_eq!(
            *outcomes.lock().unwrap(),
            ["agent \"session-test\" takes no more input: its final task has run"],
            "sync = {sync}"
        );
        assert!(!rig.agent.accepts_input());
        rig.agent.dispose().await;
        assert_eq!(rig.of("turn/start").len(), 1, "sync = {sync}");
        assert_eq!(rig.adapter.remaining(), 1, "no second request");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_once_leaves_the_agent_open_so_idle_work_runs() {
    let rig = Rig::new();
    let outcomes = requeue_at_idle(&rig, false);
    rig.adapter.push_chunks(text_response("done"));
    rig.adapter.push_chunks(text_response("a second turn"));
    run_once(&rig.agent, "the task").await.unwrap();
    super::support::until(|| rig.of("turn/end").len() == 2).await;
    assert_eq!(*outcomes.lock().unwrap(), ["queued"]);
    assert!(rig.agent.accepts_input());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_input_parked_behind_a_blocked_turn_still_runs() {
    // The final task queued while another activity runs: that activity's end (here a
    // failed turn that parks the inbox) does not close the input before the task ran.
    let rig = Rig::new();
    rig.adapter.push(dsh_agent::scripted::Script::Hang);
    rig.adapter.push_chunks(text_response("the final answer"));
    rig.agent.followup(Message::user_text("first")).unwrap();
    super::support::until(|| !rig.of("request/header").is_empty()).await;
    rig.agent
        .followup_final(Message::user_text("final"))
        .unwrap();
    rig.agent.cancel(dsh_agent::CancelCause::User, true);
    idle(&rig.agent).await;
    assert!(rig.agent.accepts_input(), "the final input has not run yet");
    rig.adapter.push_chunks(text_response("woken"));
    rig.agent.followup(Message::user_text("wake")).unwrap();
    idle(&rig.agent).await;
    let texts: Vec<String> = rig
        .of("user/message")
        .iter()
        .map(|e| text(&e.data))
        .collect();
    assert_eq!(texts, ["first", "final", "wake"]);
    assert!(
        !rig.agent.accepts_input(),
        "closed once the final input ran"
    );
}
