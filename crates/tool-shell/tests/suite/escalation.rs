//! Sandbox escalation through the real `dsh-tools` pipeline, with an approval service provided
//! as a kernel service in the calling agent's scope.

use std::sync::Arc;
use std::sync::Mutex;

use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_protocol::Message;
use dsh_tool_shell::ApprovalPolicy;
use dsh_tool_shell::JobToolsConfig;
use dsh_tool_shell::JobsConfig;
use dsh_tool_shell::JobsRuntime;
use dsh_tool_shell::SandboxConfig;
use dsh_tool_shell::SandboxMode;
use dsh_tool_shell::SandboxRunner;
use dsh_tool_shell::ShellTools;
use dsh_tool_shell::register_shell_tools;
use dsh_tools::AgentGone;
use dsh_tools::AgentHandle;
use dsh_tools::ApprovalOutcome;
use dsh_tools::ApprovalRequest;
use dsh_tools::ApprovalService;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolRegistry;
use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::sandbox::HINT;
use super::sandbox::outside_tmp;
use super::sandbox::require_bwrap;
use super::support::context;

struct Agent {
    id: String,
    scope: Scope,
}

impl AgentHandle for Agent {
    fn id(&self) -> &str {
        &self.id
    }
    fn scope(&self) -> &Scope {
        &self.scope
    }
    fn inject(&self, _message: Message) -> Result<(), AgentGone> {
        Ok(())
    }
}

/// Answers every request with a fixed outcome and records what it was asked.
struct Answerer {
    outcome: ApprovalOutcome,
    asked: Mutex<Vec<(String, String, Option<String>)>>,
}

impl ApprovalService for Answerer {
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome> {
        self.asked
            .lock()
            .unwrap()
            .push((request.tool_name, request.call_id, request.reason));
        let outcome = self.outcome;
        Box::pin(async move { outcome })
    }
}

struct Setup {
    ws: tempfile::TempDir,
    _root: Scope,
    registry: Arc<ToolRegistry>,
    agent: Arc<dyn AgentHandle>,
    answerer: Arc<Answerer>,
    _disposers: Vec<Disposer>,
}

impl Setup {
    fn asked(&self) -> Vec<(String, String, Option<String>)> {
        self.answerer.asked.lock().unwrap().clone()
    }

    async fn call(&self, call_id: &str, args: Value) -> (String, bool) {
        let input = ToolCallInput::new(call_id, "bash", args, CancellationToken::new())
            .agent(self.agent.clone());
        let result = self.registry.execute(input).await;
        (result.text(), result.is_error)
    }
}

fn setup(config: SandboxConfig, outcome: Option<ApprovalOutcome>) -> Setup {
    require_bwrap();
    let ws = outside_tmp();
    let root = Scope::root();
    let registry = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    let base = context(ws.path());
    let tools = ShellTools {
        resolve: Arc::new(move |_run| Ok(base.clone())),
        jobs: JobsRuntime::new(JobsConfig::default()),
        job_config: JobToolsConfig::default(),
        run_in_background: true,
        sandbox: Some(config),
    };
    let mut disposers = register_shell_tools(&registry, &root, &tools).unwrap();
    let scope = root.child(ScopeKind::Agent, "agent-a").unwrap();
    let answerer = Arc::new(Answerer {
        outcome: outcome.unwrap_or(ApprovalOutcome::Unavailable),
        asked: Mutex::new(Vec::new()),
    });
    if outcome.is_some() {
        let service: Arc<dyn ApprovalService> = answerer.clone();
        disposers.push(scope.provide::<dyn ApprovalService>(service).unwrap());
    }
    let agent: Arc<dyn AgentHandle> = Arc::new(Agent {
        id: "agent-a".into(),
        scope,
    });
    Setup {
        ws,
        _root: root,
        registry,
        agent,
        answerer,
        _disposers: disposers,
    }
}

fn ww() -> SandboxConfig {
    SandboxConfig::new(SandboxMode::WorkspaceWrite)
}

fn escalate(command: &str, mode: &str) -> Value {
    json!({
        "command": command,
        "description": "Write outside the workspace",
        "sandbox_permissions": mode,
        "justification": "the user asked to write a file outside the workspace",
    })
}

#[tokio::test]
async fn confining_schema_shape_is_upstreams() {
    let s = setup(ww(), None);
    let fixture: Value =
        serde_json::from_str(include_str!("../fixtures/upstream-tool-schemas.json")).unwrap();
    let schemas = s.registry.schemas(Some(s.agent.scope())).unwrap();
    let bash = schemas.iter().find(|t| t.name == "bash").cloned().unwrap();
    assert_eq!(
        super::support::shape_string(&serde_json::to_value(&bash).unwrap()),
        super::support::shape_string(&fixture["bash_confining"])
    );
    assert!(bash.description.contains("`sandbox_permissions`"));
    assert!(bash.description.contains("`justification`"));
}

