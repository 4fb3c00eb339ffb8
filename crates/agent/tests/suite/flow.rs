//! §10 items 12–29: turn/step flow.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use dsh_agent::AgentEvent;
use dsh_agent::AgentHandle;
use dsh_agent::AgentStatus;
use dsh_agent::PreStepDecision;
use dsh_agent::scripted::Script;
use dsh_agent::scripted::max_tokens_response;
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_agent::scripted::tool_calls_response;
use dsh_kernel::HookError;
use dsh_protocol::ContentBlock;
use dsh_protocol::FinishReason;
use dsh_protocol::Message;
use dsh_protocol::StreamChunk;
use dsh_session::CreateOptions;
use dsh_session::JsonlStore;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::Options;
use super::support::Rig;
use super::support::echo;
use super::support::idle;
use super::support::text;
use super::support::tool;

#[tokio::test]
async fn item_12_followup_on_idle_synchronously_opens_the_turn_and_claims() {
    let rig = Rig::new();
    rig.adapter.push_chunks(text_response("hi"));
    let prompt = Message::user_text("hello");
    rig.agent.followup(prompt.clone()).unwrap();
    // Nothing awaited yet: the head of the turn is already in the log.
    assert_eq!(
        rig.kinds(),
        ["agent/inbox/spliced", "turn/start", "agent/inbox/spliced"]
    );
    let events = rig.log().events().unwrap();
    assert_eq!(events[0].data["target"], "next-turn");
    assert_eq!(events[0].data["inserted"][0]["id"], prompt.id.as_str());
    assert_eq!(events[1].data, json!({"turn": 1}));
    assert_eq!(
        events[2].data,
        json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []})
    );
    assert_eq!(rig.agent.status(), AgentStatus::Running);
    {
        let seen = rig.events.lock().unwrap();
        assert!(matches!(
            &seen[0],
            AgentEvent::SessionStart { resumed: false, .. }
        ));
        assert!(
            matches!(&seen[1], AgentEvent::InboxInserted { message, .. } if message.id == prompt.id)
        );
        assert!(matches!(
            &seen[2],
            AgentEvent::Status {
                status: AgentStatus::Running,
                ..
            }
        ));
        assert!(seen.iter().any(|e| matches!(e, AgentEvent::InboxClaimed { message, turn: 1, .. } if message.id == prompt.id)));
    }
    idle(&rig.agent).await;
}

#[tokio::test]
async fn item_13_simple_text_turn_writes_the_canonical_skeleton() {
    let rig = Rig::new();
    rig.adapter.push_chunks(text_response("hi"));
    rig.prompt("hello").await;
    assert_eq!(
        rig.skeleton(),
        [
            "agent/inbox/spliced",
            "turn/start",
            "agent/inbox/spliced",
            "step/start",
            "user/message",
            "request/header",
            "request/context",
            "assistant/chunk",
            "assistant/message",
            "step/end",
            "turn/end"
        ]
    );
    assert_eq!(rig.of("request/header")[0].data["reason"], "initial");
    assert_eq!(rig.turn_ends(), [json!({"kind": "completed"})]);
    assert_eq!(rig.statuses(), ["Running", "Idle"]);
    assert_eq!(rig.agent.status(), AgentStatus::Idle);
}

#[tokio::test]
async fn item_14_assistant_message_cites_its_chunks_and_usage() {
    let rig = Rig::new();
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("hello").await;
    let chunks: Vec<u64> = rig.of("assistant/chunk").iter().map(|e| e.seq).collect();
    let message = &rig.of("assistant/message")[0];
    assert_eq!(message.source_event_seqs(), Some(chunks.as_slice()));
    assert_eq!(
        message.data["usage"],
        json!({"inputTokens": 10, "outputTokens": 2})
    );

    // A stream that yields nothing at all: the message cites `[]` and stays out of history.
    struct Silent;
    impl dsh_llm::ModelAdapter for Silent {
        fn provider(&self) -> &str {
            "mock"
        }
        fn stream(
            &self,
            _: dsh_llm::ModelRequest,
            _: tokio_util::sync::CancellationToken,
        ) -> dsh_llm::ChunkStream {
            Box::pin(futures::stream::empty())
        }
    }
    let log = dsh_session::SessionLog::in_memory(dsh_session::SessionHeader::new("s2", None));
    let agent = dsh_agent::Agent::create(dsh_agent::AgentConfig {
        id: "s2".into(),
        cwd: None,
        provider: "mock".into(),
        model: "mock".into(),
        max_tokens: None,
        adapter: Arc::new(Silent),
        tools: rig.tools.clone(),
        scope: rig.root.clone(),
        log: log.clone(),
        prompt: Default::default(),
        max_parallel_tool_calls: 10,
    })
    .unwrap();
    agent.followup(Message::user_text("x")).unwrap();
    idle(&agent).await;
    let message = log
        .events()
        .unwrap()
        .iter()
        .find(|e| e.kind == "assistant/message")
        .cloned()
        .unwrap();
    assert_eq!(message.source_event_seqs(), Some(&[][..]));
    assert!(message.data.get("usage").is_none());
    assert_eq!(log.derive_messages().len(), 1);
}

