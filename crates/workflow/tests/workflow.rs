//! `workflow` and `ralph` end to end on the real loop, the subagent service and the QuickJS
//! worker (subagent-spec §4).
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The subagent crate's test support (a replay adapter over `dsh_llm`, sessions in `tempfile`
// folders) is shared: those two are dev-dependencies here for it.
#[path = "../../subagent/tests/support/mod.rs"]
mod support;

use std::sync::Arc;

use dsh_kernel::ScopeKind;
use dsh_workflow::EngineConfig;
use dsh_workflow::RalphConfig;
use dsh_workflow::WorkflowEngine;
use dsh_workflow::WorkflowToolConfig;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;
use support::*;

fn engine(rig: &Rig, config: EngineConfig) -> Arc<WorkflowEngine> {
    let engine = WorkflowEngine::new(config, rig.subagents.clone()).unwrap();
    let scope = rig.plugin.child(ScopeKind::Plugin, "workflow").unwrap();
    dsh_workflow::tool::install(
        &engine,
        &rig.tools,
        Some(&rig.prompts),
        &scope,
        WorkflowToolConfig::default(),
    )
    .unwrap();
    engine
}

fn workflow_call(script: &str, meta: Value) -> Vec<dsh_protocol::StreamChunk> {
    call("wf", "workflow", json!({"script": script, "meta": meta}))
}

fn meta() -> Value {
    json!({"name": "fanout", "description": "Fan out"})
}

fn records(events: &[Arc<dsh_session::Event>]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e.kind.starts_with("tool-workflow/"))
        .map(|e| json!({"type": e.kind, "data": e.data}))
        .collect()
}

#[tokio::test]
async fn a_workflow_fans_out_children_and_records_them_in_the_parent_log() {
    let rig = Rig::new();
    engine(&rig, EngineConfig::default());
    let script = r#"
        phase("Gather");
        log("starting");
        const [a, b] = await parallel([
            () => agent("W-ONE say one", {label: "first"}),
            () => agent("W-TWO fail please"),
        ]);
        return {a, b, n: args.n ?? null};
    "#;
    rig.script(
        "P-WF",
        vec![workflow_call(script, meta()), text_response("done")],
    );
    rig.script("W-ONE", vec![text_response("one")]);
    rig.script(
        "W-TWO",
        vec![dsh_agent::scripted::error_response(
            dsh_protocol::LlmFailure::new("INVALID_REQUEST", "no"),
        )],
    );
    let parent = rig.parent();
    prompt(&parent, "P-WF").await;
    // Checklist 74 and 75.
    let (text, is_error) = tool_results(&parent.log().events().unwrap())[0].clone();
    assert!(!is_error, "{text}");
    assert_eq!(
        text,
        "workflow \"fanout\" completed (2 agents).\nReturn value:\n{\n  \"a\": \"one\",\n  \"b\": null,\n  \"n\": null\n}"
    );
    // Checklist 76: run-start, paired agent records by seq, run-end last.
    let records = records(&parent.log().events().unwrap());
    let kinds: Vec<&str> = records
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"tool-workflow/run-start"));
    assert_eq!(kinds.last(), Some(&"tool-workflow/run-end"));
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == "tool-workflow/agent-start")
            .count(),
        2
    );
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == "tool-workflow/agent-end")
            .count(),
        2
    );
    let run_id = records[0]["data"]["runId"].clone();
    assert_eq!(records[0]["data"]["name"], "fanout");
    for record in &records {
        assert_eq!(record["data"]["runId"], run_id);
    }
    let outcome = |seq: u64| {
        records
            .iter()
            .find(|r| r["type"] == "tool-workflow/agent-end" && r["data"]["seq"] == seq)
            .map(|r| r["data"]["outcome"].clone())
    };
    let start_of = |label: &str| {
        records
            .iter()
            .find(|r| r["type"] == "tool-workflow/agent-start" && r["data"]["label"] == label)
            .unwrap()["data"]
            .clone()
    };
    let first = start_of("first");
    assert_eq!(first["phase"], "Gather");
    assert_eq!(
        outcome(first["seq"].as_u64().unwrap()),
        Some(json!("completed"))
    );
    let second = start_of("W-TWO fail please");
    assert_eq!(
        outcome(second["seq"].as_u64().unwrap()),
        Some(json!("failed"))
    );
    assert_eq!(records.last().unwrap()["data"]["stopReason"], "completed");
    // Workflow children are one-shot and carry no label in their descriptor.
    let children = rig.child_logs();
    assert_eq!(children.len(), 2);
    for child in &children {
        let descriptor = child
            .events
            .iter()
            .find(|e| e.kind == "subagent/descriptor")
            .unwrap();
        assert_eq!(
            descriptor.data,
            json!({"version": 2, "mode": "one-shot", "provider": "spawn"})
        );
    }
}

