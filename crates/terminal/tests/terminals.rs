//! The terminal tools and persistent bash through the real tool pipeline, on real PTYs
//! (hooks-and-tools-spec §E.4).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dsh_kernel::Plugin;
use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_protocol::Message;
use dsh_terminal::PersistentBashPlugin;
use dsh_terminal::TerminalPlugin;
use dsh_tool_shell::JobsConfig;
use dsh_tool_shell::JobsRuntime;
use dsh_tool_shell::OwnerId;
use dsh_tool_shell::ShellContext;
use dsh_tools::AgentGone;
use dsh_tools::AgentHandle;
use dsh_tools::CancellationToken;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolResult;
use serde_json::Value;
use serde_json::json;

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

struct Setup {
    dir: tempfile::TempDir,
    root: Scope,
    registry: Arc<ToolRegistry>,
    jobs: Arc<JobsRuntime>,
    a: Arc<dyn AgentHandle>,
    b: Arc<dyn AgentHandle>,
}

fn backend(extra: Value) -> Value {
    let mut backend =
        json!({"idle_silence_ms": 1500, "timeout_ms": 10000, "dispose_grace_ms": 1000});
    if let (Some(b), Some(e)) = (backend.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    backend
}

fn setup(terminal: Option<Value>, persistent: Option<Value>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let root = Scope::root();
    let registry = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    let resolve: dsh_terminal::ContextResolver =
        Arc::new(move |_run| Ok(ShellContext::new(cwd.clone(), "session-1")));
    let jobs = JobsRuntime::new(JobsConfig::default());
    if let Some(config) = terminal {
        let plugin = Arc::new(TerminalPlugin {
            resolve: Some(resolve.clone()),
            jobs: Some(jobs.clone()),
        });
        let scope = root.child(ScopeKind::Plugin, "terminal").unwrap();
        plugin
            .apply(&scope, serde_json::from_value(config).unwrap())
            .unwrap();
    }
    if let Some(config) = persistent {
        let plugin = Arc::new(PersistentBashPlugin {
            resolve: Some(resolve),
        });
        let scope = root.child(ScopeKind::Plugin, "bash-persistent").unwrap();
        plugin
            .apply(&scope, serde_json::from_value(config).unwrap())
            .unwrap();
    }
    let make = |name: &str| -> Arc<dyn AgentHandle> {
        Arc::new(Agent {
            id: name.to_owned(),
            scope: root.child(ScopeKind::Agent, name).unwrap(),
        })
    };
    let (a, b) = (make("agent-a"), make("agent-b"));
    Setup {
        dir,
        root,
        registry,
        jobs,
        a,
        b,
    }
}

impl Setup {
    async fn call_as(
        &self,
        agent: &Arc<dyn AgentHandle>,
        name: &str,
        args: Value,
    ) -> Arc<ToolResult> {
        let input =
            ToolCallInput::new("call", name, args, CancellationToken::new()).agent(agent.clone());
        self.registry.execute(input).await
    }

    async fn call(&self, name: &str, args: Value) -> (bool, String) {
        let result = self.call_as(&self.a, name, args).await;
        (result.is_error, result.text())
    }
}

fn terminals() -> Setup {
    setup(Some(json!({"backend": backend(json!({}))})), None)
}

#[tokio::test]
async fn open_send_read_list_close_on_a_real_shell() {
    let s = terminals();
    let (err, text) = s.call("terminal_list", json!({})).await;
    assert_eq!((err, text.as_str()), (false, "(no terminal sessions)"));

    let (err, text) = s.call("terminal_open", json!({"type": "shell"})).await;
    assert!(!err, "{text}");
    assert!(
        text.starts_with("started terminal session pty-1 [type: shell]\n"),
        "{text}"
    );

    let (err, text) = s
        .call(
            "terminal_send",
            json!({"sessionId": "pty-1", "text": "echo hi"}),
        )
        .await;
    assert!(!err, "{text}");
    assert!(
        text.ends_with("\n[wait: stdin_read]\n[session: running]"),
        "{text}"
    );
    assert!(text.lines().any(|l| l == "hi"), "{text}");

    // State persists between sends, and the shell runs in the workspace.
    s.call(
        "terminal_send",
        json!({"sessionId": "pty-1", "text": "export GREETING=persisted"}),
    )
    .await;
    let (_, text) = s
        .call(
            "terminal_send",
            json!({"sessionId": "pty-1", "text": "echo $GREETING; pwd"}),
        )
        .await;
    assert!(text.contains("\npersisted\n"), "{text}");
    let cwd = s.dir.path().canonicalize().unwrap();
    assert!(text.contains(&cwd.display().to_string()), "{text}");

    let (err, text) = s
        .call(
            "terminal_read",
            json!({"sessionId": "pty-1", "offset": 100000}),
        )
        .await;
    assert!(!err);
    assert!(
        text.starts_with("(no retained output)\n[lines: 100000-100000 of "),
        "{text}"
    );
    let (_, text) = s
        .call("terminal_read", json!({"sessionId": "pty-1", "count": 3}))
        .await;
    assert!(text.contains("\n[lines: 0-3 of "), "{text}");

    let (_, text) = s.call("terminal_list", json!({})).await;
    assert!(text.starts_with("pty-1 [shell] running pid="), "{text}");

    let (err, text) = s
        .call("terminal_close", json!({"sessionId": "pty-1"}))
        .await;
    assert_eq!(
        (err, text.as_str()),
        (false, "closed terminal session pty-1")
    );
    let (_, text) = s.call("terminal_list", json!({})).await;
    assert_eq!(text, "(no terminal sessions)");
}

#[tokio::test]
async fn owners_are_isolated_and_names_unique() {
    let s = terminals();
    let (err, text) = s
        .call("terminal_open", json!({"type": "shell", "name": "main"}))
        .await;
    assert!(!err, "{text}");
    assert!(text.starts_with("started terminal session pty-1 (main) [type: shell]\n"));
    let (err, text) = s
        .call("terminal_open", json!({"type": "shell", "name": "main"}))
        .await;
    assert!(err);
    assert_eq!(
        text,
        "Error: PTY session name \"main\" already exists for this owner"
    );
    let foreign = s
        .call_as(
            &s.b,
            "terminal_send",
            json!({"sessionId": "pty-1", "text": "id"}),
        )
        .await;
    assert_eq!(
        foreign.text(),
        "Error: PTY session pty-1 belongs to another agent"
    );
    let (_, list) = {
        let r = s.call_as(&s.b, "terminal_list", json!({})).await;
        (r.is_error, r.text())
    };
    assert_eq!(list, "(no terminal sessions)");
    let (_, text) = s
        .call("terminal_send", json!({"sessionId": "pty-9", "text": "x"}))
        .await;
    assert_eq!(text, "Error: unknown PTY session pty-9");
    let (_, text) = s
        .call("terminal_send", json!({"sessionId": "", "text": "x"}))
        .await;
    assert_eq!(text, "Error: sessionId must be a non-empty string");
    let (_, text) = s.call("terminal_open", json!({"type": "nope"})).await;
    assert_eq!(text, "Error: no PTY backend registered for \"nope\"");
    // Disposing the owner closes its terminals.
    let pid: i32 = {
        let (_, text) = s.call("terminal_list", json!({})).await;
        text.rsplit("pid=").next().unwrap().parse().unwrap()
    };
    s.a.scope().dispose();
    let mut gone = false;
    for _ in 0..100 {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains(") Z "))
        {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "the disposed owner's shell {pid} is still alive");
}

#[tokio::test]
async fn agentless_calls_are_refused() {
    let s = terminals();
    let input = ToolCallInput::new("c", "terminal_list", json!({}), CancellationToken::new());
    let result = s.registry.execute(input).await;
    assert_eq!(
        result.text(),
        "Error: terminal tools require an initiating agent"
    );
}

#[tokio::test]
async fn second_send_concurrent_signal_and_idle_inference() {
    let s = terminals();
    s.call("terminal_open", json!({"type": "shell"})).await;
    // A foreground program that prints nothing and ignores stdin: the first send waits.
    let slow = s.call(
        "terminal_send",
        json!({"sessionId": "pty-1", "text": "sleep 30"}),
    );
    let second = async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let busy = s
            .call(
                "terminal_send",
                json!({"sessionId": "pty-1", "text": "echo x"}),
            )
            .await;
        let killed = s
            .call(
                "terminal_signal",
                json!({"sessionId": "pty-1", "signal": "SIGINT"}),
            )
            .await;
        (busy, killed)
    };
    let (first, (busy, signal)) = tokio::join!(slow, second);
    assert_eq!(
        busy.1,
        "Error: PTY session pty-1 already has an active send"
    );
    assert!(!signal.0, "{}", signal.1);
    assert!(
        signal
            .1
            .starts_with("delivered SIGINT to foreground process group "),
        "{}",
        signal.1
    );
    assert!(first.1.contains("[wait: stdin_read]"), "{}", first.1);

    // The idle shell itself may not be SIGKILLed.
    let (err, text) = s
        .call(
            "terminal_signal",
            json!({"sessionId": "pty-1", "signal": "SIGKILL"}),
        )
        .await;
    assert!(err);
    assert_eq!(
        text,
        "Error: refusing to SIGKILL the terminal shell; terminate the terminal session instead"
    );

    // Without Enter nothing runs; the shell is still waiting at its line editor.
    let (_, text) = s
        .call(
            "terminal_send",
            json!({"sessionId": "pty-1", "text": "", "submit": false}),
        )
        .await;
    assert_eq!(
        text,
        "(no new output)\n[wait: stdin_read]\n[session: running]"
    );

    // A program that neither prints nor reads leaves only output silence to go by.
    let (_, text) = s
        .call(
            "terminal_send",
            json!({"sessionId": "pty-1", "text": "sleep 5 </dev/null"}),
        )
        .await;
    assert!(
        text.ends_with("\n[wait: inferred_idle]\n[session: running]"),
        "{text}"
    );
    s.call(
        "terminal_signal",
        json!({"sessionId": "pty-1", "signal": "SIGINT"}),
    )
    .await;

    // A foreground program reading the terminal is a proven stdin wait.
    let (_, text) = s
        .call(
            "terminal_send",
            json!({"sessionId": "pty-1", "text": "read line; echo got:$line"}),
        )
        .await;
    assert!(
        text.ends_with("[wait: stdin_read]\n[session: running]"),
        "{text}"
    );
    let (_, text) = s
        .call(
            "terminal_send",
            json!({"sessionId": "pty-1", "text": "typed"}),
        )
        .await;
    assert!(text.contains("got:typed"), "{text}");
}

