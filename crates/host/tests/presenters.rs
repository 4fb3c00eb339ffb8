//! Plugins present their own events: with the default plugin table mounted, the host's
//! presenter registry turns every event a person should see into its display items, each
//! registered by the plugin that owns the event (no front-end decodes any of them).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use dsh_agent::scripted::ScriptedAdapter;
use dsh_host::Config;
use dsh_host::Host;
use dsh_host::HostOptions;
use dsh_host::Layer;
use dsh_plugin::transcript::Event;
use dsh_plugin::transcript::Item;
use serde_json::Value;
use serde_json::json;

fn item_name(item: &Item) -> &'static str {
    match item {
        Item::ApprovalAsked(_) => "approval asked",
        Item::ApprovalSettled(_) => "approval settled",
        Item::Child(_) => "child",
        Item::Mode(_) => "mode",
        Item::Notice(_) => "notice",
        Item::Plan(_) => "plan",
        _ => "other",
    }
}

#[tokio::test]
async fn the_default_plugins_present_the_events_they_own() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let mut config = Config::empty(home.path().to_path_buf(), cwd.path().to_path_buf());
    let table = json!({"plugins": {"session-title": {"enabled": false}}});
    let Value::Object(table) = table else {
        unreachable!()
    };
    config.merge(Layer::User, table, None);
    let mut options = HostOptions::new(config);
    options.adapter = Some(ScriptedAdapter::new("deepseek"));
    let host = Host::build(options).unwrap();
    let presenters = host.sessions().services().presenters.clone();

    let cases = [
        (
            "approval/asked",
            json!({"id": "a1", "toolName": "bash", "callId": "c1"}),
            "approval asked",
        ),
        (
            "approval/decided",
            json!({"id": "a1", "outcome": "approved"}),
            "approval settled",
        ),
        (
            "subagent/descriptor",
            json!({"version": 2, "mode": "one-shot", "provider": "spawn"}),
            "child",
        ),
        ("plan/mode", json!({"active": true}), "mode"),
        ("goal/change", json!({"operation": "clear"}), "notice"),
        (
            "todo/write",
            json!({"todos": [{"content": "ship", "status": "pending"}]}),
            "plan",
        ),
    ];
    for (kind, data, want) in cases {
        let items = presenters.present(&Event::new(kind, 1, 0, data));
        let names: Vec<&str> = items.iter().map(item_name).collect();
        assert_eq!(names, [want], "{kind} presents {items:?}");
    }
}
