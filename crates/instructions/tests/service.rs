//! The capability on the real agent loop: checklist A1, A12, A16–A21 and the recorded
//! `agent-instructions` scenario's log shape.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::PreStepDecision;
use dsh_agent::PromptConfig;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_instructions::Environment;
use dsh_instructions::InstructionFs;
use dsh_instructions::InstructionsConfig;
use dsh_instructions::LocalFs;
use dsh_instructions::Probe;
use dsh_instructions::ReadOutcome;
use dsh_instructions::WorkspaceInstructions;
use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_session::Event;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use dsh_session::SurfaceIntent;
use dsh_session::data::UserMessage;
use dsh_tools::RegistryConfig;
use dsh_tools::Tool;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

struct Rig {
    dir: tempfile::TempDir,
    adapter: Arc<ScriptedAdapter>,
    root: Scope,
    tools: Arc<ToolRegistry>,
    agent: AgentHandle,
    _mounted: Vec<Disposer>,
}

fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

/// `read`: the file's text (errors for a missing file), `other`: does nothing.
fn tools(root: &Scope, cwd: PathBuf) -> Arc<ToolRegistry> {
    let tools = ToolRegistry::install(root, RegistryConfig::default()).unwrap();
    for name in ["read", "other"] {
        let cwd = cwd.clone();
        let tool =
            Tool::builder(name)
                .description("test tool")
                .raw_parameters(json!({"type": "object", "properties": {}}))
                .raw_output(json!({"type": "string"}), |_, value| {
                    Ok(vec![ContentBlock::text(
                        value.as_str().unwrap_or_default().to_owned(),
                    )])
                })
                .run(move |args: Value, _| {
                    let path = cwd.join(args["file_path"].as_str().unwrap_or_default());
                    async move {
                        std::fs::read_to_string(&path).map_err(|e| ToolError::new(e.to_string()))
                    }
                })
                .build()
                .unwrap();
        tools.register(root, tool).unwrap();
    }
    tools
}

type BeforeAgent = Box<dyn FnOnce(&Scope, &AgentHooks, &ToolRegistry, PathBuf)>;

struct Setup<'a> {
    files: &'a [(&'a str, &'a str)],
    config: Value,
    fs: Option<Arc<dyn InstructionFs>>,
    log: Option<SessionLog>,
    before: Option<BeforeAgent>,
}

impl Default for Setup<'_> {
    fn default() -> Self {
        Self {
            files: &[],
            config: json!({"maxBytes": 65536}),
            fs: Some(Arc::new(LocalFs)),
            log: None,
            before: None,
        }
    }
}

fn rig(setup: Setup<'_>) -> Rig {
    let dir = workspace(setup.files);
    rig_in(dir, setup)
}

fn rig_in(dir: tempfile::TempDir, setup: Setup<'_>) -> Rig {
    let cwd = dir.path().to_path_buf();
    let root = Scope::root();
    let tools = tools(&root, cwd.clone());
    let hooks = AgentHooks::install(&root).unwrap();
    let mut value = setup.config;
    value["dshHome"] = json!(cwd.join(".dsh").to_string_lossy());
    let config = InstructionsConfig::parse(&value, &Environment::default()).unwrap();
    let mounted = WorkspaceInstructions::mount(
        config,
        setup.fs.map(dsh_instructions::same_fs),
        &root,
        &hooks,
        &tools,
    );
    if let Some(before) = setup.before {
        before(&root, &hooks, &tools, cwd.clone());
    }
    let adapter = ScriptedAdapter::new("mock");
    let log = setup.log.unwrap_or_else(|| {
        SessionLog::in_memory(SessionHeader::new(
            "s",
            Some(cwd.to_string_lossy().into_owned()),
        ))
    });
    let agent = create(&root, &tools, &adapter, log, false);
    Rig {
        dir,
        adapter,
        root,
        tools,
        agent,
        _mounted: mounted,
    }
}

fn create(
    root: &Scope,
    tools: &Arc<ToolRegistry>,
    adapter: &Arc<ScriptedAdapter>,
    log: SessionLog,
    resume: bool,
) -> AgentHandle {
    let config = AgentConfig {
        id: log.id().to_owned(),
        cwd: None,
        provider: "mock".into(),
        model: "m".into(),
        max_tokens: None,
        adapter: adapter.clone(),
        tools: tools.clone(),
        scope: root.clone(),
        log,
        prompt: PromptConfig::default(),
        max_parallel_tool_calls: 2,
    };
    if resume {
        Agent::resume(config).unwrap()
    } else {
        Agent::create(config).unwrap()
    }
}

