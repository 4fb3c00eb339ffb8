//! Goals end to end over a real agent loop with a scripted model (context-spec §15 F, 67–81).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::PromptConfig;
use dsh_agent::scripted::Script;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_goal::Goals;
use dsh_goal::command;
use dsh_goal::tools::GoalToolsConfig;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolRegistry;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

struct Rig {
    adapter: Arc<ScriptedAdapter>,
    goals: Arc<Goals>,
    agent: AgentHandle,
    _root: Scope,
}

fn rig_with(log: SessionLog, driver: bool) -> Rig {
    let root = Scope::root();
    let tools = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    let hooks = AgentHooks::install(&root).unwrap();
    let goals = Arc::new(Goals::default());
    dsh_goal::tools::register(&tools, &root, goals.clone(), GoalToolsConfig::default()).unwrap();
    if driver {
        dsh_goal::driver::install(&goals, &hooks, &root);
    }
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
        goals,
        agent,
        _root: root,
    }
}

fn rig(driver: bool) -> Rig {
    rig_with(
        SessionLog::in_memory(SessionHeader::new("goal-session", Some("/w".into()))),
        driver,
    )
}

impl Rig {
    fn call(&self, id: &str, name: &str, args: Value) {
        self.adapter
            .push_chunks(tool_call_response(id, name, &args.to_string(), None));
    }

    async fn prompt(&self, text: &str) {
        self.send(Message::user_text(text)).await;
    }

    async fn send(&self, message: Message) {
        self.agent.followup(message).unwrap();
        self.idle().await;
    }

    async fn idle(&self) {
        tokio::time::timeout(Duration::from_secs(10), self.agent.when_idle())
            .await
            .unwrap();
    }

    fn results(&self) -> Vec<(String, bool, Value)> {
        self.agent
            .log()
            .events()
            .unwrap()
            .iter()
            .filter(|e| e.kind == "tool/result")
            .map(|e| {
                let block = &e.data["message"]["content"][0];
                let content: Vec<ContentBlock> =
                    serde_json::from_value(block["content"].clone()).unwrap();
                (
                    dsh_protocol::text_of(&content),
                    block["isError"] == true,
                    e.data.get("error").cloned().unwrap_or(Value::Null),
                )
            })
            .collect()
    }

    fn changes(&self) -> Vec<Value> {
        self.agent
            .log()
            .events()
            .unwrap()
            .iter()
            .filter(|e| e.kind == "goal/change")
            .map(|e| e.data.value().clone())
            .collect()
    }
}

#[tokio::test]
async fn goal_tools_scenario_shape_and_item_67_71() {
    let rig = rig(false);
    rig.call(
        "probe",
        "update_goal",
        json!({"goal_id": "missing-goal", "revision": 1, "action": "pause", "objective": "", "max_goal_rounds": 0, "blocked_reason": ""}),
    );
    rig.call(
        "create",
        "create_goal",
        json!({"objective": "ship it", "max_goal_rounds": 7}),
    );
    rig.call("get", "get_goal", json!({}));
    rig.adapter.push_chunks(text_response("GOAL READY"));
    rig.prompt("make a goal").await;
    let results = rig.results();
    assert_eq!(results[0].0, "Error: no current goal");
    assert!(results[0].1);
    assert_eq!(
        results[0].2,
        json!({"name": "GoalError", "code": "GOAL_NOT_FOUND"})
    );
    let created: Value = serde_json::from_str(&results[1].0).unwrap();
    let id = created["goal"]["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("goal-") && id.len() == 41, "{id}");
    assert_eq!(
        results[1].0,
        format!(
            r#"{{"goal":{{"id":"{id}","revision":1,"objective":"ship it","phase":"active","roundsStarted":0,"maxGoalRounds":7}},"activation":"armed"}}"#
        )
    );
    assert_eq!(results[2].0, results[1].0);
    let changes = rig.changes();
    assert_eq!(changes.len(), 1);
    let keys: Vec<&String> = changes[0].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "kind",
            "version",
            "operation",
            "goal",
            "roundsStarted",
            "createdAt",
            "updatedAt"
        ]
    );
    assert_eq!(
        changes[0]["goal"],
        json!({"id": id, "revision": 1, "objective": "ship it", "phase": "active", "maxGoalRounds": 7})
    );
}

