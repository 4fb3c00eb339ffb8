//! Time and tmux context on the real agent loop: checklist C32–C38.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dsh_agent::Agent;
use dsh_agent::AgentConfig;
use dsh_agent::AgentHandle;
use dsh_agent::AgentHooks;
use dsh_agent::PromptConfig;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_agent::scripted::text_response;
use dsh_agent::scripted::tool_call_response;
use dsh_ambient::LocalShell;
use dsh_ambient::TimeContext;
use dsh_ambient::TimeContextConfig;
use dsh_ambient::TmuxContext;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_session::Event;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use dsh_tools::RegistryConfig;
use dsh_tools::Tool;
use dsh_tools::ToolRegistry;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

struct Rig {
    agent: AgentHandle,
    adapter: Arc<ScriptedAdapter>,
    now: Arc<AtomicI64>,
    _root: Scope,
}

const START: i64 = 1_785_498_790_000; // 2026-07-31T11:53:10Z

fn rig(time: Option<Value>, tmux: Option<(LocalShell, u64)>) -> Rig {
    let root = Scope::root();
    let tools = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    let noop = Tool::builder("noop")
        .description("does nothing")
        .raw_parameters(json!({"type": "object", "properties": {}}))
        .raw_output(json!({"type": "string"}), |_, _| {
            Ok(vec![ContentBlock::text("ok")])
        })
        .run(|_: Value, _| async { Ok::<_, dsh_tools::ToolError>("ok".to_owned()) })
        .build()
        .unwrap();
    tools.register(&root, noop).unwrap();
    let hooks = AgentHooks::install(&root).unwrap();
    let now = Arc::new(AtomicI64::new(START));
    let clock = {
        let now = now.clone();
        Arc::new(move || now.load(Ordering::SeqCst))
    };
    if let Some(config) = time {
        let config = TimeContextConfig::parse(&config).unwrap();
        TimeContext::new(config, Some(clock.clone())).install(&root, &hooks);
    }
    if let Some((shell, interval)) = tmux {
        TmuxContext::new(Arc::new(shell), interval, Some(clock.clone())).install(&root, &hooks);
    }
    let log = SessionLog::in_memory(SessionHeader::new("s", Some("/w".into())));
    {
        let now = now.clone();
        log.set_clock(Arc::new(move || now.load(Ordering::SeqCst) as u64));
    }
    let adapter = ScriptedAdapter::new("mock");
    let agent = Agent::create(AgentConfig {
        id: "s".into(),
        cwd: None,
        provider: "mock".into(),
        model: "m".into(),
        max_tokens: None,
        adapter: adapter.clone(),
        tools,
        scope: root.clone(),
        log,
        prompt: PromptConfig::default(),
        max_parallel_tool_calls: 1,
    })
    .unwrap();
    Rig {
        agent,
        adapter,
        now,
        _root: root,
    }
}

impl Rig {
    async fn send(&self, message: Message) {
        self.agent.followup(message).unwrap();
        tokio::time::timeout(Duration::from_secs(10), self.agent.when_idle())
            .await
            .unwrap();
    }

    fn messages(&self) -> Vec<Arc<Event>> {
        self.agent
            .log()
            .events()
            .unwrap()
            .iter()
            .filter(|e| e.kind == "user/message")
            .cloned()
            .collect()
    }

    fn of_plugin(&self, plugin: &str) -> Vec<String> {
        self.messages()
            .iter()
            .filter(|e| e.data["source"]["plugin"] == plugin)
            .map(|e| e.data["content"][0]["text"].as_str().unwrap().to_owned())
            .collect()
    }
}

#[tokio::test]
async fn each_step_ends_with_a_three_line_time_reading() {
    // Checklist C32, C33, C35.
    let rig = rig(Some(json!({"timeZone": "UTC"})), None);
    rig.adapter
        .push_chunks(tool_call_response("c1", "noop", "{}", None));
    rig.adapter.push_chunks(text_response("done"));
    rig.send(Message::user_text("hi")).await;
    let readings = rig.of_plugin("time-context");
    assert_eq!(readings.len(), 2);
    assert_eq!(
        readings[0],
        "Time sampled while preparing turn 1, step 1: 2026-07-31T11:53:10+00:00[UTC]\nBrowser time zone for this request: unavailable. Ask the user to clarify otherwise-unqualified dates and times.\nElapsed since the preceding model-visible message: unavailable."
    );
    assert!(readings[1].starts_with("Time sampled while preparing turn 1, step 2: "));
    assert!(readings[1].ends_with("\nElapsed since the preceding step context: 0s."));
    // Last of its batch: right after the prompt in step 1.
    let messages = rig.messages();
    assert_eq!(messages[0].data["source"]["kind"], "user");
    assert_eq!(messages[1].data["source"]["plugin"], "time-context");
    assert_eq!(
        messages[1].data["source"]["sections"][0]["name"],
        "time-context"
    );
    // A later turn measures from the latest model-visible message.
    rig.now.fetch_add(3_725_000, Ordering::SeqCst);
    rig.adapter.push_chunks(text_response("again"));
    rig.send(Message::user_text("later")).await;
    let readings = rig.of_plugin("time-context");
    assert!(
        readings[2].ends_with("Elapsed since the preceding model-visible message: 1h 2m 5s."),
        "{}",
        readings[2]
    );
}

