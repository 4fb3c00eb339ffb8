//! The seed's HMR test: a kernel plugin registers a tool and a hook; disposing its scope removes
//! both, re-applying registers them again, and an in-flight call still ends in one result.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use dsh_kernel::Plugin;
use dsh_kernel::PluginError;
use dsh_kernel::Scope;
use dsh_kernel::mount;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use pretty_assertions::assert_eq;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;
use tokio::sync::Notify;

use super::support::*;

#[derive(Deserialize)]
struct Config {
    greeting: String,
}

struct Greeter {
    hook_runs: Arc<AtomicUsize>,
    started: Arc<Notify>,
    release: Arc<Notify>,
}

impl Plugin for Greeter {
    type Config = Config;
    fn name(&self) -> &str {
        "greeter"
    }
    fn apply(&self, ctx: &Scope, config: Config) -> Result<(), PluginError> {
        let tools = ctx
            .service::<ToolRegistry>()
            .ok_or_else(|| PluginError::msg("tools service missing"))?;
        let greeting = config.greeting;
        let (started, release) = (self.started.clone(), self.release.clone());
        let def = content_fixture("greet")
            .run(move |args: Value, _run| {
                let text = format!("{greeting}, {}", args["who"].as_str().unwrap_or("nobody"));
                let (started, release) = (started.clone(), release.clone());
                let slow = args["slow"] == json!(true);
                async move {
                    if slow {
                        started.notify_one();
                        release.notified().await;
                    }
                    Ok::<_, ToolError>(text_value(&text))
                }
            })
            .build()
            .map_err(PluginError::other)?;
        tools.register(ctx, def).map_err(PluginError::other)?;
        let runs = self.hook_runs.clone();
        tools.pre_execute().register(ctx, move |exec, next| {
            runs.fetch_add(1, Ordering::SeqCst);
            next.run(exec)
        });
        Ok(())
    }
}

#[tokio::test]
async fn plugin_tool_and_hook_come_and_go_with_the_plugin_scope() {
    let (root, registry) = setup();
    let plugin = Arc::new(Greeter {
        hook_runs: Arc::default(),
        started: Arc::default(),
        release: Arc::default(),
    });
    let mounted = mount(&root, plugin.clone(), json!({"greeting": "hello"})).unwrap();
    assert_eq!(
        text(&registry.execute(call("greet", json!({"who":"ada"}))).await),
        "hello, ada"
    );
    assert_eq!(plugin.hook_runs.load(Ordering::SeqCst), 1);
    assert_eq!(registry.pre_execute().len(), 1);

    // hot reload: dispose + apply with a new config, no trace of the old instance
    mounted.reapply(json!({"greeting": "hi"})).unwrap();
    assert_eq!(registry.schemas(None).unwrap().len(), 1);
    assert_eq!(registry.pre_execute().len(), 1);
    assert_eq!(
        text(&registry.execute(call("greet", json!({"who":"ada"}))).await),
        "hi, ada"
    );
    assert_eq!(plugin.hook_runs.load(Ordering::SeqCst), 2);

    // a call in flight when the scope is disposed still ends in exactly one result
    let results = Arc::new(AtomicUsize::new(0));
    let r = results.clone();
    registry.results().register(&root, move |_| {
        r.fetch_add(1, Ordering::SeqCst);
        Ok(())
    });
    let reg = registry.clone();
    let task = tokio::spawn(async move {
        reg.execute(call("greet", json!({"who":"bob","slow":true})))
            .await
    });
    plugin.started.notified().await;
    mounted.unmount();
    assert!(registry.get("greet", None).is_none());
    assert_eq!(registry.pre_execute().len(), 0);
    plugin.release.notify_one();
    let in_flight = task.await.unwrap();
    assert_eq!(text(&in_flight), "hi, bob");
    assert_eq!(results.load(Ordering::SeqCst), 1);

    // after disposal the tool is unknown and the hook no longer runs
    let gone = registry.execute(call("greet", json!({}))).await;
    assert_eq!(text(&gone), "Error: unknown tool \"greet\"");
    assert_eq!(plugin.hook_runs.load(Ordering::SeqCst), 3);

    // re-applying registers both again
    let _again = mount(&root, plugin.clone(), json!({"greeting": "welcome back"})).unwrap();
    assert_eq!(
        text(&registry.execute(call("greet", json!({"who":"ada"}))).await),
        "welcome back, ada"
    );
    assert_eq!(plugin.hook_runs.load(Ordering::SeqCst), 4);
}
