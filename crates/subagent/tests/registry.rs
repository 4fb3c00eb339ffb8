//! The provider registry, tool mounting and schemas, forks, the sandbox and approval rules,
//! structured output, background jobs (subagent-spec §1.2–§1.4, §1.7.2, §2.1, §2.6).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use dsh_protocol::ContentBlock;
use dsh_subagent::Capabilities;
use dsh_subagent::StartRequest;
use dsh_subagent::SubagentError;
use dsh_subagent::SubagentProvider;
use dsh_subagent::SubagentRun;
use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;
use support::*;
use tokio_util::sync::CancellationToken;

/// A provider with no start capabilities that records whether it was called.
struct Bare {
    name: String,
    called: Arc<AtomicBool>,
    result: Option<dsh_subagent::RunResult>,
}

impl SubagentProvider for Bare {
    fn name(&self) -> &str {
        &self.name
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }
    fn inherits_parent_context(&self) -> bool {
        false
    }
    fn start(
        &self,
        _request: StartRequest,
    ) -> BoxFuture<'static, Result<SubagentRun, SubagentError>> {
        self.called.store(true, Ordering::SeqCst);
        let result = self.result.clone();
        Box::pin(async move {
            let result = result.unwrap_or_else(|| Err(SubagentError::plain("no result")));
            Ok(SubagentRun::new(
                "remote-1".into(),
                None,
                Box::pin(async move { result }),
                || Box::pin(async { Ok(()) }),
            ))
        })
    }
}

fn bare(name: &str, result: Option<dsh_subagent::RunResult>) -> (Arc<Bare>, Arc<AtomicBool>) {
    let called = Arc::new(AtomicBool::new(false));
    (
        Arc::new(Bare {
            name: name.into(),
            called: called.clone(),
            result,
        }),
        called,
    )
}

#[tokio::test]
async fn provider_registration_start_checks_and_events() {
    let rig = Rig::new();
    let events = rig.record_events();
    // Checklist 1.
    let (dup, _) = bare("spawn", None);
    let error = rig
        .subagents
        .register_provider(&rig.plugin, dup)
        .unwrap_err();
    assert_eq!(
        error.message,
        "a subagent provider named \"spawn\" is already registered"
    );
    assert_eq!(error.code.as_deref(), Some("DUPLICATE_PROVIDER"));
    let parent = rig.parent();
    let request = || {
        StartRequest::new(
            parent.clone(),
            vec![ContentBlock::text("x")],
            CancellationToken::new(),
        )
    };
    // Checklist 2: unknown provider, no events.
    let before = events.lock().unwrap().len();
    let error = rig.subagents.start("nope", request()).await.unwrap_err();
    assert_eq!(
        error.message,
        "no subagent provider registered for \"nope\""
    );
    assert_eq!(error.code.as_deref(), Some("NO_PROVIDER"));
    assert_eq!(events.lock().unwrap().len(), before);
    // Checklist 3: the capability check runs first, in order, before the provider.
    let (remote, called) = bare("remote", None);
    rig.subagents
        .register_provider(&rig.plugin, remote)
        .unwrap();
    for (cap, patch) in [
        ("outputSchema", json!({"outputSchema": true})),
        ("depthLimit", json!({"maxDepth": 1})),
        ("toolFilter", json!({"toolFilter": true})),
        ("persona", json!({"persona": true})),
    ] {
        let mut r = request();
        if patch.get("outputSchema").is_some() {
            r.output_schema = Some(json!({"type": "object", "properties": {}}));
            r.max_depth = Some(1);
        }
        if patch.get("maxDepth").is_some() {
            r.max_depth = Some(1);
            r.persona = Some("p".into());
        }
        if patch.get("toolFilter").is_some() {
            r.tool_filter = Some(dsh_subagent::ToolFilterSpec {
                allow: Some(vec![]),
                deny: None,
            });
            r.persona = Some("p".into());
        }
        if patch.get("persona").is_some() {
            r.persona = Some("p".into());
        }
        let error = rig.subagents.start("remote", r).await.unwrap_err();
        assert_eq!(
            error.message,
            format!("subagent provider \"remote\" does not support the \"{cap}\" capability")
        );
    }
    assert!(!called.load(Ordering::SeqCst));
    let names: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .map(|(n, _, _)| n.clone())
        .collect();
    assert!(names.contains(&"subagent/provider-added".to_owned()));
}

