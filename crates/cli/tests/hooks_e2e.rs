//! Real hook scripts (bash and python) for every bridged event, run end to end through the real
//! `dsh` binary over `dsh exec` and `dsh acp` against the replay model server. Each script checks
//! the payload it received (writing `<name>.ok` or `<name>.fail: <why>`) and steers the turn; the
//! tests check both the scripts' verdicts and the effect on the session log.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

use dsh_testkit::replay::ReplayServer;
use dsh_testkit::scenario::ModelEntry;
use dsh_testkit::scenario::Scenario;
use dsh_testkit::scenario::ScenarioSpec;
use serde_json::Value;
use serde_json::json;

fn scenario(task: &str, entries: Vec<Value>) -> Scenario {
    let spec: ScenarioSpec = serde_json::from_value(json!({
        "suite": "headless",
        "name": "hooks-e2e",
        "sessions": [{"session": 0, "first_user_text": task}]
    }))
    .unwrap();
    let entries: Vec<ModelEntry> = entries
        .into_iter()
        .enumerate()
        .map(|(i, mut e)| {
            e["session"] = 0.into();
            e["route"] = "main".into();
            e["index"] = i.into();
            serde_json::from_value(e).unwrap()
        })
        .collect();
    Scenario::from_parts(spec, entries)
}

fn bash_call(id: &str, command: &str) -> Value {
    json!({"kind": "response", "tool_calls": [{"id": id, "name": "bash", "arguments": json!({"command": command, "description": "run it"}).to_string()}],
           "finish_reason": "tool_calls", "usage": {"prompt_tokens": 5, "completion_tokens": 5}})
}

fn text(content: &str) -> Value {
    json!({"kind": "response", "content": content, "finish_reason": "stop",
           "usage": {"prompt_tokens": 5, "completion_tokens": 5}})
}

fn write_script(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
}

/// A python helper every python hook imports: read the payload, check it, record a verdict.
const PY_CHECK: &str = r#"import json, os, sys
def payload(name, event, **expect):
    raw = sys.stdin.read()
    data = json.loads(raw)
    problems = []
    if data.get("hook_event_name") != event:
        problems.append("event %r" % data.get("hook_event_name"))
    if data.get("cwd") != os.getcwd():
        problems.append("cwd %r != %r" % (data.get("cwd"), os.getcwd()))
    if not data.get("session_id"):
        problems.append("no session_id")
    for key, value in expect.items():
        if data.get(key) != value:
            problems.append("%s %r != %r" % (key, data.get(key), value))
    with open(name + (".fail" if problems else ".ok"), "a") as out:
        out.write("; ".join(problems) + "\n")
    return data
"#;

