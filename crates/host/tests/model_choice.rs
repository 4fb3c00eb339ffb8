//! A client's model switch (ACP's `model` config option) is durable: logged as
//! `model/selected`, it is what the next request asks for, and resume and fork keep it;
//! selecting the configured model again returns to it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use dsh_agent::AgentHandle;
use dsh_agent::scripted::ScriptedAdapter;
use dsh_agent::scripted::text_response;
use dsh_host::Config;
use dsh_host::Host;
use dsh_host::HostOptions;
use dsh_host::Layer;
use dsh_host::ModelSelected;
use dsh_host::NewSession;
use dsh_protocol::Message;
use serde_json::json;

struct Rig {
    host: Host,
    adapter: Arc<ScriptedAdapter>,
    _home: tempfile::TempDir,
    cwd: tempfile::TempDir,
}

impl Rig {
    fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let mut config = Config::empty(home.path().to_path_buf(), cwd.path().to_path_buf());
        let table = json!({
            "model": {"name": "configured-model"},
            "plugins": {"session-title": {"enabled": false}},
        });
        if let serde_json::Value::Object(table) = table {
            config.merge(Layer::User, table, None);
        }
        let adapter = ScriptedAdapter::new("deepseek");
        let mut options = HostOptions::new(config);
        // The default JSONL store under the home: resume reads what was written.
        options.adapter = Some(adapter.clone());
        Self {
            host: Host::build(options).unwrap(),
            adapter,
            _home: home,
            cwd,
        }
    }

    /// Runs one prompt; the model its request asked for.
    async fn ask(&self, agent: &AgentHandle) -> String {
        self.adapter.push_chunks(text_response("ok"));
        agent.followup(Message::user_text("hi")).unwrap();
        tokio::time::timeout(Duration::from_secs(20), agent.when_idle())
            .await
            .unwrap();
        self.adapter.requests().last().unwrap().model.clone()
    }
}

/// `load`, once the disposed agent's last holder of the log (its actor task) has let go.
async fn reopen(rig: &Rig, id: &str) -> AgentHandle {
    for _ in 0..500 {
        match rig.host.sessions().load(id) {
            Err(dsh_host::HostError::Session(dsh_session::SessionError::AlreadyExists {
                ..
            })) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            other => return other.unwrap(),
        }
    }
    panic!("session {id} stays open after its agent was disposed");
}

fn selected(agent: &AgentHandle) -> Vec<String> {
    agent
        .log()
        .events()
        .unwrap()
        .iter()
        .filter_map(|e| e.decode::<ModelSelected>())
        .map(|d| d.unwrap().model)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selected_model_is_logged_used_and_kept_by_resume_and_fork() {
    let rig = Rig::new();
    let sessions = rig.host.sessions();
    let agent = sessions
        .create(NewSession {
            id: None,
            cwd: rig.cwd.path().to_path_buf(),
        })
        .unwrap();
    assert_eq!(rig.ask(&agent).await, "configured-model");
    sessions.set_model(&agent, "other-model").unwrap();
    assert_eq!(sessions.current_model(&agent), "other-model");
    assert_eq!(rig.ask(&agent).await, "other-model");
    // The same choice again logs nothing more.
    sessions.set_model(&agent, "other-model").unwrap();
    assert_eq!(selected(&agent), ["other-model"]);
    let id = agent.id().to_owned();
    agent.dispose().await;
    drop(agent);

    let resumed = reopen(&rig, &id).await;
    assert_eq!(sessions.current_model(&resumed), "other-model");
    assert_eq!(rig.ask(&resumed).await, "other-model");
    // Back to the configured model: logged too, so a later resume follows the configuration.
    sessions.set_model(&resumed, "configured-model").unwrap();
    assert_eq!(rig.ask(&resumed).await, "configured-model");
    resumed.dispose().await;
    drop(resumed);
    let again = reopen(&rig, &id).await;
    assert_eq!(sessions.current_model(&again), "configured-model");
    assert_eq!(rig.ask(&again).await, "configured-model");
    assert_eq!(selected(&again), ["other-model", "configured-model"]);
    sessions.set_model(&again, "other-model").unwrap();
    again.dispose().await;
    drop(again);

    // A fork copies the log, the selection with it.
    let forked = sessions.fork(&id).unwrap();
    assert_eq!(sessions.current_model(&forked), "other-model");
    assert_eq!(rig.ask(&forked).await, "other-model");
    forked.dispose().await;
    rig.host.shutdown();
}