#[tokio::test]
async fn remote_runs_publish_start_then_end_and_rejections_end_in_error() {
    let rig = Rig::new();
    let events = rig.record_events();
    let (ok, _) = bare(
        "settled",
        Some(Ok(dsh_subagent::SubagentResult::new(
            vec![],
            dsh_subagent::StopReason::Completed,
        ))),
    );
    let (bad, _) = bare("broken", Some(Err(SubagentError::plain("transport lost"))));
    rig.subagents.register_provider(&rig.plugin, ok).unwrap();
    rig.subagents.register_provider(&rig.plugin, bad).unwrap();
    let parent = rig.parent();
    let got = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = got.clone();
    rig.subagents.events().register(&rig.plugin, move |event| {
        if let dsh_subagent::SubagentEvent::End {
            last_assistant_message,
            stop_reason,
            info,
        } = event
        {
            sink.lock().unwrap().push((
                info.provider.clone(),
                stop_reason.clone(),
                last_assistant_message.is_some(),
                info.local,
            ));
        }
        Ok(())
    });
    for name in ["settled", "broken"] {
        let run = rig
            .subagents
            .start(
                name,
                StartRequest::new(
                    parent.clone(),
                    vec![ContentBlock::text("x")],
                    CancellationToken::new(),
                ),
            )
            .await
            .unwrap();
        let _ = run.result().await;
        run.dispose().await.unwrap();
    }
    eventually("both ends", || got.lock().unwrap().len() == 2).await;
    // Checklists 4 and 5.
    let got = got.lock().unwrap().clone();
    assert!(got.contains(&(
        "settled".into(),
        dsh_subagent::StopReason::Completed,
        false,
        false
    )));
    assert!(got.contains(&(
        "broken".into(),
        dsh_subagent::StopReason::Error,
        false,
        false
    )));
    let seq: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .filter(|(n, _, _)| n == "subagent/start" || n == "subagent/end")
        .map(|(n, id, _)| format!("{n} {id}"))
        .collect();
    let first_end = seq
        .iter()
        .position(|s| s.starts_with("subagent/end"))
        .unwrap();
    assert!(
        seq[..first_end]
            .iter()
            .any(|s| s.starts_with("subagent/start"))
    );
}

#[tokio::test]
async fn tool_mount_rules_follow_the_provider() {
    let rig = Rig::new();
    // Checklist 20.
    let (remote, _) = bare("remote", None);
    rig.subagents
        .register_provider(&rig.plugin, remote)
        .unwrap();
    let error = rig
        .tool(json!({"provider": "remote", "toolName": "remote_agent"}))
        .unwrap_err();
    assert_eq!(
        error.message,
        "tool-subagent: provider \"remote\" cannot enforce maxDepth (no depthLimit capability) — set maxDepth: 'provider-managed' to leave the recursion budget to the provider"
    );
    // Checklist 21.
    let error = rig
        .tool(json!({"provider": "remote", "toolName": "remote_agent", "maxDepth": "provider-managed", "backgroundMode": "continuable"}))
        .unwrap_err();
    assert_eq!(
        error.message,
        "tool-subagent: provider \"remote\" does not support `backgroundMode: continuable`"
    );
    // Load-time errors.
    let error = rig
        .tool(json!({"provider": "spawn", "maxDepth": -1}))
        .unwrap_err();
    assert_eq!(
        error.message,
        "subagent maxDepth must be a non-negative safe integer"
    );
    let error = rig
        .tool(json!({"provider": "spawn", "toolFilter": {}}))
        .unwrap_err();
    assert_eq!(
        error.message,
        "tool-subagent: `toolFilter` is configured but names neither `allow` nor `deny` — remove the key or fill the filter"
    );
    // Checklist 22: registered only while the provider is.
    let late = rig
        .plugin
        .child(dsh_kernel::ScopeKind::Plugin, "late")
        .unwrap();
    rig.tool(json!({"provider": "late", "toolName": "late_agent", "maxDepth": "provider-managed"}))
        .unwrap();
    assert!(rig.tools.get("late_agent", None).is_none());
    let (provider, _) = bare("late", None);
    rig.subagents.register_provider(&late, provider).unwrap();
    assert!(rig.tools.get("late_agent", None).is_some());
    late.dispose();
    assert!(rig.tools.get("late_agent", None).is_none());
}