#[tokio::test]
async fn invalid_meta_and_scripts_are_rejected_before_any_child() {
    let rig = Rig::new();
    engine(&rig, EngineConfig::default());
    rig.script(
        "P-BAD",
        vec![
            workflow_call("return 1;", json!({"name": "", "description": "d", "x": 1})),
            workflow_call("export const meta = {name: 'x'};\nreturn 1;", meta()),
            workflow_call("return (;", meta()),
            text_response("done"),
        ],
    );
    let parent = rig.parent();
    prompt(&parent, "P-BAD").await;
    let results = tool_results(&parent.log().events().unwrap());
    // Checklist 71.
    assert_eq!(
        results[0],
        (
            "Error: invalid meta: meta.x is not a recognized field (name/description/whenToUse/phases); meta.name must be a non-empty string".to_owned(),
            true
        )
    );
    // Checklist 72.
    assert_eq!(
        results[1],
        (format!("Error: {}", dsh_workflow::INLINE_META), true)
    );
    assert!(
        results[2]
            .0
            .starts_with("Error: workflow script does not parse: "),
        "{results:?}"
    );
    assert!(rig.child_logs().is_empty());
    assert!(records(&parent.log().events().unwrap()).is_empty());
}

#[tokio::test]
async fn misusing_a_hook_inside_a_combinator_kills_the_script() {
    let rig = Rig::new();
    engine(&rig, EngineConfig::default());
    let script = r#"
        const results = await parallel([
            async () => { try { return await agent("W-NEVER", {colour: "red"}); } catch (e) { return "caught"; } },
        ]);
        await agent("W-AFTER");
        return results;
    "#;
    rig.script(
        "P-MISUSE",
        vec![workflow_call(script, meta()), text_response("done")],
    );
    rig.script("W-AFTER", vec![text_response("should not run")]);
    let parent = rig.parent();
    prompt(&parent, "P-MISUSE").await;
    // Checklist 73.
    assert_eq!(
        tool_results(&parent.log().events().unwrap()),
        vec![(
            "Error: workflow run failed: WorkflowError: agent() option \"colour\" is not recognized (supported: label, phase, schema, provider, model)".to_owned(),
            true
        )]
    );
    assert!(rig.child_logs().is_empty());
    let records = records(&parent.log().events().unwrap());
    assert_eq!(records.last().unwrap()["data"]["stopReason"], "error");
}

#[tokio::test]
async fn the_total_agent_cap_stops_a_runaway_loop() {
    let rig = Rig::new();
    engine(
        &rig,
        EngineConfig {
            max_total_agents: 2,
            ..EngineConfig::default()
        },
    );
    let script = r#"
        const out = [];
        for (let i = 0; i < 5; i++) out.push(await agent("W-LOOP " + i));
        return out;
    "#;
    rig.script(
        "P-CAP",
        vec![workflow_call(script, meta()), text_response("done")],
    );
    rig.script(
        "W-LOOP",
        vec![text_response("a"), text_response("b"), text_response("c")],
    );
    let parent = rig.parent();
    prompt(&parent, "P-CAP").await;
    // Checklist 77.
    assert_eq!(
        tool_results(&parent.log().events().unwrap()),
        vec![(
            "Error: workflow run failed: WorkflowError: this run reached its total agent cap (2) — a runaway-loop backstop; raise the applicable maxTotalAgents limit if the scale is intentional".to_owned(),
            true
        )]
    );
    assert_eq!(rig.child_logs().len(), 2);
}