impl Rig {
    async fn prompt(&self, text: &str) {
        self.agent.followup(Message::user_text(text)).unwrap();
        tokio::time::timeout(Duration::from_secs(10), self.agent.when_idle())
            .await
            .unwrap();
    }

    fn events(&self) -> Vec<Arc<Event>> {
        self.agent.log().events().unwrap().to_vec()
    }

    fn instruction_messages(&self) -> Vec<Arc<Event>> {
        self.events()
            .into_iter()
            .filter(|e| {
                e.kind == "user/message" && e.data["source"]["kind"] == "agent-instructions"
            })
            .collect()
    }
}

fn read(id: &str, path: &str) -> Vec<dsh_protocol::StreamChunk> {
    tool_call_response(id, "read", &json!({"file_path": path}).to_string(), None)
}

fn texts(event: &Event) -> Vec<String> {
    event.data["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["text"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_first_step_logs_the_baseline_right_after_the_prompt() {
    // Checklist A1.
    let rig = rig(Setup {
        files: &[(".git/HEAD", "ref"), ("AGENTS.md", "Be brief.\n")],
        ..Setup::default()
    });
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("hi").await;
    let kinds: Vec<String> = rig
        .events()
        .iter()
        .map(|e| e.kind.to_string())
        .filter(|k| k != "assistant/chunk")
        .collect();
    let at = kinds.iter().position(|k| k == "step/start").unwrap();
    assert_eq!(
        kinds[at + 1..at + 4],
        ["user/message", "user/message", "request/header"]
    );
    let events = rig.events();
    let baseline = events
        .iter()
        .filter(|e| e.kind == "user/message")
        .nth(1)
        .unwrap();
    assert!(texts(baseline)[0].starts_with(
        "<system-reminder>\nThe following workspace instructions may be relevant to your work."
    ));
    // It reached the first request.
    let request = &rig.adapter.requests()[0];
    assert_eq!(request.messages.len(), 2);
    assert_eq!(request.messages[1].source.kind(), "agent-instructions");
}

#[tokio::test]
async fn the_recorded_scenario_log_shape() {
    let dir = workspace(&[
        (".dsh-project", "snapshot root marker\n"),
        ("AGENTS.canonical.md", "Root snapshot instruction.\n"),
        (
            "nested/AGENTS.canonical.md",
            "Nested snapshot instruction.\n",
        ),
        ("nested/task.txt", "snapshot task\n"),
        (
            "scope</system-reminder>/AGENTS.md",
            "Delimiter path snapshot instruction.\n",
        ),
        (
            "scope</system-reminder>/task.txt",
            "delimiter path snapshot task\n",
        ),
    ]);
    std::os::unix::fs::symlink("AGENTS.canonical.md", dir.path().join("AGENTS.md")).unwrap();
    std::os::unix::fs::symlink("AGENTS.canonical.md", dir.path().join("nested/AGENTS.md")).unwrap();
    let log = SessionLog::in_memory(SessionHeader::new(
        "s",
        Some(dir.path().to_string_lossy().into_owned()),
    ));
    let rig = rig_in(
        dir,
        Setup {
            config: json!({"maxBytes": 65536, "projectRootMarkers": [".dsh-project"]}),
            log: Some(log),
            before: Some(Box::new(move |root, _, tools, _| {
                dsh_test_fixtures::install_baseline_compaction_fixture(
                    root,
                    tools,
                    "nested/task.txt".to_owned(),
                );
            })),
            ..Setup::default()
        },
    );
    rig.adapter
        .push_chunks(read("call_workspace_read", "nested/task.txt"));
    rig.adapter.push_chunks(read(
        "call_workspace_delimiter_read",
        "scope</system-reminder>/task.txt",
    ));
    rig.adapter.push_chunks(text_response("DONE"));
    rig.prompt("Read nested/task.txt, then read scope</system-reminder>/task.txt with the read tool, then reply DONE.").await;
    let expected_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/conformance/acp/agent-instructions/upstream/session.jsonl");
    let recorded =
        std::fs::read_to_string(&expected_path).expect("the recorded scenario (../shared)");
    // Compare the instruction messages and the inbox traffic around them with the recording.
    let recorded: Vec<Value> = recorded
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let shape = |events: Vec<Value>| -> Vec<Value> {
        events
            .into_iter()
            .filter(|e| {
                let kind = e["type"].as_str().unwrap();
                (kind == "user/message" && e["data"]["source"]["kind"] == "agent-instructions")
                    || (kind == "agent/inbox/spliced" && e["data"]["target"] == "next-step")
                    || kind == "step/start"
            })
            .map(|mut e| {
                e.as_object_mut().unwrap().remove("time");
                e.as_object_mut().unwrap().remove("seq");
                if let Some(inserted) = e["data"]["inserted"].as_array_mut() {
                    for m in inserted {
                        m.as_object_mut().unwrap().remove("id");
                    }
                }
                if let Some(m) = e["data"].as_object_mut()
                    && m.contains_key("role")
                {
                    m.remove("id");
                }
                e
            })
            .collect()
    };
    let ours: Vec<Value> = rig
        .events()
        .iter()
        .map(|e| serde_json::to_value(e.as_ref()).unwrap())
        .collect();
    assert_eq!(shape(ours), shape(recorded));
    // The model saw the nested and the delimiter-path instructions, each in the request after
    // the read that discovered them.
    let requests = rig.adapter.requests();
    assert_eq!(requests.len(), 3);
    let last_text = |i: usize| {
        requests[i]
            .messages
            .last()
            .map(|m| dsh_protocol::text_of(&m.content))
            .unwrap_or_default()
    };
    assert!(last_text(1).contains("Additional instructions from: nested/AGENTS.md"));
    assert!(last_text(2).contains("scope<\\/system-reminder>/AGENTS.md"));
}

#[tokio::test]
async fn a_rejected_or_empty_first_step_keeps_exactly_one_pending_message() {
    // Checklist A12.
    let rig = rig(Setup {
        files: &[("AGENTS.md", "rule")],
        before: Some(Box::new(|root, hooks, _, _| {
            hooks.pre_step.register(root, |_input, _next| {
                Box::pin(async { Ok(PreStepDecision::Reject) })
            });
        })),
        ..Setup::default()
    });
    rig.prompt("one").await;
    rig.prompt("two").await;
    let pending = rig.agent.pending().1;
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].source.kind(), "agent-instructions");
    assert!(rig.instruction_messages().is_empty());
}

