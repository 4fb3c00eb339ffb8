//! Checklist items 17–30: registration and visibility.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use dsh_kernel::ScopeKind;
use dsh_tools::DefineError;
use dsh_tools::PresentationMode;
use dsh_tools::RegisterError;
use dsh_tools::RestrictError;
use dsh_tools::Tool;
use dsh_tools::ToolError;
use dsh_tools::ToolFilter;
use pretty_assertions::assert_eq;
use serde_json::Value;
use serde_json::json;

use super::support::*;

fn names(registry: &dsh_tools::ToolRegistry, scope: Option<&dsh_kernel::Scope>) -> Vec<String> {
    registry
        .schemas(scope)
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect()
}

fn allow(names: &[&str]) -> ToolFilter {
    ToolFilter {
        allow: Some(names.iter().map(|n| n.to_string()).collect()),
        deny: None,
    }
}

fn deny(names: &[&str]) -> ToolFilter {
    ToolFilter {
        allow: None,
        deny: Some(names.iter().map(|n| n.to_string()).collect()),
    }
}

#[test]
fn item_17_missing_output_unsupported_output_schema_and_bad_timeout_fail_synchronously() {
    let missing = Tool::builder("no-output")
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(json!(1)) })
        .build();
    assert_eq!(
        missing.unwrap_err().to_string(),
        "tool \"no-output\" must declare output { schema, render, presentationMeta? }"
    );
    let unsupported = Tool::builder("bad-schema")
        .raw_output(json!({"type":"string","pattern":"x"}), |_, _| Ok(vec![]))
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(json!("x")) })
        .build();
    match unsupported {
        Err(DefineError::Schema(err)) => {
            assert!(err.to_string().starts_with("unsupported JSON schema: "))
        }
        other => panic!("expected a schema error, got {other:?}"),
    }
    let timeout = content_fixture("slow")
        .timeout_ms(0)
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(json!([])) })
        .build();
    assert_eq!(
        timeout.unwrap_err().to_string(),
        "defineTool(slow): timeoutMs must be a positive finite number"
    );
    let ok = content_fixture("fine")
        .timeout_ms(5)
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(json!([])) })
        .build();
    assert_eq!(ok.unwrap().timeout_ms(), Some(5));
}

#[test]
fn item_18_run_code_is_reserved_in_every_mode_and_scope() {
    let (root, registry) = setup();
    let expected = "tool name \"run_code\" is reserved for the Code Mode presentation transport and cannot be registered or shadowed";
    assert_eq!(
        registry
            .register(&root, text_tool("run_code", "x"))
            .unwrap_err()
            .to_string(),
        expected
    );
    let (scope, _agent) = agent(&root, "a");
    registry.present_as(&scope, PresentationMode::Code).unwrap();
    assert_eq!(
        registry
            .register(&scope, text_tool("run_code", "x"))
            .unwrap_err(),
        RegisterError::Reserved
    );
}

#[test]
fn item_19_duplicates_in_one_layer_fail_and_the_global_message_points_to_agent_ctx() {
    let (root, registry) = setup();
    registry.register(&root, text_tool("echo", "a")).unwrap();
    assert_eq!(
        registry
            .register(&root, text_tool("echo", "b"))
            .unwrap_err()
            .to_string(),
        "tool \"echo\" is already registered (for a per-agent variant, register through that agent's `agent.ctx` instead)"
    );
    let (scope, _agent) = agent(&root, "a");
    registry.register(&scope, text_tool("mine", "a")).unwrap();
    assert_eq!(
        registry
            .register(&scope, text_tool("mine", "b"))
            .unwrap_err()
            .to_string(),
        "tool \"mine\" is already registered in this scope"
    );
    // A different layer may shadow.
    registry
        .register(&scope, text_tool("echo", "scoped"))
        .unwrap();
}

#[tokio::test]
async fn item_20_a_scoped_tool_is_visible_and_executable_only_for_its_agent_and_descendants() {
    let (root, registry) = setup();
    let (scope, mine) = agent(&root, "a");
    let (_other_scope, other) = agent(&root, "b");
    let (_child_scope, child) = agent(&scope, "a-child");
    registry.register(&scope, text_tool("mine", "ok")).unwrap();
    assert_eq!(
        text(&registry.execute(call_as("mine", json!({}), &mine)).await),
        "ok"
    );
    assert_eq!(
        text(&registry.execute(call_as("mine", json!({}), &child)).await),
        "ok"
    );
    let foreign = registry.execute(call_as("mine", json!({}), &other)).await;
    assert_eq!(text(&foreign), "Error: unknown tool \"mine\"");
    assert_eq!(foreign.error_code(), Some("UNKNOWN_TOOL"));
    assert_eq!(
        text(&registry.execute(call("mine", json!({}))).await),
        "Error: unknown tool \"mine\""
    );
    assert!(names(&registry, Some(other.scope())).is_empty());
    assert!(names(&registry, None).is_empty());
}