#[tokio::test]
async fn long_results_are_truncated_and_non_json_results_rejected() {
    let rig = Rig::new();
    let engine = WorkflowEngine::new(EngineConfig::default(), rig.subagents.clone()).unwrap();
    let scope = rig.plugin.child(ScopeKind::Plugin, "workflow").unwrap();
    dsh_workflow::tool::install(
        &engine,
        &rig.tools,
        None,
        &scope,
        WorkflowToolConfig {
            tool_name: "workflow".into(),
            max_result_chars: 10,
        },
    )
    .unwrap();
    rig.script(
        "P-TRUNC",
        vec![
            workflow_call("return 'abcdefghijklmnopqrstuvwxyz';", meta()),
            workflow_call("return {when: new Date(0)};", meta()),
            text_response("done"),
        ],
    );
    let parent = rig.parent();
    prompt(&parent, "P-TRUNC").await;
    let results = tool_results(&parent.log().events().unwrap());
    assert_eq!(
        results[0],
        (
            "workflow \"fanout\" completed (0 agents).\nReturn value:\n\"abcdefghi\n… [truncated: 18 more characters]".to_owned(),
            false
        )
    );
    assert_eq!(
        results[1],
        (
            "Error: workflow run failed: WorkflowError: the workflow's return value is not plain JSON data — result.when is a Date object. Return only JSON-serializable objects/arrays/scalars.".to_owned(),
            true
        )
    );
}

#[tokio::test]
async fn cancelling_the_parent_step_cancels_the_run_and_its_children() {
    let rig = Rig::new();
    engine(&rig, EngineConfig::default());
    rig.script(
        "P-WFCANCEL",
        vec![workflow_call("return await agent('W-HANG');", meta())],
    );
    rig.script_raw("W-HANG", vec![dsh_agent::scripted::Script::Hang]);
    let parent = rig.parent();
    parent
        .followup(dsh_protocol::Message::user_text("P-WFCANCEL"))
        .unwrap();
    eventually("the child to stream", || {
        rig.child_logs()
            .first()
            .is_some_and(|c| c.events.iter().any(|e| e.kind == "step/start"))
    })
    .await;
    parent.cancel(dsh_agent::AbortReason::User, false);
    tokio::time::timeout(std::time::Duration::from_secs(10), parent.when_idle())
        .await
        .unwrap();
    let child = &rig.child_logs()[0];
    let end = child
        .events
        .iter()
        .rev()
        .find(|e| e.kind == "turn/end")
        .unwrap();
    assert_eq!(end.data["reason"]["kind"], "aborted");
    let records = records(&parent.log().events().unwrap());
    assert_eq!(records.last().unwrap()["type"], "tool-workflow/run-end");
    assert_eq!(records.last().unwrap()["data"]["stopReason"], "cancelled");
    let ends: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "tool-workflow/agent-end")
        .collect();
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["data"]["outcome"], "cancelled");
    assert_eq!(rig.directory.len(), 1);
}

fn ralph(rig: &Rig, engine: &Arc<WorkflowEngine>, config: RalphConfig) {
    let scope = rig.plugin.child(ScopeKind::Plugin, "ralph").unwrap();
    dsh_workflow::ralph::install(engine, &rig.tools, Some(&rig.prompts), &scope, config).unwrap();
}

fn report(status: &str, summary: &str) -> Vec<dsh_protocol::StreamChunk> {
    call(
        "so",
        "structured_output",
        json!({"status": status, "summary": summary, "evidence": [], "nextSteps": [], "blocker": ""}),
    )
}