#[tokio::test]
async fn item_15_a_burst_of_followups_runs_n_turns_in_one_running_interval() {
    let rig = Rig::new();
    for t in ["a", "b", "c"] {
        rig.adapter.push_chunks(text_response(t));
    }
    for t in ["one", "two", "three"] {
        rig.agent.followup(Message::user_text(t)).unwrap();
    }
    idle(&rig.agent).await;
    let turns: Vec<u64> = rig
        .of("turn/start")
        .iter()
        .map(|e| e.data["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, [1, 2, 3]);
    let prompts: Vec<(u64, String)> = rig
        .log()
        .events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == "user/message")
        .map(|e| (rig.log().turn_state().last_turn, text(&e.data)))
        .collect();
    assert_eq!(
        prompts.iter().map(|p| p.1.as_str()).collect::<Vec<_>>(),
        ["one", "two", "three"]
    );
    assert_eq!(rig.statuses(), ["Running", "Idle"]);
    assert_eq!(rig.turn_ends().len(), 3);
}

#[tokio::test]
async fn item_16_turn_numbering_continues_after_resume() {
    let home = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(home.path());
    let id = {
        let log = store
            .create(CreateOptions {
                id: Some("session-resume".into()),
                ..Default::default()
            })
            .unwrap();
        let rig = Rig::with(Options {
            log: Some(log),
            ..Options::default()
        });
        rig.adapter.push_chunks(text_response("first"));
        rig.prompt("one").await;
        rig.agent.dispose().await;
        rig.log().id().to_owned()
    };
    let log = store.resume(&id).unwrap();
    let rig = Rig::with(Options {
        log: Some(log),
        ..Options::default()
    });
    rig.adapter.push_chunks(text_response("second"));
    rig.prompt("two").await;
    let turns: Vec<u64> = rig
        .of("turn/start")
        .iter()
        .map(|e| e.data["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, [1, 2]);
    let reasons: Vec<String> = rig
        .of("request/header")
        .iter()
        .map(|e| e.data["reason"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(reasons, ["initial", "resume"]);
    // History continues: the second request sees the first exchange.
    assert_eq!(rig.adapter.requests()[0].messages.len(), 3);
}

#[tokio::test]
async fn item_17_pre_step_fires_once_per_proposed_step_before_step_start() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let rig = Rig::with(Options {
        setup: Some(Box::new(move |root, hooks, cell| {
            let cell = cell.clone();
            hooks.pre_step.register(root, move |input, next| {
                let steps_started = cell.get().map_or(0, |a: &dsh_agent::AgentHandle| {
                    a.log()
                        .events()
                        .unwrap()
                        .iter()
                        .filter(|e| e.kind == "step/start")
                        .count()
                });
                sink.lock()
                    .unwrap()
                    .push((input.turn, input.step, steps_started));
                next.run(input)
            });
        })),
        ..Options::default()
    });
    rig.register(echo());
    rig.adapter
        .push_chunks(tool_call_response("c1", "echo", r#"{"text":"x"}"#, None));
    rig.adapter.push_chunks(text_response("done"));
    rig.prompt("go").await;
    assert_eq!(*seen.lock().unwrap(), [(1, 1, 0), (1, 2, 1)]);
}

#[tokio::test]
async fn item_18_a_reject_decision_blocks_the_turn_without_a_step() {
    let rig = Rig::with(Options {
        setup: Some(Box::new(|root, hooks, _| {
            hooks
                .pre_step
                .register(root, |_, _| Box::pin(async { Ok(PreStepDecision::Reject) }));
        })),
        ..Options::default()
    });
    rig.prompt("blocked").await;
    assert_eq!(
        rig.kinds(),
        [
            "agent/inbox/spliced",
            "turn/start",
            "agent/inbox/spliced",
            "turn/end"
        ]
    );
    assert_eq!(rig.turn_ends(), [json!({"kind": "blocked"})]);
    assert!(rig.adapter.requests().is_empty());
    assert_eq!(rig.agent.pending(), (vec![], vec![]));
}

#[tokio::test]
async fn item_19_after_a_blocked_turn_queued_prompts_wait_for_the_next_waking_send() {
    let rejected = Arc::new(AtomicBool::new(false));
    let flag = rejected.clone();
    let rig = Rig::with(Options {
        setup: Some(Box::new(move |root, hooks, _| {
            hooks.pre_step.register(root, move |input, next| {
                if !flag.swap(true, Ordering::SeqCst) {
                    return Box::pin(async { Ok(PreStepDecision::Reject) });
                }
                next.run(input)
            });
        })),
        ..Options::default()
    });
    rig.adapter.push_chunks(text_response("b"));
    rig.adapter.push_chunks(text_response("c"));
    let b = Message::user_text("B");
    rig.agent.followup(Message::user_text("A")).unwrap();
    rig.agent.followup(b.clone()).unwrap();
    idle(&rig.agent).await;
    assert_eq!(rig.turn_ends(), [json!({"kind": "blocked"})]);
    assert_eq!(rig.agent.pending().0, vec![b]);
    rig.prompt("C").await;
    let prompts: Vec<String> = rig
        .of("user/message")
        .iter()
        .map(|e| text(&e.data))
        .collect();
    assert_eq!(prompts, ["B", "C"]);
    assert_eq!(rig.turn_ends().len(), 3);
}

#[tokio::test]
async fn item_20_enter_messages_follow_step_start_in_decision_order() {
    let extra = Message::user(
        vec![ContentBlock::text("extra")],
        dsh_protocol::MessageSource::plugin("test"),
    );
    let injected = extra.clone();
    let rig = Rig::with(Options {
        setup: Some(Box::new(move |root, hooks, _| {
            hooks.pre_step.register(root, move |input, _| {
                let mut messages = vec![injected.clone()];
                messages.extend(input.messages);
                Box::pin(async move { Ok(PreStepDecision::Enter(messages)) })
            });
        })),
        ..Options::default()
    });
    rig.adapter.push_chunks(text_response("ok"));
    let prompt = Message::user_text("prompt");
    rig.agent.followup(prompt.clone()).unwrap();
    idle(&rig.agent).await;
    let kinds = rig.kinds();
    let start = kinds.iter().position(|k| k == "step/start").unwrap();
    assert_eq!(
        kinds[start + 1..start + 3],
        ["user/message", "user/message"]
    );
    let ids: Vec<String> = rig
        .of("user/message")
        .iter()
        .map(|e| e.data["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, [extra.id.clone(), prompt.id.clone()]);
    assert_eq!(
        rig.of("user/message")[0].data["source"],
        json!({"kind": "plugin", "plugin": "test"})
    );
}

#[tokio::test]
async fn item_21_an_empty_first_enter_completes_the_turn_without_a_step() {
    let rig = Rig::with(Options {
        setup: Some(Box::new(|root, hooks, _| {
            hooks.pre_step.register(root, |_, _| {
                Box::pin(async { Ok(PreStepDecision::Enter(vec![])) })
            });
        })),
        ..Options::default()
    });
    rig.prompt("nothing").await;
    assert_eq!(
        rig.kinds(),
        [
            "agent/inbox/spliced",
            "turn/start",
            "agent/inbox/spliced",
            "turn/end"
        ]
    );
    assert_eq!(rig.turn_ends(), [json!({"kind": "completed"})]);
}

#[tokio::test]
async fn item_22_a_tool_step_continues_without_a_user_message() {
    let rig = Rig::new();
    rig.register(echo());
    rig.adapter
        .push_chunks(tool_call_response("c1", "echo", r#"{"text":"hi"}"#, None));
    rig.adapter.push_chunks(text_response("done"));
    rig.prompt("go").await;
    assert_eq!(
        rig.skeleton(),
        [
            "agent/inbox/spliced",
            "turn/start",
            "agent/inbox/spliced",
            "step/start",
            "user/message",
            "request/header",
            "request/context",
            "assistant/chunk",
            "assistant/message",
            "tool/call",
            "tool/result",
            "step/end",
            "step/start",
            "assistant/chunk",
            "assistant/message",
            "step/end",
            "turn/end"
        ]
    );
    assert_eq!(rig.adapter.requests().len(), 2);
    assert_eq!(
        text(&rig.of("tool/result")[0].data["message"]["content"][0]),
        "hi"
    );
}

#[tokio::test]
async fn item_23_steer_joins_the_running_turn_and_wakes_an_idle_agent() {
    let steered = Arc::new(AtomicBool::new(false));
    let flag = steered.clone();
    let rig = Rig::with(Options {
        setup: Some(Box::new(move |root, hooks, cell| {
            let cell = cell.clone();
            hooks.events.register(root, move |event| {
                if let AgentEvent::InboxClaimed { turn: 1, .. } = event
                    && !flag.swap(true, Ordering::SeqCst)
                    && let Some(agent) = cell.get()
                {
                    agent
                        .steer(Message::user_text("steer"))
                        .map_err(HookError::other)?;
                }
                Ok(())
            });
        })),
        ..Options::default()
    });
    rig.adapter.push_chunks(text_response("one"));
    rig.adapter.push_chunks(text_response("two"));
    rig.prompt("first").await;
    let steps: Vec<(u64, u64)> = rig
        .of("step/start")
        .iter()
        .map(|e| {
            (
                e.data["turn"].as_u64().unwrap(),
                e.data["step"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(steps, [(1, 1), (1, 2)]);
    let messages: Vec<(String, String)> = rig
        .log()
        .events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == "user/message" || e.kind == "step/start")
        .map(|e| {
            (
                e.kind.to_string(),
                if e.kind == "user/message" {
                    text(&e.data)
                } else {
                    String::new()
                },
            )
        })
        .collect();
    assert_eq!(messages[3], ("user/message".to_owned(), "steer".to_owned()));
    assert_eq!(rig.turn_ends().len(), 1);

    // On an idle agent, steer starts a turn immediately.
    rig.adapter.push_chunks(text_response("three"));
    rig.agent.steer(Message::user_text("wake")).unwrap();
    assert_eq!(rig.agent.status(), AgentStatus::Running);
    idle(&rig.agent).await;
    assert_eq!(rig.turn_ends().len(), 2);
}

#[tokio::test]
async fn item_24_inject_on_idle_does_not_wake_and_enters_the_next_turn() {
    let rig = Rig::new();
    let context = Message::user(
        vec![ContentBlock::text("ctx")],
        dsh_protocol::MessageSource::plugin("test"),
    );
    rig.agent.inject(context.clone()).unwrap();
    assert_eq!(rig.kinds(), ["agent/inbox/spliced"]);
    assert_eq!(rig.of("agent/inbox/spliced")[0].data["target"], "next-step");
    assert_eq!(rig.agent.status(), AgentStatus::Idle);
    assert!(rig.statuses().is_empty());
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("prompt").await;
    let entered: Vec<String> = rig
        .of("user/message")
        .iter()
        .map(|e| text(&e.data))
        .collect();
    assert_eq!(entered, ["ctx", "prompt"]);
}

#[tokio::test]
async fn item_25_a_steer_from_turn_stopping_runs_another_step() {
    let once = Arc::new(AtomicBool::new(false));
    let flag = once.clone();
    let rig = Rig::with(Options {
        setup: Some(Box::new(move |root, hooks, _| {
            hooks.turn_stopping.register(root, move |event| {
                let first = !flag.swap(true, Ordering::SeqCst);
                let agent = event.agent.clone();
                Box::pin(async move {
                    if first {
                        agent
                            .steer(Message::user_text("more"))
                            .map_err(HookError::other)?;
                    }
                    Ok(())
                })
            });
        })),
        ..Options::default()
    });
    rig.adapter.push_chunks(text_response("one"));
    rig.adapter.push_chunks(text_response("two"));
    rig.prompt("go").await;
    assert_eq!(rig.of("step/start").len(), 2);
    assert_eq!(rig.of("turn/start").len(), 1);
    assert_eq!(text(&rig.of("user/message")[1].data), "more");
}

#[tokio::test]
async fn item_26_concludes_turn_ends_after_the_step_unless_context_is_pending() {
    let rig = Rig::new();
    rig.register(tool("finish", false, |_, run| async move {
        run.conclude_turn();
        Ok("finished".to_owned())
    }));
    rig.register(tool("finish_ctx", false, |_, run| async move {
        run.conclude_turn();
        run.defer_context(Message::user(
            vec![ContentBlock::text("note")],
            dsh_protocol::MessageSource::plugin("t"),
        ));
        Ok("finished".to_owned())
    }));
    rig.adapter
        .push_chunks(tool_call_response("c1", "finish", "{}", None));
    rig.prompt("go").await;
    assert_eq!(rig.adapter.requests().len(), 1);
    assert_eq!(rig.turn_ends(), [json!({"kind": "completed"})]);

    rig.adapter
        .push_chunks(tool_call_response("c2", "finish_ctx", "{}", None));
    rig.adapter.push_chunks(text_response("after"));
    rig.prompt("again").await;
    assert_eq!(rig.adapter.requests().len(), 3);
    assert_eq!(rig.of("step/start").len(), 3);
}

#[tokio::test]
async fn item_27_max_tokens_is_sticky_for_the_turn() {
    let once = Arc::new(AtomicBool::new(false));
    let flag = once.clone();
    let rig = Rig::with(Options {
        setup: Some(Box::new(move |root, hooks, _| {
            hooks.turn_stopping.register(root, move |event| {
                let first = !flag.swap(true, Ordering::SeqCst);
                let agent = event.agent.clone();
                Box::pin(async move {
                    if first {
                        agent
                            .steer(Message::user_text("continue"))
                            .map_err(HookError::other)?;
                    }
                    Ok(())
                })
            });
        })),
        ..Options::default()
    });
    rig.adapter.push_chunks(max_tokens_response("cut"));
    rig.adapter.push_chunks(text_response("complete"));
    rig.prompt("go").await;
    assert_eq!(rig.of("step/start").len(), 2);
    assert_eq!(rig.turn_ends(), [json!({"kind": "max-tokens"})]);
}

#[tokio::test]
async fn item_28_a_max_tokens_step_runs_no_tools_and_drops_tool_calls() {
    let rig = Rig::new();
    rig.register(echo());
    let mut chunks = tool_call_response("c1", "echo", "{}", Some("text"));
    let last = chunks.len() - 1;
    chunks[last] = StreamChunk::Finish {
        reason: FinishReason::MaxTokens,
        replay_state: None,
    };
    rig.adapter.push_chunks(chunks);
    rig.prompt("go").await;
    assert!(rig.of("tool/call").is_empty());
    let content = &rig.of("assistant/message")[0].data["message"]["content"];
    assert_eq!(content, &json!([{"type": "text", "text": "text"}]));
    assert_eq!(rig.turn_ends(), [json!({"kind": "max-tokens"})]);
}

#[tokio::test]
async fn item_29_additional_contexts_enter_after_all_results_in_call_order() {
    let rig = Rig::new();
    for name in ["a", "b"] {
        let label = name.to_owned();
        rig.register(tool(name, false, move |_, run| {
            let label = label.clone();
            async move {
                let source = dsh_protocol::MessageSource::plugin("t");
                run.defer_context(Message::user(
                    vec![ContentBlock::text(format!("ctx-{label}"))],
                    source,
                ));
                Ok(label)
            }
        }));
    }
    rig.adapter.push(Script::Chunks(tool_calls_response(&[
        ("c1", "a", "{}"),
        ("c2", "b", "{}"),
    ])));
    rig.adapter.push_chunks(text_response("done"));
    rig.prompt("go").await;
    let tail: Vec<String> = rig
        .log()
        .events()
        .unwrap()
        .iter()
        .filter(|e| {
            [
                "tool/call",
                "tool/result",
                "step/end",
                "step/start",
                "user/message",
            ]
            .contains(&e.kind.as_str())
        })
        .skip(2)
        .map(|e| {
            if e.kind == "user/message" {
                format!("user:{}", text(&e.data))
            } else {
                e.kind.to_string()
            }
        })
        .collect();
    assert_eq!(
        tail,
        [
            "tool/call",
            "tool/result",
            "tool/call",
            "tool/result",
            "step/end",
            "step/start",
            "user:ctx-a",
            "user:ctx-b",
            "step/end"
        ]
    );
}

#[tokio::test]
async fn session_start_carries_the_live_agent_and_the_scope_reaches_it() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    let rig = Rig::with(Options {
        setup: Some(Box::new(move |root, hooks, _| {
            hooks
                .session_start
                .register(root, move |event: &dsh_agent::SessionStarted| {
                    sink.lock()
                        .unwrap()
                        .push((event.agent.id().to_owned(), event.source.as_str()));
                    Ok(())
                });
        })),
        ..Options::default()
    });
    assert_eq!(
        *seen.lock().unwrap(),
        vec![("session-test".to_owned(), "startup")]
    );
    let child = rig
        .agent
        .scope()
        .child(dsh_kernel::ScopeKind::Plugin, "inner")
        .unwrap();
    let found = AgentHandle::from_scope(&child).unwrap();
    assert_eq!(found.id(), rig.agent.id());
    assert!(AgentHandle::from_scope(&rig.root).is_none());
    rig.agent.dispose().await;
    assert!(AgentHandle::from_scope(&child).is_none());
}
