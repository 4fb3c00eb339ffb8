//! The generated TypeScript SDK (tool-runtime-spec §7.8) and the code-only rule section.
//! Deterministic: the same tool set always gives byte-identical text, in lexicographic order.

use std::cmp::Ordering;

use dsh_kernel::Scope;
use dsh_tools::PresentationMode;
use dsh_tools::RUN_CODE;
use dsh_tools::ToolRegistry;
use serde_json::Value;

use crate::seam::CodeRuntime;
use crate::transport::CodeModeError;

/// The `tools:code-only` section (order 99) in `code` mode.
pub const CODE_ONLY_RULE: &str = "`run_code` is the only tool you can call directly — a tool call naming any other tool fails. Reach every tool the SDK declares below from inside the program.";
/// Prompt section name of the rule (in the preamble slot).
pub const CODE_ONLY_SECTION: &str = "tools:code-only";
/// Prompt section name of the SDK (in the reference slot).
pub const SDK_SECTION: &str = "tools:sdk";

const INSTRUCTIONS: &str = "## Writing code for run_code

`run_code` takes two required arguments: `code` — the body of an async TypeScript function (erasable syntax only — no `enum` or namespaces; type annotations are advisory, the code runs type-stripped) — and `description`, a short summary of what the program does. Inside the program:

- Call tools as `await tools.name(args)` — quoted access for exotic names: `tools[\"my-tool\"](args)`. Every call resolves to the tool's typed canonical JSON value. Tool arguments must be lossless JSON.
- A FAILED tool call rejects with `ToolCallError`, whose `toolName` identifies the failed tool and whose `message` is human-readable — `try/catch` it to handle and continue.
- Independent read-only calls MAY overlap under `Promise.all` (safe calls run concurrently; mutating calls run alone, in submission order). Sequence dependent work with `await`.
- Emit results with `return` and/or `console.log(...)`. Only what you print or return is program output. A successful tool result containing an image is attached after the run so you can inspect it on the next step; every other intermediate result stays out of the conversation, so extract just what you need.

The available tools:";

const JSON_VALUE: &str = "type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue }";

const TAIL: &str = "type ToolName = keyof ToolOutputMap

declare class ToolCallError extends Error {
  readonly name: \"ToolCallError\";
  readonly toolName: ToolName;
}

declare const tools: {
  [K in ToolName]: (args: ToolArgsMap[K]) => Promise<ToolOutputMap[K]>;
}";

/// One tool as the SDK declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct SdkTool {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    pub output: Value,
}

/// Plain code-unit (UTF-16) comparison, like JavaScript's default string order.
fn code_unit_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

fn key(name: &str) -> String {
    if is_identifier(name) {
        name.to_owned()
    } else {
        serde_json::to_string(name).unwrap_or_default()
    }
}

/// `/** text */` with whitespace collapsed and `*/` escaped; `None` when empty.
fn jsdoc(text: &str) -> Option<String> {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!collapsed.is_empty()).then(|| format!("/** {} */", collapsed.replace("*/", "*\\/")))
}

/// The section text for `tools` (sorted here; input order does not matter).
pub fn render_tools_sdk(tools: &[SdkTool]) -> String {
    let mut sorted: Vec<&SdkTool> = tools.iter().collect();
    sorted.sort_by(|a, b| code_unit_cmp(&a.name, &b.name));
    let mut args = String::new();
    let mut outputs = String::new();
    for tool in &sorted {
        if let Some(doc) = jsdoc(&tool.description) {
            args.push_str(&format!("  {doc}\n"));
        }
        args.push_str(&format!(
            "  {}: {};\n",
            key(&tool.name),
            json_schema_to_ts(&tool.parameters, 1)
        ));
        outputs.push_str(&format!(
            "  {}: {};\n",
            key(&tool.name),
            json_schema_to_ts(&tool.output, 1)
        ));
    }
    let block = |name: &str, body: &str| {
        if body.is_empty() {
            format!("interface {name} {{}}")
        } else {
            format!("interface {name} {{\n{body}}}")
        }
    };
    format!(
        "{INSTRUCTIONS}\n\n```ts\n{JSON_VALUE}\n\n{}\n\n{}\n\n{TAIL}\n```",
        block("ToolArgsMap", &args),
        block("ToolOutputMap", &outputs)
    )
}