/// The advice for a refused escalation is "run with `-s <mode>`"; a model in such a session
/// that asks for that mode again must simply run, without a prompt.
#[tokio::test]
async fn the_mode_the_call_already_has_simply_runs_without_asking() {
    let s = setup(ww(), Some(ApprovalOutcome::Rejected));
    let (text, is_error) = s
        .call("c1", escalate("echo same-mode", "workspace-write"))
        .await;
    assert!(!is_error, "{text}");
    assert!(text.contains("same-mode"), "{text}");
    assert!(s.asked().is_empty());
}

#[tokio::test]
async fn pairing_errors_come_before_any_prompt() {
    let s = setup(ww(), Some(ApprovalOutcome::AllowedOnce));
    assert_eq!(
        s.call("c1", json!({"command": "true", "description": "d", "sandbox_permissions": "danger-full-access"})).await,
        ("Error: invalid escalation: sandbox_permissions requires a justification".to_owned(), true)
    );
    assert_eq!(
        s.call("c2", json!({"command": "true", "description": "d", "justification": "j"})).await,
        ("Error: invalid escalation: justification is only valid together with sandbox_permissions".to_owned(), true)
    );
    assert!(s.asked().is_empty());
}

#[tokio::test]
async fn allowed_once_widens_only_that_call() {
    let s = setup(ww(), Some(ApprovalOutcome::AllowedOnce));
    let elsewhere = outside_tmp();
    let first = elsewhere.path().join("escalated.txt");
    let command = format!(
        "printf 'escalated\\n' > {p} && cat {p}",
        p = first.display()
    );
    assert_eq!(
        s.call("call-esc", escalate(&command, "danger-full-access"))
            .await,
        ("escalated\n".to_owned(), false)
    );
    assert!(first.exists());
    assert_eq!(
        s.asked(),
        vec![(
            "bash".to_owned(),
            "call-esc".to_owned(),
            Some("escalate sandbox to danger-full-access: the user asked to write a file outside the workspace".to_owned())
        )]
    );
    // The next call is back under the standing mode.
    let second = std::fs::canonicalize(elsewhere.path())
        .unwrap()
        .join("second.txt");
    let (text, is_error) = s
        .call("call-next", json!({"command": format!("echo again > {}", second.display()), "description": "Write again"}))
        .await;
    assert!(!is_error);
    assert!(
        text.ends_with(&format!(
            "[sandbox: file access denied under workspace-write mode]\n{HINT}\n[exit code: 1]"
        )),
        "{text}"
    );
    assert!(!second.exists());
    // Escalated from read-only to workspace-write: the workspace becomes writable for one call.
    let ro = setup(
        SandboxConfig::new(SandboxMode::ReadOnly),
        Some(ApprovalOutcome::AllowedOnce),
    );
    assert_eq!(
        ro.call(
            "c",
            escalate("echo w > w.txt && cat w.txt", "workspace-write")
        )
        .await,
        ("w\n".to_owned(), false)
    );
    assert!(ro.ws.path().join("w.txt").exists());
}

#[tokio::test]
async fn rejected_escalation_does_not_run() {
    let s = setup(ww(), Some(ApprovalOutcome::Rejected));
    let elsewhere = outside_tmp();
    let target = elsewhere.path().join("never.txt");
    assert_eq!(
        s.call(
            "c1",
            escalate(
                &format!("echo no > {}", target.display()),
                "danger-full-access"
            )
        )
        .await,
        (
            "Error: the user rejected escalating this command to \"danger-full-access\"".to_owned(),
            true
        )
    );
    assert!(!target.exists());
    assert_eq!(s.asked().len(), 1);
}

#[tokio::test]
async fn cancelled_and_unavailable_outcomes() {
    let s = setup(ww(), Some(ApprovalOutcome::Cancelled));
    assert_eq!(
        s.call("c1", escalate("true", "danger-full-access")).await,
        (
            "Error: approval for escalating to \"danger-full-access\" was cancelled".to_owned(),
            true
        )
    );
    let s = setup(ww(), Some(ApprovalOutcome::Unavailable));
    assert_eq!(
        s.call("c1", escalate("true", "danger-full-access")).await,
        ("Error: sandbox escalation to \"danger-full-access\" requires approval, but no approval channel is available".to_owned(), true)
    );
    let s = setup(ww(), None);
    assert_eq!(
        s.call("c1", escalate("true", "danger-full-access")).await,
        ("Error: sandbox escalation to \"danger-full-access\" requires approval, but no approval service is composed".to_owned(), true)
    );
    // Without an agent there is no scope to find a service in.
    let input = ToolCallInput::new(
        "c2",
        "bash",
        escalate("true", "danger-full-access"),
        CancellationToken::new(),
    );
    let result = s.registry.execute(input).await;
    assert_eq!(
        result.text(),
        "Error: sandbox escalation to \"danger-full-access\" requires approval, but no approval service is composed"
    );
}