#[tokio::test]
async fn ralph_runs_fresh_rounds_until_the_worker_reports_completion() {
    let rig = Rig::new();
    let engine = engine(&rig, EngineConfig::default());
    ralph(&rig, &engine, RalphConfig::default());
    rig.script(
        "P-RALPH",
        vec![
            call(
                "r",
                "ralph",
                json!({"objective": "ship it", "maxRounds": 5}),
            ),
            text_response("ok"),
        ],
    );
    let worker = rig.script(
        "Ralph round",
        vec![report("continue", "half"), report("complete", "all done")],
    );
    let parent = rig.parent();
    prompt(&parent, "P-RALPH go").await;
    // Checklist 79.
    let (text, is_error) = tool_results(&parent.log().events().unwrap())[0].clone();
    assert!(!is_error, "{text}");
    assert_eq!(
        text,
        "Ralph worker reported completion after 2 rounds.\nFinal report:\n{\n  \"status\": \"complete\",\n  \"summary\": \"all done\",\n  \"evidence\": [],\n  \"nextSteps\": [],\n  \"blocker\": \"\"\n}"
    );
    let requests = worker.requests();
    assert_eq!(requests.len(), 2);
    let prompt_of = |i: usize| latest_user_text(&requests[i]).unwrap();
    assert!(prompt_of(0).contains("Ralph round: 1 of 5."));
    assert!(prompt_of(0).contains("(none — this is the first round)"));
    assert!(prompt_of(1).contains("Ralph round: 2 of 5."));
    assert!(prompt_of(1).contains("\"summary\":\"half\""));
    let children = rig.child_logs();
    assert_eq!(children.len(), 2);
    // Fresh children: no seed, and each offered structured_output.
    for child in &children {
        assert_eq!(child.header.seed_length, None);
    }
    assert!(
        requests[0]
            .tools
            .iter()
            .any(|t| t.name == "structured_output")
    );
}

#[tokio::test]
async fn ralph_budget_blocker_and_round_failure_envelopes() {
    let rig = Rig::new();
    let engine = engine(&rig, EngineConfig::default());
    ralph(&rig, &engine, RalphConfig::default());
    rig.script(
        "P-RALPH2",
        vec![
            call("r1", "ralph", json!({"objective": "A", "maxRounds": 1})),
            call("r2", "ralph", json!({"objective": "B", "maxRounds": 2})),
            call("r3", "ralph", json!({"objective": "C", "maxRounds": 2})),
            call("r4", "ralph", json!({"objective": "  "})),
            call("r5", "ralph", json!({"objective": "D", "maxRounds": 999})),
            text_response("ok"),
        ],
    );
    rig.script(
        "Ralph round",
        vec![
            report("continue", "a1"),
            report("blocked", "b1"),
            report("continue", "c1"),
            text_response("I forgot the tool"),
        ],
    );
    let parent = rig.parent();
    prompt(&parent, "P-RALPH2").await;
    let results = tool_results(&parent.log().events().unwrap());
    assert!(
        results[0].0.starts_with(
            "Ralph reached its 1 round limit; the worker reported work remaining.\nFinal report:\n{"
        ),
        "{results:?}"
    );
    assert!(
        results[1]
            .0
            .starts_with("Ralph worker reported a blocker after 1 round.\nFinal report:\n")
    );
    // Checklist 80.
    assert_eq!(
        results[2],
        (
            "Error: Ralph round 2 child failed before producing a structured report.\nLast successful handoff:\n{\n  \"status\": \"continue\",\n  \"summary\": \"c1\",\n  \"evidence\": [],\n  \"nextSteps\": [],\n  \"blocker\": \"\"\n}".to_owned(),
            true
        )
    );
    assert_eq!(
        results[3],
        (
            "Error: Ralph objective must be a non-empty string".to_owned(),
            true
        )
    );
    assert_eq!(
        results[4],
        (
            "Error: Ralph maxRounds 999 exceeds the deployment ceiling 256".to_owned(),
            true
        )
    );
}

