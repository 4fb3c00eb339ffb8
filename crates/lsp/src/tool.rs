//! The `lsp` tool (`tool-lsp`): argument checks, the session workspace, the declared
//! deadline, the output value and its text.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dsh_protocol::ContentBlock;
use dsh_tools::DefineError;
use dsh_tools::FileLocation;
use dsh_tools::Tool;
use dsh_tools::ToolCallKind;
use dsh_tools::ToolCallView;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRun;
use serde::Deserialize;
use serde_json::Value;
use serde_json::json;

use crate::error::LspConfigError;
use crate::render;
use crate::service::LspAnswer;
use crate::service::LspQuery;
use crate::service::LspService;
use crate::service::Operation;
use crate::translate::Hover;
use crate::translate::Location;
use crate::translate::Position;

/// `tool:lsp`, order 112 (exact).
pub const SECTION: (&str, u32) = ("tool:lsp", 112);
pub const SECTION_TEXT: &str = "Plain text search and reading are enough to find your way around most code. Reach for lsp when a name matches in too many places, or when a change depends on exactly where something is defined, implemented or used. Give the cursor as a one-based line and a one-based UTF-16 character; a cursor that is not on a symbol can come back empty. findReferences lists the declaration among the references.";

const DESCRIPTION: &str = "Ask the workspace's language server about the symbol under a cursor. operation picks goToDefinition, findReferences, goToImplementation or hover; line and character place the cursor, both one-based, the character counted in UTF-16 units. findReferences also returns the declaration.";

/// Where a call's session workspace comes from (the session header's cwd).
pub type WorkspaceResolver = Arc<dyn Fn(&ToolRun) -> Option<PathBuf> + Send + Sync>;

/// `tool-lsp` settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LspToolConfig {
    pub max_locations: usize,
    pub max_result_chars: usize,
    pub timeout_ms: u64,
}

impl Default for LspToolConfig {
    fn default() -> Self {
        Self {
            max_locations: 100,
            max_result_chars: 16_000,
            timeout_ms: 60_000,
        }
    }
}

impl LspToolConfig {
    pub fn check(&self) -> Result<(), LspConfigError> {
        if self.max_locations == 0 {
            return Err(LspConfigError::MaxLocations);
        }
        if self.max_result_chars == 0 {
            return Err(LspConfigError::MaxResultChars);
        }
        if self.timeout_ms == 0 || self.timeout_ms > 2_147_483_647 {
            return Err(LspConfigError::TimeoutMs);
        }
        Ok(())
    }
}

fn positive(args: &Value, name: &str) -> Result<u64, ToolError> {
    args.get(name)
        .and_then(Value::as_f64)
        .filter(|n| n.fract() == 0.0 && *n >= 1.0 && *n <= 9_007_199_254_740_991.0)
        .map(|n| {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let n = n as u64;
            n
        })
        .ok_or_else(|| ToolError::new(format!("{name} must be a positive integer (one-based)")))
}

/// `parseLspArgs`: the operation, the file and the zero-based position.
pub fn parse_args(args: &Value) -> Result<(Operation, String, Position), ToolError> {
    let operation = args
        .get("operation")
        .and_then(Value::as_str)
        .and_then(Operation::parse)
        .ok_or_else(|| {
            ToolError::new(
                "operation must be one of goToDefinition, findReferences, goToImplementation, hover",
            )
        })?;
    let file = args.get("file_path").and_then(Value::as_str).unwrap_or("");
    if file.trim().is_empty() {
        return Err(ToolError::new("file_path must be a non-empty string"));
    }
    let line = positive(args, "line")?;
    let character = positive(args, "character")?;
    Ok((
        operation,
        file.to_owned(),
        Position {
            line: line - 1,
            character: character - 1,
        },
    ))
}