#[tokio::test]
async fn never_policy_refuses_by_policy_whatever_the_seam_answers() {
    let config = SandboxConfig::new(SandboxMode::ReadOnly);
    let config = SandboxConfig {
        approval: ApprovalPolicy::Never,
        ..config
    };
    let s = setup(config, Some(ApprovalOutcome::AllowedOnce));
    assert_eq!(
        s.call("c1", escalate("echo x > x.txt", "workspace-write"))
            .await,
        (
            "Error: sandbox escalation to \"workspace-write\" was refused by policy: it needs approval, and the approval policy is \"never\" (set by `-a never` / `[plugins.approval] policy = \"never\"`), so no one was asked".to_owned(),
            true
        )
    );
    // The request goes to the approval seam (which audits it and, being the user-approval
    // service in a real session, asks no one); an answerer that ignores the policy and
    // allows it changes nothing.
    assert_eq!(s.asked().len(), 1);
    assert!(!s.ws.path().join("x.txt").exists());
    // A denial under `never` carries no escalation hint.
    let (text, _) = s
        .call(
            "c2",
            json!({"command": "echo x > x.txt", "description": "Write"}),
        )
        .await;
    assert!(
        text.contains("[sandbox: file access denied under read-only mode]\n[exit code: 1]"),
        "{text}"
    );
    assert!(!text.contains("escalation available"));
}

#[tokio::test]
async fn missing_runner_through_the_pipeline() {
    let config = SandboxConfig {
        runner: SandboxRunner::at("/nonexistent/bwrap"),
        ..ww()
    };
    let s = setup(config, None);
    let (text, is_error) = s
        .call(
            "c1",
            json!({"command": "touch ran", "description": "Touch"}),
        )
        .await;
    assert!(is_error);
    assert!(text.starts_with("Error: sandbox mode \"workspace-write\" is requested but no sandbox backend is usable on this host;"));
    assert!(text.ends_with(" Runner failure: Error: spawn /nonexistent/bwrap ENOENT"));
    assert!(!s.ws.path().join("ran").exists());
}

/// `escalation-rejected`: workspace-write (`DSH_PERMISSION_MODE`), the client rejects the prompt.
#[tokio::test]
async fn recorded_escalation_rejected() {
    let rec: Value = serde_json::from_str(
        include_str!("../fixtures/escalation-rejected.tool-results.jsonl").trim(),
    )
    .unwrap();
    let config = SandboxConfig::from_permission_mode(Some("workspace-write")).unwrap();
    let s = setup(config, Some(ApprovalOutcome::Rejected));
    let call_id = rec["call_id"].as_str().unwrap();
    let input = ToolCallInput::new(
        call_id,
        "bash",
        rec["arguments"].clone(),
        CancellationToken::new(),
    )
    .agent(s.agent.clone());
    let result = s.registry.execute(input).await;
    assert_eq!(result.text(), rec["text"].as_str().unwrap());
    assert_eq!(result.is_error, rec["is_error"].as_bool().unwrap());
    assert_eq!(
        serde_json::to_value(&result.content).unwrap(),
        rec["content"]
    );
    assert_eq!(
        s.asked(),
        vec![(
            "bash".to_owned(),
            call_id.to_owned(),
            Some("escalate sandbox to danger-full-access: the user asked to write a file outside the workspace".to_owned())
        )]
    );
}

#[tokio::test]
async fn background_job_is_confined_and_reports_the_denial() {
    let s = setup(ww(), Some(ApprovalOutcome::AllowedOnce));
    let elsewhere = outside_tmp();
    let target = std::fs::canonicalize(elsewhere.path())
        .unwrap()
        .join("bg.txt");
    let (text, _) = s
        .call("c1", json!({"command": format!("echo bg > {}", target.display()), "description": "Write in background", "run_in_background": true}))
        .await;
    assert_eq!(text, "started background job bash-1");
    let input = ToolCallInput::new(
        "c2",
        "job_output",
        json!({"job_id": "bash-1", "wait": true, "timeout_ms": 5000}),
        CancellationToken::new(),
    )
    .agent(s.agent.clone());
    let out = s.registry.execute(input).await.text();
    assert_eq!(
        out,
        format!(
            "[stderr]\nbash: line 1: {}: Read-only file system\n[sandbox: file access denied under workspace-write mode]\n{HINT}\n[status: completed, exit code: 1]",
            target.display()
        )
    );
    assert!(!target.exists());
}
