//! dsh as an MCP server (`dsh mcp serve`): one session's tools offered over stdio.
//!
//! `tools/list` is the session's catalog exactly as the model gets it; `tools/call` runs through
//! the registry's whole pipeline (policy, sandbox, approval) with the session as the caller, so
//! a peer can do nothing the model of that session could not. A name outside the catalog is an
//! invalid-params error; a tool failure is a result with `isError` set.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use dsh_protocol::ContentBlock;
use dsh_protocol::ToolSchema;
use dsh_tools::AgentHandle;
use dsh_tools::ToolCallInput;
use dsh_tools::ToolRegistry;
use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::ServerHandler;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::model::CallToolResponse;
use rmcp::model::CallToolResult;
use rmcp::model::Implementation;
use rmcp::model::ListToolsResult;
use rmcp::model::PaginatedRequestParams;
use rmcp::model::ServerCapabilities;
use rmcp::model::ServerConfig;
use rmcp::model::Tool;
use rmcp::service::RequestContext;
use serde_json::Value;

/// The session's model-facing catalog, read at each `tools/list` and `tools/call` (plugins can
/// add or remove tools while the server runs).
pub type Catalog = Arc<dyn Fn() -> Result<Vec<ToolSchema>, String> + Send + Sync>;

/// Why serving stopped early.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("the MCP client did not complete initialization: {0}")]
    Initialize(String),
    #[error("the MCP server task failed: {0}")]
    Task(String),
}

/// The `ServerHandler` offering one session's tools.
#[derive(Clone)]
pub struct ToolServer {
    registry: Arc<ToolRegistry>,
    agent: Arc<dyn AgentHandle>,
    catalog: Catalog,
    calls: Arc<AtomicU64>,
}

impl ToolServer {
    pub fn new(registry: Arc<ToolRegistry>, agent: Arc<dyn AgentHandle>, catalog: Catalog) -> Self {
        Self {
            registry,
            agent,
            catalog,
            calls: Arc::new(AtomicU64::new(0)),
        }
    }

    fn schemas(&self) -> Result<Vec<ToolSchema>, ErrorData> {
        (self.catalog)().map_err(|error| ErrorData::internal_error(error, None))
    }

    /// Serves on this process's stdin/stdout until the client closes the stream.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|error| ServeError::Initialize(error.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|error| ServeError::Task(error.to_string()))?;
        Ok(())
    }
}

/// A dsh schema as an MCP tool. Tool parameters are always JSON objects; anything else is
/// offered as an empty object schema rather than dropped.
fn mcp_tool(schema: ToolSchema) -> Tool {
    let input_schema = match schema.parameters {
        Value::Object(object) => object,
        _ => {
            let mut object = serde_json::Map::new();
            object.insert("type".to_owned(), Value::String("object".to_owned()));
            object
        }
    };
    Tool::new(schema.name, schema.description, Arc::new(input_schema))
}

/// The text a peer gets: the result's text blocks, or the failure's message when there are none.
fn result_text(result: &dsh_tools::ToolResult) -> String {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    if texts.is_empty()
        && let Some(failure) = &result.error
    {
        return format!("Error: {}", failure.message);
    }
    texts.join("\n")
}

impl ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("dsh", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.schemas()?.into_iter().map(mcp_tool).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        // Only what the model of this session is offered can be called.
        if !self.schemas()?.iter().any(|schema| schema.name == name) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {name}"),
                None,
            ));
        }
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let number = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let mut input = ToolCallInput::new(
            format!("mcp-serve-{number}"),
            name,
            arguments,
            context.ct.clone(),
        );
        input.agent = Some(self.agent.clone());
        let result = self.registry.execute(input).await;
        let content = vec![rmcp::model::ContentBlock::text(result_text(&result))];
        Ok(if result.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
        .into())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dsh_tools::ToolResult;
    use serde_json::json;

    #[test]
    fn a_schema_becomes_an_mcp_tool_unchanged() {
        let parameters = json!({"type": "object", "properties": {"file_path": {"type": "string"}}});
        let tool = mcp_tool(ToolSchema {
            name: "read".to_owned(),
            description: "Reads a file.".to_owned(),
            parameters: parameters.clone(),
        });
        assert_eq!(tool.name, "read");
        assert_eq!(tool.description.as_deref(), Some("Reads a file."));
        assert_eq!(Value::Object((*tool.input_schema).clone()), parameters);
    }

    #[test]
    fn a_non_object_schema_is_offered_as_an_empty_object() {
        let tool = mcp_tool(ToolSchema {
            name: "odd".to_owned(),
            description: String::new(),
            parameters: Value::Null,
        });
        assert_eq!(
            Value::Object((*tool.input_schema).clone()),
            json!({"type": "object"})
        );
    }

    #[test]
    fn the_text_is_the_text_blocks_joined() {
        let result = ToolResult::success(
            json!({}),
            vec![
                ContentBlock::Text {
                    text: "one".to_owned(),
                },
                ContentBlock::Reasoning {
                    text: "hidden".to_owned(),
                },
                ContentBlock::Text {
                    text: "two".to_owned(),
                },
            ],
        );
        assert_eq!(result_text(&result), "one\ntwo");
    }

    #[test]
    fn a_failure_without_text_carries_its_message() {
        let mut result = ToolResult::success(json!({}), Vec::new());
        result.is_error = true;
        result.error = Some(dsh_tools::ToolFailure {
            message: "denied".to_owned(),
            info: None,
        });
        assert_eq!(result_text(&result), "Error: denied");
    }
}
