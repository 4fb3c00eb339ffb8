//! The shell tools through the real `dsh-tools` pipeline.

use std::sync::Arc;
use std::sync::Mutex;

use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_protocol::Message;
use dsh_tool_shell::JobToolsConfig;
use dsh_tool_shell::JobsConfig;
use dsh_tool_shell::JobsRuntime;
use dsh_tool_shell::ShellTools;
use dsh_tool_shell::register_shell_tools;
use dsh_tools::AgentGone;
use dsh_tools::AgentHandle;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolRegistry;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::context;

struct Agent {
    id: String,
    scope: Scope,
    injected: Mutex<Vec<Message>>,
}

impl AgentHandle for Agent {
    fn id(&self) -> &str {
        &self.id
    }
    fn scope(&self) -> &Scope {
        &self.scope
    }
    fn inject(&self, message: Message) -> Result<(), AgentGone> {
        self.injected.lock().unwrap().push(message);
        Ok(())
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    _root: Scope,
    registry: Arc<ToolRegistry>,
    agent: Arc<dyn AgentHandle>,
    other: Arc<dyn AgentHandle>,
    _disposers: Vec<dsh_kernel::Disposer>,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let root = Scope::root();
    let registry = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    let base = context(dir.path());
    let tools = ShellTools {
        resolve: Arc::new(move |_run| Ok(base.clone())),
        jobs: JobsRuntime::new(JobsConfig::default()),
        job_config: JobToolsConfig::default(),
        run_in_background: true,
        sandbox: None,
    };
    let disposers = register_shell_tools(&registry, &root, &tools).unwrap();
    let make = |name: &str| -> Arc<dyn AgentHandle> {
        let scope = root.child(ScopeKind::Agent, name).unwrap();
        Arc::new(Agent {
            id: name.to_owned(),
            scope,
            injected: Mutex::new(Vec::new()),
        })
    };
    let agent = make("agent-a");
    let other = make("agent-b");
    Setup {
        _dir: dir,
        _root: root,
        registry,
        agent,
        other,
        _disposers: disposers,
    }
}

async fn call(s: &Setup, agent: &Arc<dyn AgentHandle>, name: &str, args: Value) -> (String, bool) {
    let input =
        ToolCallInput::new("call-1", name, args, CancellationToken::new()).agent(agent.clone());
    let result = s.registry.execute(input).await;
    (result.text(), result.is_error)
}

#[tokio::test]
async fn schema_shapes_are_upstreams() {
    let s = setup();
    let fixture: Value =
        serde_json::from_str(include_str!("../fixtures/upstream-tool-schemas.json")).unwrap();
    let schemas = s.registry.schemas(Some(s.agent.scope())).unwrap();
    let by_name = |n: &str| schemas.iter().find(|t| t.name == n).cloned().unwrap();
    for (name, key) in [
        ("bash", "bash_plain"),
        ("job_output", "job_output"),
        ("job_list", "job_list"),
        ("job_kill", "job_kill"),
    ] {
        let ours = serde_json::to_value(by_name(name)).unwrap();
        assert_eq!(
            super::support::shape_string(&ours),
            super::support::shape_string(&fixture[key]),
            "{name}"
        );
        assert!(!by_name(name).description.is_empty(), "{name}");
    }
    let bash = by_name("bash").description;
    assert!(bash.contains("`run_in_background: true`"));
    assert!(!bash.contains("sandbox_permissions"));
}

#[tokio::test]
async fn bash_and_job_tools_end_to_end() {
    let s = setup();
    let a = &s.agent;
    assert_eq!(
        call(&s, a, "bash", json!({"command": "echo TERMINAL_OK", "description": "Echo TERMINAL_OK to verify terminal access"})).await,
        ("TERMINAL_OK\n".to_owned(), false)
    );
    assert_eq!(
        call(
            &s,
            a,
            "bash",
            json!({"command": "echo failing; exit 3", "description": "Fail"})
        )
        .await,
        ("failing\n[exit code: 3]".to_owned(), false)
    );
    assert_eq!(
        call(&s, a, "bash", json!({"command": "ls"})).await,
        (
            "Error: invalid arguments: missing required property \"description\"".to_owned(),
            true
        )
    );
    assert_eq!(
        call(&s, a, "bash", json!({"command": " ", "description": "d"})).await,
        (
            "Error: invalid command: expected a non-empty string".to_owned(),
            true
        )
    );
    assert_eq!(
        call(
            &s,
            a,
            "bash",
            json!({"command": "echo bg", "description": "Background", "run_in_background": true})
        )
        .await,
        ("started background job bash-1".to_owned(), false)
    );
    assert_eq!(
        call(
            &s,
            a,
            "job_output",
            json!({"job_id": "bash-1", "wait": true, "timeout_ms": 5000})
        )
        .await,
        ("bg\n[status: completed, exit code: 0]".to_owned(), false)
    );
    assert_eq!(
        call(&s, &s.other, "job_output", json!({"job_id": "bash-1"})).await,
        (
            "Error: job bash-1 belongs to another session".to_owned(),
            true
        )
    );
    assert_eq!(
        call(&s, a, "job_list", json!({})).await,
        ("bash-1 [bash] completed — echo bg".to_owned(), false)
    );
    assert_eq!(
        call(&s, &s.other, "job_list", json!({})).await,
        ("(no background jobs)".to_owned(), false)
    );
    assert_eq!(
        call(&s, a, "job_kill", json!({"job_id": "bash-1"})).await,
        (
            "job bash-1 had already finished [status: completed, exit code: 0]".to_owned(),
            false
        )
    );
    assert_eq!(
        call(&s, a, "job_kill", json!({"job_id": ""})).await,
        (
            "Error: invalid job_id: expected a non-empty string, got \"\"".to_owned(),
            true
        )
    );
}

#[tokio::test]
async fn cards_through_the_definition() {
    let s = setup();
    let def = s.registry.get("bash", Some(s.agent.scope())).unwrap();
    let args = json!({"command": "exit 2", "description": "Exit two", "workdir": "sub"});
    let call_card = serde_json::to_value(def.present_call(&args).unwrap()).unwrap();
    assert_eq!(
        call_card,
        json!({"card":"terminal","title":"exit 2","description":"Exit two","cwd":"sub"})
    );
    let view = dsh_tools::ResultView {
        content: vec![dsh_protocol::ContentBlock::text(
            "(no output)\n[exit code: 2]",
        )],
        is_error: false,
        meta: None,
    };
    let result_card = serde_json::to_value(def.present_result(&args, &view).unwrap()).unwrap();
    assert_eq!(
        result_card,
        json!({"card":"terminal","output":"(no output)","exitCode":2})
    );
    let kill = s.registry.get("job_kill", None).unwrap();
    assert_eq!(
        serde_json::to_value(kill.present_call(&json!({"job_id": "bash-3"})).unwrap()).unwrap(),
        json!({"card":"generic","title":"Kill background job bash-3","kind":"execute"})
    );
}

/// Records each live chunk with when it arrived.
#[derive(Default)]
struct LiveRecorder(Mutex<Vec<(String, dsh_tools::OutputStream, String, std::time::Instant)>>);

impl dsh_tools::ToolOutputSink for LiveRecorder {
    fn output(&self, call_id: &str, stream: dsh_tools::OutputStream, chunk: &[u8]) {
        self.0.lock().unwrap().push((
            call_id.to_owned(),
            stream,
            String::from_utf8_lossy(chunk).into_owned(),
            std::time::Instant::now(),
        ));
    }
}

#[tokio::test]
async fn foreground_output_streams_live_to_the_agents_sink_without_changing_the_result() {
    let s = setup();
    let recorder = Arc::new(LiveRecorder::default());
    let _provided = s
        .agent
        .scope()
        .provide::<dyn dsh_tools::ToolOutputSink>(recorder.clone())
        .unwrap();
    let args = json!({
        "command": "printf 'a\\nb\\n'; sleep 0.2; printf 'c\\n'; printf 'e\\n' >&2",
        "description": "Stream",
    });
    let (text, is_error) = call(&s, &s.agent, "bash", args.clone()).await;
    let ended = std::time::Instant::now();
    // The agent without a sink gets the very same result.
    assert_eq!(
        call(&s, &s.other, "bash", args).await,
        (text.clone(), is_error)
    );
    assert_eq!((text.as_str(), is_error), ("a\nb\nc\n[stderr]\ne\n", false));

    let seen = recorder.0.lock().unwrap();
    assert!(seen.iter().all(|(id, ..)| id == "call-1"), "{seen:?}");
    let stdout: String = seen
        .iter()
        .filter(|(_, stream, ..)| *stream == dsh_tools::OutputStream::Stdout)
        .map(|(_, _, chunk, _)| chunk.as_str())
        .collect();
    let stderr: String = seen
        .iter()
        .filter(|(_, stream, ..)| *stream == dsh_tools::OutputStream::Stderr)
        .map(|(_, _, chunk, _)| chunk.as_str())
        .collect();
    assert_eq!((stdout.as_str(), stderr.as_str()), ("a\nb\nc\n", "e\n"));
    // `a\nb\n` (in one read or several) came while the command still slept, well before the
    // call ended and before `c`.
    let before_c: Vec<_> = seen
        .iter()
        .take_while(|(_, _, chunk, _)| !chunk.contains('c'))
        .collect();
    let early: String = before_c
        .iter()
        .map(|(_, _, chunk, _)| chunk.as_str())
        .collect();
    assert_eq!(early, "a\nb\n");
    let at = before_c.last().unwrap().3;
    assert!(ended.duration_since(at) >= std::time::Duration::from_millis(150));
    let c_at = seen
        .iter()
        .find(|(_, _, chunk, _)| chunk.contains('c'))
        .unwrap()
        .3;
    assert!(c_at.duration_since(at) >= std::time::Duration::from_millis(150));
}