#[tokio::test]
async fn a_concurrent_second_close_reports_already_closing_and_exit_is_seen() {
    let s = terminals();
    s.call("terminal_open", json!({"type": "shell"})).await;
    // Keep the shell busy so closing takes its grace period.
    let close = || s.call("terminal_close", json!({"sessionId": "pty-1"}));
    let (one, two) = tokio::join!(close(), close());
    let mut texts = [one.1, two.1];
    texts.sort();
    assert_eq!(
        texts,
        [
            "closed terminal session pty-1".to_owned(),
            "terminal session pty-1 was already closing".to_owned()
        ]
    );

    s.call("terminal_open", json!({"type": "shell"})).await;
    let (_, text) = s
        .call(
            "terminal_send",
            json!({"sessionId": "pty-2", "text": "exit 4"}),
        )
        .await;
    assert!(
        text.ends_with("[wait: session_exit]\n[session: exited code=4 signal=null]"),
        "{text}"
    );
    let (_, list) = s.call("terminal_list", json!({})).await;
    assert!(
        list.starts_with("pty-2 [shell] exited code=4 signal=null"),
        "{list}"
    );
}

#[tokio::test]
async fn results_are_bounded_to_max_result_bytes() {
    let s = setup(
        Some(json!({"max_result_bytes": 200, "backend": backend(json!({}))})),
        None,
    );
    s.call("terminal_open", json!({"type": "shell"})).await;
    let (_, text) = s
        .call(
            "terminal_send",
            json!({"sessionId": "pty-1", "text": "seq 1 500"}),
        )
        .await;
    assert!(text.len() <= 200, "{}", text.len());
    assert!(text.ends_with("\n[output truncated]"), "{text}");
    assert!(
        text.contains("\n[wait: stdin_read]\n[session: running]"),
        "{text}"
    );
    assert!(text.contains("500"), "the newest output is kept: {text}");
    let (_, text) = s
        .call("terminal_read", json!({"sessionId": "pty-1", "count": 400}))
        .await;
    assert!(text.len() <= 200);
    assert!(text.ends_with("\n[output truncated]"), "{text}");
    let long = "x".repeat(300);
    let (_, text) = s
        .call("terminal_send", json!({"sessionId": long, "text": "x"}))
        .await;
    assert!(
        text.len() <= 200 && text.ends_with("\n[output truncated]"),
        "{text}"
    );
}