#[tokio::test]
async fn item_21_a_scoped_registration_shadows_a_global_in_either_order() {
    let (root, registry) = setup();
    let (a_scope, a) = agent(&root, "a");
    let (b_scope, b) = agent(&root, "b");
    // global first, then scoped
    registry
        .register(&root, text_tool("echo", "global"))
        .unwrap();
    registry
        .register(&a_scope, text_tool("echo", "scoped-a"))
        .unwrap();
    // scoped first, then global (other name)
    registry
        .register(&b_scope, text_tool("read", "scoped-b"))
        .unwrap();
    registry
        .register(&root, text_tool("read", "global-read"))
        .unwrap();
    assert_eq!(names(&registry, Some(&a_scope)), vec!["echo", "read"]);
    assert_eq!(names(&registry, Some(&b_scope)), vec!["echo", "read"]);
    assert_eq!(
        text(&registry.execute(call_as("echo", json!({}), &a)).await),
        "scoped-a"
    );
    assert_eq!(
        text(&registry.execute(call_as("read", json!({}), &b)).await),
        "scoped-b"
    );
    assert_eq!(
        text(&registry.execute(call_as("read", json!({}), &a)).await),
        "global-read"
    );
    assert_eq!(
        text(&registry.execute(call("echo", json!({}))).await),
        "global"
    );
}

#[tokio::test]
async fn item_22_disposers_and_scope_disposal_remove_every_contribution() {
    let (root, registry) = setup();
    let disposer = registry.register(&root, text_tool("echo", "x")).unwrap();
    disposer.dispose();
    disposer.dispose();
    assert!(registry.get("echo", None).is_none());
    registry
        .register(&root, text_tool("echo", "again"))
        .unwrap();

    let (scope, a) = agent(&root, "a");
    registry.register(&scope, text_tool("mine", "m")).unwrap();
    registry.restrict(&scope, deny(&["echo"])).unwrap();
    registry.guard(&scope, |_| Some("guarded".into()));
    registry.present_as(&scope, PresentationMode::Both).unwrap();
    assert_eq!(names(&registry, Some(&scope)), vec!["mine"]);
    scope.dispose();
    assert_eq!(names(&registry, Some(&scope)), vec!["echo"]);
    assert_eq!(registry.mode_for(Some(&scope)), PresentationMode::Native);
    // The guard is gone too: a call naming the (now global-only) tool runs.
    assert_eq!(
        text(&registry.execute(call_as("echo", json!({}), &a)).await),
        "again"
    );
}

#[test]
fn item_23_change_is_emitted_for_register_unregister_restrict_and_present_as_but_not_guard() {
    let (root, registry) = setup();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    registry.on_change(&root, move || {
        seen.fetch_add(1, Ordering::SeqCst);
        Ok(())
    });
    let disposer = registry.register(&root, text_tool("echo", "x")).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
    let (scope, _a) = agent(&root, "a");
    let restriction = registry.restrict(&scope, deny(&["echo"])).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 2);
    let mode = registry.present_as(&scope, PresentationMode::Both).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 3);
    registry.guard(&scope, |_| None);
    assert_eq!(count.load(Ordering::SeqCst), 3);
    restriction.dispose();
    mode.dispose();
    disposer.dispose();
    assert_eq!(count.load(Ordering::SeqCst), 6);
}

#[test]
fn item_24_a_failing_change_listener_rolls_the_registration_back() {
    let (root, registry) = setup();
    let plugin = root.child(ScopeKind::Plugin, "listener").unwrap();
    registry.on_change(&plugin, || Err(ToolError::new("listener exploded")));
    let err = registry
        .register(&root, text_tool("echo", "x"))
        .unwrap_err();
    assert_eq!(err.to_string(), "listener exploded");
    assert!(registry.get("echo", None).is_none());
    plugin.dispose();
    registry.register(&root, text_tool("echo", "x")).unwrap();
    assert_eq!(names(&registry, None), vec!["echo"]);
}