#[tokio::test]
async fn the_schema_and_the_disabled_background_flag() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn"})).unwrap();
    rig.tool(
        json!({"provider": "spawn", "toolName": "subagent_fg", "enableRunInBackground": false}),
    )
    .unwrap();
    // Checklist 23.
    let schema = rig
        .tools
        .get("subagent", None)
        .unwrap()
        .parameters()
        .clone();
    assert_eq!(
        schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        vec!["description", "prompt", "run_in_background"]
    );
    assert_eq!(schema["required"], json!(["description", "prompt"]));
    assert_eq!(schema["properties"]["run_in_background"]["type"], "boolean");
    let fg = rig
        .tools
        .get("subagent_fg", None)
        .unwrap()
        .parameters()
        .clone();
    assert!(fg["properties"].get("run_in_background").is_none());
    // Checklist 24.
    rig.script(
        "P-FG",
        vec![
            call(
                "c",
                "subagent_fg",
                json!({"description": "a", "prompt": "C-FG", "run_in_background": true}),
            ),
            text_response("ok"),
        ],
    );
    let parent = rig.parent();
    prompt(&parent, "P-FG").await;
    assert_eq!(
        tool_results(&parent.log().events().unwrap()),
        vec![(
            "Error: run_in_background is disabled for this tool instance (enableRunInBackground: false)".to_owned(),
            true
        )]
    );
}

#[tokio::test]
async fn foreground_errors_diagnostics_and_dispose_failures() {
    use dsh_subagent::StopReason::*;
    use dsh_subagent::SubagentResult;
    use dsh_subagent::tools::failure_text;
    // Checklists 27 and 28.
    let mut result = SubagentResult::new(vec![ContentBlock::text("partial assistant text")], Error);
    result.diagnostic = Some("d".into());
    assert_eq!(
        failure_text(&result),
        "subagent run failed\nDiagnostic: d\nPartial output before the run ended:\npartial assistant text"
    );
    for (stop, headline) in [
        (Aborted, "subagent run was cancelled"),
        (Error, "subagent run failed"),
        (
            MaxTokens,
            "subagent run hit its token limit before finishing",
        ),
        (Refusal, "subagent declined the task"),
        (
            Other("weird".into()),
            "subagent run ended abnormally (weird)",
        ),
    ] {
        assert_eq!(failure_text(&SubagentResult::new(vec![], stop)), headline);
    }
    // Checklist 29: a rejecting result and a rejecting dispose are both reported.
    struct Failing;
    impl SubagentProvider for Failing {
        fn name(&self) -> &str {
            "failing"
        }
        fn capabilities(&self) -> Capabilities {
            Capabilities::ALL
        }
        fn inherits_parent_context(&self) -> bool {
            false
        }
        fn start(&self, _: StartRequest) -> BoxFuture<'static, Result<SubagentRun, SubagentError>> {
            Box::pin(async {
                Ok(SubagentRun::new(
                    "f".into(),
                    None,
                    Box::pin(async { Err(SubagentError::plain("socket closed")) }),
                    || Box::pin(async { Err(SubagentError::plain("kill failed")) }),
                ))
            })
        }
    }
    let rig = Rig::new();
    rig.subagents
        .register_provider(&rig.plugin, Arc::new(Failing))
        .unwrap();
    rig.tool(json!({"provider": "failing", "toolName": "failing_agent"}))
        .unwrap();
    rig.script(
        "P-DISPOSE",
        vec![
            call(
                "c",
                "failing_agent",
                json!({"description": "a", "prompt": "x"}),
            ),
            text_response("ok"),
        ],
    );
    let parent = rig.parent();
    prompt(&parent, "P-DISPOSE").await;
    assert_eq!(
        tool_results(&parent.log().events().unwrap()),
        vec![(
            "Error: subagent run failed: socket closed; dispose failed: kill failed".to_owned(),
            true
        )]
    );
}