fn cc_scripts(work: &Path) {
    std::fs::create_dir_all(work.join("hooks")).unwrap();
    let hooks = work.join("hooks");
    std::fs::write(hooks.join("check.py"), PY_CHECK).unwrap();
    // SessionStart (python): checks `source`, injects context.
    write_script(
        &hooks,
        "session_start.py",
        r#"#!/usr/bin/env python3
import json, sys, os
sys.path.insert(0, os.path.join(os.getcwd(), "hooks"))
from check import payload
data = payload("session_start", "SessionStart", source="startup")
print(json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "session context from hook"}}))
"#,
    );
    // UserPromptSubmit (bash): checks the prompt and the env, adds context.
    write_script(
        &hooks,
        "prompt.sh",
        r#"#!/bin/bash
payload=$(cat)
if [[ "$payload" == *'"hook_event_name":"UserPromptSubmit"'* && "$payload" == *'"prompt":"'* && "$CLAUDE_PROJECT_DIR" == "$PWD" ]]; then
  echo >> prompt.ok
else
  echo "$payload" >> prompt.fail
fi
echo '{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"prompt context from hook"}}'
"#,
    );
    // PreToolUse (python): denies `rm`, lets the rest run.
    write_script(
        &hooks,
        "pre.py",
        r#"#!/usr/bin/env python3
import sys, os
sys.path.insert(0, os.path.join(os.getcwd(), "hooks"))
from check import payload
data = payload("pre", "PreToolUse", tool_name="bash")
if "rm " in data["tool_input"].get("command", ""):
    sys.stderr.write("rm is not allowed here\n")
    sys.exit(2)
"#,
    );
    // PostToolUse (bash): adds context naming the call.
    write_script(
        &hooks,
        "post.sh",
        r#"#!/bin/bash
payload=$(cat)
id=$(printf '%s' "$payload" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["tool_use_id"]); open("post.ok" if d["hook_event_name"]=="PostToolUse" and "tool_response" in d else "post.fail","a").write(d["tool_response"]+"\n")')
printf '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"post context for %s"}}\n' "$id"
"#,
    );
    // Stop (python): blocks once (after SessionStart has finished), then lets the turn end.
    write_script(
        &hooks,
        "stop.py",
        r#"#!/usr/bin/env python3
import sys, os, time
sys.path.insert(0, os.path.join(os.getcwd(), "hooks"))
from check import payload
data = payload("stop", "Stop", stop_hook_active=False)
if not os.path.exists("stop.blocked"):
    open("stop.blocked", "w").close()
    for _ in range(100):
        if os.path.exists("session_start.ok"):
            break
        time.sleep(0.05)
    time.sleep(0.3)
    sys.stderr.write("verify first")
    sys.exit(2)
"#,
    );
    let config = json!({"hooks": {
        "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "hooks/session_start.py"}]}],
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "hooks/prompt.sh"}]}],
        "PreToolUse": [{"matcher": "bash", "hooks": [{"type": "command", "command": "hooks/pre.py"}]}],
        "PostToolUse": [{"matcher": "bash", "hooks": [{"type": "command", "command": "hooks/post.sh"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "${CLAUDE_PROJECT_DIR}/hooks/stop.py"}]}],
    }});
    std::fs::write(work.join("hooks.json"), config.to_string()).unwrap();
}

fn configure(home: &Path, extra: &str) {
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[plugins.session-title]\nenabled = false\n\n[plugins.sandbox]\nmode = \"danger-full-access\"\n\n{extra}"
        ),
    )
    .unwrap();
}

