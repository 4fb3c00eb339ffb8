//! Event kinds beyond the core vocabulary belong to the plugins that declare them
//! (`HostPlugin::EVENT_KINDS`). Reading a stored log never depends on them: an unknown kind is
//! kept as it is. Resuming or forking one does (§1.10: a non-ignorable kind nobody declares is
//! refused), and appending an undeclared kind to an attached log is caught in debug builds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use dsh_host::Config;
use dsh_host::Host;
use dsh_host::HostError;
use dsh_host::HostOptions;
use dsh_host::Layer;
use dsh_host::NewSession;
use dsh_session::CreateOptions;
use dsh_session::JsonlStore;
use serde_json::json;

fn host(home: &Path, cwd: &Path) -> Host {
    let mut config = Config::empty(home.to_path_buf(), cwd.to_path_buf());
    // The goal plugin is off: its kinds are still this build's.
    let table =
        json!({"plugins": {"session-title": {"enabled": false}, "goal": {"enabled": false}}});
    if let serde_json::Value::Object(table) = table {
        config.merge(Layer::User, table, None);
    }
    let mut options = HostOptions::new(config);
    options.adapter = Some(dsh_agent::scripted::ScriptedAdapter::new("deepseek"));
    Host::build(options).unwrap()
}

/// A stored session holding one event of `kind`, written without a host.
async fn stored(home: &Path, kind: &str, ignorable: bool) -> String {
    let store = JsonlStore::new(home.to_path_buf());
    let log = store.create(CreateOptions::default()).unwrap();
    if ignorable {
        log.append_ignorable(kind, json!({"n": 1})).unwrap();
    } else {
        log.append(kind, json!({"n": 1}), None).unwrap();
    }
    log.sync().await.unwrap();
    log.id().to_owned()
}

#[tokio::test]
async fn an_undeclared_kind_is_read_but_not_resumed() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let id = stored(home.path(), "mystery/event", false).await;
    let host = host(home.path(), cwd.path());
    let read = host.sessions().read(&id).unwrap();
    assert_eq!(read.events[0].kind, "mystery/event");
    match host.sessions().load(&id) {
        Err(HostError::UnknownEventType { session, seq, kind }) => {
            assert_eq!(
                (session.as_str(), seq, kind.as_str()),
                (id.as_str(), 0, "mystery/event")
            );
        }
        Err(other) => panic!("resumed with {other}"),
        Ok(_) => panic!("resumed a log holding an undeclared kind"),
    }
    assert!(matches!(
        host.sessions().fork(&id),
        Err(HostError::UnknownEventType { .. })
    ));
}

#[tokio::test]
async fn an_ignorable_or_declared_kind_resumes_even_with_its_plugin_off() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let ignorable = stored(home.path(), "mystery/event", true).await;
    let declared = stored(home.path(), "goal/change", false).await;
    let host = host(home.path(), cwd.path());
    for id in [ignorable, declared] {
        let agent = host.sessions().load(&id).unwrap();
        agent.dispose().await;
    }
}

#[cfg(debug_assertions)]
#[tokio::test]
async fn appending_an_undeclared_kind_is_caught_in_debug_builds() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let host = host(home.path(), cwd.path());
    let agent = host
        .sessions()
        .create(NewSession {
            id: None,
            cwd: cwd.path().to_path_buf(),
        })
        .unwrap();
    let log = agent.log().clone();
    // Declared (even by a plugin that is off), core and ignorable kinds pass.
    log.append("goal/change", json!({"n": 1}), None).unwrap();
    log.append_ignorable("typo/kind", json!({})).unwrap();
    let typo = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        log.append("goal/chnage", json!({}), None)
    }));
    let message = typo.expect_err("an undeclared kind was appended silently");
    let text = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(
        text.contains("\"goal/chnage\"") && text.contains("EVENT_KINDS"),
        "{text}"
    );
    agent.dispose().await;
}