/// The `lsp` definition.
pub fn definition(
    service: Arc<LspService>,
    workspace: WorkspaceResolver,
    config: LspToolConfig,
) -> Result<ToolDefinition, DefineError> {
    let render_config = config.clone();
    Tool::builder("lsp")
        .description(DESCRIPTION)
        .validated_parameters(json!({
            "type": "object",
            "properties": {
                "operation": {"type": "string", "enum": ["goToDefinition", "findReferences", "goToImplementation", "hover"]},
                "file_path": {"type": "string", "description": "File path relative to the workspace, or absolute."},
                "line": {"type": "number", "description": "One-based line."},
                "character": {"type": "number", "description": "One-based UTF-16 column."}
            },
            "required": ["operation", "file_path", "line", "character"]
        }))
        .raw_output(json!({"type": "object"}), move |_args, value| {
            Ok(vec![ContentBlock::text(render_value(value, &render_config))])
        })
        .timeout_ms(config.timeout_ms)
        .present_call(|args: &Value| {
            let operation = args.get("operation").and_then(Value::as_str).unwrap_or("");
            let file = args.get("file_path").and_then(Value::as_str).unwrap_or("");
            let line = args.get("line").and_then(Value::as_u64).unwrap_or(0);
            let character = args.get("character").and_then(Value::as_u64).unwrap_or(0);
            let mut location = FileLocation::path(file);
            location.line = Some(line);
            Some(
                ToolCallView::generic(format!("LSP {operation} {file}:{line}:{character}"))
                    .kind(ToolCallKind::Search)
                    .locations(vec![location]),
            )
        })
        .run(move |args: Value, run: ToolRun| {
            let service = service.clone();
            let workspace = workspace.clone();
            let timeout = config.timeout_ms;
            async move {
                let (operation, file_path, position) = parse_args(&args)?;
                let root = workspace(&run).ok_or_else(|| {
                    ToolError::coded(
                        "LspError",
                        "LSP_WORKSPACE_REQUIRED",
                        "the lsp tool requires a session workspace cwd",
                    )
                })?;
                let signal = run.signal().child_token();
                let query = LspQuery {
                    operation,
                    file_path,
                    position,
                    workspace_root: root,
                    language_id: String::new(),
                };
                let pending = service.query(query, signal.clone())?;
                // The declared deadline holds even without a timeout policy composed.
                let answer = tokio::select! {
                    answer = pending => answer?,
                    () = tokio::time::sleep(Duration::from_millis(timeout)) => {
                        signal.cancel();
                        return Err(ToolError::coded(
                            "ToolTimeoutError",
                            "TOOL_TIMEOUT",
                            format!("tool call timed out after {timeout}ms"),
                        ));
                    }
                };
                Ok(answer_value(&answer))
            }
        })
        .build()
}

fn answer_value(answer: &LspAnswer) -> Value {
    match answer {
        LspAnswer::Locations {
            locations,
            resolved_workspace_uri,
        } => json!({
            "kind": "locations",
            "locations": locations,
            "resolvedWorkspaceUri": resolved_workspace_uri,
        }),
        LspAnswer::Hover(hover) => json!({"kind": "hover", "hover": hover}),
    }
}

fn render_value(value: &Value, config: &LspToolConfig) -> String {
    match value.get("kind").and_then(Value::as_str) {
        Some("locations") => {
            let locations: Vec<Location> = value["locations"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|l| {
                    Some(Location {
                        uri: l.get("uri")?.as_str()?.to_owned(),
                        range: crate::translate::range(l.get("range")?)?,
                    })
                })
                .collect();
            let workspace = value["resolvedWorkspaceUri"].as_str().unwrap_or("");
            render::locations(
                &locations,
                workspace,
                config.max_locations,
                config.max_result_chars,
            )
        }
        _ => {
            let hover = value.get("hover").and_then(|h| {
                Some(Hover {
                    contents: h.get("contents")?.as_str()?.to_owned(),
                    range: None,
                })
            });
            render::hover(hover.as_ref(), config.max_result_chars)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked_in_order() {
        let err = |v: Value| parse_args(&v).unwrap_err().message;
        assert_eq!(
            err(json!({"operation": "rename"})),
            "operation must be one of goToDefinition, findReferences, goToImplementation, hover"
        );
        assert_eq!(
            err(json!({"operation": "hover", "file_path": " "})),
            "file_path must be a non-empty string"
        );
        assert_eq!(
            err(json!({"operation": "hover", "file_path": "a", "line": 0, "character": 1})),
            "line must be a positive integer (one-based)"
        );
        assert_eq!(
            err(json!({"operation": "hover", "file_path": "a", "line": 1, "character": 1.5})),
            "character must be a positive integer (one-based)"
        );
        let (_, _, position) = parse_args(
            &json!({"operation": "hover", "file_path": "a", "line": 10, "character": 5}),
        )
        .unwrap();
        assert_eq!(
            position,
            Position {
                line: 9,
                character: 4
            }
        );
    }
}
