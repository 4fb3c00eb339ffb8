use super::*;
use crate::policy::FilePolicy;
use crate::policy::SandboxMode;
use crate::spill::SpillStore;
use dsh_kernel::ScopeKind;
use dsh_tools::CancellationToken;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolCallInput;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::sync::Mutex;

struct Agent(Scope);

impl dsh_tools::AgentHandle for Agent {
    fn id(&self) -> &str {
        "agent-1"
    }
    fn scope(&self) -> &Scope {
        &self.0
    }
    fn inject(&self, _message: dsh_protocol::Message) -> Result<(), dsh_tools::AgentGone> {
        Ok(())
    }
}

struct Answer(
    dsh_tools::ApprovalOutcome,
    Mutex<Vec<(String, Option<String>)>>,
);

impl ApprovalService for Answer {
    fn request(
        &self,
        request: ApprovalRequest,
    ) -> futures::future::BoxFuture<'static, dsh_tools::ApprovalOutcome> {
        if let Ok(mut seen) = self.1.lock() {
            seen.push((request.tool_name.clone(), request.reason.clone()));
        }
        let outcome = self.0;
        Box::pin(async move { outcome })
    }
}

fn setup(mode: SandboxMode) -> (tempfile::TempDir, Arc<ToolRegistry>, Scope, FsContext) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut policy = FilePolicy::new(mode, &ws);
    policy.temp_roots.clear();
    let ctx = FsContext::new(&ws, policy);
    let registry = ToolRegistry::new(RegistryConfig::default());
    (dir, registry, Scope::root(), ctx)
}

async fn call(registry: &ToolRegistry, name: &str, args: Value) -> Arc<dsh_tools::ToolResult> {
    registry
        .execute(ToolCallInput::new(
            "call-1",
            name,
            args,
            CancellationToken::new(),
        ))
        .await
}

#[tokio::test]
async fn pipeline_runs_write_read_edit_with_meta_and_cards() {
    let (dir, registry, scope, ctx) = setup(SandboxMode::WorkspaceWrite);
    register_fs_tools(&registry, &scope, ctx).unwrap();
    let ws = dir.path().join("ws").display().to_string();
    let schemas = registry.schemas(None).unwrap();
    let names: Vec<&str> = schemas.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["read", "write", "edit", "glob", "grep"]);
    assert_eq!(
        schemas[1].parameters["required"],
        json!(["file_path", "content"])
    );
    assert!(
        schemas[1].parameters["properties"]
            .get("sandbox_permissions")
            .is_some()
    );

    let written = call(
        &registry,
        "write",
        json!({"file_path": "config.txt", "content": "mode=DEBUG\nlevel=info\n"}),
    )
    .await;
    assert_eq!(
        written.text(),
        format!(
            "<path>{ws}/config.txt</path>\n<type>file</type>\n<content>\nCreated file\n</content>"
        )
    );
    assert_eq!(written.meta, Some(json!({"diffs": []})));

    let read = call(&registry, "read", json!({"file_path": "config.txt"})).await;
    assert!(!read.is_error, "{}", read.text());
    assert!(
        read.text()
            .ends_with("1: mode=DEBUG\n2: level=info\n\n(End of file - total 2 lines)\n</content>")
    );
    let edited = call(
        &registry,
        "edit",
        json!({"file_path": "config.txt", "old_string": "DEBUG", "new_string": "RELEASE"}),
    )
    .await;
    assert_eq!(
        edited.text(),
        format!("The file {ws}/config.txt has been updated successfully.")
    );
    assert_eq!(
        edited.meta,
        Some(
            json!({"diffs":[{"path":"config.txt","oldText":"mode=DEBUG\nlevel=info","newText":"mode=RELEASE\nlevel=info"}]})
        )
    );
    let edit_def = registry.get("edit", None).unwrap();
    let card = edit_def.present_result(
        &json!({"file_path": "config.txt", "old_string": "DEBUG", "new_string": "RELEASE"}),
        &edited.view(),
    );
    assert_eq!(
        serde_json::to_value(card).unwrap(),
        json!({"card":"diff","title":"Edit config.txt","diffs":[{"path":"config.txt","oldText":"mode=DEBUG\nlevel=info","newText":"mode=RELEASE\nlevel=info"}]})
    );
    let read_def = registry.get("read", None).unwrap();
    assert!(read_def.is_concurrency_safe(&json!({"file_path": "x"})));
    let card = read_def
        .present_result(&json!({"file_path": "config.txt"}), &read.view())
        .unwrap();
    assert_eq!(serde_json::to_value(card).unwrap()["card"], "read");

    let missing = call(&registry, "read", json!({"file_path": "missing.txt"})).await;
    assert!(missing.is_error);
    assert_eq!(
        missing.text(),
        format!("Error: cannot read \"{ws}/missing.txt\": not found")
    );
    assert_eq!(missing.error_code(), Some("FS_NOT_FOUND"));
    let invalid = call(&registry, "read", json!({})).await;
    assert_eq!(
        invalid.text(),
        "Error: invalid arguments: missing required property \"file_path\""
    );
}

