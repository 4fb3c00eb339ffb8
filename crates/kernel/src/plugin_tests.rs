use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::json;

use super::*;
use crate::{HookError, Observe, ScopeKind};

/// The event: observers push their instance's greeting into it.
type Sink = Mutex<Vec<String>>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    greeting: String,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    fail: bool,
}

#[derive(Debug, Default, Deserialize)]
struct Limits {
    #[serde(default)]
    max: u32,
}

/// Registers an observer that reports its greeting, and a `String` service.
struct Greeter {
    hook: Arc<Observe<Sink>>,
}

impl Plugin for Greeter {
    type Config = Config;
    fn name(&self) -> &str {
        "greeter"
    }
    fn apply(&self, ctx: &Scope, config: Config) -> Result<(), PluginError> {
        ctx.provide(Arc::new(format!(
            "{}/{}",
            config.greeting, config.limits.max
        )))?;
        let greeting = config.greeting;
        self.hook
            .register(ctx, move |sink: &Sink| -> Result<(), HookError> {
                sink.lock().unwrap().push(greeting.clone());
                Ok(())
            });
        if config.fail {
            return Err(PluginError::msg("refusing to start"));
        }
        Ok(())
    }
}

fn setup() -> (Scope, Arc<Observe<Sink>>, Arc<Greeter>) {
    let hook = Arc::new(Observe::new("test/hook"));
    (Scope::root(), hook.clone(), Arc::new(Greeter { hook }))
}

#[test]
fn mount_applies_config_in_a_named_plugin_scope() {
    let (root, hook, plugin) = setup();
    let mounted = mount(
        &root,
        plugin,
        json!({"greeting": "hi", "limits": {"max": 3}}),
    )
    .unwrap();
    let scope = mounted.scope();
    assert_eq!((scope.name(), scope.kind()), ("greeter", ScopeKind::Plugin));
    assert_eq!(scope.parent(), Some(root.clone()));
    assert_eq!(mounted.name(), "greeter");
    assert_eq!(*root.service::<String>().unwrap(), "hi/3");
    assert_eq!(hook.len(), 1);
    mounted.unmount();
    assert!(root.service::<String>().is_none());
    assert!(hook.is_empty());
    // Reapplying after unmount mounts it again.
    mounted.reapply(json!({"greeting": "back"})).unwrap();
    assert_eq!(observed(&hook), ["back"]);
    assert_eq!(root.child_count(), 1);
}

#[test]
fn bad_config_names_the_plugin_and_the_field() {
    let (root, hook, plugin) = setup();
    let cases = [
        (
            json!({"greeting": "hi", "limits": {"max": "lots"}}),
            "plugin `greeter`: invalid config at `limits.max`: invalid type: string \"lots\", expected u32",
        ),
        (
            json!({"limits": {}}),
            "plugin `greeter`: invalid config: missing field `greeting`",
        ),
        (
            json!({"greeting": 5}),
            "plugin `greeter`: invalid config at `greeting`: invalid type: integer `5`, expected a string",
        ),
        (
            json!({"greeting": "x", "colour": 1}),
            "plugin `greeter`: invalid config at `colour`: unknown field `colour`, expected one of `greeting`, `limits`, `fail`",
        ),
    ];
    for (config, want) in cases {
        let err = mount(&root, plugin.clone(), config).err().unwrap();
        assert_eq!(err.to_string(), want);
    }
    // Nothing was created or registered.
    assert!(hook.is_empty());
    assert!(root.child_count() == 0);
}

#[test]
fn reapply_leaves_no_trace_of_the_old_instance() {
    let (root, hook, plugin) = setup();
    let mounted = mount(&root, plugin, json!({"greeting": "old"})).unwrap();
    let old_scope = mounted.scope();
    mounted.reapply(json!({"greeting": "new"})).unwrap();
    assert!(old_scope.is_disposed());
    assert_ne!(mounted.scope(), old_scope);
    assert_eq!(*root.service::<String>().unwrap(), "new/0");
    // Exactly one observer, and it is the new instance's.
    assert_eq!(hook.len(), 1);
    let seen = observed(&hook);
    assert_eq!(seen, ["new"]);
}

#[test]
fn reapply_with_bad_config_keeps_the_old_instance() {
    let (root, hook, plugin) = setup();
    let mounted = mount(&root, plugin, json!({"greeting": "old"})).unwrap();
    let err = mounted.reapply(json!({"greeting": []})).unwrap_err();
    assert!(matches!(err, PluginError::InvalidConfig { .. }));
    assert!(!mounted.scope().is_disposed());
    assert_eq!(observed(&hook), ["old"]);
}

#[test]
fn apply_failure_disposes_what_it_registered() {
    let (root, hook, plugin) = setup();
    let err = mount(
        &root,
        plugin.clone(),
        json!({"greeting": "x", "fail": true}),
    )
    .err()
    .unwrap();
    assert_eq!(
        err.to_string(),
        "plugin `greeter` failed to apply: refusing to start"
    );
    assert!(hook.is_empty());
    assert!(root.service::<String>().is_none());
    assert!(root.child_count() == 0);

    let mounted = mount(&root, plugin, json!({"greeting": "ok"})).unwrap();
    assert!(
        mounted
            .reapply(json!({"greeting": "x", "fail": true}))
            .is_err()
    );
    assert!(hook.is_empty());
    assert!(mounted.scope().is_disposed());
}

/// The greetings of the currently registered observers, in order.
fn observed(hook: &Observe<Sink>) -> Vec<String> {
    let sink = Mutex::new(Vec::new());
    hook.emit(None, &sink);
    sink.into_inner().unwrap()
}

#[test]
fn field_path_locates_nested_keys_and_closing_braces() {
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        items: Vec<Item>,
        inner: Inner,
    }
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Item {
        id: u8,
    }
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        required: bool,
    }
    let err = |v| parse_config::<Outer>("p", &v).unwrap_err().to_string();
    assert_eq!(
        err(json!({"items": [{"id": 1}, {"id": 300}], "inner": {"required": true}})),
        "plugin `p`: invalid config at `items.1.id`: invalid value: integer `300`, expected u8"
    );
    assert_eq!(
        err(json!({"items": [], "inner": {"other": 1}})),
        "plugin `p`: invalid config at `inner`: missing field `required`"
    );
    assert_eq!(
        err(json!({"inner": {"re\"q": 1}, "items": "no"})),
        "plugin `p`: invalid config at `inner`: missing field `required`"
    );
    assert_eq!(
        err(json!("x")),
        "plugin `p`: invalid config: invalid type: string \"x\", expected struct Outer"
    );
}

#[test]
fn kernel_handles_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Scope>();
    check::<crate::Disposer>();
    check::<Mounted>();
    check::<crate::Waterfall<String, String>>();
    check::<crate::Serial<String>>();
    check::<Observe<String>>();
    // `Next` is moved into the listener's future, so it only needs to be Send.
    fn send<T: Send>() {}
    send::<crate::Next<String, String>>();
}
