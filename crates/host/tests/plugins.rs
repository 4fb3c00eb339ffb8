//! Every built-in plugin, through the host's real reload path: mount it with config A, reapply
//! it with config B and check that the tools, hooks and prompt sections reflect B only, then
//! disable it and check the registries are exactly as before it was mounted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use dsh_agent::AgentHandle;
use dsh_agent::prompt::assemble;
use dsh_host::Config;
use dsh_host::Host;
use dsh_host::HostOptions;
use dsh_host::Layer;
use dsh_host::ReloadReport;
use dsh_session::MemoryStore;
use pretty_assertions::assert_eq;
use serde_json::Map;
use serde_json::Value;
use serde_json::json;

/// What a session sees of the composition.
#[derive(Debug, Clone, PartialEq)]
struct Snapshot {
    /// `(name, description, parameters)` of every tool the session is offered.
    tools: Vec<(String, String, Value)>,
    sections: Vec<(String, String)>,
    contexts: Vec<(String, String)>,
    pre_execute: usize,
    post_execute: usize,
    execute: usize,
    results: usize,
    pre_step: usize,
    request: usize,
    request_error: usize,
    turn_stopping: usize,
    attachments: bool,
    spill: bool,
    jobs: bool,
    /// The other plugins' services visible from the session's scope.
    services: Vec<&'static str>,
    /// The slash commands the session lists.
    commands: Vec<String>,
}

impl Snapshot {
    fn tool(&self, name: &str) -> Option<&(String, String, Value)> {
        self.tools.iter().find(|t| t.0 == name)
    }
    fn section(&self, name: &str) -> Option<&str> {
        self.sections
            .iter()
            .chain(&self.contexts)
            .find(|s| s.0 == name)
            .map(|s| s.1.as_str())
    }
    fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.0.as_str()).collect()
    }
}

struct Rig {
    host: Host,
    agent: AgentHandle,
    home: tempfile::TempDir,
    cwd: tempfile::TempDir,
}

fn config(home: &Path, cwd: &Path, table: Value) -> Config {
    let mut config = Config::empty(home.to_path_buf(), cwd.to_path_buf());
    if let Value::Object(map) = table {
        config.merge(Layer::User, map, None);
    }
    config
}

impl Rig {
    async fn new(table: Value) -> Self {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let mut options = HostOptions::new(config(home.path(), cwd.path(), table));
        options.store = Some(Arc::new(MemoryStore::new()));
        let host = Host::build(options).unwrap();
        let agent = host.sessions().preview(cwd.path()).unwrap();
        Self {
            host,
            agent,
            home,
            cwd,
        }
    }

    async fn reload(&self, table: Value) -> ReloadReport {
        self.host
            .reload(config(self.home.path(), self.cwd.path(), table))
            .await
    }

    fn snapshot(&self) -> Snapshot {
        let services = self.host.sessions().services();
        let scope = self.agent.scope();
        let mut tools: Vec<(String, String, Value)> = services
            .tools
            .schemas(Some(scope))
            .unwrap()
            .into_iter()
            .map(|s| (s.name, s.description, s.parameters))
            .collect();
        tools.sort_by(|a, b| a.0.cmp(&b.0));
        let (sections, contexts) = services.prompts.visible(scope);
        let assembly = assemble(&sections, &contexts, scope);
        let root = self.host.sessions();
        Snapshot {
            tools,
            sections: assembly.sections,
            contexts: assembly.contexts,
            pre_execute: services.tools.pre_execute().len(),
            post_execute: services.tools.post_execute().len(),
            execute: services.tools.execute_hook().len(),
            results: services.tools.results().len(),
            pre_step: services.hooks.pre_step.len(),
            request: services.hooks.request.len(),
            request_error: services.hooks.request_error.len(),
            turn_stopping: services.hooks.turn_stopping.len(),
            attachments: root
                .service::<dsh_attachments::LocalAttachmentStore>()
                .is_some(),
            spill: root.service::<dsh_spill::SpillStore>().is_some(),
            jobs: root.service::<dsh_tool_shell::JobsRuntime>().is_some(),
            services: services_of(scope),
            commands: commands_of(scope),
        }
    }
}

fn services_of(scope: &dsh_kernel::Scope) -> Vec<&'static str> {
    let present = [
        (
            "approval",
            scope.service::<dyn dsh_tools::ApprovalService>().is_some(),
        ),
        (
            "user-questions",
            scope
                .service::<dsh_user_questions::UserQuestions>()
                .is_some(),
        ),
        (
            "token-meter",
            scope.service::<dsh_token_meter::TokenMeter>().is_some(),
        ),
        (
            "pruner",
            scope
                .service::<dsh_compaction::ToolResultPruneConfig>()
                .is_some(),
        ),
        (
            "compaction",
            scope.service::<dsh_compaction::Compaction>().is_some(),
        ),
        (
            "plan-mode",
            scope.service::<dsh_plan_mode::PlanMode>().is_some(),
        ),
        ("goals", scope.service::<dsh_goal::Goals>().is_some()),
        (
            "checkpoints",
            scope.service::<dsh_checkpoints::Checkpoints>().is_some(),
        ),
        (
            "subagents",
            scope.service::<dsh_subagent::Subagents>().is_some(),
        ),
        (
            "workflows",
            scope.service::<dsh_workflow::WorkflowEngine>().is_some(),
        ),
        (
            "presets",
            scope.service::<dsh_presets::AgentPresets>().is_some(),
        ),
        (
            "web-search",
            scope.service::<dsh_web_search::WebSearch>().is_some(),
        ),
        ("lsp", scope.service::<dsh_lsp::LspService>().is_some()),
        (
            "session-query",
            scope.service::<dsh_session_query::SessionQuery>().is_some(),
        ),
        (
            "schedule",
            scope.service::<dsh_schedule::Schedules>().is_some(),
        ),
    ];
    present
        .into_iter()
        .filter_map(|(name, present)| present.then_some(name))
        .collect()
}

