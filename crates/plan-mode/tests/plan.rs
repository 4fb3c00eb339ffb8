//! Plan mode over a real agent loop (context-spec §15 G, items 82–91).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::PromptConfig;
use dsh_agent::prompt::PromptRegistry;
use dsh_agent::scripted::Script;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_kernel::BoxFuture;
use dsh_kernel::Scope;
use dsh_plan_mode::PlanMode;
use dsh_plan_mode::PlanModeConfig;
use dsh_plan_mode::command;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolRegistry;
use dsh_user_questions::Answer;
use dsh_user_questions::Answers;
use dsh_user_questions::QuestionRequest;
use dsh_user_questions::UserQuestionError;
use dsh_user_questions::UserQuestionProvider;
use dsh_user_questions::UserQuestions;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

struct Reviewer {
    answer: Mutex<Option<Result<Answers, UserQuestionError>>>,
    seen: Mutex<Vec<QuestionRequest>>,
}

impl UserQuestionProvider for Reviewer {
    fn ask(
        &self,
        request: QuestionRequest,
    ) -> BoxFuture<'static, Result<Answers, UserQuestionError>> {
        self.seen.lock().unwrap().push(request);
        let answer = self.answer.lock().unwrap().take().unwrap();
        Box::pin(async move { answer })
    }
}

struct Rig {
    adapter: Arc<ScriptedAdapter>,
    plan: Arc<PlanMode>,
    agent: AgentHandle,
    reviewer: Arc<Reviewer>,
    _root: Scope,
}

fn rig_with(log: SessionLog) -> Rig {
    let root = Scope::root();
    let tools = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    let hooks = AgentHooks::install(&root).unwrap();
    let prompts = Arc::new(PromptRegistry::default());
    root.provide(prompts.clone()).unwrap();
    let questions = UserQuestions::install(&root).unwrap();
    let reviewer = Arc::new(Reviewer {
        answer: Mutex::new(None),
        seen: Mutex::new(Vec::new()),
    });
    questions
        .register_provider(&root, reviewer.clone())
        .unwrap();
    let plan = Arc::new(PlanMode::new(PlanModeConfig {
        section: "PLAN MODE GUIDANCE".into(),
    }));
    dsh_plan_mode::install(&plan, &hooks, &prompts, &root);
    tools
        .register(
            &root,
            dsh_plan_mode::tool::definition(plan.clone()).unwrap(),
        )
        .unwrap();
    let adapter = ScriptedAdapter::new("mock");
    let agent = Agent::create(AgentConfig {
        id: log.id().to_owned(),
        cwd: None,
        provider: "mock".into(),
        model: "mock".into(),
        max_tokens: None,
        adapter: adapter.clone(),
        tools,
        scope: root.clone(),
        log,
        prompt: PromptConfig::default(),
        max_parallel_tool_calls: 2,
    })
    .unwrap();
    Rig {
        adapter,
        plan,
        agent,
        reviewer,
        _root: root,
    }
}

fn rig() -> Rig {
    rig_with(SessionLog::in_memory(SessionHeader::new(
        "plan-s",
        Some("/w".into()),
    )))
}

impl Rig {
    async fn prompt(&self, text: &str) {
        self.agent.followup(Message::user_text(text)).unwrap();
        self.idle().await;
    }

    async fn idle(&self) {
        tokio::time::timeout(Duration::from_secs(10), self.agent.when_idle())
            .await
            .unwrap();
    }

    fn of(&self, kind: &str) -> Vec<Value> {
        self.agent
            .log()
            .events()
            .unwrap()
            .iter()
            .filter(|e| e.kind == kind)
            .map(|e| e.data.value().clone())
            .collect()
    }

    fn result_text(&self) -> String {
        let results = self.of("tool/result");
        let content: Vec<ContentBlock> = serde_json::from_value(
            results.last().unwrap()["message"]["content"][0]["content"].clone(),
        )
        .unwrap();
        dsh_protocol::text_of(&content)
    }

    fn answer(&self, answer: Result<Answers, UserQuestionError>) {
        *self.reviewer.answer.lock().unwrap() = Some(answer);
    }
}

