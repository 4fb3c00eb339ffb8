//! One MCP tool as a raw dsh tool: schema passed through verbatim, arguments unvalidated,
//! `tools/call` bounded by the per-call timeout, the caller's signal and the connection.

use std::sync::Arc;
use std::time::Duration;

use dsh_tools::DefineError;
use dsh_tools::Tool;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRun;
use rmcp::ServiceError;
use rmcp::model::CallToolRequestParams;
use serde_json::Map;
use serde_json::Value;
use serde_json::json;

use crate::naming::public_name;
use crate::render::error_text;
use crate::render::render_content;
use crate::server::ServerLink;

/// `{content: array, structuredContent?}`; an advertised output schema constrains
/// `structuredContent` only when it lies within the harness-supported subset.
fn output_schema(advertised: Option<&Map<String, Value>>) -> Value {
    let mut properties = Map::new();
    properties.insert("content".to_owned(), json!({"type": "array"}));
    if let Some(schema) = advertised {
        let schema = Value::Object(schema.clone());
        if dsh_schema::assert_supported(&schema).is_ok() {
            properties.insert("structuredContent".to_owned(), schema);
        }
    }
    json!({"type": "object", "properties": properties, "required": ["content"]})
}

pub(crate) fn define(
    server: ServerLink,
    tool: &rmcp::model::Tool,
) -> Result<ToolDefinition, DefineError> {
    let (name, images) = match server.upgrade() {
        Some(shared) => (shared.name.clone(), shared.images.clone()),
        None => (String::new(), None),
    };
    let raw = tool.name.to_string();
    // `readOnlyHint` is the only annotation that changes scheduling: a read-only tool may
    // overlap other concurrency-safe calls (the server answers them in parallel).
    let read_only = tool
        .annotations
        .as_ref()
        .and_then(|a| a.read_only_hint)
        .unwrap_or(false);
    let render_raw = raw.clone();
    let call_raw = raw.clone();
    Tool::builder(public_name(&name, &raw))
        .description(tool.description.as_deref().unwrap_or(""))
        .raw_parameters(Value::Object((*tool.input_schema).clone()))
        .raw_output(
            output_schema(tool.output_schema.as_deref()),
            move |_args, value| {
                let content = value
                    .get("content")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                Ok(render_content(&render_raw, content, images.as_ref()))
            },
        )
        .concurrency_safe(move |_args: &Value| read_only)
        .run(move |args: Value, run: ToolRun| call(server.clone(), call_raw.clone(), args, run))
        .build()
}