#[tokio::test]
async fn item_67_default_rounds_and_item_68_needs_a_human_turn() {
    let rig = rig(false);
    rig.call("c", "create_goal", json!({"objective": "  ship it  "}));
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("go").await;
    let created: Value = serde_json::from_str(&rig.results()[0].0).unwrap();
    assert_eq!(created["goal"]["maxGoalRounds"], 256);
    assert_eq!(created["goal"]["objective"], "ship it");

    let rig = self::rig(false);
    rig.call("c", "create_goal", json!({"objective": "x"}));
    rig.adapter.push_chunks(text_response("ok"));
    let automated = Message::user(
        vec![ContentBlock::text("scheduled")],
        dsh_protocol::MessageSource::plugin("schedule"),
    );
    rig.send(automated).await;
    let (text, error, info) = rig.results()[0].clone();
    assert_eq!(
        text,
        "Error: this goal operation requires a direct human turn on a top-level agent"
    );
    assert!(error);
    assert_eq!(info["code"], "GOAL_TOOL_AUTHORITY_REQUIRED");
}

#[tokio::test]
async fn items_69_70_75_argument_and_revision_errors() {
    let rig = rig(false);
    rig.call("c", "create_goal", json!({"objective": "o"}));
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("go").await;
    let created: Value = serde_json::from_str(&rig.results()[0].0).unwrap();
    let id = created["goal"]["id"].as_str().unwrap().to_owned();
    for (args, expected) in [
        (
            json!({"goal_id": id, "revision": 5, "action": "pause"}),
            format!("Error: stale goal ref \"{id}\" revision 5; current is \"{id}\" revision 1"),
        ),
        (
            json!({"goal_id": id, "revision": 1, "action": "pause", "objective": "new"}),
            "Error: objective and max_goal_rounds are valid only with action edit; blocked_reason is valid only with action blocked".to_owned(),
        ),
        (
            json!({"goal_id": " x", "revision": 1, "action": "pause"}),
            "Error: goal_id must be non-empty and revision must be a positive safe integer".to_owned(),
        ),
        (
            json!({"goal_id": id, "revision": 1.5, "action": "pause"}),
            "Error: goal_id must be non-empty and revision must be a positive safe integer".to_owned(),
        ),
        (
            json!({"goal_id": id, "revision": 1, "action": "edit", "blocked_reason": "b"}),
            "Error: blocked_reason is valid only with action blocked".to_owned(),
        ),
        (
            json!({"goal_id": id, "revision": 1, "action": "complete", "max_goal_rounds": 3}),
            "Error: objective and max_goal_rounds are valid only with action edit".to_owned(),
        ),
        (
            json!({"goal_id": id, "revision": 1, "action": "blocked", "blocked_reason": "   "}),
            "Error: blocked_reason is required with action blocked".to_owned(),
        ),
        (
            json!({"goal_id": id, "revision": 1, "action": "edit"}),
            "Error: goal edit requires objective and/or maxGoalRounds".to_owned(),
        ),
        (
            json!({"goal_id": id, "revision": 1, "action": "resume"}),
            format!("Error: goal \"{id}\" is already active and armed"),
        ),
    ] {
        rig.call("u", "update_goal", args.clone());
        rig.adapter.push_chunks(text_response("ok"));
        rig.prompt("try").await;
        let (text, error, _) = rig.results().last().unwrap().clone();
        assert!(error, "{args}");
        assert!(text.starts_with(&expected), "{args}: {text}");
    }
    // Nothing changed the goal.
    assert_eq!(rig.changes().len(), 1);
}

impl Rig {
    /// A response computed when requested: `update_goal` on the then-current goal.
    fn update_current(&self, call_id: &'static str, action: &'static str, extra: Value) {
        let (goals, agent) = (self.goals.clone(), self.agent.clone());
        self.adapter.push(Script::Computed(Arc::new(move |_| {
            let state = goals.current(&agent).unwrap();
            let mut args = json!({"goal_id": state.goal.id, "revision": state.goal.revision, "action": action});
            for (k, v) in extra.as_object().unwrap() {
                args[k] = v.clone();
            }
            tool_call_response(call_id, "update_goal", &args.to_string(), None)
        })));
    }