#[tokio::test]
async fn ralph_refuses_providers_it_cannot_use() {
    let rig = Rig::new();
    let engine = engine(&rig, EngineConfig::default());
    for (provider, message) in [
        (
            "fork",
            "Error: Ralph subagent provider \"fork\" inherits parent context; Ralph requires a fresh provider",
        ),
        (
            "ghost",
            "Error: Ralph subagent provider \"ghost\" is not registered",
        ),
    ] {
        let scope = rig.plugin.child(ScopeKind::Plugin, "ralph").unwrap();
        dsh_workflow::ralph::install(
            &engine,
            &rig.tools,
            None,
            &scope,
            RalphConfig {
                subagent_provider: provider.into(),
                ..RalphConfig::default()
            },
        )
        .unwrap();
        let key = format!("P-REFUSE-{provider}");
        rig.script(
            &key,
            vec![
                call("r", "ralph", json!({"objective": "x"})),
                text_response("ok"),
            ],
        );
        let parent = rig.parent();
        prompt(&parent, &key).await;
        // Checklist 78.
        assert_eq!(
            tool_results(&parent.log().events().unwrap()),
            vec![(message.to_owned(), true)]
        );
        scope.dispose();
    }
    assert!(rig.child_logs().is_empty());
}

#[tokio::test]
async fn a_workflow_called_from_code_mode_writes_no_records() {
    let rig = Rig::new();
    engine(&rig, EngineConfig::default());
    let runtime = dsh_code::QuickJsRuntime::new(dsh_code::QuickJsConfig::default()).unwrap();
    rig.root
        .provide::<dyn dsh_code::CodeRuntime>(runtime)
        .unwrap();
    let (_code_mode, _installed) =
        dsh_code::CodeMode::install(&rig.root, &rig.tools, dsh_code::CodeModeConfig::default())
            .unwrap();
    let parent = rig.parent();
    rig.tools
        .present_as(parent.scope(), dsh_tools::PresentationMode::Both)
        .unwrap();
    let program = r#"
        const out = await tools.workflow({script: "return await agent('W-NESTED');", meta: {name: "nested", description: "d"}});
        console.log(out);
        return "ran";
    "#;
    rig.script(
        "P-CODE",
        vec![
            call(
                "rc",
                "run_code",
                json!({"code": program, "description": "Run a nested workflow"}),
            ),
            text_response("done"),
        ],
    );
    rig.script("W-NESTED", vec![text_response("nested answer")]);
    prompt(&parent, "P-CODE").await;
    let (text, is_error) = tool_results(&parent.log().events().unwrap())[0].clone();
    assert!(!is_error, "{text}");
    assert!(text.contains("nested answer"), "{text}");
    // Checklist 76, second half.
    assert!(records(&parent.log().events().unwrap()).is_empty());
    assert_eq!(rig.child_logs().len(), 1);
}

/// A registered provider without the structured-output capability.
struct Plain;

impl dsh_subagent::SubagentProvider for Plain {
    fn name(&self) -> &str {
        "plain"
    }
    fn capabilities(&self) -> dsh_subagent::Capabilities {
        dsh_subagent::Capabilities::NONE
    }
    fn inherits_parent_context(&self) -> bool {
        false
    }
    fn start(
        &self,
        _: dsh_subagent::StartRequest,
    ) -> futures::future::BoxFuture<
        'static,
        Result<dsh_subagent::SubagentRun, dsh_subagent::SubagentError>,
    > {
        Box::pin(async { Err(dsh_subagent::SubagentError::plain("not used")) })
    }
}

#[tokio::test]
async fn ralph_refuses_a_provider_without_structured_output() {
    let rig = Rig::new();
    rig.subagents
        .register_provider(&rig.plugin, Arc::new(Plain))
        .unwrap();
    let engine = engine(&rig, EngineConfig::default());
    ralph(
        &rig,
        &engine,
        RalphConfig {
            subagent_provider: "plain".into(),
            ..RalphConfig::default()
        },
    );
    rig.script(
        "P-PLAIN",
        vec![
            call("r", "ralph", json!({"objective": "x"})),
            text_response("ok"),
        ],
    );
    let parent = rig.parent();
    prompt(&parent, "P-PLAIN").await;
    // Checklist 78.
    assert_eq!(
        tool_results(&parent.log().events().unwrap()),
        vec![(
            "Error: Ralph subagent provider \"plain\" does not support structured output"
                .to_owned(),
            true
        )]
    );
}