fn commands_of(scope: &dsh_kernel::Scope) -> Vec<String> {
    let mut names: Vec<String> = dsh_commands::CommandRegistry::of(scope)
        .map(|registry| registry.list(scope).into_iter().map(|c| c.name).collect())
        .unwrap_or_default();
    names.sort();
    names
}

fn plugin(name: &str, table: Value) -> Value {
    let mut row = Map::new();
    row.insert(name.to_owned(), table);
    json!({ "plugins": row })
}

fn off(name: &str) -> Value {
    plugin(name, json!({"enabled": false}))
}

fn applied(report: &ReloadReport, name: &str) {
    match report {
        ReloadReport::Applied { changed, .. } if changed.iter().any(|c| c == name) => {}
        other => panic!("expected {name} to be re-applied, got {other:?}"),
    }
}

/// Mounts `name` with `a`, re-applies it with `b` and unmounts it, checking each state with
/// `check_a` / `check_b` against the snapshot without the plugin, and that unmounting restores
/// that snapshot exactly.
async fn cycle(
    name: &str,
    a: Value,
    b: Value,
    check_a: impl Fn(&Snapshot, &Snapshot),
    check_b: impl Fn(&Snapshot, &Snapshot),
) {
    cycle_over(json!({}), name, a, b, check_a, check_b).await;
}

/// `base` with `name`'s table set to `table` (`plugins` is created when missing).
fn over(base: &Value, name: &str, table: Value) -> Value {
    let mut config = base.clone();
    config["plugins"][name] = table;
    config
}

/// [`cycle`] over `base`, the other plugins' tables (`{"plugins": {...}}`) kept throughout.
async fn cycle_over(
    base: Value,
    name: &str,
    a: Value,
    b: Value,
    check_a: impl Fn(&Snapshot, &Snapshot),
    check_b: impl Fn(&Snapshot, &Snapshot),
) {
    let plugin = |name: &str, table: Value| over(&base, name, table);
    let off = |name: &str| over(&base, name, json!({"enabled": false}));
    let rig = Rig::new(off(name)).await;
    let before = rig.snapshot();
    let report = rig.reload(plugin(name, a.clone())).await;
    applied(&report, name);
    let with_a = rig.snapshot();
    check_a(&before, &with_a);
    if a == b {
        // Nothing to reload: re-apply the same configuration in a fresh instance instead.
        assert_eq!(
            rig.reload(plugin(name, b.clone())).await,
            ReloadReport::Unchanged
        );
        rig.host.reapply(name).unwrap();
    } else {
        let report = rig.reload(plugin(name, b)).await;
        applied(&report, name);
    }
    let with_b = rig.snapshot();
    check_b(&before, &with_b);
    let report = rig.reload(off(name)).await;
    applied(&report, name);
    assert_eq!(rig.snapshot(), before, "disabling {name} leaves no trace");
    rig.host.shutdown();
}

#[tokio::test]
async fn sandbox_mode_changes_the_policy_context() {
    cycle(
        "sandbox",
        json!({"mode": "workspace-write"}),
        json!({"mode": "read-only"}),
        |before, a| {
            assert_eq!(before.section("sandbox:policy"), None);
            assert!(
                a.section("sandbox:policy")
                    .unwrap()
                    .contains("workspace-write")
            );
        },
        |_, b| {
            let text = b.section("sandbox:policy").unwrap();
            assert!(
                text.contains("read-only") && !text.contains("workspace-write"),
                "{text}"
            );
            assert_eq!(
                b.contexts
                    .iter()
                    .filter(|c| c.0 == "sandbox:policy")
                    .count(),
                1
            );
        },
    )
    .await;
}

#[tokio::test]
async fn approval_policy_changes_the_approval_context() {
    cycle(
        "approval",
        json!({"policy": "ask"}),
        json!({"policy": "never"}),
        |before, a| {
            assert_eq!(before.section("approval:policy"), None);
            assert!(
                a.section("approval:policy")
                    .unwrap()
                    .starts_with("Approval policy: ask")
            );
        },
        |_, b| {
            assert!(
                b.section("approval:policy")
                    .unwrap()
                    .starts_with("Approval prompts are disabled")
            );
        },
    )
    .await;
}

#[tokio::test]
async fn attachments_provide_the_store_and_read_image() {
    cycle(
        "attachments",
        json!({}),
        json!({}),
        |before, a| {
            assert!(!before.attachments && a.attachments);
            assert!(before.tool("read_image").is_none());
            assert!(
                a.tool("read_image").is_some(),
                "fs re-applies when attachments does"
            );
        },
        |_, b| {
            assert!(b.attachments);
            assert_eq!(b.names().iter().filter(|n| **n == "read_image").count(), 1);
        },
    )
    .await;
}

