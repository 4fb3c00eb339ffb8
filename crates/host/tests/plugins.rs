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
        }
    }
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