async fn call(
    server: ServerLink,
    raw: String,
    args: Value,
    run: ToolRun,
) -> Result<Value, ToolError> {
    let Some(shared) = server.upgrade() else {
        return Err(ToolError::new(format!(
            "MCP tool \"{raw}\" is no longer mounted"
        )));
    };
    let name = shared.name.clone();
    let Some(connection) = shared.live() else {
        return Err(ToolError::new(format!(
            "MCP server \"{name}\" is not connected (reconnecting); \"{raw}\" cannot run until it is back"
        )));
    };
    let timeout_ms = shared.config.timeout_ms;
    drop(shared);
    // A non-object argument value is sent as `{}`; the server validates the rest.
    let arguments = match args {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let params = CallToolRequestParams::new(raw.clone()).with_arguments(arguments);
    // Progress notifications become live output of this call (display only). rmcp assigns
    // the request's progress token, so the route is keyed once the request is sent.
    let route: Option<(Arc<crate::server::Shared>, ProgressWriter)> =
        match (dsh_tools::output_sink(&run), server.upgrade()) {
            (Some(sink), Some(shared)) => {
                let call_id = run.call_id().to_owned();
                let write: Arc<dyn Fn(String) + Send + Sync> = Arc::new(move |line: String| {
                    sink.output(&call_id, dsh_tools::OutputStream::Stdout, line.as_bytes());
                });
                Some((shared, write))
            }
            _ => None,
        };
    let peer = connection.peer.clone();
    let request = async move {
        let request =
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params));
        let handle = peer
            .send_request_with_option(request, rmcp::service::PeerRequestOptions::default())
            .await?;
        // Held until the answer: dropping it removes the route.
        let _progress = route.map(|(shared, write)| {
            let token = crate::connection::token_key(&handle.progress_token);
            dsh_sync::lock(&shared.side.progress).insert(token.clone(), write);
            ProgressGuard {
                server: Arc::downgrade(&shared),
                token,
            }
        });
        match handle.await_response().await? {
            rmcp::model::ServerResult::CallToolResult(result) => Ok(result),
            _ => Err(ServiceError::UnexpectedResponse),
        }
    };
    let outcome = tokio::select! {
        outcome = request => outcome,
        () = connection.closed.cancelled() => {
            return Err(ToolError::new(format!(
                "MCP server \"{name}\" disconnected while \"{raw}\" was running"
            )));
        }
        () = run.signal().cancelled() => return Err(ToolError::aborted()),
        () = tokio::time::sleep(Duration::from_millis(timeout_ms)) => {
            return Err(ToolError::new(format!(
                "MCP server \"{name}\" did not answer \"{raw}\" within {timeout_ms}ms"
            )));
        }
    };
    let result = match outcome {
        Ok(result) => result,
        Err(ServiceError::McpError(error)) => {
            return Err(ToolError::new(format!(
                "MCP server \"{name}\" rejected \"{raw}\": {} (code {})",
                error.message, error.code.0
            )));
        }
        // The session is unusable: close it so the supervisor reconnects and every other
        // in-flight call ends now rather than at its timeout.
        Err(ServiceError::TransportClosed) => {
            connection.close();
            return Err(ToolError::new(format!(
                "MCP server \"{name}\" disconnected while \"{raw}\" was running"
            )));
        }
        Err(ServiceError::TransportSend(error)) => {
            connection.close();
            return Err(ToolError::new(format!(
                "MCP server \"{name}\" connection failed during \"{raw}\": {}",
                error_chain(error.error.as_ref())
            )));
        }
        Err(error) => {
            return Err(ToolError::new(format!(
                "MCP server \"{name}\" failed \"{raw}\": {error}"
            )));
        }
    };
    let wire = serde_json::to_value(&result)?;
    let content = wire.get("content").cloned().unwrap_or_else(|| json!([]));
    if result.is_error == Some(true) {
        let blocks = content.as_array().map(Vec::as_slice).unwrap_or_default();
        return Err(ToolError::new(error_text(&raw, blocks)));
    }
    let mut value = Map::new();
    value.insert("content".to_owned(), content);
    if let Some(structured) = wire.get("structuredContent") {
        value.insert("structuredContent".to_owned(), structured.clone());
    }
    Ok(Value::Object(value))
}

/// Writes one progress line to the call's live output.
type ProgressWriter = Arc<dyn Fn(String) + Send + Sync>;

/// Removes a call's progress route when the call ends, however it ends.
struct ProgressGuard {
    server: ServerLink,
    token: String,
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        if let Some(shared) = self.server.upgrade() {
            dsh_sync::lock(&shared.side.progress).remove(&self.token);
        }
    }
}

/// The error and its causes, `a: b: c`, skipping causes already quoted by their parent.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_output_schema_is_supported_and_keeps_a_supported_advertised_schema() {
        let plain = output_schema(None);
        dsh_schema::assert_supported(&plain).unwrap();
        assert_eq!(plain["required"], json!(["content"]));

        let advertised = json!({"type": "object", "properties": {"sum": {"type": "number"}}});
        let with = output_schema(advertised.as_object());
        assert_eq!(with["properties"]["structuredContent"], advertised);

        let exotic = json!({"type": "object", "patternProperties": {".*": {}}});
        let without = output_schema(exotic.as_object());
        assert!(without["properties"].get("structuredContent").is_none());
    }
}