/// The hook files live in the project folder (`config_path` is relative to it), which the
/// person trusts: a user setting that runs a folder's files applies only in a trusted folder.
fn trust_folder(home: &Path, work: &Path) {
    let config = home.join("config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap_or_default();
    if !text.contains("[projects.") {
        text.push_str(&format!(
            "\n[projects.{}]\ntrust = \"trusted\"\n",
            toml::Value::String(work.to_string_lossy().into_owned())
        ));
        std::fs::write(&config, text).unwrap();
    }
}

fn command(args: &[&str], work: &Path, home: &Path, url: &str) -> std::process::Command {
    trust_folder(home, work);
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_dsh"));
    command
        .args(args)
        .current_dir(work)
        .env("HOME", home)
        .env("DSH_HOME", home)
        .env("DEEPSEEK_API_KEY", "replay-key")
        .env("DEEPSEEK_BASE_URL", url)
        .env_remove("DSH_LOG");
    command
}

fn session_events(home: &Path) -> Vec<Value> {
    fn find(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                find(&path, out);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    find(&home.join("sessions"), &mut files);
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::read_to_string(&files[0])
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn verdicts(work: &Path, names: &[&str]) {
    for name in names {
        let fail = work.join(format!("{name}.fail"));
        assert!(
            !fail.exists(),
            "{name}: {}",
            std::fs::read_to_string(&fail).unwrap_or_default()
        );
        assert!(work.join(format!("{name}.ok")).exists(), "{name} never ran");
    }
}

fn texts_of(events: &[Value], kind: &str) -> Vec<(String, Value)> {
    events
        .iter()
        .filter(|e| e["type"] == kind)
        .map(|e| {
            let content = if kind == "tool/result" {
                &e["data"]["message"]["content"][0]["content"]
            } else {
                &e["data"]["content"]
            };
            let text: String = content
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect();
            (text, e["data"]["source"].clone())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_hooks_for_every_event_over_exec() {
    let work = tempfile::tempdir().unwrap();
    let work = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    cc_scripts(&work);
    configure(
        home.path(),
        "[plugins.hooks-claude-code]\nconfig_path = \"hooks.json\"\n",
    );
    let task = "run the two commands";
    let scenario = scenario(
        task,
        vec![
            bash_call("call_echo", "echo HELLO"),
            bash_call("call_rm", "rm -rf nothing-here"),
            text("done"),
            text("verified"),
        ],
    );
    let server = ReplayServer::start(&scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap();
    let out = command(
        &["exec", "--output", "stream-json", task],
        &work,
        home.path(),
        &server.url(),
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    verdicts(&work, &["session_start", "prompt", "pre", "post", "stop"]);
    let events = session_events(home.path());
    let results = texts_of(&events, "tool/result");
    assert!(results[0].0.contains("HELLO"), "{results:?}");
    assert_eq!(results[1].0, "Error: rm is not allowed here");
    let messages = texts_of(&events, "user/message");
    let plugin = json!({"kind": "plugin", "plugin": "hooks-claude-code"});
    for expected in [
        "session context from hook",
        "prompt context from hook",
        "post context for call_echo",
        "post context for call_rm",
        "verify first",
    ] {
        assert!(
            messages.iter().any(|(t, s)| t == expected && *s == plugin),
            "{expected} missing from {messages:?}"
        );
    }
    // The Stop steer ran a second step of the same turn, and its prompt hook saw the steer.
    assert_eq!(
        events.iter().filter(|e| e["type"] == "turn/start").count(),
        1
    );
    let last = events
        .iter()
        .rev()
        .find(|e| e["type"] == "turn/end")
        .unwrap();
    assert_eq!(last["data"]["reason"]["kind"], "completed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(result["output"], "verified");
    // Every hook run left an adjacent invoked/result pair (SessionStart writes none).
    let invoked = events
        .iter()
        .filter(|e| e["type"] == "hook/invoked")
        .count();
    let results = events.iter().filter(|e| e["type"] == "hook/result").count();
    assert_eq!(invoked, results);
    // UserPromptSubmit runs at every pre-step that claims messages: the prompt, each step
    // claiming a PostToolUse context, and the Stop steer (×4); pre ×2, post ×2, stop ×2.
    assert_eq!(invoked, 10);
    let prompt_runs = events
        .iter()
        .filter(|e| e["type"] == "hook/invoked" && e["data"]["point"] == "UserPromptSubmit")
        .count();
    assert_eq!(prompt_runs, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_hooks_never_fail_the_turn_over_exec() {
    let work = tempfile::tempdir().unwrap();
    let work = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let config = json!({"hooks": {
        "PreToolUse": [{"hooks": [
            {"type": "command", "command": "sleep 30", "timeout": 0.5},
            {"type": "command", "command": "echo '{not json'"},
            {"type": "command", "command": "echo odd >&2; exit 7"},
            {"type": "command", "command": "exit 2", "timeout": 0},
        ]}],
    }});
    std::fs::write(work.join("hooks.json"), config.to_string()).unwrap();
    configure(
        home.path(),
        "[plugins.hooks-claude-code]\nconfig_path = \"hooks.json\"\n",
    );
    let task = "echo it";
    let scenario = scenario(task, vec![bash_call("c1", "echo HELLO"), text("fine")]);
    let server = ReplayServer::start(&scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap();
    let started = Instant::now();
    let out = command(&["exec", task], &work, home.path(), &server.url())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "fine\n");
    let events = session_events(home.path());
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "hook/result")
        .collect();
    assert_eq!(results.len(), 4);
    for r in &results {
        assert_eq!(r["data"]["decision"], "pass");
    }
    // The hanging hook was killed at its timeout: no exit code.
    assert!(results[0]["data"].get("exitCode").is_none());
    assert_eq!(results[2]["data"]["exitCode"], 7);
    assert_eq!(results[2]["data"]["stderrSummary"], "odd");
    assert_eq!(
        results[3]["data"]["stderrSummary"],
        "bash-local: request.timeoutMs must be a positive finite number"
    );
    assert!(texts_of(&events, "tool/result")[0].0.contains("HELLO"));
}

/// §A.4: a read-only session confines its hooks like its `bash` calls: a PreToolUse hook cannot
/// write into the workspace (the other tests run `danger-full-access`, where hooks write their
/// verdict files there). Fails loudly when this host cannot run bubblewrap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_session_confines_its_hooks_over_exec() {
    let probe = std::process::Command::new("bwrap")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--unshare-pid",
            "true",
        ])
        .output();
    assert!(
        probe.as_ref().is_ok_and(|out| out.status.success()),
        "bubblewrap cannot create a sandbox on this host (apt-get install -y bubblewrap): {probe:?}"
    );
    let work = tempfile::tempdir().unwrap();
    let work = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let config = json!({"hooks": {
        "PreToolUse": [{"hooks": [
            {"type": "command", "command": "cat >/dev/null; echo x > hook-wrote.txt"},
        ]}],
    }});
    std::fs::write(work.join("hooks.json"), config.to_string()).unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[plugins.session-title]\nenabled = false\n\n[plugins.sandbox]\nmode = \"read-only\"\n\n[plugins.hooks-claude-code]\nconfig_path = \"hooks.json\"\n",
    )
    .unwrap();
    let task = "echo it";
    let scenario = scenario(task, vec![bash_call("c1", "echo HELLO"), text("fine")]);
    let server = ReplayServer::start(&scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap();
    let out = command(&["exec", task], &work, home.path(), &server.url())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !work.join("hook-wrote.txt").exists(),
        "the hook escaped the read-only sandbox"
    );
    let events = session_events(home.path());
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "hook/result")
        .collect();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["data"]["decision"], "pass");
    assert_eq!(results[0]["data"]["exitCode"], 1);
    assert!(texts_of(&events, "tool/result")[0].0.contains("HELLO"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_matcher_registers_nothing_over_exec() {
    let work = tempfile::tempdir().unwrap();
    let work = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    let config = json!({"hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "exit 2"}]}],
        "PreToolUse": [{"matcher": "[", "hooks": [{"type": "command", "command": "exit 2"}]}],
    }});
    std::fs::write(work.join("hooks.json"), config.to_string()).unwrap();
    configure(
        home.path(),
        "[plugins.hooks-claude-code]\nconfig_path = \"hooks.json\"\n",
    );
    let scenario = scenario("hi", vec![text("hello")]);
    let server = ReplayServer::start(&scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap();
    let out = command(&["exec", "hi"], &work, home.path(), &server.url())
        .env("DSH_LOG", "warn")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("hooks-claude-code: could not load hook config \"hooks.json\": SyntaxError: invalid claude-code regex matcher \"[\" on event \"PreToolUse\" — no hooks registered"),
        "{stderr}"
    );
    let events = session_events(home.path());
    assert!(!events.iter().any(|e| e["type"] == "hook/invoked"));
}

/// A minimal ACP client over the child's stdio.
struct Acp {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Acp {
    fn start(mut command: std::process::Command) -> Self {
        let mut child = command
            .arg("acp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(value) = serde_json::from_str::<Value>(&line)
                    && tx.send(value).is_err()
                {
                    break;
                }
            }
        });
        Self {
            child,
            lines: rx,
            seen: Vec::new(),
        }
    }

    fn send(&mut self, value: Value) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{value}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request and waits for its response (answering permission requests "cancelled").
    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let frame = self.lines.recv_timeout(left).expect("acp response in time");
            self.seen.push(frame.clone());
            if frame["method"] == "session/request_permission" {
                self.send(json!({"jsonrpc": "2.0", "id": frame["id"], "result": {"outcome": {"outcome": "cancelled"}}}));
                continue;
            }
            if frame["id"] == id && frame.get("method").is_none() {
                return frame;
            }
        }
    }
}

impl Drop for Acp {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_and_claude_code_hooks_over_acp() {
    let work = tempfile::tempdir().unwrap();
    let work = work.path().canonicalize().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.join("hooks")).unwrap();
    std::fs::write(work.join("hooks/check.py"), PY_CHECK).unwrap();
    // Codex UserPromptSubmit (bash): blocks a prompt saying "forbidden"; plain stdout is
    // context otherwise.
    write_script(
        &work.join("hooks"),
        "codex_prompt.sh",
        r#"#!/bin/bash
payload=$(cat)
case "$payload" in
  *'"permission_mode":"default"'*'"turn_id":"'*) echo >> codex_prompt.ok ;;
  *) echo "$payload" >> codex_prompt.fail ;;
esac
if [[ "$payload" == *forbidden* ]]; then echo "no forbidden prompts" >&2; exit 2; fi
echo "codex plain context"
"#,
    );
    // Codex Stop (bash): checks the Codex-only fields.
    write_script(
        &work.join("hooks"),
        "codex_stop.sh",
        r#"#!/bin/bash
payload=$(cat)
case "$payload" in
  *'"stop_hook_active":false,"last_assistant_message":null'*) echo >> codex_stop.ok ;;
  *) echo "$payload" >> codex_stop.fail ;;
esac
"#,
    );
    // Claude Code PreToolUse (python): asks; under danger-full-access (policy never) the
    // approval service rejects without asking the client.
    write_script(
        &work.join("hooks"),
        "ask.py",
        r#"#!/usr/bin/env python3
import json, sys, os
sys.path.insert(0, os.path.join(os.getcwd(), "hooks"))
from check import payload
payload("ask", "PreToolUse", tool_name="bash")
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", "permissionDecisionReason": "a human must look"}}))
"#,
    );
    std::fs::write(
        work.join("codex-hooks.json"),
        json!({"hooks": {
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "hooks/codex_prompt.sh"}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "hooks/codex_stop.sh"}]}],
        }})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        work.join("hooks.json"),
        json!({"hooks": {"PreToolUse": [{"matcher": "bash", "hooks": [{"type": "command", "command": "hooks/ask.py"}]}]}}).to_string(),
    )
    .unwrap();
    configure(
        home.path(),
        "[plugins.hooks-claude-code]\nconfig_path = \"hooks.json\"\n\n[plugins.hooks-codex]\nconfig_path = \"codex-hooks.json\"\nmodel = \"m-test\"\n",
    );
    let scenario = scenario(
        "use bash",
        vec![bash_call("call_1", "echo HELLO"), text("could not run it")],
    );
    let server = ReplayServer::start(&scenario, ([127, 0, 0, 1], 0).into(), None)
        .await
        .unwrap();
    let mut acp = Acp::start(command(&[], &work, home.path(), &server.url()));
    acp.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let created = acp.request(2, "session/new", json!({"cwd": work, "mcpServers": []}));
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
    // A forbidden prompt is blocked by the Codex hook: no model request is made.
    let blocked = acp.request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "a forbidden prompt"}]}),
    );
    assert!(blocked.get("result").is_some(), "{blocked}");
    let answered = acp.request(
        4,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "use bash"}]}),
    );
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    assert!(
        !acp.seen
            .iter()
            .any(|f| f["method"] == "session/request_permission"),
        "the client must not be asked under policy never"
    );
    drop(acp);
    verdicts(&work, &["codex_prompt", "codex_stop", "ask"]);
    let events = session_events(home.path());
    let ends: Vec<&Value> = events.iter().filter(|e| e["type"] == "turn/end").collect();
    assert_eq!(ends[0]["data"]["reason"]["kind"], "blocked");
    assert_eq!(ends[1]["data"]["reason"]["kind"], "completed");
    let results = texts_of(&events, "tool/result");
    // Nobody rejected it: the policy `never` (danger-full-access's default) refused it.
    assert_eq!(
        results[0].0,
        "Error: tool \"bash\" was refused by policy: it needs approval, and the approval policy is \"never\" (set by `-a never` / `[plugins.approval] policy`, whose default under sandbox mode \"danger-full-access\" is \"never\"), so no one was asked"
    );
    let asked = events
        .iter()
        .find(|e| e["type"] == "approval/asked")
        .unwrap();
    assert_eq!(asked["data"]["reason"], "a human must look");
    let decided = events
        .iter()
        .find(|e| e["type"] == "approval/decided")
        .unwrap();
    assert_eq!(decided["data"]["outcome"], "rejected");
    let messages = texts_of(&events, "user/message");
    assert!(
        messages
            .iter()
            .any(|(t, s)| t == "codex plain context" && s["plugin"] == "hooks-codex")
    );
    // One model request only: the blocked prompt never reached the model.
    assert_eq!(
        events.iter().filter(|e| e["type"] == "step/start").count(),
        2
    );
}