#[tokio::test]
async fn a_refresh_interval_suppresses_readings_and_browser_zones_are_used() {
    // Checklist C36.
    let rig = rig(
        Some(json!({"timeZone": "UTC", "refreshIntervalMs": 60_000})),
        None,
    );
    rig.adapter
        .push_chunks(tool_call_response("c1", "noop", "{}", None));
    rig.adapter.push_chunks(text_response("done"));
    let prompt = Message::user(
        vec![ContentBlock::text("hi")],
        MessageSource::user()
            .with("rpcId", "r1")
            .with("clientTimeZone", "Asia/Tokyo"),
    );
    rig.send(prompt).await;
    let readings = rig.of_plugin("time-context");
    assert_eq!(readings.len(), 1, "the second step was within 60 s");
    assert!(readings[0].contains("2026-07-31T20:53:10+09:00[Asia/Tokyo]"));
    assert!(readings[0].contains(
        "\nBrowser time zone for this request: Asia/Tokyo. Interpret otherwise-unqualified dates and times in this zone.\n"
    ));
    rig.now.fetch_add(60_000, Ordering::SeqCst);
    rig.adapter.push_chunks(text_response("again"));
    let mixed = Message::user(
        vec![ContentBlock::text("x")],
        MessageSource::user()
            .with("rpcId", "r2")
            .with("clientTimeZone", "Europe/Paris"),
    );
    rig.agent
        .inject(Message::user(
            vec![ContentBlock::text("y")],
            MessageSource::user()
                .with("rpcId", "r3")
                .with("clientTimeZone", "UTC"),
        ))
        .unwrap();
    rig.send(mixed).await;
    let readings = rig.of_plugin("time-context");
    assert_eq!(readings.len(), 2);
    assert!(readings[1].contains(
        "Browser time zone for this request: mixed [\"UTC\",\"Europe/Paris\"]. Ask the user to clarify otherwise-unqualified dates and times."
    ), "{}", readings[1]);
}

/// A directory with a fake `tmux` (and `ps`) reporting a fixed pane; returns it and the
/// environment for the shell.
fn fake_tmux(window: &str) -> (tempfile::TempDir, LocalShell) {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, body: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    write("ps", "#!/bin/sh\necho ' pts/7'\n");
    write(
        "tmux",
        &format!(
            "#!/bin/sh\ncase \"$*\" in\n  *pane_tty*) echo /dev/pts/7 ;;\n  *) printf 'work\\\\t1\\\\t{window}\\\\t0\\\\t%%3\\\\t1\\\\t1\\\\tlayout\\n' ;;\nesac\n"
        ),
    );
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let shell = LocalShell {
        env: vec![("PATH".into(), path), ("TMUX_PANE".into(), "%3".into())],
    };
    (dir, shell)
}

#[tokio::test]
async fn tmux_location_comes_first_on_step_one_and_only_when_changed() {
    // Checklist C37, C38.
    let (_dir, shell) = fake_tmux("editor");
    let rig = rig(None, Some((shell, 0)));
    rig.adapter
        .push_chunks(tool_call_response("c1", "noop", "{}", None));
    rig.adapter.push_chunks(text_response("done"));
    rig.send(Message::user_text("hi")).await;
    let messages = rig.messages();
    assert_eq!(messages[0].data["source"]["plugin"], "tmux-context");
    assert_eq!(
        messages[0].data["content"][0]["text"],
        "tmux location (turn 1):\nsession work, window 1 \"editor\", pane 0 %3\nwindow active=1, pane active=1, layout layout"
    );
    assert_eq!(messages[1].data["source"]["kind"], "user");
    assert_eq!(rig.of_plugin("tmux-context").len(), 1, "not on step 2");
    rig.adapter.push_chunks(text_response("again"));
    rig.send(Message::user_text("same place")).await;
    assert_eq!(rig.of_plugin("tmux-context").len(), 1, "unchanged state");
}

#[tokio::test]
async fn outside_tmux_nothing_is_read() {
    let shell = LocalShell {
        env: vec![("TMUX_PANE".into(), String::new())],
    };
    let rig = rig(None, Some((shell, 0)));
    rig.adapter.push_chunks(text_response("ok"));
    rig.send(Message::user_text("hi")).await;
    assert!(rig.of_plugin("tmux-context").is_empty());
}