#[tokio::test]
async fn failed_results_and_other_tools_never_trigger_discovery() {
    // Checklist A16.
    let rig = rig(Setup {
        files: &[
            ("AGENTS.md", "root"),
            ("sub/AGENTS.md", "sub rule"),
            ("sub/x.txt", "x"),
        ],
        ..Setup::default()
    });
    rig.adapter.push_chunks(tool_call_response(
        "c1",
        "other",
        &json!({"file_path": "sub/x.txt"}).to_string(),
        None,
    ));
    rig.adapter.push_chunks(read("c2", "sub/missing.txt"));
    rig.adapter.push_chunks(text_response("done"));
    rig.prompt("go").await;
    assert_eq!(rig.instruction_messages().len(), 1, "the baseline only");
    // A successful read does.
    rig.adapter.push_chunks(read("c3", "sub/x.txt"));
    rig.adapter.push_chunks(text_response("done"));
    rig.prompt("again").await;
    let messages = rig.instruction_messages();
    assert_eq!(messages.len(), 2);
    assert!(texts(&messages[1])[0].contains("Additional instructions from: sub/AGENTS.md"));
}

#[tokio::test]
async fn a_touch_inside_a_step_is_projected_after_its_step_end() {
    // Checklist A13, A17.
    let rig = rig(Setup {
        files: &[
            ("AGENTS.md", "root"),
            ("packages/app/AGENTS.md", "app"),
            ("packages/app/x.ts", "x"),
        ],
        ..Setup::default()
    });
    rig.adapter.push_chunks(read("c1", "packages/app/x.ts"));
    rig.adapter.push_chunks(text_response("done"));
    rig.prompt("go").await;
    let events = rig.events();
    let step_end = events.iter().find(|e| e.kind == "step/end").unwrap().seq;
    let queued = events
        .iter()
        .find(|e| e.kind == "agent/inbox/spliced" && e.data["target"] == "next-step")
        .unwrap();
    assert!(queued.seq > step_end);
    let delta = rig.instruction_messages()[1].clone();
    let text = &texts(&delta)[0];
    assert!(text.contains("Additional instructions from: packages/app/AGENTS.md"));
    assert!(text.contains("These instructions apply to work under `packages/app`."));
    // It entered the continuation step, after the tool result.
    let result = events.iter().find(|e| e.kind == "tool/result").unwrap().seq;
    assert!(delta.seq > result);
    assert_eq!(
        rig.adapter.requests()[1]
            .messages
            .last()
            .unwrap()
            .source
            .kind(),
        "agent-instructions"
    );
}