#[tokio::test]
async fn output_is_the_last_non_empty_message_of_the_childs_own_events() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn"})).unwrap();
    rig.script(
        "P-OUT",
        vec![
            call(
                "c",
                "subagent",
                json!({"description": "a", "prompt": "C-OUT"}),
            ),
            text_response("ok"),
        ],
    );
    // A text answer with a tool call, then an empty usage-only max-tokens message: the text
    // survives (checklist 30).
    rig.script(
        "C-OUT",
        vec![
            dsh_agent::scripted::tool_call_response(
                "g",
                "no_such_tool",
                "{}",
                Some("the real answer"),
            ),
            vec![
                dsh_protocol::StreamChunk::Usage {
                    usage: dsh_protocol::TokenUsage::default(),
                },
                dsh_protocol::StreamChunk::Finish {
                    reason: dsh_protocol::FinishReason::MaxTokens,
                    replay_state: None,
                },
            ],
        ],
    );
    let parent = rig.parent();
    prompt(&parent, "P-OUT").await;
    let results = tool_results(&parent.log().events().unwrap());
    assert!(results[0].1);
    assert!(
        results[0]
            .0
            .ends_with("\nPartial output before the run ended:\nthe real answer"),
        "{results:?}"
    );
    let child = &rig.child_logs()[0];
    let last = child
        .events
        .iter()
        .rev()
        .find(|e| e.kind == "assistant/message")
        .unwrap();
    assert_eq!(last.data["message"]["content"], json!([]));
}

#[tokio::test]
async fn forks_are_seeded_with_completed_turns_only() {
    let rig = Rig::new();
    rig.tool(
        json!({"provider": "fork", "toolName": "subagent_fork", "enableRunInBackground": false}),
    )
    .unwrap();
    // Checklist 8: a fork during the first turn has no seed at all.
    rig.script(
        "P-FORK",
        vec![
            call(
                "f1",
                "subagent_fork",
                json!({"description": "a", "prompt": "C-FORK-EARLY"}),
            ),
            text_response("first done"),
            call(
                "f2",
                "subagent_fork",
                json!({"description": "b", "prompt": "C-FORK-LATE"}),
            ),
            text_response("second done"),
        ],
    );
    rig.script("C-FORK-EARLY", vec![text_response("early")]);
    let late = rig.script("C-FORK-LATE", vec![text_response("late")]);
    let parent = rig.parent();
    prompt(&parent, "P-FORK one").await;
    let first_turn_len = parent.log().len();
    prompt(&parent, "P-FORK two").await;
    let children = rig.child_logs();
    assert_eq!(children.len(), 2);
    let early = &children[0];
    assert_eq!(early.header.seed_length, None);
    assert!(!early.events.iter().any(|e| e.kind == "session/end-seed"));
    // Checklist 7: the seed is the parent's events up to and including its last turn/end.
    let fork = &children[1];
    let parent_events = parent.log().events().unwrap();
    let last_end = parent_events[..first_turn_len as usize]
        .iter()
        .rposition(|e| e.kind == "turn/end")
        .unwrap() as u64;
    assert_eq!(fork.header.seed_length, Some(last_end + 1));
    for i in 0..=last_end as usize {
        assert_eq!(fork.events[i].kind, parent_events[i].kind);
        assert_eq!(fork.events[i].data, parent_events[i].data);
    }
    assert_eq!(fork.events[last_end as usize + 1].kind, "session/end-seed");
    // The forked child's request carries the parent's first turn, not the in-flight one.
    let request = &late.requests()[0];
    let texts: Vec<String> = request.messages.iter().map(|m| text(&m.content)).collect();
    assert!(texts.iter().any(|t| t == "P-FORK one"));
    assert!(!texts.iter().any(|t| t == "P-FORK two"));
}

