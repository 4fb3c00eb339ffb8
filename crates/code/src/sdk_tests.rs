use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn tool(name: &str, description: &str, parameters: Value, output: Value) -> SdkTool {
    SdkTool {
        name: name.into(),
        description: description.into(),
        parameters,
        output,
    }
}

#[test]
fn construct_table() {
    let cases = [
        (json!({"type": "string"}), "string"),
        (json!({"type": "number"}), "number"),
        (json!({"type": "integer"}), "number"),
        (json!({"type": "boolean"}), "boolean"),
        (json!({"type": "null"}), "null"),
        (json!({}), "JsonValue"),
        (json!({"type": "string", "const": "x"}), "\"x\""),
        (
            json!({"type": "string", "enum": ["a", "b"], "const": "a"}),
            "\"a\"",
        ),
        (
            json!({"type": "string", "enum": ["a", "b"]}),
            "\"a\" | \"b\"",
        ),
        (json!({"type": "number", "enum": [1, 1e21]}), "1 | 1e+21"),
        (
            json!({"oneOf": [{"type": "string"}, {"type": "null"}]}),
            "string | null",
        ),
        (json!({"type": "array"}), "JsonValue[]"),
        (
            json!({"type": "array", "items": {"type": "string"}}),
            "string[]",
        ),
        (
            json!({"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "number"}]}}),
            "(string | number)[]",
        ),
        (
            json!({"type": "array", "items": {"type": "object"}}),
            "Record<string, JsonValue>[]",
        ),
        (json!({"type": "object"}), "Record<string, JsonValue>"),
        (
            json!({"type": "object", "additionalProperties": false}),
            "Record<string, never>",
        ),
        (
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
            "Record<string, never>",
        ),
        (
            json!({"type": "object", "properties": {"a-b": {"type": "string"}}, "required": ["a-b"], "additionalProperties": false}),
            "{\n  \"a-b\": string;\n}",
        ),
        (json!({"type": "strange"}), "unknown"),
        (json!({"type": "string", "pattern": "x"}), "unknown"),
    ];
    for (schema, expected) in cases {
        assert_eq!(json_schema_to_ts(&schema, 0), expected, "{schema}");
    }
}

#[test]
fn objects_render_required_optional_nested_docs_and_open_records() {
    let schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Absolute   file\npath"},
            "limit": {"type": "number"},
            "opts": {"type": "object", "properties": {"deep": {"type": "boolean"}}, "required": ["deep"]}
        },
        "required": ["path"]
    });
    assert_eq!(
        json_schema_to_ts(&schema, 0),
        "{\n  /** Absolute file path */\n  path: string;\n  limit?: number;\n  opts?: {\n    deep: boolean;\n  } & Record<string, JsonValue>;\n} & Record<string, JsonValue>"
    );
    let doc =
        json!({"type": "object", "properties": {"x": {"type": "string", "description": "a */ b"}}});
    assert!(json_schema_to_ts(&doc, 0).contains("/** a *\\/ b */"));
}

#[test]
fn the_recorded_todo_write_declaration_is_reproduced() {
    let item = json!({
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": "What the task is — a short imperative line."},
            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"], "description": "pending (not started) | in_progress (now) | completed (done)."}
        },
        "required": ["content", "status"],
        "additionalProperties": false
    });
    let parameters = json!({
        "type": "object",
        "properties": {"todos": {"type": "array", "items": item, "description": "The COMPLETE task list, replacing any previous list."}},
        "required": ["todos"]
    });
    assert_eq!(
        json_schema_to_ts(&parameters, 1),
        "{\n    /** The COMPLETE task list, replacing any previous list. */\n    todos: ({\n      /** What the task is — a short imperative line. */\n      content: string;\n      /** pending (not started) | in_progress (now) | completed (done). */\n      status: \"pending\" | \"in_progress\" | \"completed\";\n    })[];\n  } & Record<string, JsonValue>"
    );
}

#[test]
fn deep_unions_render_iteratively() {
    let mut schema = json!({"type": "string"});
    for _ in 0..5000 {
        let mut node = serde_json::Map::new();
        node.insert(
            "oneOf".into(),
            Value::Array(vec![schema, json!({"type": "null"})]),
        );
        schema = Value::Object(node);
    }
    let text = json_schema_to_ts(&schema, 0);
    assert_eq!(text.len(), "string".len() + 5000 * " | null".len());
    dsh_schema::drop_deep(schema);
}

#[test]
fn hostile_input_is_unknown_and_never_panics() {
    for schema in [
        json!(null),
        json!([]),
        json!({"type": ["string"]}),
        json!({"oneOf": [{}]}),
        json!("x"),
    ] {
        assert_eq!(json_schema_to_ts(&schema, 0), "unknown", "{schema}");
    }
}

#[test]
fn sdk_text_is_sorted_quoted_and_deterministic() {
    let params =
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
    let out = json!({"type": "string"});
    let a = tool("echo", "Echo  the\ttext", params.clone(), out.clone());
    let b = tool(
        "my-mcp.tool",
        "",
        json!({"type": "object", "properties": {}}),
        json!({}),
    );
    let c = tool("Zed", "upper", params.clone(), out.clone());
    let one = render_tools_sdk(&[a.clone(), b.clone(), c.clone()]);
    let two = render_tools_sdk(&[c.clone(), b.clone(), a.clone()]);
    assert_eq!(one, two);
    let expected_block = "```ts\ntype JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue }\n\ninterface ToolArgsMap {\n  /** upper */\n  Zed: {\n    text: string;\n  } & Record<string, JsonValue>;\n  /** Echo the text */\n  echo: {\n    text: string;\n  } & Record<string, JsonValue>;\n  \"my-mcp.tool\": Record<string, JsonValue>;\n}\n\ninterface ToolOutputMap {\n  Zed: string;\n  echo: string;\n  \"my-mcp.tool\": JsonValue;\n}\n\ntype ToolName = keyof ToolOutputMap\n\ndeclare class ToolCallError extends Error {\n  readonly name: \"ToolCallError\";\n  readonly toolName: ToolName;\n}\n\ndeclare const tools: {\n  [K in ToolName]: (args: ToolArgsMap[K]) => Promise<ToolOutputMap[K]>;\n}\n```";
    assert!(one.ends_with(expected_block), "{one}");
    assert!(one.starts_with(
        "## Writing code for run_code\n\n`run_code` takes two required arguments: `code`"
    ));
    assert!(one.contains("`description`, a short summary"));
    let empty = render_tools_sdk(&[]);
    assert!(empty.contains("interface ToolArgsMap {}\n\ninterface ToolOutputMap {}"));
    let dup = render_tools_sdk(&[a.clone(), a.clone()]);
    assert_eq!(dup, render_tools_sdk(&[a.clone(), a]));
}

#[test]
fn instructions_match_the_recorded_prompt() {
    let path = "/work/shared/conformance/acp/code-mode-turn/upstream-system-prompt.md";
    let Ok(prompt) = std::fs::read_to_string(path) else {
        return;
    };
    let start = prompt.find("## Writing code for run_code").unwrap();
    let recorded = &prompt[start..];
    assert!(recorded.starts_with(INSTRUCTIONS));
    assert!(recorded.trim_end().ends_with(&format!("{TAIL}\n```")));
    assert!(prompt.contains(CODE_ONLY_RULE));
}