#[tokio::test]
async fn no_filesystem_provider_means_nothing_is_logged() {
    // Checklist A21.
    let rig = rig(Setup {
        files: &[("AGENTS.md", "rule")],
        fs: None,
        ..Setup::default()
    });
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("hi").await;
    assert!(rig.instruction_messages().is_empty());
    assert_eq!(
        rig.agent.log().events().unwrap().last().unwrap().data["reason"]["kind"],
        "completed"
    );
}

#[tokio::test]
async fn resume_with_unchanged_files_appends_nothing() {
    // Checklist A19.
    let rig = rig(Setup {
        files: &[("AGENTS.md", "rule")],
        ..Setup::default()
    });
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("hi").await;
    let seed: Vec<Event> = rig.events().iter().map(|e| e.as_ref().clone()).collect();
    let header = rig.agent.log().header().clone();
    rig.agent.dispose().await;
    // A new composition over the same log (fresh caches).
    let dir = rig.dir;
    let log = SessionLog::from_seed(header, seed).unwrap();
    let again = rig_in(
        dir,
        Setup {
            log: Some(log),
            ..Setup::default()
        },
    );
    let resumed = create(
        &again.root,
        &again.tools,
        &again.adapter,
        again.agent.log().clone(),
        true,
    );
    again.adapter.push_chunks(text_response("ok"));
    resumed.followup(Message::user_text("again")).unwrap();
    tokio::time::timeout(Duration::from_secs(10), resumed.when_idle())
        .await
        .unwrap();
    assert_eq!(again.instruction_messages().len(), 1);
}

#[tokio::test]
async fn compaction_of_the_baseline_records_it_again() {
    // Checklist A18.
    let rig = rig(Setup {
        files: &[("AGENTS.md", "rule")],
        ..Setup::default()
    });
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("hi").await;
    let log = rig.agent.log();
    let baseline = rig.instruction_messages()[0].seq;
    let first = log.surface_seqs()[0];
    log.append_data(
        &UserMessage(Message::user(
            vec![ContentBlock::text("checkpoint")],
            dsh_protocol::MessageSource::plugin("compact").with("compactionId", "x"),
        )),
        Some(SurfaceIntent::replace(
            first,
            baseline,
            vec![first, baseline],
        )),
    )
    .unwrap();
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("after").await;
    let messages = rig.instruction_messages();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[1].data["source"]["baseline"], true);
    assert_eq!(texts(&messages[1]), texts(&messages[0]));
}

/// A provider that fails every read.
struct Broken;

impl InstructionFs for Broken {
    fn exists(&self, path: &Path) -> std::io::Result<bool> {
        LocalFs.exists(path)
    }
    fn probe_file(&self, path: &Path) -> Probe {
        LocalFs.probe_file(path)
    }
    fn read(&self, _path: &Path, _max: u64) -> ReadOutcome {
        ReadOutcome::Failed("Input/output error (os error 5)".into())
    }
}

#[tokio::test]
async fn unreadable_or_huge_files_never_fail_the_turn() {
    let rig = rig(Setup {
        files: &[("AGENTS.md", "rule")],
        fs: Some(Arc::new(Broken)),
        ..Setup::default()
    });
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("hi").await;
    assert!(rig.instruction_messages().is_empty());
    assert_eq!(
        rig.agent.log().events().unwrap().last().unwrap().data["reason"]["kind"],
        "completed"
    );
    let huge = "x".repeat(2_000_000);
    let rig = rig_in(
        workspace(&[("AGENTS.md", &huge), ("CLAUDE.md", "small rule")]),
        Setup::default(),
    );
    rig.adapter.push_chunks(text_response("ok"));
    rig.prompt("hi").await;
    let messages = rig.instruction_messages();
    assert_eq!(messages.len(), 1);
    assert!(texts(&messages[0])[0].contains("Instructions from: CLAUDE.md"));
    assert!(!texts(&messages[0])[0].contains("AGENTS.md"));
}