#[tokio::test]
async fn an_explicit_sandbox_override_is_stamped_and_a_default_is_not() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn"})).unwrap();
    rig.script(
        "P-SBX",
        vec![
            call(
                "a",
                "subagent",
                json!({"description": "a", "prompt": "C-SBX-DEFAULT"}),
            ),
            text_response("ok"),
            call(
                "b",
                "subagent",
                json!({"description": "b", "prompt": "C-SBX-SWITCHED"}),
            ),
            text_response("ok"),
        ],
    );
    rig.script("C-SBX-DEFAULT", vec![text_response("x")]);
    let switched = rig.script("C-SBX-SWITCHED", vec![text_response("y")]);
    let parent = rig.parent();
    prompt(&parent, "P-SBX one").await;
    parent
        .log()
        .append("sandbox/mode", json!({"mode": "read-only"}), None)
        .unwrap();
    prompt(&parent, "P-SBX two").await;
    // Checklist 13.
    let children = rig.child_logs();
    assert!(!children[0].events.iter().any(|e| e.kind == "sandbox/mode"));
    let kinds = kinds(&children[1].events);
    assert_eq!(kinds[0], "sandbox/mode");
    assert_eq!(kinds[1], "approval/policy");
    assert_eq!(
        children[1].events[0].data,
        json!({"mode": "read-only", "source": "delegation"})
    );
    // The host is told, so the child's runtime context reflects the override.
    let request = &switched.requests()[0];
    assert!(
        request
            .messages
            .iter()
            .any(|m| text(&m.content).contains("Sandbox: read-only."))
    );
}

#[tokio::test]
async fn approval_requests_in_a_child_are_rejected_without_an_answerer() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn"})).unwrap();
    // A tool whose calls always ask, and an answerer that would allow: it must never be asked.
    let asked = Arc::new(AtomicBool::new(false));
    struct Allow(Arc<AtomicBool>);
    impl dsh_tools::ApprovalService for Allow {
        fn request(
            &self,
            _: dsh_tools::ApprovalRequest,
        ) -> BoxFuture<'static, dsh_tools::ApprovalOutcome> {
            self.0.store(true, Ordering::SeqCst);
            Box::pin(async { dsh_tools::ApprovalOutcome::AllowedOnce })
        }
    }
    rig.root
        .provide::<dyn dsh_tools::ApprovalService>(Arc::new(Allow(asked.clone())))
        .unwrap();
    let definition = dsh_tools::Tool::builder("risky")
        .description("asks first")
        .raw_output(json!({"type": "string"}), |_, v| {
            Ok(vec![ContentBlock::text(v.as_str().unwrap_or_default())])
        })
        .run(|_: Value, _| async { Ok::<_, dsh_tools::ToolError>("did it") })
        .build()
        .unwrap();
    rig.tools.register(&rig.root, definition).unwrap();
    rig.tools
        .pre_execute()
        .register(&rig.root, |exec: Arc<dsh_tools::Execution>, next| {
            Box::pin(async move {
                if exec.name() == "risky" {
                    Ok(dsh_tools::PreDecision::ask(Some("needs approval".into())))
                } else {
                    next.run(exec).await
                }
            })
        });
    rig.script(
        "P-APPROVE",
        vec![
            call(
                "c",
                "subagent",
                json!({"description": "a", "prompt": "C-APPROVE"}),
            ),
            text_response("ok"),
        ],
    );
    rig.script(
        "C-APPROVE",
        vec![call("r", "risky", json!({})), text_response("could not")],
    );
    let parent = rig.parent();
    prompt(&parent, "P-APPROVE").await;
    // Checklist 70.
    let child = &rig.child_logs()[0];
    let results = tool_results(&child.events);
    assert!(results[0].1, "{results:?}");
    assert!(!asked.load(Ordering::SeqCst), "no answerer was reached");
}

#[tokio::test]
async fn one_shot_children_are_owned_and_continuable_children_are_roots() {
    // Checklist 69's seam: the user-questions guard rejects agents that are not runtime roots.
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn"})).unwrap();
    let gates = rig.gates();
    rig.script(
        "P-ROOTS",
        vec![
            call(
                "c",
                "subagent",
                json!({"description": "a", "prompt": "C-OWNED-ONE"}),
            ),
            text_response("ok"),
        ],
    );
    rig.script(
        "C-OWNED-ONE",
        vec![call("g", "gate", json!({"name": "g"})), text_response("x")],
    );
    let parent = rig.parent();
    parent
        .followup(dsh_protocol::Message::user_text("P-ROOTS"))
        .unwrap();
    eventually("the child to be live", || rig.directory.len() == 2).await;
    let child = rig
        .directory
        .live()
        .into_iter()
        .find(|a| a.id() != parent.id())
        .unwrap();
    assert!(rig.directory.is_root(&parent));
    assert!(!rig.directory.is_root(&child));
    assert_eq!(
        rig.directory.owner_of(child.id()).as_deref(),
        Some(parent.id())
    );
    gates.open("g");
    parent.when_idle().await;
}