#[tokio::test]
async fn background_sends_become_jobs_whose_output_is_the_delta() {
    let s = terminals();
    s.call("terminal_open", json!({"type": "shell"})).await;
    let (err, text) = s
        .call(
            "terminal_send",
            json!({"sessionId": "pty-1", "text": "echo from-job", "run_in_background": true}),
        )
        .await;
    assert!(!err, "{text}");
    assert_eq!(text, "started background job pty-send-1");
    let owner = OwnerId::new("agent-a");
    let job = s
        .jobs
        .wait(
            Some(&owner),
            "pty-send-1",
            Duration::from_secs(10),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(job.detail.as_deref(), Some("wait: stdin_read"), "{job:?}");
    let read = s.jobs.read(Some(&owner), "pty-send-1").unwrap();
    assert!(read.text.contains("from-job"), "{}", read.text);
}

fn persistent() -> Setup {
    setup(
        None,
        Some(json!({"timeout_ms": 3000, "max_output_chars": 100, "backend": backend(json!({}))})),
    )
}

#[tokio::test]
async fn persistent_bash_keeps_state_and_reports_status() {
    let s = persistent();
    let (err, text) = s.call("bash", json!({"command": "cd /tmp"})).await;
    assert_eq!((err, text.as_str()), (false, ""));
    let (_, text) = s.call("bash", json!({"command": "pwd"})).await;
    assert_eq!(text, "/tmp");
    let (_, text) = s.call("bash", json!({"command": "false"})).await;
    assert_eq!(text, "[exit code: 1]");
    let (_, text) = s
        .call(
            "bash",
            json!({"command": "printf 'a\\nb\\n'; echo 'quote '\"'\"' ok'"}),
        )
        .await;
    assert_eq!(text, "a\nb\nquote ' ok");
    let (_, text) = s.call("bash", json!({"command": "seq 1 100"})).await;
    assert!(text.starts_with("1\n2\n"), "{text}");
    assert!(
        text.contains("<response clipped><NOTE>To save on context"),
        "{text}"
    );
    assert!(!text.contains("__DSH_PERSISTENT_BASH"), "{text}");
    let (err, text) = s.call("bash", json!({"command": "  "})).await;
    assert_eq!(
        (err, text.as_str()),
        (true, "Error: command must be a non-empty string")
    );
}

#[tokio::test]
async fn persistent_bash_resets_after_exit_and_timeout() {
    let s = persistent();
    s.call("bash", json!({"command": "cd /tmp"})).await;
    let (_, text) = s.call("bash", json!({"command": "exit 3"})).await;
    assert_eq!(
        text,
        format!(
            "[shell exited: code 3]\n{}",
            dsh_terminal::persistent::RESET_LINE
        )
    );
    let (_, text) = s.call("bash", json!({"command": "pwd"})).await;
    assert_eq!(
        text,
        s.dir.path().canonicalize().unwrap().display().to_string()
    );

    let (_, text) = s
        .call("bash", json!({"command": "echo partial; sleep 20"}))
        .await;
    assert!(
        text.starts_with("Your command timed out after 3 seconds or experienced an OOM error. Below is partial output:\npartial\n"),
        "{text}"
    );
    assert!(
        text.ends_with(dsh_terminal::persistent::RESET_LINE),
        "{text}"
    );
    assert!(!text.contains("__DSH_PERSISTENT_BASH"), "{text}");
    let (_, text) = s.call("bash", json!({"command": "echo fresh"})).await;
    assert_eq!(text, "fresh");
    drop(s.root);
}

#[tokio::test]
async fn a_terminal_is_confined_like_bash() {
    if !std::path::Path::new("/usr/bin/bwrap").exists() {
        eprintln!("SKIPPED: bubblewrap is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = Scope::root();
    let registry = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    let cwd = dir.path().canonicalize().unwrap();
    let policy_root = cwd.clone();
    let resolve: dsh_terminal::ContextResolver = Arc::new(move |_run| {
        let mut context = ShellContext::new(policy_root.clone(), "session-1");
        context.sandbox = Some(dsh_tool_shell::SandboxPolicy::new(
            dsh_tool_shell::SandboxMode::ReadOnly,
            &policy_root,
        ));
        Ok(context)
    });
    let scope = root.child(ScopeKind::Plugin, "terminal").unwrap();
    TerminalPlugin {
        resolve: Some(resolve.clone()),
        jobs: None,
    }
    .apply(
        &scope,
        serde_json::from_value(json!({"backend": backend(json!({}))})).unwrap(),
    )
    .unwrap();
    let scope = root.child(ScopeKind::Plugin, "bash-persistent").unwrap();
    PersistentBashPlugin {
        resolve: Some(resolve),
    }
    .apply(
        &scope,
        serde_json::from_value(json!({"backend": backend(json!({}))})).unwrap(),
    )
    .unwrap();
    let agent: Arc<dyn AgentHandle> = Arc::new(Agent {
        id: "agent-a".into(),
        scope: root.child(ScopeKind::Agent, "agent-a").unwrap(),
    });
    let call = |name: &'static str, args: Value| {
        let input =
            ToolCallInput::new("c", name, args, CancellationToken::new()).agent(agent.clone());
        registry.execute(input)
    };
    let opened = call("terminal_open", json!({"type": "shell"})).await;
    assert!(!opened.is_error, "{}", opened.text());
    let sent = call(
        "terminal_send",
        json!({"sessionId": "pty-1", "text": "echo x > inside.txt; echo status=$?"}),
    )
    .await;
    assert!(sent.text().contains("status=1"), "{}", sent.text());
    assert!(!cwd.join("inside.txt").exists());
    let text = call("bash", json!({"command": "touch also.txt"}))
        .await
        .text();
    assert!(text.contains("[exit code: 1]"), "{text}");
    assert!(!cwd.join("also.txt").exists());
    // The secret-scrubbed environment reaches the terminal too.
    let text = call(
        "bash",
        json!({"command": "echo ${DSH_PTY_SESSION_ID}:$TERM"}),
    )
    .await
    .text();
    assert_eq!(text, "pty-2:dumb");
}