#[test]
fn item_25_schemas_are_exactly_three_keys_and_detached() {
    let (root, registry) = setup();
    let def = content_fixture("echo")
        .raw_parameters(json!({"type":"object","properties":{"text":{"type":"string"}}}))
        .timeout_ms(10)
        .concurrency_safe(|_| true)
        .present_call(|_| None)
        .finalize_content(|_, _| Ok(None))
        .presentation_meta(|_, _| Ok(json!({})))
        .run(|_a: Value, _r| async { Ok::<_, ToolError>(json!([])) })
        .build()
        .unwrap();
    registry.register(&root, def).unwrap();
    let mut schemas = registry.schemas(None).unwrap();
    let as_json = serde_json::to_value(&schemas[0]).unwrap();
    let keys: Vec<&String> = as_json.as_object().unwrap().keys().collect();
    assert_eq!(keys, vec!["name", "description", "parameters"]);
    schemas[0].parameters["properties"]["text"]["type"] = json!("number");
    assert_eq!(
        registry.schemas(None).unwrap()[0].parameters["properties"]["text"]["type"],
        json!("string")
    );
}

#[test]
fn item_26_get_returns_the_registered_definition_itself_and_nothing_when_hidden() {
    let (root, registry) = setup();
    let def = Arc::new(text_tool("echo", "x"));
    registry.register_arc(&root, def.clone()).unwrap();
    assert!(Arc::ptr_eq(&registry.get("echo", None).unwrap(), &def));
    assert!(registry.get("nope", None).is_none());
    let (scope, _a) = agent(&root, "a");
    registry.restrict(&scope, deny(&["echo"])).unwrap();
    assert!(registry.get("echo", Some(&scope)).is_none());
    assert!(registry.get("run_code", None).is_none());
}

#[test]
fn item_27_restrict_validates_its_context_and_names() {
    let (root, registry) = setup();
    registry.register(&root, text_tool("b", "x")).unwrap();
    registry.register(&root, text_tool("a", "x")).unwrap();
    assert_eq!(
        registry
            .restrict(&root, deny(&["a"]))
            .unwrap_err()
            .to_string(),
        "tools.restrict() requires a scoped context (agent.ctx): a context-global restriction would mask every agent — deny the tool for the intended agent instead"
    );
    let (scope, _a) = agent(&root, "s");
    assert_eq!(
        registry
            .restrict(&scope, ToolFilter::default())
            .unwrap_err()
            .to_string(),
        "tools.restrict({}) is a no-op: pass `allow` and/or `deny` (an empty filter is almost always a materialized-empty-config bug)"
    );
    assert_eq!(
        registry.restrict(&scope, deny(&["run_code"])).unwrap_err(),
        RestrictError::Reserved
    );
    assert_eq!(
        registry
            .restrict(&scope, deny(&["run_code"]))
            .unwrap_err()
            .to_string(),
        "tools.restrict() cannot name reserved Code Mode presentation transport \"run_code\"; restrict end-capability tools instead"
    );
    registry.register(&scope, text_tool("own", "x")).unwrap();
    assert_eq!(
        registry
            .restrict(&scope, allow(&["own"]))
            .unwrap_err()
            .to_string(),
        "tools.restrict() names unknown global tool \"own\"; known global tools: a, b"
    );
    assert_eq!(
        registry
            .restrict(&scope, deny(&["x", "y"]))
            .unwrap_err()
            .to_string(),
        "tools.restrict() names unknown global tools \"x\", \"y\"; known global tools: a, b"
    );
    let bare = dsh_kernel::Scope::root();
    let registry2 = dsh_tools::ToolRegistry::new(Default::default());
    let (scope2, _) = agent(&bare, "t");
    assert_eq!(
        registry2
            .restrict(&scope2, deny(&["x"]))
            .unwrap_err()
            .to_string(),
        "tools.restrict() names unknown global tool \"x\"; known global tools: (none)"
    );
    // An empty allow list is legal and hides every inherited tool.
    registry.restrict(&scope, allow(&[])).unwrap();
    assert_eq!(names(&registry, Some(&scope)), vec!["own"]);
}

