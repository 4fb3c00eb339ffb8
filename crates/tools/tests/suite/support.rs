//! Shared fixtures: a registry on a kernel root, test agents, content-fixture tools.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use dsh_kernel::Scope;
use dsh_kernel::ScopeKind;
use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_tools::AgentGone;
use dsh_tools::AgentHandle;
use dsh_tools::CancellationToken;
use dsh_tools::RegistryConfig;
use dsh_tools::Tool;
use dsh_tools::ToolBuilder;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use serde_json::Value;
use serde_json::json;

pub struct TestAgent {
    id: String,
    scope: Scope,
    pub injected: Mutex<Vec<Message>>,
}

impl AgentHandle for TestAgent {
    fn id(&self) -> &str {
        &self.id
    }
    fn scope(&self) -> &Scope {
        &self.scope
    }
    fn inject(&self, message: Message) -> Result<(), AgentGone> {
        if self.scope.is_disposed() {
            return Err(AgentGone);
        }
        self.injected.lock().unwrap().push(message);
        Ok(())
    }
}

/// An agent scope under `parent` and its handle.
pub fn agent(parent: &Scope, name: &str) -> (Scope, Arc<dyn AgentHandle>) {
    let scope = parent.child(ScopeKind::Agent, name).unwrap();
    let handle: Arc<dyn AgentHandle> = Arc::new(TestAgent {
        id: name.to_owned(),
        scope: scope.clone(),
        injected: Mutex::new(Vec::new()),
    });
    (scope, handle)
}

pub fn setup() -> (Scope, Arc<ToolRegistry>) {
    let root = Scope::root();
    let registry = ToolRegistry::install(&root, RegistryConfig::default()).unwrap();
    (root, registry)
}

/// Renders a value that is an array of content blocks as those blocks.
pub fn blocks_of(value: &Value) -> Result<Vec<ContentBlock>, ToolError> {
    let items = value
        .as_array()
        .ok_or("content fixture value must be an array")?;
    items
        .iter()
        .map(|v| ContentBlock::from_value(v).ok_or_else(|| ToolError::new("not a block")))
        .collect()
}

/// `defineContentToolFixture`: output `{type:array, items:{}}`, content = value.
pub fn content_fixture(name: &str) -> ToolBuilder<Value> {
    Tool::builder(name)
        .description(format!("{name} fixture"))
        .raw_output(json!({"type":"array","items":{}}), |_, v| blocks_of(v))
}

pub fn text_value(text: &str) -> Value {
    json!([{"type":"text","text": text}])
}

/// A fixture tool returning `[text]`.
pub fn text_tool(name: &str, text: &str) -> ToolDefinition {
    let value = text_value(text);
    content_fixture(name)
        .run(move |_args: Value, _run| {
            let value = value.clone();
            async move { Ok::<_, ToolError>(value) }
        })
        .build()
        .unwrap()
}

/// A fixture tool counting its body runs.
pub fn counting_tool(name: &str, counter: Arc<AtomicUsize>) -> ToolDefinition {
    content_fixture(name)
        .run(move |_args: Value, _run| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, ToolError>(text_value("ran")) }
        })
        .build()
        .unwrap()
}

/// A string-output tool: value is a string, content `[text value]`.
pub fn string_tool(name: &str) -> ToolBuilder<Value> {
    Tool::builder(name)
        .description("string output")
        .raw_output(json!({"type":"string"}), |_, v| {
            Ok(vec![ContentBlock::text(v.as_str().unwrap_or_default())])
        })
}

pub fn call(name: &str, args: Value) -> ToolCallInput {
    ToolCallInput::new("c1", name, args, CancellationToken::new())
}

pub fn call_as(name: &str, args: Value, agent: &Arc<dyn AgentHandle>) -> ToolCallInput {
    call(name, args).agent(agent.clone())
}

pub fn text(result: &Arc<dsh_tools::ToolResult>) -> String {
    dsh_protocol::text_of(&result.content)
}

/// A shared event log for ordering assertions.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn push(&self, entry: impl Into<String>) {
        self.0.lock().unwrap().push(entry.into());
    }
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

pub fn user(text: &str) -> Message {
    Message::user_text(text)
}

pub fn texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| dsh_protocol::text_of(&m.content))
        .collect()
}