enum Step<'a> {
    Visit(&'a Value, usize),
    Union(usize),
    Array,
    Object {
        lines: Vec<(Option<String>, String)>,
        indent: usize,
        open: bool,
    },
}

/// TypeScript text for a subset schema; anything unsupported makes the whole result `unknown`.
/// Never fails, never recurses.
pub fn json_schema_to_ts(schema: &Value, indent: usize) -> String {
    if dsh_schema::assert_supported(schema).is_err() {
        return "unknown".to_owned();
    }
    let mut steps = vec![Step::Visit(schema, indent)];
    let mut results: Vec<String> = Vec::new();
    while let Some(step) = steps.pop() {
        match step {
            Step::Visit(node, indent) => visit(node, indent, &mut steps, &mut results),
            Step::Union(n) => {
                let parts = results.split_off(results.len().saturating_sub(n));
                results.push(parts.join(" | "));
            }
            Step::Array => {
                let item = results.pop().unwrap_or_default();
                results.push(if item.contains('|') || item.contains('&') {
                    format!("({item})[]")
                } else {
                    format!("{item}[]")
                });
            }
            Step::Object {
                lines,
                indent,
                open,
            } => {
                let types = results.split_off(results.len().saturating_sub(lines.len()));
                let pad = "  ".repeat(indent + 1);
                let mut text = String::from("{\n");
                for ((doc, head), ty) in lines.into_iter().zip(types) {
                    if let Some(doc) = doc {
                        text.push_str(&format!("{pad}{doc}\n"));
                    }
                    text.push_str(&format!("{pad}{head}: {ty};\n"));
                }
                text.push_str(&"  ".repeat(indent));
                text.push('}');
                if open {
                    text.push_str(" & Record<string, JsonValue>");
                }
                results.push(text);
            }
        }
    }
    results.pop().unwrap_or_else(|| "unknown".to_owned())
}

fn visit<'a>(node: &'a Value, indent: usize, steps: &mut Vec<Step<'a>>, results: &mut Vec<String>) {
    if let Some(constant) = node.get("const") {
        results.push(dsh_schema::to_js_json(constant));
        return;
    }
    if let Some(Value::Array(values)) = node.get("enum") {
        let parts: Vec<String> = values.iter().map(dsh_schema::to_js_json).collect();
        results.push(parts.join(" | "));
        return;
    }
    if let Some(Value::Array(branches)) = node.get("oneOf") {
        steps.push(Step::Union(branches.len()));
        for branch in branches.iter().rev() {
            steps.push(Step::Visit(branch, indent));
        }
        return;
    }
    let text = match node.get("type").and_then(Value::as_str) {
        None => "JsonValue",
        Some("string") => "string",
        Some("number" | "integer") => "number",
        Some("boolean") => "boolean",
        Some("null") => "null",
        Some("array") => match node.get("items") {
            None => "JsonValue[]",
            Some(items) => {
                steps.push(Step::Array);
                steps.push(Step::Visit(items, indent));
                return;
            }
        },
        Some("object") => {
            let open = node.get("additionalProperties") != Some(&Value::Bool(false));
            let properties = node.get("properties").and_then(Value::as_object);
            let Some(properties) = properties.filter(|p| !p.is_empty()) else {
                results.push(
                    if open {
                        "Record<string, JsonValue>"
                    } else {
                        "Record<string, never>"
                    }
                    .to_owned(),
                );
                return;
            };
            let required: Vec<&str> = node
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let lines = properties
                .iter()
                .map(|(name, property)| {
                    let doc = property
                        .get("description")
                        .and_then(Value::as_str)
                        .and_then(jsdoc);
                    let optional = if required.contains(&name.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    (doc, format!("{}{optional}", key(name)))
                })
                .collect();
            steps.push(Step::Object {
                lines,
                indent,
                open,
            });
            for property in properties.values().rev() {
                steps.push(Step::Visit(property, indent + 1));
            }
            return;
        }
        Some(_) => "unknown",
    };
    results.push(text.to_owned());
}