#[tokio::test]
async fn spill_provides_the_store_and_its_policy_follows_the_cap() {
    cycle(
        "spill",
        json!({"max_inline_bytes": 1000}),
        json!({"max_inline_bytes": 0}),
        |before, a| {
            assert!(!before.spill && a.spill);
            assert_eq!(
                a.post_execute,
                before.post_execute + 1,
                "the inline-cap policy"
            );
        },
        |before, b| {
            assert!(b.spill);
            assert_eq!(
                b.post_execute, before.post_execute,
                "a zero cap installs no policy"
            );
        },
    )
    .await;
}

#[tokio::test]
async fn fallback_titles_register_one_request_hook() {
    cycle(
        "fallback-title",
        json!({}),
        json!({}),
        |before, a| assert_eq!(a.request, before.request + 1),
        |before, b| assert_eq!(b.request, before.request + 1),
    )
    .await;
}

#[tokio::test]
async fn llm_titles_register_one_request_hook() {
    cycle(
        "session-title",
        json!({"max_tokens": 64}),
        json!({"max_tokens": 16, "model": "deepseek-v4-pro"}),
        |before, a| assert_eq!(a.request, before.request + 1),
        |before, b| assert_eq!(b.request, before.request + 1),
    )
    .await;
}

#[tokio::test]
async fn web_registers_its_tool_and_guidance() {
    cycle(
        "web",
        json!({}),
        json!({}),
        |before, a| {
            assert!(before.tool("web_fetch").is_none() && a.tool("web_fetch").is_some());
            assert!(before.section("tool:web_fetch").is_none());
            assert!(a.section("tool:web_fetch").is_some());
        },
        |_, b| assert_eq!(b.names().iter().filter(|n| **n == "web_fetch").count(), 1),
    )
    .await;
}

#[tokio::test]
async fn todo_description_follows_the_parallel_rule() {
    cycle(
        "todo",
        json!({"allow_parallel_in_progress": true}),
        json!({"allow_parallel_in_progress": false}),
        |before, a| {
            assert!(before.tool("todo_write").is_none());
            assert!(
                !a.tool("todo_write")
                    .unwrap()
                    .1
                    .contains("more than one is rejected")
            );
        },
        |_, b| {
            assert!(
                b.tool("todo_write")
                    .unwrap()
                    .1
                    .contains("more than one is rejected")
            )
        },
    )
    .await;
}

#[tokio::test]
async fn skill_registers_its_tool_and_one_pre_step_listener() {
    cycle(
        "skill",
        json!({}),
        json!({"custom_dirs": ["/nonexistent-skills"]}),
        |before, a| {
            assert!(before.tool("skill").is_none() && a.tool("skill").is_some());
            assert_eq!(a.pre_step, before.pre_step + 1);
        },
        |before, b| {
            assert!(b.tool("skill").is_some());
            assert_eq!(b.pre_step, before.pre_step + 1);
        },
    )
    .await;
}

#[tokio::test]
async fn hook_bridges_follow_their_hooks_file() {
    let dir = tempfile::tempdir().unwrap();
    let pre = dir.path().join("pre.json");
    let post = dir.path().join("post.json");
    let hook = |event: &str| {
        json!({"hooks": {event: [{"matcher": "bash", "hooks": [{"type": "command", "command": "true"}]}]}})
            .to_string()
    };
    std::fs::write(&pre, hook("PreToolUse")).unwrap();
    std::fs::write(&post, hook("PostToolUse")).unwrap();
    for name in ["hooks-claude-code", "hooks-codex"] {
        cycle(
            name,
            json!({"config_path": pre}),
            json!({"config_path": post}),
            |before, a| {
                assert_eq!(a.pre_execute, before.pre_execute + 1);
                assert_eq!(a.post_execute, before.post_execute);
            },
            |before, b| {
                assert_eq!(
                    b.pre_execute, before.pre_execute,
                    "the old file's hook is gone"
                );
                assert_eq!(b.post_execute, before.post_execute + 1);
            },
        )
        .await;
    }
}

#[tokio::test]
async fn code_mode_registers_run_code_its_sections_and_the_wire_list() {
    let rig = Rig::new(off("code")).await;
    let sessions = rig.host.sessions();
    let before = rig.snapshot();
    assert!(before.section("tools:sdk").is_none());
    applied(
        &rig.reload(plugin("code", json!({"compute_ms": 1000})))
            .await,
        "code",
    );
    let a = rig.snapshot();
    assert!(a.section("tools:code-only").is_some() && a.section("tools:sdk").is_some());
    let offered = sessions.offered_tools(&rig.agent).unwrap();
    assert!(
        offered.iter().all(|t| t.name != "run_code"),
        "native mode offers no run_code"
    );
    applied(
        &rig.reload(plugin(
            "code",
            json!({"compute_ms": 2000, "max_parallel_sub_calls": 2}),
        ))
        .await,
        "code",
    );
    assert_eq!(
        rig.snapshot()
            .sections
            .iter()
            .filter(|s| s.0 == "tools:sdk")
            .count(),
        1
    );
    applied(&rig.reload(off("code")).await, "code");
    assert_eq!(rig.snapshot(), before);
    rig.host.shutdown();
}

#[tokio::test]
async fn a_broken_code_budget_is_refused_and_the_old_instance_keeps_running() {
    let rig = Rig::new(json!({})).await;
    let before = rig.snapshot();
    let report = rig.reload(plugin("code", json!({"memory_mb": 0}))).await;
    assert!(matches!(report, ReloadReport::Partial { .. }), "{report:?}");
    assert_eq!(
        rig.snapshot(),
        before,
        "the previous configuration was restored"
    );
    rig.host.shutdown();
}