#[tokio::test]
async fn structured_output_ends_the_turn_and_closes_the_run() {
    let rig = Rig::new();
    let schema = json!({
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": false
    });
    rig.script(
        "C-STRUCT",
        vec![
            // Invalid first (checklist 68), then valid (66); the same step's next call is refused.
            call("s1", "structured_output", json!({"answer": 1})),
            dsh_agent::scripted::tool_calls_response(&[
                (
                    "s2",
                    "structured_output",
                    &json!({"answer": "42"}).to_string(),
                ),
                (
                    "s3",
                    "structured_output",
                    &json!({"answer": "43"}).to_string(),
                ),
            ]),
        ],
    );
    rig.script("C-PLAIN", vec![text_response("just text")]);
    let parent = rig.parent();
    let mut request = StartRequest::new(
        parent.clone(),
        vec![ContentBlock::text("C-STRUCT")],
        CancellationToken::new(),
    );
    request.output_schema = Some(schema.clone());
    let run = rig.subagents.start("spawn", request).await.unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await.unwrap();
    assert_eq!(result.stop_reason, dsh_subagent::StopReason::Completed);
    assert_eq!(result.structured, Some(json!({"answer": "42"})));
    let child = &rig.child_logs()[0];
    let results = tool_results(&child.events);
    assert!(results[0].1);
    assert!(
        results[0].0.starts_with("Error: invalid arguments: "),
        "{results:?}"
    );
    assert_eq!(
        results[1],
        ("Structured output recorded.".to_owned(), false)
    );
    assert_eq!(
        results[2],
        (
            "Error: structured output already recorded: the run is complete, so `structured_output` is not executed".to_owned(),
            true
        )
    );
    assert_eq!(
        child
            .events
            .iter()
            .filter(|e| e.kind == "turn/start")
            .count(),
        1
    );
    // Checklist 67: a plain-text finish is an error.
    let mut request = StartRequest::new(
        parent.clone(),
        vec![ContentBlock::text("C-PLAIN")],
        CancellationToken::new(),
    );
    request.output_schema = Some(schema);
    let run = rig.subagents.start("spawn", request).await.unwrap();
    let result = run.result().await.unwrap();
    run.dispose().await.unwrap();
    assert_eq!(result.stop_reason, dsh_subagent::StopReason::Error);
    assert_eq!(result.structured, None);
}