#[tokio::test]
async fn glob_spills_only_direct_over_cap_calls() {
    let (dir, registry, scope, mut ctx) = setup(SandboxMode::DangerFullAccess);
    for n in 0..5 {
        std::fs::write(dir.path().join(format!("ws/f{n}.txt")), "x").unwrap();
    }
    ctx.limits.glob_max_results = 2;
    ctx.limits.sample_over_cap_glob_results = false;
    let spill = tempfile::tempdir().unwrap();
    ctx.spill = crate::spill::SpillConfig::new(SpillStore::new(spill.path()), "s");
    register_fs_tools(&registry, &scope, ctx).unwrap();
    let result = call(&registry, "glob", json!({"pattern": "*.txt"})).await;
    let text = result.text();
    assert!(
        text.contains("\n\n(Showing 2 of 5 paths. Full sorted result stored at: "),
        "{text}"
    );
    let locator = text
        .split("stored at: ")
        .nth(1)
        .unwrap()
        .split(". Use read")
        .next()
        .unwrap();
    assert_eq!(std::fs::read_to_string(locator).unwrap().lines().count(), 5);
    assert_eq!(result.meta.as_ref().unwrap()["truncated"], true);
    let fits = call(&registry, "glob", json!({"pattern": "f0.txt"})).await;
    assert_eq!(fits.text(), "f0.txt");
}

#[tokio::test]
async fn write_escalation_goes_through_the_agent_approval_service() {
    let (dir, registry, scope, ctx) = setup(SandboxMode::WorkspaceWrite);
    register_fs_tools(&registry, &scope, ctx).unwrap();
    let agent_scope = scope.child(ScopeKind::Agent, "agent").unwrap();
    let service = Arc::new(Answer(
        dsh_tools::ApprovalOutcome::Rejected,
        Mutex::default(),
    ));
    agent_scope
        .provide::<dyn ApprovalService>(service.clone())
        .unwrap();
    let agent: Arc<dyn dsh_tools::AgentHandle> = Arc::new(Agent(agent_scope));
    let args = json!({"file_path": "../out.txt", "content": "x", "sandbox_permissions": "danger-full-access", "justification": "asked"});

    let denied = call(
        &registry,
        "write",
        json!({"file_path": "../out.txt", "content": "x"}),
    )
    .await;
    assert_eq!(denied.error_code(), Some("FS_SANDBOX_DENIED"));
    assert!(denied.text().starts_with("Error: [sandbox: file access denied under workspace-write mode]\n[sandbox: escalation available"));

    let no_agent = call(&registry, "write", args.clone()).await;
    assert_eq!(
        no_agent.text(),
        "Error: sandbox escalation to \"danger-full-access\" requires approval, but the call has no agent to route it through"
    );
    let input = ToolCallInput::new("call-2", "write", args.clone(), CancellationToken::new())
        .agent(agent.clone());
    let rejected = registry.execute(input).await;
    assert_eq!(
        rejected.text(),
        "Error: the user rejected escalating this operation to \"danger-full-access\""
    );
    assert_eq!(rejected.error_code(), None);
    assert_eq!(
        service.1.lock().unwrap().clone(),
        vec![(
            "write".to_owned(),
            Some("escalate sandbox to danger-full-access: asked".to_owned())
        )]
    );
    assert!(!dir.path().join("out.txt").exists());
}

#[tokio::test]
async fn generic_inline_cap_from_dsh_spill_composes_with_fs_tools() {
    let (dir, registry, scope, ctx) = setup(SandboxMode::DangerFullAccess);
    let body: String = (1..=100).map(|n| format!("needle {n:03}\n")).collect();
    std::fs::write(dir.path().join("ws/big.txt"), &body).unwrap();
    let spill = tempfile::tempdir().unwrap();
    register_fs_tools(&registry, &scope, ctx).unwrap();
    let policy = dsh_spill::SpillPolicy {
        max_inline_bytes: 800,
        store: SpillStore::new(spill.path()),
    };
    dsh_spill::install_policy(&registry, &scope, policy);
    let agent: Arc<dyn dsh_tools::AgentHandle> =
        Arc::new(Agent(scope.child(ScopeKind::Agent, "agent").unwrap()));
    let call = |name: &str, args: Value| {
        let input =
            ToolCallInput::new("call-3", name, args, CancellationToken::new()).agent(agent.clone());
        registry.execute(input)
    };

    let grep = call("grep", json!({"pattern": "needle"})).await;
    let text = grep.text();
    assert!(text.len() <= 800, "{}", text.len());
    assert!(text.starts_with("Found 100 matches\n\nbig.txt\nLine 1: needle 001"));
    let notice = text.rsplit_once("\n\n").unwrap().1;
    let locator = notice
        .split("stored at: ")
        .nth(1)
        .unwrap()
        .split(". Use read")
        .next()
        .unwrap();
    assert!(locator.ends_with("-grep.txt"));
    let full = std::fs::read_to_string(locator).unwrap();
    assert!(full.ends_with("Line 100: needle 100"));
    assert!(notice.starts_with(&format!(
        "(Omitted {} bytes.",
        full.len() - (text.len() - notice.len() - 2)
    )));
    // The canonical value is preserved.
    assert_eq!(grep.value.as_ref().unwrap()["total"], 100);

    let read = call("read", json!({"file_path": "big.txt"})).await;
    assert!(read.text().len() > 800);
    assert!(
        read.text()
            .ends_with("(End of file - total 100 lines)\n</content>")
    );
}