/// The model-facing tool list of an assembly from `scope`: exactly `[run_code]` in `code` mode
/// (the registry's view keeps the native tools, which the SDK declares), the full view
/// otherwise.
pub fn wire_schemas(
    registry: &ToolRegistry,
    scope: Option<&Scope>,
) -> Result<Vec<dsh_protocol::ToolSchema>, CodeModeError> {
    let schemas = registry
        .schemas(scope)
        .map_err(|e| CodeModeError::Schemas(e.to_string()))?;
    if registry.mode_for(scope) == PresentationMode::Code {
        return Ok(schemas.into_iter().filter(|s| s.name == RUN_CODE).collect());
    }
    Ok(schemas)
}

/// The SDK tools `scope` can reach: its visible set minus `run_code`.
pub fn sdk_tools(
    registry: &ToolRegistry,
    scope: Option<&Scope>,
) -> Result<Vec<SdkTool>, CodeModeError> {
    let schemas = registry
        .schemas(scope)
        .map_err(|e| CodeModeError::Schemas(e.to_string()))?;
    let view = registry.view(scope);
    Ok(schemas
        .into_iter()
        .zip(view)
        .filter(|(schema, _)| schema.name != RUN_CODE)
        .map(|(schema, definition)| SdkTool {
            name: schema.name,
            description: schema.description,
            parameters: schema.parameters,
            output: dsh_schema::clone_deep(definition.output_schema()),
        })
        .collect())
}

fn runtime_for(
    scope: Option<&Scope>,
    home: Option<&Scope>,
) -> Option<std::sync::Arc<dyn CodeRuntime>> {
    scope
        .and_then(|s| s.service::<dyn CodeRuntime>())
        .or_else(|| home.and_then(|h| h.service::<dyn CodeRuntime>()))
}

/// Fails when a non-native `scope` has no runtime, or one with no SDK renderer.
fn check_runtime(
    registry: &ToolRegistry,
    scope: Option<&Scope>,
) -> Result<PresentationMode, CodeModeError> {
    let mode = registry.mode_for(scope);
    if mode == PresentationMode::Native {
        return Ok(mode);
    }
    let Some(runtime) = runtime_for(scope, None) else {
        return Err(CodeModeError::MissingRuntime {
            mode: mode.as_str().to_owned(),
        });
    };
    if runtime.language() != "typescript" {
        return Err(CodeModeError::UnknownLanguage {
            language: runtime.language().to_owned(),
        });
    }
    Ok(mode)
}

/// The `tools:sdk` section text for an assembly from `scope`: `""` under native.
pub fn sdk_section(registry: &ToolRegistry, scope: &Scope) -> Result<String, CodeModeError> {
    if check_runtime(registry, Some(scope))? == PresentationMode::Native {
        return Ok(String::new());
    }
    Ok(render_tools_sdk(&sdk_tools(registry, Some(scope))?))
}

/// The `tools:code-only` section text: the rule in `code` mode, `""` otherwise.
pub fn code_only_section(registry: &ToolRegistry, scope: &Scope) -> Result<String, CodeModeError> {
    Ok(match check_runtime(registry, Some(scope))? {
        PresentationMode::Code => CODE_ONLY_RULE.to_owned(),
        PresentationMode::Native | PresentationMode::Both => String::new(),
    })
}

#[cfg(test)]
#[path = "sdk_tests.rs"]
mod tests;