#[tokio::test]
async fn jobs_register_the_job_tools_and_the_runtime() {
    cycle(
        "jobs",
        json!({}),
        json!({"completion": "quiet", "max_consecutive_wakes": 1}),
        |before, a| {
            assert!(!before.jobs && a.jobs);
            for tool in ["job_output", "job_list", "job_kill"] {
                assert!(
                    before.tool(tool).is_none() && a.tool(tool).is_some(),
                    "{tool}"
                );
            }
            assert!(
                before.tool("bash").unwrap().2["properties"]
                    .get("run_in_background")
                    .is_none()
            );
            assert!(
                a.tool("bash").unwrap().2["properties"]
                    .get("run_in_background")
                    .is_some()
            );
        },
        |_, b| assert_eq!(b.names().iter().filter(|n| **n == "job_list").count(), 1),
    )
    .await;
}

#[tokio::test]
async fn bash_follows_run_in_background() {
    cycle(
        "bash",
        json!({"timeout_ms": 60000}),
        json!({"timeout_ms": 1000, "run_in_background": false}),
        |before, a| {
            assert!(before.tool("bash").is_none());
            assert!(
                a.tool("bash").unwrap().2["properties"]
                    .get("run_in_background")
                    .is_some()
            );
            assert!(a.section("tool:bash").is_some() && a.section("tool:jobs").is_some());
        },
        |_, b| {
            assert!(
                b.tool("bash").unwrap().2["properties"]
                    .get("run_in_background")
                    .is_none()
            );
            assert!(b.section("tool:jobs").is_none());
            assert_eq!(b.names().iter().filter(|n| **n == "bash").count(), 1);
        },
    )
    .await;
}

#[tokio::test]
async fn fs_attaches_per_session_and_follows_glob_sampling() {
    cycle(
        "fs",
        json!({"glob_sampling": true}),
        json!({"glob_sampling": false}),
        |before, a| {
            for tool in ["read", "write", "edit", "glob", "grep"] {
                assert!(
                    before.tool(tool).is_none() && a.tool(tool).is_some(),
                    "{tool}"
                );
            }
            assert!(a.section("tool:glob").unwrap().contains("sampled"));
        },
        |_, b| {
            assert!(b.section("tool:glob").unwrap().contains("oldest files"));
            assert_eq!(b.names().iter().filter(|n| **n == "read").count(), 1);
        },
    )
    .await;
}

#[tokio::test]
async fn mcp_without_servers_mounts_nothing_and_bad_rows_are_refused() {
    let rig = Rig::new(json!({})).await;
    let before = rig.snapshot();
    let report = rig
        .reload(json!({"mcp": {"servers": [{"name": "off", "command": "true", "enabled": false}]}}))
        .await;
    applied(&report, "mcp");
    rig.host.start().await.unwrap();
    assert_eq!(rig.snapshot(), before);
    let report = rig
        .reload(json!({"mcp": {"servers": [{"name": "bad name!", "command": "true"}]}}))
        .await;
    assert!(matches!(report, ReloadReport::Partial { .. }), "{report:?}");
    rig.host.shutdown();
}

#[tokio::test]
async fn a_permission_preset_switch_reattaches_the_file_tools() {
    let rig = Rig::new(json!({})).await;
    let sessions = rig.host.sessions();
    let escalation = |s: &Snapshot| {
        s.tool("write").unwrap().2["properties"]
            .get("sandbox_permissions")
            .is_some()
    };
    assert!(
        escalation(&rig.snapshot()),
        "workspace-write + ask offers escalation"
    );
    sessions
        .set_preset(&rig.agent, "danger-full-access")
        .unwrap();
    let full = rig.snapshot();
    assert!(!escalation(&full));
    assert!(
        full.section("approval:policy")
            .unwrap()
            .starts_with("Approval prompts are disabled")
    );
    assert_eq!(
        sessions.current_preset(&rig.agent).unwrap().name,
        "danger-full-access"
    );
    assert_eq!(full.names().iter().filter(|n| **n == "write").count(), 1);
    sessions.set_preset(&rig.agent, "workspace-write").unwrap();
    assert!(escalation(&rig.snapshot()));
    assert!(sessions.set_preset(&rig.agent, "yolo").is_err());
    rig.host.shutdown();
}

#[tokio::test]
async fn a_config_change_of_the_sandbox_follows_live_sessions_unless_a_client_chose() {
    let rig = Rig::new(json!({})).await;
    let sessions = rig.host.sessions();
    let other = sessions.preview(rig.cwd.path()).unwrap();
    sessions.set_preset(&other, "read-only").unwrap();
    applied(
        &rig.reload(plugin("sandbox", json!({"mode": "danger-full-access"})))
            .await,
        "sandbox",
    );
    assert_eq!(
        sessions.current_preset(&rig.agent).unwrap().name,
        "danger-full-access"
    );
    assert_eq!(sessions.current_preset(&other).unwrap().name, "read-only");
    rig.host.shutdown();
}

#[tokio::test]
async fn file_references_provide_the_candidates_and_the_read_guidance() {
    cycle(
        "file-references",
        json!({}),
        json!({"max_results": 5, "excluded_directories": ["target"]}),
        |before, a| {
            assert!(before.section("context:file-reference").is_none());
            assert_eq!(
                a.section("context:file-reference"),
                Some(dsh_references::FILE_REFERENCE_GUIDANCE),
                "the session can read, so the guidance shows"
            );
        },
        |_, b| assert!(b.section("context:file-reference").is_some()),
    )
    .await;
    // Without a `read` tool the section is empty (dropped at render time).
    let rig = Rig::new(off("fs")).await;
    assert_eq!(rig.snapshot().section("context:file-reference"), Some(""));
    assert!(
        rig.host
            .sessions()
            .service::<dsh_references::FileReferences>()
            .is_some()
    );
    rig.host.shutdown();
}

