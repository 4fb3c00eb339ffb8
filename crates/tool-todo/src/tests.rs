use std::sync::Arc;

use dsh_kernel::ScopeKind;
use dsh_protocol::Message;
use dsh_protocol::text_of;
use dsh_tools::AgentGone;
use dsh_tools::AgentHandle;
use dsh_tools::CancellationToken;
use dsh_tools::RegistryConfig;
use dsh_tools::ToolCallInput;
use pretty_assertions::assert_eq;

use super::*;

struct TestAgent {
    scope: Scope,
}

impl AgentHandle for TestAgent {
    fn id(&self) -> &str {
        "agent-1"
    }
    fn scope(&self) -> &Scope {
        &self.scope
    }
    fn inject(&self, _message: Message) -> Result<(), AgentGone> {
        Ok(())
    }
}

/// The `todo/write` lists the session logged.
struct Recorder(Arc<SessionContext>);

impl Recorder {
    fn lists(&self) -> Vec<Vec<Todo>> {
        self.0
            .log()
            .events()
            .unwrap()
            .iter()
            .filter_map(|event| event.decode::<TodoWrite>())
            .map(|decoded| decoded.unwrap().todos)
            .collect()
    }
}

struct Fixture {
    registry: Arc<ToolRegistry>,
    agent: Arc<TestAgent>,
    recorder: Recorder,
}

fn fixture(config: TodoConfig) -> Fixture {
    let root = Scope::root();
    let registry = ToolRegistry::new(RegistryConfig::default());
    register(&registry, &root, config).unwrap();
    let scope = root.child(ScopeKind::Agent, "agent-1").unwrap();
    let log = dsh_session::SessionLog::in_memory(dsh_session::SessionHeader::new("s", None));
    let context = Arc::new(SessionContext::new(
        log,
        "/".into(),
        None,
        dsh_plugin::Permissions::for_mode(dsh_plugin::SandboxMode::WorkspaceWrite),
    ));
    scope.provide(context.clone()).unwrap();
    let recorder = Recorder(context);
    Fixture {
        registry,
        agent: Arc::new(TestAgent { scope }),
        recorder,
    }
}

async fn call(fixture: &Fixture, arguments: Value) -> (bool, String) {
    let input = ToolCallInput::new("c1", NAME, arguments, CancellationToken::new())
        .agent(fixture.agent.clone());
    let result = fixture.registry.execute(input).await;
    (result.is_error, text_of(&result.content))
}

#[tokio::test]
async fn recorded_parallel_in_progress_list_is_accepted_and_logged() {
    let fixture = fixture(TodoConfig::default());
    let args = json!({"todos":[
        {"content":"read the code","status":"in_progress"},
        {"content":"watch the background build","status":"in_progress"},
        {"content":"write the fix","status":"pending"}]});
    assert_eq!(
        call(&fixture, args).await,
        (
            false,
            "Updated todo list: 1 pending, 2 in progress, 0 completed.".to_owned()
        )
    );
    let logged = fixture.recorder.lists();
    assert_eq!(logged.len(), 1);
    assert_eq!(
        logged[0][2],
        Todo {
            content: "write the fix".into(),
            status: TodoStatus::Pending
        }
    );
}

#[tokio::test]
async fn content_is_trimmed_and_checked_in_upstream_order() {
    let fixture = fixture(TodoConfig {
        allow_parallel_in_progress: false,
    });
    let (is_error, text) = call(
        &fixture,
        json!({"todos":[{"content":"  ","status":"pending"}]}),
    )
    .await;
    assert!(is_error);
    assert_eq!(
        text,
        "Error: invalid todo: `content` must be a non-empty string"
    );
    let dup = json!({"todos":[{"content":"write the fix","status":"pending"},{"content":" write the fix ","status":"pending"}]});
    assert_eq!(
        call(&fixture, dup).await.1,
        "Error: invalid todos: duplicate content \"write the fix\""
    );
    let two = json!({"todos":[{"content":"a","status":"in_progress"},{"content":"b","status":"in_progress"}]});
    assert_eq!(
        call(&fixture, two).await.1,
        "Error: invalid todos: at most one task may be in_progress (got 2)"
    );
    assert!(fixture.recorder.lists().is_empty());
    let empty = call(&fixture, json!({"todos": []})).await;
    assert_eq!(
        empty,
        (
            false,
            "Updated todo list: 0 pending, 0 in progress, 0 completed.".to_owned()
        )
    );
}

#[tokio::test]
async fn schema_violations_and_missing_agent_are_errors() {
    let fixture = fixture(TodoConfig::default());
    let extra = json!({"todos":[{"content":"a","status":"pending","x":1}]});
    assert_eq!(
        call(&fixture, extra).await.1,
        "Error: invalid arguments: \"todos[0].x\" is not a declared property (additionalProperties: false)"
    );
    let bad_status = json!({"todos":[{"content":"a","status":"done"}]});
    assert_eq!(
        call(&fixture, bad_status).await.1,
        "Error: invalid arguments: \"todos[0].status\" must be one of [\"pending\",\"in_progress\",\"completed\"]"
    );
    let input = ToolCallInput::new("c2", NAME, json!({"todos": []}), CancellationToken::new());
    let result = fixture.registry.execute(input).await;
    assert_eq!(
        text_of(&result.content),
        "Error: todo_write requires an owning agent session"
    );
}

#[test]
fn the_card_is_generic_with_the_list_as_input() {
    let definition = definition(TodoConfig::default()).unwrap();
    let args = json!({"todos":[{"content":"a","status":"pending"}]});
    let card = definition.present_call(&args).unwrap();
    assert_eq!(
        serde_json::to_value(card).unwrap(),
        json!({"card":"generic","title":"Update todo list","kind":"other","rawInput":[{"content":"a","status":"pending"}]})
    );
}

/// The schema with its prose removed: names, types, enums, required lists, key order.
fn shape(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, v)| !(key.as_str() == "description" && v.is_string()))
                .map(|(key, v)| (key.clone(), shape(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(shape).collect()),
        other => other.clone(),
    }
}

#[test]
fn parameter_shape_matches_the_recorded_upstream_schema() {
    let recorded: Value = serde_json::from_str(include_str!(
        "../../../../shared/conformance/acp/todo-write/upstream-tool-schemas.json"
    ))
    .unwrap();
    let tools = recorded
        .as_array()
        .cloned()
        .or_else(|| recorded["initial"].as_array().cloned())
        .unwrap();
    let upstream = tools.iter().find(|t| t["name"] == NAME).unwrap();
    assert_eq!(
        serde_json::to_string(&shape(&parameters())).unwrap(),
        serde_json::to_string(&shape(&upstream["parameters"])).unwrap()
    );
    // Our prose, not a copy of upstream's.
    assert_ne!(upstream["description"], DESCRIPTION_PARALLEL);
    assert_ne!(
        upstream["parameters"]["properties"]["todos"]["description"],
        parameters()["properties"]["todos"]["description"]
    );
}

#[test]
fn descriptions_state_the_whole_list_rule_and_the_in_progress_policy() {
    for text in [DESCRIPTION_PARALLEL, DESCRIPTION_SINGLE] {
        for fact in [
            "full list",
            "replaces",
            "`pending`",
            "`in_progress`",
            "`completed`",
        ] {
            assert!(text.contains(fact), "{fact}");
        }
    }
    assert!(DESCRIPTION_PARALLEL.contains("several at once"));
    assert!(DESCRIPTION_SINGLE.contains("exactly one task is `in_progress`"));
    assert!(!DESCRIPTION_SINGLE.contains("several at once"));
}
