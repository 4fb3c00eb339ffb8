//! Guards over a real agent loop and pipeline (hooks-and-tools-spec §B checklists).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::PromptConfig;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_calls_response;
use dsh_guard::repeat::GENTLE;
use dsh_guard::repeat::Repeat;
use dsh_guard::repeat::RepeatConfig;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use dsh_tools::PostDecision;
use dsh_tools::PreDecision;
use dsh_tools::RegistryConfig;
use dsh_tools::Tool;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolRegistry;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

struct Rig {
    adapter: Arc<ScriptedAdapter>,
    agent: AgentHandle,
    tools: Arc<ToolRegistry>,
    root: Scope,
}

fn tool(name: &str) -> dsh_tools::ToolDefinition {
    Tool::builder(name)
        .description("t")
        .raw_parameters(json!({"type": "object", "properties": {}}))
        .raw_output(json!({"type": "string"}), |_, v| {
            Ok(vec![ContentBlock::text(
                v.as_str().unwrap_or_default().to_owned(),
            )])
        })
        .concurrency_safe(|_| true)
        .run(|_, _| async { Ok("ok".to_owned()) })
        .build()
        .unwrap()
}

fn rig(config: RepeatConfig) -> Rig {
    let root = Scope::root();
    let tools = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    let hooks = AgentHooks::install(&root).unwrap();
    for name in ["grep", "todo_write", "read", "denied"] {
        tools.register(&root, tool(name)).unwrap();
    }
    tools.pre_execute().register(&root, |exec, next| {
        Box::pin(async move {
            if exec.name() == "denied" {
                return Ok(PreDecision::deny("no"));
            }
            next.run(exec).await
        })
    });
    dsh_guard::repeat::install(&tools, &hooks, &root, Repeat::new(&config).unwrap());
    let adapter = ScriptedAdapter::new("mock");
    let agent = Agent::create(AgentConfig {
        id: "s".into(),
        cwd: None,
        provider: "mock".into(),
        model: "mock".into(),
        max_tokens: None,
        adapter: adapter.clone(),
        tools: tools.clone(),
        scope: root.clone(),
        log: SessionLog::in_memory(SessionHeader::new("s", Some("/w".into()))),
        prompt: PromptConfig::default(),
        max_parallel_tool_calls: 1,
    })
    .unwrap();
    Rig {
        adapter,
        agent,
        tools,
        root,
    }
}

impl Rig {
    /// One step per call (so each call is its own tool batch), then a final text.
    async fn run(&self, calls: &[(&str, Value)]) {
        for (i, (name, args)) in calls.iter().enumerate() {
            let id = format!("c{i}");
            self.adapter
                .push_chunks(tool_calls_response(&[(&id, name, &args.to_string())]));
        }
        self.adapter.push_chunks(text_response("done"));
        self.agent.followup(Message::user_text("go")).unwrap();
        tokio::time::timeout(Duration::from_secs(10), self.agent.when_idle())
            .await
            .unwrap();
    }