#[tokio::test]
async fn background_one_shot_children_are_jobs() {
    let rig = Rig::new();
    rig.tool(json!({"provider": "spawn"})).unwrap();
    // Checklist 33: no jobs service.
    rig.script(
        "P-NOJOBS",
        vec![
            call(
                "c",
                "subagent",
                json!({"description": "a", "prompt": "C-NOJOB", "run_in_background": true}),
            ),
            text_response("ok"),
        ],
    );
    let parent = rig.parent();
    prompt(&parent, "P-NOJOBS").await;
    assert_eq!(
        tool_results(&parent.log().events().unwrap()),
        vec![(
            "Error: background jobs unavailable: load @deepseek-ai/dsh-jobs and @deepseek-ai/dsh-tool-jobs".to_owned(),
            true
        )]
    );
    // Checklists 31 and 32.
    let jobs = dsh_tool_shell::JobsRuntime::new(dsh_tool_shell::JobsConfig::default());
    rig.root.provide(jobs.clone()).unwrap();
    rig.script(
        "P-JOBS",
        vec![
            dsh_agent::scripted::tool_calls_response(&[
                ("c1", "subagent", &json!({"description": "Quick job", "prompt": "C-JOB-OK", "run_in_background": true}).to_string()),
                ("c2", "subagent", &json!({"description": "Long job", "prompt": "C-JOB-MAX", "run_in_background": true}).to_string()),
            ]),
            text_response("started"),
        ],
    );
    rig.script("C-JOB-OK", vec![text_response("job answer")]);
    rig.script("C-JOB-MAX", vec![max_tokens_response("cut off")]);
    let owner = rig.parent();
    let owner_id = dsh_tool_shell::OwnerId::new(owner.id());
    prompt(&owner, "P-JOBS").await;
    let results = tool_results(&owner.log().events().unwrap());
    let mut ids: Vec<String> = results
        .iter()
        .map(|(t, _)| {
            t.strip_prefix("started background subagent job ")
                .unwrap()
                .to_owned()
        })
        .collect();
    ids.sort();
    assert_eq!(ids, vec!["subagent-1", "subagent-2"]);
    eventually("both jobs to settle", || {
        jobs.list(Some(&owner_id))
            .iter()
            .all(|j| j.status.is_terminal())
    })
    .await;
    let listed = jobs.list(Some(&owner_id));
    let quick = listed.iter().find(|j| j.label == "Quick job").unwrap();
    assert_eq!(quick.kind, "subagent");
    assert_eq!(quick.status, dsh_tool_shell::jobs::JobStatus::Completed);
    assert_eq!(
        jobs.read(Some(&owner_id), &quick.id).unwrap().text,
        "job answer"
    );
    let long = listed.iter().find(|j| j.label == "Long job").unwrap();
    assert_eq!(long.status, dsh_tool_shell::jobs::JobStatus::Failed);
    assert_eq!(long.detail.as_deref(), Some("max-tokens"));
}

/// A tool that asks the user through the user-questions seam, as `ask_user_question` does.
fn install_ask_tool(rig: &Rig) {
    let definition = dsh_tools::Tool::builder("ask")
        .description("asks the user")
        .raw_output(json!({"type": "string"}), |_, v| {
            Ok(vec![ContentBlock::text(v.as_str().unwrap_or_default())])
        })
        .run(|_: Value, run: dsh_tools::ToolRun| async move {
            let agent = run.agent().unwrap();
            let questions = dsh_user_questions::UserQuestions::for_scope(agent.scope()).unwrap();
            let answers = questions
                .ask(dsh_user_questions::QuestionRequest {
                    questions: vec![dsh_user_questions::Question {
                        id: "q".into(),
                        question: "Which way?".into(),
                        header: None,
                        detail: None,
                        options: None,
                        multi_select: None,
                        intent: None,
                    }],
                    caller: Some(dsh_user_questions::Caller {
                        agent_id: agent.id().to_owned(),
                        scope: agent.scope().clone(),
                    }),
                    signal: run.signal().clone(),
                })
                .await
                .map_err(|e| dsh_tools::ToolError::new(e.message))?;
            Ok::<_, dsh_tools::ToolError>(answers.to_json())
        })
        .build()
        .unwrap();
    rig.tools.register(&rig.root, definition).unwrap();
}

#[tokio::test]
async fn a_one_shot_child_cannot_ask_the_user() {
    let rig = Rig::new();
    dsh_user_questions::UserQuestions::install(&rig.root).unwrap();
    install_ask_tool(&rig);
    rig.tool(json!({"provider": "spawn"})).unwrap();
    rig.script(
        "P-ASK",
        vec![
            call(
                "c",
                "subagent",
                json!({"description": "a", "prompt": "C-ASK"}),
            ),
            text_response("parent done"),
        ],
    );
    rig.script(
        "C-ASK",
        vec![
            call("q", "ask", json!({})),
            text_response("I need a decision: which way?"),
        ],
    );
    let parent = rig.parent();
    prompt(&parent, "P-ASK").await;
    // Checklist 69: the exact DELEGATED_CALLER text, and the parent is never blocked.
    let child = &rig.child_logs()[0];
    assert_eq!(
        tool_results(&child.events),
        vec![(format!("Error: {}", dsh_user_questions::DELEGATED), true)]
    );
    assert_eq!(
        tool_results(&parent.log().events().unwrap()),
        vec![("I need a decision: which way?".to_owned(), false)]
    );
}