#[tokio::test]
async fn session_references_time_and_tmux_each_add_one_pre_step_listener() {
    for (name, a, b) in [
        (
            "session-references",
            json!({"enabled": true}),
            json!({"enabled": true, "max_references": 2, "max_reference_bytes": 4096}),
        ),
        (
            "time-context",
            json!({"enabled": true}),
            json!({"enabled": true, "time_zone": "Europe/Paris", "refresh_interval_ms": 60000}),
        ),
        (
            "tmux-context",
            json!({"enabled": true}),
            json!({"enabled": true, "refresh_interval_ms": 0}),
        ),
    ] {
        cycle(
            name,
            a,
            b,
            |before, a| assert_eq!(a.pre_step, before.pre_step + 1),
            |before, b| assert_eq!(b.pre_step, before.pre_step + 1),
        )
        .await;
    }
}

#[tokio::test]
async fn context_plugin_values_are_checked_with_upstream_texts() {
    for (name, table, text) in [
        (
            "time-context",
            json!({"enabled": true, "time_zone": "Mars/Olympus"}),
            "time-context: invalid IANA timeZone \"Mars/Olympus\"",
        ),
        (
            "time-context",
            json!({"enabled": true, "refresh_interval_ms": -1}),
            "time-context: refreshIntervalMs must be a non-negative safe integer, got -1",
        ),
        (
            "tmux-context",
            json!({"enabled": true, "refresh_interval_ms": 1.5}),
            "tmux-context: refreshIntervalMs must be a non-negative safe integer, got 1.5",
        ),
        (
            "session-references",
            json!({"enabled": true, "max_references": 4}),
            "session-reference: maxReferences must not exceed 3",
        ),
        (
            "file-references",
            json!({"max_results": 0}),
            "file-reference-local: maxResults must be a positive safe integer",
        ),
        (
            "file-references",
            json!({"excluded_directories": ["a/b"]}),
            "file-reference-local: excludedDirectories entries must be non-empty directory basenames",
        ),
    ] {
        let rig = Rig::new(off(name)).await;
        let before = rig.snapshot();
        let report = rig.reload(plugin(name, table)).await;
        match &report {
            ReloadReport::Partial { failed, .. } => {
                assert!(
                    failed.iter().any(|(_, e)| e.contains(text)),
                    "{name}: {report:?}"
                );
            }
            other => panic!("{name}: expected a refusal, got {other:?}"),
        }
        assert_eq!(rig.snapshot(), before, "{name}: nothing was mounted");
        rig.host.shutdown();
    }
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preset_switch_is_refused_while_the_agent_has_a_terminal_open() {
    let rig = Rig::new(plugin("terminal", json!({"enabled": true}))).await;
    let sessions = rig.host.sessions();
    let agent: Arc<dyn dsh_tools::AgentHandle> = Arc::new(rig.agent.clone());
    let call = |name: &str, args: Value| {
        dsh_tools::ToolCallInput::new("call", name, args, dsh_tools::CancellationToken::new())
            .agent(agent.clone())
    };
    let opened = sessions
        .registry()
        .execute(call("terminal_open", json!({"type": "shell"})))
        .await;
    assert!(!opened.is_error, "{}", opened.text());
    let refused = sessions
        .set_preset(&rig.agent, "read-only")
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("cannot change sandbox mode from \"workspace-write\" to \"read-only\" while persistent terminal sessions are open"),
        "{refused}"
    );
    assert_eq!(
        sessions.current_preset(&rig.agent).unwrap().name,
        "workspace-write"
    );
    let id = opened.text();
    let id = id
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .find(|word| word.starts_with("pty-"))
        .unwrap()
        .to_owned();
    let closed = sessions
        .registry()
        .execute(call("terminal_close", json!({"sessionId": id})))
        .await;
    assert!(!closed.is_error, "{}", closed.text());
    sessions.set_preset(&rig.agent, "read-only").unwrap();
    rig.host.shutdown();
}

/// `name`'s services appear with the plugin and leave with it.
fn gains(before: &Snapshot, after: &Snapshot, service: &str) {
    assert!(
        !before.services.contains(&service) && after.services.contains(&service),
        "{service}: {:?} -> {:?}",
        before.services,
        after.services
    );
}

/// The tools `after` offers that `before` does not.
fn added_tools<'a>(before: &Snapshot, after: &'a Snapshot) -> Vec<&'a str> {
    let known = before.names();
    after
        .names()
        .into_iter()
        .filter(|n| !known.contains(n))
        .collect()
}

#[tokio::test]
async fn user_approval_attaches_the_approval_service_to_each_session() {
    let check = |before: &Snapshot, s: &Snapshot| gains(before, s, "approval");
    cycle("user-approval", json!({}), json!({}), check, check).await;
}

#[tokio::test]
async fn user_questions_provide_the_one_question_service() {
    // ask-user reads the service when it mounts: without it the tool is not usable, so it is
    // off here and the service alone is what this plugin adds.
    let base = json!({"plugins": {"ask-user": {"enabled": false}}});
    let check = |before: &Snapshot, s: &Snapshot| {
        gains(before, s, "user-questions");
        assert_eq!(s.tools, before.tools);
    };
    cycle_over(base, "user-questions", json!({}), json!({}), check, check).await;
}