#[tokio::test]
async fn items_82_85_idle_plan_commits_and_the_section_follows_the_state() {
    let rig = rig();
    assert_eq!(
        command::run(&rig.plan, &rig.agent, "", Vec::new()),
        command::Outcome::Success("Plan mode on. Use /plan off to leave.".into())
    );
    assert_eq!(rig.of("plan/mode"), [json!({"active": true})]);
    rig.adapter.push_chunks(text_response("planning"));
    rig.prompt("look around").await;
    assert_eq!(
        command::run(&rig.plan, &rig.agent, "off", Vec::new()),
        command::Outcome::Success("Plan mode off.".into())
    );
    rig.adapter.push_chunks(text_response("doing"));
    rig.prompt("go").await;
    let requests = rig.adapter.requests();
    assert!(
        requests[0]
            .system
            .as_deref()
            .unwrap_or("")
            .contains("PLAN MODE GUIDANCE")
    );
    assert!(
        !requests[1]
            .system
            .as_deref()
            .unwrap_or("")
            .contains("PLAN MODE GUIDANCE")
    );
    let names =
        |i: usize| -> Vec<String> { requests[i].tools.iter().map(|t| t.name.clone()).collect() };
    assert_eq!(names(0), names(1));
    assert_eq!(
        command::run(&rig.plan, &rig.agent, "off", Vec::new()),
        command::Outcome::Success("Plan mode is already inactive.".into())
    );
}

#[tokio::test]
async fn items_83_84_90_a_running_turn_queues_and_narrates_at_the_next_pre_step() {
    let rig = rig();
    let (plan, agent) = (rig.plan.clone(), rig.agent.clone());
    let said = Arc::new(Mutex::new(None));
    let out = said.clone();
    // During the first request: `/plan fix the bug`.
    rig.adapter.push(Script::Computed(Arc::new(move |_| {
        *out.lock().unwrap() = Some(command::run(&plan, &agent, "fix the bug", Vec::new()));
        text_response("first")
    })));
    rig.adapter.push_chunks(text_response("second"));
    rig.prompt("start").await;
    assert_eq!(
        said.lock().unwrap().clone().unwrap(),
        command::Outcome::Success(
            "Entering plan mode (applies from the next step). Use /plan off to leave.".into()
        )
    );
    let kinds: Vec<(String, Value)> = rig
        .agent
        .log()
        .events()
        .unwrap()
        .iter()
        .map(|e| (e.kind.to_string(), e.data.value().clone()))
        .collect();
    let mode = kinds.iter().position(|(k, _)| k == "plan/mode").unwrap();
    let first_end = kinds.iter().position(|(k, _)| k == "step/end").unwrap();
    let second_step = kinds.iter().rposition(|(k, _)| k == "step/start").unwrap();
    assert!(
        first_end < mode && mode < second_step,
        "plan/mode is logged at the next pre-step"
    );
    // The second request is taken in plan mode.
    let requests = rig.adapter.requests();
    assert!(
        !requests[0]
            .system
            .as_deref()
            .unwrap_or("")
            .contains("PLAN MODE GUIDANCE")
    );
    assert!(
        requests[1]
            .system
            .as_deref()
            .unwrap_or("")
            .contains("PLAN MODE GUIDANCE")
    );
    let messages: Vec<&Value> = kinds[second_step..]
        .iter()
        .filter(|(k, _)| k == "user/message")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(messages[0]["content"][0]["text"], "fix the bug");
    assert_eq!(messages[0]["source"], json!({"kind": "user"}));
    let narration = messages
        .iter()
        .find(|m| m["source"]["plugin"] == "plan-mode")
        .unwrap();
    assert_eq!(
        narration["content"][0]["text"],
        "The user switched this session to plan mode."
    );
    assert_eq!(
        narration["source"],
        json!({"kind": "plugin", "plugin": "plan-mode", "form": "notice", "summary": "The user switched this session to plan mode."})
    );
}

#[tokio::test]
async fn items_86_87_exit_outside_plan_mode_and_without_a_heading() {
    let rig = rig();
    rig.adapter.push_chunks(tool_call_response(
        "e",
        "exit_plan_mode",
        r##"{"plan":"# P"}"##,
        None,
    ));
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("x").await;
    assert_eq!(
        rig.result_text(),
        "Error: exit_plan_mode is only available in plan mode"
    );
    command::run(&rig.plan, &rig.agent, "", Vec::new());
    rig.adapter.push_chunks(tool_call_response(
        "e2",
        "exit_plan_mode",
        r#"{"plan":"no heading"}"#,
        None,
    ));
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("y").await;
    assert_eq!(
        rig.result_text(),
        "Error: exit_plan_mode requires a non-empty markdown plan starting with a # heading"
    );
}