    /// (call index, reminder text) for every reminder logged.
    fn reminders(&self) -> Vec<(usize, String)> {
        let mut calls = 0usize;
        let mut out = Vec::new();
        for event in self.agent.log().events().unwrap().iter() {
            if event.kind == "tool/result" {
                calls += 1;
            }
            if event.kind == "user/message"
                && event.data["source"]["plugin"] == "repeat-tool-reminder"
            {
                out.push((
                    calls,
                    event.data["content"][0]["text"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                ));
            }
        }
        out
    }
}

#[tokio::test]
async fn items_1_2_gentle_at_3_detailed_at_5_and_8() {
    let rig = rig(RepeatConfig::default());
    let calls: Vec<(&str, Value)> = (0..10).map(|_| ("grep", json!({"pattern": "X"}))).collect();
    rig.run(&calls).await;
    let reminders = rig.reminders();
    let at: Vec<usize> = reminders.iter().map(|(n, _)| *n).collect();
    assert_eq!(at, [3, 5, 8]);
    assert_eq!(reminders[0].1, GENTLE);
    assert!(
        reminders[1]
            .1
            .contains("- consecutive_calls: 5\n- arguments: {\"pattern\":\"X\"}")
    );
    assert!(reminders[2].1.contains("- consecutive_calls: 8"));
}

#[tokio::test]
async fn items_3_4_5_6_identity_resets_transparency_and_denials() {
    let rig = rig(RepeatConfig {
        exclude: vec!["todo_write".into()],
        ..RepeatConfig::default()
    });
    rig.run(&[
        ("grep", json!({"a": 1, "b": 2})),
        ("todo_write", json!({})),
        ("grep", json!({"b": 2, "a": 1})),
        ("read", json!({})),
        ("denied", json!({})),
        ("denied", json!({})),
        ("denied", json!({})),
    ])
    .await;
    // grep ×2 (todo_write transparent), reset by read, then three denied calls remind.
    assert_eq!(
        rig.reminders().iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        [7]
    );
}

#[tokio::test]
async fn item_7_a_user_prompt_resets_the_chain() {
    let rig = rig(RepeatConfig::default());
    rig.run(&[("grep", json!({})), ("grep", json!({}))]).await;
    rig.run(&[("grep", json!({})), ("grep", json!({}))]).await;
    assert!(rig.reminders().is_empty());
    rig.run(&[
        ("grep", json!({})),
        ("grep", json!({})),
        ("grep", json!({})),
    ])
    .await;
    assert_eq!(rig.reminders().len(), 1);
}

#[tokio::test]
async fn item_11_a_downstream_block_keeps_its_feedback_and_gains_the_reminder_first() {
    let rig = rig(RepeatConfig {
        thresholds: vec![2.0],
        ..RepeatConfig::default()
    });
    // Registered after the reminder: an inner listener that blocks with its own context.
    rig.tools.post_execute().register(&rig.root, |_, _| {
        Box::pin(async {
            Ok(
                PostDecision::block(vec![ContentBlock::text("blocked!")]).with_contexts(vec![
                    Message::user(
                        vec![ContentBlock::text("inner context")],
                        dsh_protocol::MessageSource::plugin("inner"),
                    ),
                ]),
            )
        })
    });
    rig.run(&[("grep", json!({})), ("grep", json!({}))]).await;
    let events = rig.agent.log().events().unwrap();
    let last_result = events
        .iter()
        .rposition(|e| e.kind == "tool/result")
        .unwrap();
    assert_eq!(
        events[last_result].data["message"]["content"][0]["content"][0]["text"],
        "blocked!"
    );
    let after: Vec<String> = events[last_result..]
        .iter()
        .filter(|e| e.kind == "user/message")
        .map(|e| e.data["content"][0]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(after[..2], [GENTLE.to_owned(), "inner context".to_owned()]);
}

#[tokio::test]
async fn agentless_calls_are_ignored() {
    let rig = rig(RepeatConfig {
        thresholds: vec![2.0],
        ..RepeatConfig::default()
    });
    for _ in 0..3 {
        let result = rig
            .tools
            .execute(ToolCallInput::new(
                "x",
                "grep",
                json!({}),
                dsh_tools::CancellationToken::new(),
            ))
            .await;
        assert!(result.additional_contexts.is_empty());
    }
    let _ = &rig.agent;
}

// ----- timeout policy -----

fn slow(
    name: &str,
    timeout_ms: Option<u64>,
    seen: Arc<Mutex<Vec<bool>>>,
) -> dsh_tools::ToolDefinition {
    let builder = Tool::builder(name)
        .description("slow")
        .raw_parameters(json!({"type": "object", "properties": {}}))
        .raw_output(json!({"type": "string"}), |_, v| {
            Ok(vec![ContentBlock::text(
                v.as_str().unwrap_or_default().to_owned(),
            )])
        });
    let builder = match timeout_ms {
        Some(ms) => builder.timeout_ms(ms),
        None => builder,
    };
    builder
        .run(move |_, run: dsh_tools::ToolRun| {
            let seen = seen.clone();
            async move {
                tokio::select! {
                    () = run.signal().cancelled() => {
                        seen.lock().unwrap().push(true);
                        Err(dsh_tools::ToolError::aborted())
                    }
                    () = tokio::time::sleep(Duration::from_millis(300)) => Ok("finished".to_owned()),
                }
            }
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn timeout_items_1_to_4() {
    let root = Scope::root();
    let tools = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    tools
        .register(&root, slow("timed", Some(50), seen.clone()))
        .unwrap();
    tools
        .register(&root, slow("untimed", None, seen.clone()))
        .unwrap();
    tools
        .register(&root, slow("long", Some(5_000), seen.clone()))
        .unwrap();
    dsh_guard::timeout::install(&tools, &root);
    let post_signals = Arc::new(Mutex::new(Vec::new()));
    let sink = post_signals.clone();
    tools.post_execute().register(&root, move |input, next| {
        sink.lock()
            .unwrap()
            .push(input.exec.signal().is_cancelled());
        next.run(input)
    });
    // 1: declared 50 ms, body honours the signal.
    let result = tools
        .execute(ToolCallInput::new(
            "a",
            "timed",
            json!({}),
            dsh_tools::CancellationToken::new(),
        ))
        .await;
    assert_eq!(result.text(), "Error: tool call timed out after 50ms");
    assert_eq!(result.error_code(), Some("TOOL_TIMEOUT"));
    assert_eq!(
        result.error.as_ref().unwrap().info.as_ref().unwrap().name,
        "ToolTimeoutError"
    );
    // 3: post-execute saw the caller's own, unaborted signal.
    assert_eq!(*post_signals.lock().unwrap(), [false]);
    // 2: no timeoutMs, never timed out.
    let result = tools
        .execute(ToolCallInput::new(
            "b",
            "untimed",
            json!({}),
            dsh_tools::CancellationToken::new(),
        ))
        .await;
    assert_eq!(result.text(), "finished");
    // 4: an outer abort first is an ordinary cancellation.
    let outer = dsh_tools::CancellationToken::new();
    let input = ToolCallInput::new("c", "long", json!({}), outer.clone());
    let pending = tokio::spawn({
        let tools = tools.clone();
        async move { tools.execute(input).await }
    });
    tokio::time::sleep(Duration::from_millis(30)).await;
    outer.cancel();
    let result = pending.await.unwrap();
    assert_ne!(result.error_code(), Some("TOOL_TIMEOUT"));
    assert!(result.is_error);
}