#[tokio::test]
async fn ask_user_registers_its_tool() {
    let check = |before: &Snapshot, s: &Snapshot| {
        assert_eq!(added_tools(before, s), ["ask_user_question"]);
    };
    cycle("ask-user", json!({}), json!({}), check, check).await;
}

#[tokio::test]
async fn token_meter_provides_the_meter() {
    let check = |before: &Snapshot, s: &Snapshot| gains(before, s, "token-meter");
    cycle("token-meter", json!({}), json!({}), check, check).await;
}

#[tokio::test]
async fn the_pruner_provides_its_settings_and_compaction_follows_them() {
    cycle(
        "tool-result-pruner",
        json!({"threshold_chars": 8192}),
        json!({"threshold_chars": 20000, "head_chars": 1000, "tail_chars": 500}),
        |before, a| {
            gains(before, a, "pruner");
            assert!(a.services.contains(&"compaction"));
        },
        |before, b| {
            gains(before, b, "pruner");
            assert_eq!(
                b.pre_step, before.pre_step,
                "the pruner adds no hook of its own"
            );
        },
    )
    .await;
}

#[tokio::test]
async fn compaction_registers_its_triggers_service_and_command() {
    cycle(
        "compaction",
        json!({"threshold_ratio": 0.8}),
        json!({"threshold_ratio": 0.5, "auto": false}),
        |before, a| {
            gains(before, a, "compaction");
            assert!(!before.commands.contains(&"compact".to_owned()));
            assert!(
                a.commands.contains(&"compact".to_owned()),
                "{:?}",
                a.commands
            );
            assert!(a.pre_step + a.request_error > before.pre_step + before.request_error);
        },
        |before, b| {
            gains(before, b, "compaction");
            assert_eq!(
                b.commands.iter().filter(|c| *c == "compact").count(),
                1,
                "one command after the re-apply"
            );
        },
    )
    .await;
}

#[tokio::test]
async fn workspace_instructions_register_their_listeners_once() {
    let a_counts = std::sync::Mutex::new(None);
    cycle(
        "workspace-instructions",
        json!({}),
        json!({"max_bytes": 1024, "instruction_file_candidates": ["AGENTS.md"]}),
        |before, a| {
            assert!(
                a.pre_step > before.pre_step,
                "{} {}",
                a.pre_step,
                before.pre_step
            );
            *a_counts.lock().unwrap() = Some((a.pre_step, a.results, a.post_execute));
        },
        |_, b| {
            assert_eq!(
                Some((b.pre_step, b.results, b.post_execute)),
                *a_counts.lock().unwrap(),
                "the re-applied instance replaces the old one"
            );
        },
    )
    .await;
}

#[tokio::test]
async fn the_compaction_fixture_adds_one_listener() {
    let added = |before: &Snapshot, s: &Snapshot| {
        let count = |s: &Snapshot| s.pre_execute + s.post_execute + s.results + s.pre_step;
        assert_eq!(count(s), count(before) + 1);
    };
    cycle(
        "workspace-context-compaction-fixture",
        json!({"enabled": true}),
        json!({"enabled": true, "read_path": "other/file.txt"}),
        added,
        added,
    )
    .await;
}

#[tokio::test]
async fn the_timeout_policy_wraps_execution() {
    let check = |before: &Snapshot, s: &Snapshot| {
        let count = |s: &Snapshot| s.execute + s.pre_execute + s.post_execute;
        assert_eq!(count(s), count(before) + 1);
    };
    cycle("timeout-policy", json!({}), json!({}), check, check).await;
}

#[tokio::test]
async fn the_repeat_reminder_follows_its_thresholds() {
    let check = |before: &Snapshot, s: &Snapshot| {
        assert_eq!(s.post_execute, before.post_execute + 1);
        assert_eq!(s.pre_step, before.pre_step + 1);
    };
    cycle(
        "repeat-tool-reminder",
        json!({}),
        json!({"thresholds": [2.0, 4.0], "exclude": ["read"]}),
        check,
        check,
    )
    .await;
    let rig = Rig::new(off("repeat-tool-reminder")).await;
    let report = rig
        .reload(plugin("repeat-tool-reminder", json!({"thresholds": []})))
        .await;
    assert!(
        matches!(report, ReloadReport::Partial { .. }),
        "an empty threshold list is refused: {report:?}"
    );
    rig.host.shutdown();
}

#[tokio::test]
async fn plan_mode_registers_its_tool_section_and_command() {
    cycle(
        "plan-mode",
        json!({}),
        json!({"section": "Plan first, in the plan file."}),
        |before, a| {
            gains(before, a, "plan-mode");
            assert_eq!(added_tools(before, a), ["exit_plan_mode"]);
            assert!(a.commands.contains(&"plan".to_owned()), "{:?}", a.commands);
        },
        |before, b| {
            assert_eq!(added_tools(before, b), ["exit_plan_mode"]);
            assert_eq!(b.commands.iter().filter(|c| *c == "plan").count(), 1);
        },
    )
    .await;
}

#[tokio::test]
async fn checkpoints_mount_the_service_and_the_three_commands() {
    let check = |before: &Snapshot, s: &Snapshot| {
        gains(before, s, "checkpoints");
        for name in ["undo", "redo", "rewind"] {
            assert_eq!(
                s.commands.iter().filter(|c| *c == name).count(),
                1,
                "{:?}",
                s.commands
            );
        }
        assert!(added_tools(before, s).is_empty());
    };
    cycle(
        "checkpoints",
        json!({}),
        json!({"max_file_bytes": 1000, "ignore": ["dist/"]}),
        check,
        check,
    )
    .await;
}