    async fn settle(&self, mut done: impl FnMut(&Rig) -> bool) {
        for _ in 0..500 {
            if done(self) && self.agent.status() == dsh_agent::AgentStatus::Idle {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("never settled");
    }

    fn goal_messages(&self) -> Vec<Value> {
        self.agent
            .log()
            .events()
            .unwrap()
            .iter()
            .filter(|e| e.kind == "user/message" && e.data["source"]["kind"] == "goal")
            .map(|e| e.data.value().clone())
            .collect()
    }
}

#[tokio::test]
async fn items_72_73_76_the_driver_runs_rounds_until_complete() {
    let rig = rig(true);
    rig.call(
        "c",
        "create_goal",
        json!({"objective": "finish", "max_goal_rounds": 3}),
    );
    rig.adapter.push_chunks(text_response("created"));
    rig.adapter.push_chunks(text_response("round one work"));
    rig.update_current("done", "complete", json!({}));
    rig.adapter.push_chunks(text_response("all done"));
    rig.prompt("please finish").await;
    rig.settle(|r| r.goals.current(&r.agent).unwrap().goal.phase == dsh_goal::Phase::Complete)
        .await;
    let done = rig.goals.current(&rig.agent).unwrap();
    assert_eq!(done.rounds_started, 2);
    let rounds = rig.goal_messages();
    assert_eq!(rounds.len(), 2);
    assert_eq!(
        rounds[0]["source"],
        json!({"kind": "goal", "goalId": done.goal.id, "revision": 1, "round": 1})
    );
    let text = rounds[1]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("<goal_round>\nObjective: \"finish\"\nRound: 2/3\n\nContinue working"),
        "{text}"
    );
    assert!(text.ends_with("before reporting a blocker.\n</goal_round>"));
    // Each round is its own turn.
    assert_eq!(
        rig.agent
            .log()
            .events()
            .unwrap()
            .iter()
            .filter(|e| e.kind == "turn/start")
            .count(),
        3
    );
    let events: Vec<(String, Value)> = rig
        .agent
        .log()
        .events()
        .unwrap()
        .iter()
        .map(|e| (e.kind.to_string(), e.data.value().clone()))
        .collect();
    let result = events
        .iter()
        .rposition(|(k, _)| k == "tool/result")
        .unwrap();
    let notice = events[result..]
        .iter()
        .find(|(k, d)| k == "user/message" && d["source"]["plugin"] == "tool-goal")
        .unwrap();
    assert!(
        notice.1["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("<goal_complete>\nObjective: \"finish\"\n")
    );
    assert_eq!(notice.1["source"]["form"], "notice");
    assert_eq!(notice.1["source"]["summary"], "complete: finish");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(rig.goal_messages().len(), 2);
}

#[tokio::test]
async fn item_74_the_round_limit_blocks_the_goal() {
    let rig = rig(true);
    rig.call(
        "c",
        "create_goal",
        json!({"objective": "tiny", "max_goal_rounds": 1}),
    );
    rig.adapter.push_chunks(text_response("created"));
    rig.adapter.push_chunks(text_response("round one"));
    rig.prompt("go").await;
    rig.settle(|r| r.goals.current(&r.agent).unwrap().goal.phase == dsh_goal::Phase::Blocked)
        .await;
    let state = rig.goals.current(&rig.agent).unwrap();
    let reason = state.goal.blocked_reason.unwrap();
    assert_eq!(reason.code, "round-limit");
    assert_eq!(
        reason.message,
        "Goal reached its configured limit of 1 rounds."
    );
    assert_eq!(state.rounds_started, 1);
}

#[tokio::test]
async fn item_75_blocked_needs_enough_consecutive_rounds() {
    let rig = rig(true);
    rig.call(
        "c",
        "create_goal",
        json!({"objective": "hard", "max_goal_rounds": 5}),
    );
    rig.adapter.push_chunks(text_response("created"));
    rig.adapter.push_chunks(text_response("round one"));
    rig.update_current("b", "blocked", json!({"blocked_reason": "stuck"}));
    let (goals, agent) = (rig.goals.clone(), rig.agent.clone());
    rig.adapter.push(Script::Computed(Arc::new(move |_| {
        // The person pauses the goal while round 2 winds down.
        goals.pause(&agent, None).unwrap();
        text_response("stuck")
    })));
    rig.prompt("go").await;
    rig.settle(|r| r.goals.current(&r.agent).unwrap().goal.phase == dsh_goal::Phase::Paused)
        .await;
    assert_eq!(
        rig.results()[1].0,
        "Error: blocked requires at least 3 consecutive goal rounds; current round is 2"
    );
    assert_eq!(rig.results()[1].2["code"], "GOAL_TOOL_BLOCK_THRESHOLD");
}

#[tokio::test]
async fn item_78_cancelling_a_round_pauses_the_goal() {
    let rig = rig(true);
    rig.call("c", "create_goal", json!({"objective": "long"}));
    rig.adapter.push_chunks(text_response("created"));
    rig.adapter.push(Script::Hang);
    rig.agent.followup(Message::user_text("go")).unwrap();
    for _ in 0..300 {
        if !rig.goal_messages().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(rig.goal_messages().len(), 1);
    rig.agent.cancel(dsh_agent::CancelCause::User, false);
    rig.settle(|r| r.goals.current(&r.agent).unwrap().goal.phase == dsh_goal::Phase::Paused)
        .await;
    assert_eq!(
        rig.goals.activation(&rig.agent),
        dsh_goal::Activation::Disarmed
    );
}

#[tokio::test]
async fn item_77_after_resume_the_goal_is_disarmed() {
    let dir = tempfile_dir();
    let store = dsh_session::JsonlStore::new(dir.clone());
    let log = store.create(dsh_session::CreateOptions::default()).unwrap();
    let id = log.id().to_owned();
    {
        let rig = rig_with(log, false);
        rig.call("c", "create_goal", json!({"objective": "persist"}));
        rig.adapter.push_chunks(text_response("ok"));
        rig.prompt("go").await;
        rig.agent.dispose().await;
    }
    let log = store.resume(&id).unwrap();
    let rig = rig_with(log, true);
    rig.call("g", "get_goal", json!({}));
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("status?").await;
    let view: Value = serde_json::from_str(&rig.results().last().unwrap().0).unwrap();
    assert_eq!(view["activation"], "disarmed");
    assert_eq!(view["goal"]["phase"], "active");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !rig.agent
            .log()
            .events()
            .unwrap()
            .iter()
            .any(|e| e.kind == "user/message" && e.data["source"]["kind"] == "goal")
    );
    let _ = std::fs::remove_dir_all(dir);
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("dsh-goal-test-{}", uuid_like()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn uuid_like() -> String {
    format!("{:?}", std::time::SystemTime::now()).replace(|c: char| !c.is_ascii_alphanumeric(), "")
}

#[tokio::test]
async fn items_79_80_81_goal_command_texts() {
    let rig = rig(false);
    assert_eq!(
        command::run(&rig.goals, &rig.agent, "", false),
        command::Outcome::Success("No goal is currently set.\nUsage: /goal [<objective>|clear|edit <objective>|pause|resume]".into())
    );
    let command::Outcome::Success(created) =
        command::run(&rig.goals, &rig.agent, "pause after verification", false)
    else {
        panic!("create failed");
    };
    assert_eq!(
        created,
        "Goal created\nStatus: active\nObjective: pause after verification\nRounds: 0/256\nActivation: armed\n\nCommands: /goal edit <objective>, /goal pause, /goal clear"
    );
    assert_eq!(
        command::run(&rig.goals, &rig.agent, "x", false),
        command::Outcome::Error("A goal is already active. Use /goal edit <objective> to change it or /goal clear before replacing it.".into())
    );
    assert_eq!(
        command::run(&rig.goals, &rig.agent, "edit", false),
        command::Outcome::Error("Goal editing requires a replacement objective.\nUsage: /goal [<objective>|clear|edit <objective>|pause|resume]".into())
    );
    let command::Outcome::Success(paused) = command::run(&rig.goals, &rig.agent, "pause", false)
    else {
        panic!()
    };
    assert!(paused.starts_with("Goal paused\nStatus: paused"));
    assert!(paused.ends_with("Commands: /goal edit <objective>, /goal resume, /goal clear"));
    assert_eq!(
        command::run(&rig.goals, &rig.agent, "pause", false),
        command::Outcome::Error("The goal command is not valid for the current state. Run /goal to view available commands.".into())
    );
    assert_eq!(
        command::run(&rig.goals, &rig.agent, "clear", true),
        command::Outcome::Error("Image attachments only accompany a goal objective: /goal <objective> or /goal edit <objective>.".into())
    );
    assert_eq!(
        command::run(&rig.goals, &rig.agent, "clear", false),
        command::Outcome::Success("Goal cleared.".into())
    );
    assert_eq!(
        command::run(&rig.goals, &rig.agent, "clear", false),
        command::Outcome::Success("No goal to clear.".into())
    );
    assert_eq!(
        command::run(&rig.goals, &rig.agent, "resume", false),
        command::Outcome::Error("No goal is currently set; /goal resume requires one. Usage: /goal [<objective>|clear|edit <objective>|pause|resume]".into())
    );
    let clear = rig.changes().last().unwrap().clone();
    assert_eq!(clear["operation"], "clear");
    assert_eq!(clear["cleared"]["revision"], 3);
}
