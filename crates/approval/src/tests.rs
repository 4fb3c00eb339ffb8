use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHooks;
use dsh_agent::PromptConfig;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_session::SessionHeader;
use dsh_tools::PreDecision;
use dsh_tools::RegistryConfig;
use dsh_tools::Tool;
use dsh_tools::ToolRegistry;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

struct Answerer {
    calls: AtomicUsize,
    outcome: ApprovalOutcome,
}

impl ApprovalService for Answerer {
    fn request(&self, _: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let outcome = self.outcome;
        Box::pin(async move { outcome })
    }
}

struct Standing(Policy);

impl PolicySource for Standing {
    fn standing(&self) -> Policy {
        self.0
    }
}

struct Run {
    agent: AgentHandle,
    answerer: Arc<Answerer>,
    ran: Arc<Mutex<bool>>,
}

async fn run(standing: Policy, outcome: ApprovalOutcome, logged: Option<&str>) -> Run {
    let root = Scope::root();
    let tools = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    AgentHooks::install(&root).unwrap();
    let ran = Arc::new(Mutex::new(false));
    let flag = ran.clone();
    tools
        .register(
            &root,
            Tool::builder("bash")
                .description("Run.")
                .raw_parameters(json!({"type": "object", "properties": {}}))
                .raw_output(json!({"type": "string"}), |_, v| {
                    Ok(vec![ContentBlock::text(
                        v.as_str().unwrap_or_default().to_owned(),
                    )])
                })
                .run(move |_, _| {
                    *flag.lock().unwrap() = true;
                    async { Ok("ran".to_owned()) }
                })
                .build()
                .unwrap(),
        )
        .unwrap();
    tools.pre_execute().register(&root, |_, _| {
        Box::pin(async { Ok(PreDecision::ask(Some("hook says check".into()))) })
    });
    let adapter = ScriptedAdapter::new("mock");
    let log = SessionLog::in_memory(SessionHeader::new("s-1", Some("/work".into())));
    // `never:delegation` logs the policy with its source.
    if let Some(logged) = logged {
        let data = match logged.split_once(':') {
            Some((policy, source)) => json!({"policy": policy, "source": source}),
            None => json!({"policy": logged}),
        };
        log.append("approval/policy", data, None).unwrap();
    }
    let agent = Agent::create(AgentConfig {
        id: "s-1".into(),
        cwd: None,
        provider: "mock".into(),
        model: "mock".into(),
        max_tokens: None,
        adapter: adapter.clone(),
        tools: tools.clone(),
        scope: root.clone(),
        log,
        prompt: PromptConfig::default(),
        max_parallel_tool_calls: 2,
    })
    .unwrap();
    let answerer = Arc::new(Answerer {
        calls: AtomicUsize::new(0),
        outcome,
    });
    agent
        .scope()
        .provide::<dyn ApprovalService>(Arc::new(UserApproval::new(
            Some(answerer.clone()),
            Some(Arc::new(Standing(standing))),
        )))
        .unwrap();
    adapter.push_chunks(tool_call_response("call-1", "bash", "{}", None));
    adapter.push_chunks(text_response("done"));
    agent.followup(Message::user_text("go")).unwrap();
    agent.when_idle().await;
    Run {
        agent,
        answerer,
        ran,
    }
}

fn result_text(agent: &AgentHandle) -> String {
    let events = agent.log().events().unwrap();
    let result = events.iter().find(|e| e.kind == "tool/result").unwrap();
    let content: Vec<ContentBlock> =
        serde_json::from_value(result.data["message"]["content"][0]["content"].clone()).unwrap();
    dsh_protocol::text_of(&content)
}

fn audit(agent: &AgentHandle) -> Vec<(String, Value)> {
    agent
        .log()
        .events()
        .unwrap()
        .iter()
        .filter(|e| e.kind.starts_with("approval/") && e.kind != "approval/policy")
        .map(|e| (e.kind.to_string(), e.data.value().clone()))
        .collect()
}

#[tokio::test]
async fn never_refuses_by_policy_with_the_audit_pair_and_no_answerer() {
    let run = run(Policy::Never, ApprovalOutcome::AllowedOnce, None).await;
    assert_eq!(run.answerer.calls.load(Ordering::SeqCst), 0);
    assert!(!*run.ran.lock().unwrap());
    // Nobody rejected it: the model is told it was the policy, and which setting.
    assert_eq!(
        result_text(&run.agent),
        "Error: tool \"bash\" was refused by policy: it needs approval, and the approval policy is \"never\" (set by `-a never` / `[plugins.approval] policy = \"never\"`), so no one was asked"
    );
    let pair = audit(&run.agent);
    assert_eq!(pair.len(), 2);
    assert_eq!(pair[0].0, "approval/asked");
    let id = pair[0].1["id"].clone();
    assert_eq!(
        pair[0].1,
        json!({"id": id, "toolName": "bash", "callId": "call-1", "reason": "hook says check"})
    );
    assert_eq!(
        pair[1],
        (
            "approval/decided".to_owned(),
            json!({"id": id, "outcome": "rejected"})
        )
    );
    // Ordered between the call and its result.
    let kinds: Vec<String> = run
        .agent
        .log()
        .events()
        .unwrap()
        .iter()
        .map(|e| e.kind.to_string())
        .collect();
    let call = kinds.iter().position(|k| k == "tool/call").unwrap();
    assert_eq!(
        &kinds[call + 1..call + 4],
        ["approval/asked", "approval/decided", "tool/result"]
    );
}

#[tokio::test]
async fn ask_delegates_to_the_answerer() {
    let run = run(Policy::Ask, ApprovalOutcome::AllowedOnce, None).await;
    assert_eq!(run.answerer.calls.load(Ordering::SeqCst), 1);
    assert!(*run.ran.lock().unwrap());
    assert_eq!(audit(&run.agent)[1].1["outcome"], "allowed-once");
    let unavailable = self::run(Policy::Ask, ApprovalOutcome::Unavailable, None).await;
    assert_eq!(
        result_text(&unavailable.agent),
        "Error: tool \"bash\" requires approval, but no approval channel is available"
    );
}

#[tokio::test]
async fn the_logged_policy_overrides_the_standing_one() {
    let run = run(Policy::Ask, ApprovalOutcome::AllowedOnce, Some("never")).await;
    assert_eq!(run.answerer.calls.load(Ordering::SeqCst), 0);
    assert_eq!(audit(&run.agent)[1].1["outcome"], "rejected");
    let back = self::run(Policy::Never, ApprovalOutcome::AllowedOnce, Some("ask")).await;
    assert_eq!(back.answerer.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_delegated_agent_is_told_that_delegation_refused_it() {
    let run = run(
        Policy::Ask,
        ApprovalOutcome::AllowedOnce,
        Some("never:delegation"),
    )
    .await;
    assert_eq!(run.answerer.calls.load(Ordering::SeqCst), 0);
    assert_eq!(
        result_text(&run.agent),
        "Error: tool \"bash\" was refused by policy: it needs approval, and the approval policy is \"never\" (a delegated agent never asks for approval), so no one was asked"
    );
    assert_eq!(audit(&run.agent)[1].1["outcome"], "rejected");
}