#[test]
fn item_28_restrictions_intersect_lift_independently_and_are_compiled_at_call_time() {
    let (root, registry) = setup();
    for name in ["a", "b", "c"] {
        registry.register(&root, text_tool(name, "x")).unwrap();
    }
    let (scope, _a) = agent(&root, "s");
    let mut list = vec!["a".to_owned(), "b".to_owned()];
    let first = registry
        .restrict(
            &scope,
            ToolFilter {
                allow: Some(list.clone()),
                deny: None,
            },
        )
        .unwrap();
    list.push("c".to_owned()); // later mutation of the caller's list has no effect
    let second = registry.restrict(&scope, deny(&["a"])).unwrap();
    assert_eq!(names(&registry, Some(&scope)), vec!["b"]);
    first.dispose();
    assert_eq!(names(&registry, Some(&scope)), vec!["b", "c"]);
    second.dispose();
    assert_eq!(names(&registry, Some(&scope)), vec!["a", "b", "c"]);
    assert_eq!(list.len(), 3);
}

#[test]
fn item_29_deny_admits_later_globals_allow_excludes_them() {
    let (root, registry) = setup();
    registry.register(&root, text_tool("a", "x")).unwrap();
    let (deny_scope, _) = agent(&root, "d");
    let (allow_scope, _) = agent(&root, "al");
    registry.restrict(&deny_scope, deny(&["a"])).unwrap();
    registry.restrict(&allow_scope, allow(&["a"])).unwrap();
    registry.register(&root, text_tool("later", "x")).unwrap();
    assert_eq!(names(&registry, Some(&deny_scope)), vec!["later"]);
    assert_eq!(names(&registry, Some(&allow_scope)), vec!["a"]);
    registry
        .register(&allow_scope, text_tool("own-later", "x"))
        .unwrap();
    assert_eq!(names(&registry, Some(&allow_scope)), vec!["a", "own-later"]);
}

#[test]
fn item_30_own_tools_are_exempt_and_ancestor_restrictions_reach_descendants() {
    let (root, registry) = setup();
    registry.register(&root, text_tool("g1", "x")).unwrap();
    registry.register(&root, text_tool("g2", "x")).unwrap();
    let (parent, _) = agent(&root, "parent");
    registry.register(&parent, text_tool("p", "x")).unwrap();
    let (child, _) = agent(&parent, "child");
    registry.register(&child, text_tool("own", "x")).unwrap();
    registry.restrict(&child, allow(&["g1"])).unwrap();
    // child's allow filters global AND ancestor tools, never its own
    assert_eq!(names(&registry, Some(&child)), vec!["g1", "own"]);
    assert_eq!(names(&registry, Some(&parent)), vec!["g1", "g2", "p"]);
    // an ancestor's restriction applies to every descendant
    registry.restrict(&parent, deny(&["g1"])).unwrap();
    assert_eq!(names(&registry, Some(&child)), vec!["own"]);
    assert_eq!(names(&registry, Some(&parent)), vec!["g2", "p"]);
}

#[test]
fn a_narrowing_covers_own_tools_too_names_the_unknown_freely_and_lifts() {
    let (root, registry) = setup();
    registry.register(&root, text_tool("g1", "x")).unwrap();
    registry.register(&root, text_tool("g2", "x")).unwrap();
    let (agent_scope, _) = agent(&root, "agent");
    let piece = agent_scope.child(ScopeKind::Plugin, "preset").unwrap();
    registry.register(&piece, text_tool("own", "x")).unwrap();
    registry.register(&piece, text_tool("own2", "x")).unwrap();
    let lift = registry
        .narrow(&piece, allow(&["g1", "own", "not-here"]))
        .unwrap();
    assert_eq!(names(&registry, Some(&agent_scope)), vec!["g1", "own"]);
    // Hidden means not callable either.
    assert!(registry.get("own2", Some(&agent_scope)).is_none());
    assert!(registry.get("g2", Some(&agent_scope)).is_none());
    assert!(registry.get("own", Some(&agent_scope)).is_some());
    // Other agents are untouched.
    let (other, _) = agent(&root, "other");
    assert_eq!(names(&registry, Some(&other)), vec!["g1", "g2"]);
    lift.dispose();
    assert_eq!(
        names(&registry, Some(&agent_scope)),
        vec!["g1", "g2", "own", "own2"]
    );
    registry.narrow(&piece, deny(&["own"])).unwrap();
    assert_eq!(
        names(&registry, Some(&agent_scope)),
        vec!["g1", "g2", "own2"]
    );
    assert!(matches!(
        registry.narrow(&root, deny(&["g1"])),
        Err(RestrictError::Unscoped)
    ));
    assert!(matches!(
        registry.narrow(&piece, deny(&["run_code"])),
        Err(RestrictError::Reserved)
    ));
}