#[tokio::test]
async fn goal_tools_and_guidance_follow_the_blocked_rounds() {
    let section = |s: &Snapshot| {
        s.sections
            .iter()
            .find(|(name, _)| name.contains("goal"))
            .map(|(_, text)| text.clone())
            .unwrap_or_default()
    };
    let a_text = std::sync::Mutex::new(String::new());
    cycle(
        "goal",
        json!({}),
        json!({"blocked_after_consecutive_rounds": 7}),
        |before, a| {
            gains(before, a, "goals");
            let mut tools = added_tools(before, a);
            tools.sort_unstable();
            assert_eq!(tools, ["create_goal", "get_goal", "update_goal"]);
            assert!(a.commands.contains(&"goal".to_owned()));
            *a_text.lock().unwrap() = section(a);
        },
        |before, b| {
            assert_eq!(added_tools(before, b).len(), 3);
            let a_text = a_text.lock().unwrap().clone();
            let b_text = section(b);
            assert!(!b_text.is_empty() && b_text != a_text, "{b_text}");
            assert!(b_text.contains('7'), "{b_text}");
        },
    )
    .await;
}

#[tokio::test]
async fn subagents_follow_control_tools() {
    // workflows and the remote providers read the subagents service: off here.
    let base = json!({"plugins": {"workflows": {"enabled": false}}});
    cycle_over(
        base,
        "subagents",
        json!({}),
        json!({"control_tools": false}),
        |before, a| {
            gains(before, a, "subagents");
            let tools = added_tools(before, a);
            for tool in ["subagent", "subagent_fork", "send_message", "list_agents"] {
                assert!(tools.contains(&tool), "{tool}: {tools:?}");
            }
        },
        |before, b| {
            let tools = added_tools(before, b);
            assert!(tools.contains(&"subagent"), "{tools:?}");
            for tool in ["send_message", "interrupt_agent", "list_agents"] {
                assert!(!tools.contains(&tool), "{tool} is gone: {tools:?}");
            }
        },
    )
    .await;
}

#[tokio::test]
async fn workflows_follow_the_tool_name_and_ralph() {
    cycle(
        "workflows",
        json!({}),
        json!({"tool_name": "flow", "ralph": {"enabled": false}}),
        |before, a| {
            gains(before, a, "workflows");
            let mut tools = added_tools(before, a);
            tools.sort_unstable();
            assert_eq!(tools, ["ralph", "workflow"]);
        },
        |before, b| assert_eq!(added_tools(before, b), ["flow"]),
    )
    .await;
}

#[tokio::test]
async fn remote_subagents_register_one_tool_per_configured_provider() {
    cycle(
        "subagent-remote",
        json!({"codex": {}}),
        json!({"claude_code": {}}),
        |before, a| assert_eq!(added_tools(before, a), ["subagent_codex"]),
        |before, b| assert_eq!(added_tools(before, b), ["subagent_claude_code"]),
    )
    .await;
}