#[tokio::test]
async fn item_88_approval_exits_at_the_next_pre_step_without_narration() {
    let rig = rig();
    command::run(&rig.plan, &rig.agent, "", Vec::new());
    rig.answer(Ok(Answers {
        answers: vec![Answer::selected("plan-review", vec!["Approve".into()])],
    }));
    rig.adapter.push_chunks(tool_call_response(
        "e",
        "exit_plan_mode",
        r##"{"plan":"# Ship\n1. do"}"##,
        None,
    ));
    rig.adapter.push_chunks(text_response("carrying out"));
    rig.prompt("plan it").await;
    assert_eq!(
        rig.result_text(),
        "Plan approved — plan mode exited; carry out the plan starting with your next step."
    );
    assert_eq!(
        rig.of("plan/mode"),
        [json!({"active": true}), json!({"active": false})]
    );
    assert!(
        rig.of("user/message")
            .iter()
            .all(|m| m["source"]["plugin"] != "plan-mode")
    );
    let seen = rig.reviewer.seen.lock().unwrap();
    let question = &seen[0].questions[0];
    assert_eq!(question.id, "plan-review");
    assert_eq!(question.detail.as_deref(), Some("# Ship\n1. do"));
    assert_eq!(question.header.as_deref(), Some("Plan review"));
    // The step after the approval no longer carries the guidance.
    let requests = rig.adapter.requests();
    assert!(
        requests[0]
            .system
            .as_deref()
            .unwrap_or("")
            .contains("PLAN MODE GUIDANCE")
    );
    assert!(
        !requests[1]
            .system
            .as_deref()
            .unwrap_or("")
            .contains("PLAN MODE GUIDANCE")
    );
}

#[tokio::test]
async fn item_89_keep_planning_and_dismissal_texts() {
    for (answer, expected) in [
        (
            Ok(Answers {
                answers: vec![Answer::custom("plan-review", "use X")],
            }),
            "Error: The user chose to keep planning; their feedback: use X",
        ),
        (
            Ok(Answers {
                answers: vec![Answer::selected(
                    "plan-review",
                    vec!["Keep planning".into()],
                )],
            }),
            "Error: The user chose to keep planning; revise the plan and present it again.",
        ),
        (
            Err(UserQuestionError::cancelled()),
            "Error: The user dismissed the plan review to speak instead; stay in plan mode, stop here, and wait for their message.",
        ),
    ] {
        let rig = rig();
        command::run(&rig.plan, &rig.agent, "", Vec::new());
        rig.answer(answer);
        rig.adapter.push_chunks(tool_call_response(
            "e",
            "exit_plan_mode",
            r##"{"plan":"# P"}"##,
            None,
        ));
        rig.adapter.push_chunks(text_response("ok"));
        rig.prompt("x").await;
        assert_eq!(rig.result_text(), expected);
        assert!(rig.plan.logged(&rig.agent));
    }
}

#[tokio::test]
async fn item_91_a_fork_inherits_the_plan_state() {
    let parent = rig();
    command::run(&parent.plan, &parent.agent, "", Vec::new());
    let seed: Vec<_> = parent
        .agent
        .log()
        .events()
        .unwrap()
        .iter()
        .map(|e| (**e).clone())
        .collect();
    let child = rig_with(
        SessionLog::from_seed(SessionHeader::new("child", Some("/w".into())), seed).unwrap(),
    );
    assert!(child.plan.logged(&child.agent));
    let fresh = rig();
    assert!(!fresh.plan.logged(&fresh.agent));
}

#[tokio::test]
async fn plan_and_its_texts_run_through_the_command_registry() {
    let rig = rig();
    let registry = dsh_commands::CommandRegistry::new();
    let owner = Scope::root();
    dsh_plan_mode::command::register(&registry, &owner, rig.plan.clone()).unwrap();
    let info = registry.find(rig.agent.scope(), "plan").unwrap();
    assert_eq!(info.description, "Enter or leave plan mode");
    assert_eq!(info.input.as_ref().unwrap().hint, "[off|message]");
    assert!(info.input.unwrap().images);
    let executed = registry
        .execute(
            &rig.agent,
            "/plan",
            Vec::new(),
            dsh_tools::CancellationToken::new(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        executed.result.display_text().as_deref(),
        Some("Plan mode on. Use /plan off to leave.")
    );
    let kinds: Vec<String> = rig
        .agent
        .log()
        .events()
        .unwrap()
        .iter()
        .map(|e| e.kind.to_string())
        .collect();
    assert_eq!(kinds.iter().filter(|k| *k == "command/run").count(), 1);
    assert_eq!(kinds.iter().filter(|k| *k == "command/done").count(), 1);
    assert!(rig.plan.logged(&rig.agent));
    let off = registry
        .execute(
            &rig.agent,
            "/plan off",
            vec![ContentBlock::text("img")],
            dsh_tools::CancellationToken::new(),
        )
        .await;
    // An image block alongside `off` is refused (by the registry's admission or by /plan).
    let text = match off {
        Ok(Some(executed)) => executed.result.display_text().unwrap_or_default(),
        Ok(None) => String::new(),
        Err(error) => error.to_string(),
    };
    assert!(!text.is_empty());
    assert!(rig.plan.logged(&rig.agent));
}