#[tokio::test]
async fn agent_presets_apply_the_default_preset_to_each_session() {
    cycle(
        "agent-presets",
        json!({"default": "standard"}),
        json!({"default": "minimal"}),
        |before, a| {
            gains(before, a, "presets");
            assert!(
                a.commands.contains(&"preset".to_owned()),
                "{:?}",
                a.commands
            );
            assert_eq!(a.sections, before.sections, "standard changes nothing");
            assert_eq!(a.tools, before.tools);
        },
        |before, b| {
            assert_ne!(
                b.sections, before.sections,
                "minimal's persona is the prompt"
            );
            assert!(
                b.sections
                    .iter()
                    .any(|(_, text)| text.contains("Answer directly, and use a tool only")),
                "{:?}",
                b.sections
            );
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_registers_its_six_tools_and_section() {
    let six = |before: &Snapshot, s: &Snapshot| {
        let tools = added_tools(before, s);
        assert_eq!(tools.len(), 6, "{tools:?}");
        assert!(
            tools.iter().all(|t| t.starts_with("terminal_")),
            "{tools:?}"
        );
    };
    cycle(
        "terminal",
        json!({"enabled": true}),
        json!({"enabled": true, "enable_run_in_background": false}),
        six,
        six,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_bash_shadows_the_one_shot_tool_per_session() {
    cycle(
        "bash-persistent",
        json!({"enabled": true}),
        json!({"enabled": true, "timeout_ms": 5000}),
        |before, a| {
            assert_eq!(a.names().iter().filter(|n| **n == "bash").count(), 1);
            assert_ne!(
                a.tool("bash"),
                before.tool("bash"),
                "the persistent definition"
            );
        },
        |before, b| {
            assert_eq!(b.names().iter().filter(|n| **n == "bash").count(), 1);
            assert_ne!(b.tool("bash"), before.tool("bash"));
        },
    )
    .await;
}

#[tokio::test]
async fn web_search_is_offered_with_a_provider_and_its_guidance_follows_the_query_cap() {
    cycle(
        "web-search",
        json!({"exa": {"api_key": "test-key"}}),
        json!({"exa": {"api_key": "test-key"}, "search_max_queries": 2}),
        |before, a| {
            gains(before, a, "web-search");
            assert_eq!(added_tools(before, a), ["web_search"]);
            assert!(
                a.sections
                    .iter()
                    .any(|(_, t)| t.contains("1\u{2013}4 non-empty")),
                "{:?}",
                a.sections
            );
        },
        |before, b| {
            assert_eq!(added_tools(before, b), ["web_search"]);
            let texts: Vec<&str> = b.sections.iter().map(|(_, t)| t.as_str()).collect();
            assert!(
                texts.iter().any(|t| t.contains("1\u{2013}2 non-empty")),
                "{texts:?}"
            );
            assert!(!texts.iter().any(|t| t.contains("1\u{2013}4 non-empty")));
        },
    )
    .await;
    // Without a usable provider the service is there and the tool is not.
    let rig = Rig::new(off("web-search")).await;
    let before = rig.snapshot();
    applied(
        &rig.reload(plugin("web-search", json!({}))).await,
        "web-search",
    );
    let without = rig.snapshot();
    assert!(added_tools(&before, &without).is_empty());
    rig.host.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lsp_registers_its_tool_over_the_configured_servers() {
    let server = |max: u64| {
        json!({
            "enabled": true,
            "max_locations": max,
            "servers": {"py": {"command": "pyright-langserver", "args": ["--stdio"], "extension_to_language": {".py": "python"}}}
        })
    };
    let check = |before: &Snapshot, s: &Snapshot| {
        gains(before, s, "lsp");
        assert_eq!(added_tools(before, s), ["lsp"]);
    };
    cycle("lsp", server(100), server(5), check, check).await;
}

#[tokio::test]
async fn session_query_follows_its_tools_switch() {
    cycle(
        "session-query",
        json!({"enabled": true}),
        json!({"enabled": true, "tools": false}),
        |before, a| {
            gains(before, a, "session-query");
            let tools = added_tools(before, a);
            assert_eq!(tools.len(), 5, "{tools:?}");
            assert!(tools.iter().all(|t| t.starts_with("session_")), "{tools:?}");
        },
        |before, b| {
            gains(before, b, "session-query");
            assert!(added_tools(before, b).is_empty());
        },
    )
    .await;
}

#[tokio::test]
async fn schedule_attaches_its_tools_to_each_session() {
    let check = |before: &Snapshot, s: &Snapshot| {
        gains(before, s, "schedule");
        let mut tools = added_tools(before, s);
        tools.sort_unstable();
        assert_eq!(
            tools,
            ["schedule_create", "schedule_delete", "schedule_list"]
        );
    };
    cycle(
        "schedule",
        json!({"enabled": true}),
        json!({"enabled": true}),
        check,
        check,
    )
    .await;
}

/// A stdio MCP server in a few lines of Python: one tool, `echo`, under the server's name.
const MCP_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message.get("method")
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"],
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "tiny", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "echo", "description": "Echo.",
                             "inputSchema": {"type": "object", "properties": {}}}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"],
                          "error": {"code": -32601, "message": "no such method"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_connects_the_configured_servers_and_follows_the_list() {
    let rig = Rig::new(json!({})).await;
    let script = rig.cwd.path().join("server.py");
    std::fs::write(&script, MCP_SERVER).unwrap();
    let servers = |names: &[&str]| {
        let rows: Vec<Value> = names
            .iter()
            .map(|name| json!({"name": name, "command": "python3", "args": [script]}))
            .collect();
        json!({"mcp": {"servers": rows}})
    };
    let before = rig.snapshot();
    for (config, tools) in [
        (servers(&["alpha"]), vec!["mcp__alpha__echo"]),
        (servers(&["beta"]), vec!["mcp__beta__echo"]),
        (
            servers(&["alpha", "beta"]),
            vec!["mcp__alpha__echo", "mcp__beta__echo"],
        ),
    ] {
        applied(&rig.reload(config).await, "mcp");
        rig.host.start().await.unwrap();
        let now = rig.snapshot();
        assert_eq!(added_tools(&before, &now), tools);
        assert!(now.section("mcp:instructions").is_some());
    }
    applied(&rig.reload(json!({})).await, "mcp");
    assert_eq!(
        rig.snapshot(),
        before,
        "no server left: nothing of mcp remains"
    );
    rig.host.shutdown();
}

/// An untrusted folder's configuration file that turns into broken TOML during a session is
/// left out whole on the reload, and the report says so and why, rather than "nothing
/// changed".
#[tokio::test]
async fn a_reload_tells_when_an_untrusted_projects_file_broke() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let project = cwd.path().join(".dsh/config.toml");
    std::fs::create_dir_all(project.parent().unwrap()).unwrap();
    std::fs::write(&project, "[tools]\nmax_parallel = 2\n").unwrap();
    let overrides = dsh_host::Overrides::default();
    let loaded = Config::load_in(home.path().to_path_buf(), cwd.path(), &overrides).unwrap();
    let mut options = HostOptions::new(loaded);
    options.store = Some(Arc::new(MemoryStore::new()));
    let host = Host::build(options).unwrap();
    std::fs::write(&project, "[tools\nmax_parallel = = 2\n").unwrap();
    let report = host.reload_from_disk().await;
    let text = report.to_string();
    assert!(!text.contains("nothing changed"), "{text}");
    assert!(
        text.contains("is not trusted, so") && text.contains(&project.display().to_string()),
        "the notice names the file: {text}"
    );
    assert!(text.contains("was ignored ("), "and why: {text}");
    assert!(text.contains("dsh trust"), "and what to do: {text}");
}
