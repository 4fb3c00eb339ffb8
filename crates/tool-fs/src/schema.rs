//! What the model sees of each tool: descriptions, parameter schemas (names, types and
//! required-ness exactly as upstream; property descriptions are ours) and the system-prompt
//! sections the tools contribute.

use serde_json::Value;
use serde_json::json;

pub const READ_DESCRIPTION: &str = "Read a UTF-8 text file and return line-numbered content.";
pub const READ_IMAGE_DESCRIPTION: &str = "Read a PNG/JPEG/WebP/GIF file and return the image itself. Requires the current model to accept image input.";
pub const WRITE_DESCRIPTION: &str = "Create or fully replace a UTF-8 text file.";
pub const EDIT_DESCRIPTION: &str = "Edit an existing UTF-8 text file by replacing literal text.";
pub const GREP_DESCRIPTION_TEMPLATE: &str = "Search file contents with a ripgrep regular expression. Returns matching lines with line numbers, grouped by file. Returns the first {max} matches inline; a capped result reports where the complete match list was saved. Use read on a matched file for surrounding context.";
pub const STR_REPLACE_EDITOR_DESCRIPTION: &str = "Custom editing tool for viewing, creating and editing files.\n* State is persistent across command calls.\n* If `path` is a file, `view` displays the result of applying `cat -n`. If `path` is a directory, `view` lists non-hidden files and directories up to 2 levels deep.\n* The `create` command cannot be used if the specified `path` already exists as a file.\n* Long outputs are truncated and marked with `<response clipped>`.\n\nNotes for using the `str_replace` command:\n* The `old_str` parameter should match EXACTLY one or more consecutive lines from the original file. Be mindful of whitespaces!\n* If the `old_str` parameter is not unique in the file, the replacement will not be performed. Make sure to include enough context in `old_str` to make it unique.\n* The `new_str` parameter should contain the edited lines that should replace the `old_str`.";

pub fn grep_description(max_matches: usize) -> String {
    GREP_DESCRIPTION_TEMPLATE.replace("{max}", &max_matches.to_string())
}

pub use crate::glob::description as glob_description;

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

/// Adds `sandbox_permissions` + `justification` when the file backend confines.
fn with_escalation(mut schema: Value, escalation: bool) -> Value {
    if escalation && let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        props.insert(
            "sandbox_permissions".into(),
            json!({
                "type": "string",
                "description": "The wider sandbox mode this file operation needs. Only valid as a one-shot retry of an operation the sandbox just denied; requires justification and user approval.",
                "enum": ["workspace-write", "danger-full-access"]
            }),
        );
        props.insert(
            "justification".into(),
            string("Required with sandbox_permissions: one sentence for the user explaining why this exact file operation needs the wider access."),
        );
    }
    schema
}

pub fn read_parameters() -> Value {
    object(
        json!({
            "file_path": string("Path to read, resolved by the filesystem backend."),
            "offset": {"type": "number", "description": "1-based first line to return. Defaults to 1."},
            "limit": {"type": "number", "description": "Maximum number of lines to return. Defaults to 2000."}
        }),
        &["file_path"],
    )
}

pub fn read_image_parameters() -> Value {
    object(
        json!({"file_path": string("Path to the image file, resolved by the filesystem backend.")}),
        &["file_path"],
    )
}

pub fn write_parameters(escalation: bool) -> Value {
    with_escalation(
        object(
            json!({
                "file_path": string("Path to write, resolved by the filesystem backend."),
                "content": string("Full UTF-8 text content to write.")
            }),
            &["file_path", "content"],
        ),
        escalation,
    )
}

pub fn edit_parameters(escalation: bool) -> Value {
    with_escalation(
        object(
            json!({
                "file_path": string("Path to edit, resolved by the filesystem backend."),
                "old_string": string("Literal text to replace. Must match exactly."),
                "new_string": string("Literal replacement text. Use an empty string to delete the match."),
                "replace_all": {"type": "boolean", "description": "Replace all matches. Defaults to false; when false, old_string must appear exactly once."}
            }),
            &["file_path", "old_string", "new_string"],
        ),
        escalation,
    )
}

pub fn glob_parameters() -> Value {
    object(
        json!({
            "pattern": string("Glob pattern to match file paths against (e.g. \"**/*.ts\", \"src/**/*.test.js\"). A pattern with no \"/\" matches the basename at any depth, so \"*\" and \"*.ts\" both search the whole tree; include a separator to anchor the depth."),
            "path": string("Directory to search in. Defaults to the session workspace; a relative path resolves against it.")
        }),
        &["pattern"],
    )
}

pub fn grep_parameters() -> Value {
    object(
        json!({
            "pattern": string("Regular expression to search for (ripgrep syntax)."),
            "path": string("File or directory to search. Defaults to the session workspace; a relative path resolves against it."),
            "include": string("One glob filter for which files to search (e.g. \"*.ts\", \"*.{js,jsx}\"). Not a list; negation is not supported.")
        }),
        &["pattern"],
    )
}

pub fn str_replace_editor_parameters() -> Value {
    object(
        json!({
            "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert"], "description": "The command to run."},
            "path": string("Absolute path to a file or directory."),
            "file_text": string("Required for `create`: the content of the new file."),
            "insert_line": {"type": "integer", "description": "Required for `insert`: `new_str` is inserted after this line (0 inserts at the top)."},
            "new_str": string("For `str_replace`: the replacement (empty when omitted). Required for `insert`: the text to insert."),
            "old_str": string("Required for `str_replace`: the exact text to replace."),
            "view_range": {"type": "array", "items": {"type": "integer"}, "description": "Optional for `view` of a file: [start, end] 1-based line range; end -1 reads to the end."}
        }),
        &["command", "path"],
    )
}

/// A system-prompt section: lower `order` comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptSection {
    pub id: &'static str,
    pub order: u32,
    pub text: &'static str,
}

pub const READ_SECTION: PromptSection = PromptSection {
    id: "tool:read",
    order: 100,
    text: "Use the read tool — not shell commands like cat — to inspect text files. Results include line numbers. Use offset and limit to continue reading large files.",
};

pub const WRITE_SECTION: PromptSection = PromptSection {
    id: "tool:write",
    order: 101,
    text: "Use the write tool to create files or completely replace file contents. Existing files are overwritten, so read an existing file first (the default fs-observation-policy requires it) and prefer edit for targeted changes.",
};

pub const EDIT_SECTION: PromptSection = PromptSection {
    id: "tool:edit",
    order: 102,
    text: "Use the edit tool for targeted changes to existing UTF-8 text files. It replaces literal old_string with new_string; by default old_string must appear exactly once. If old_string appears multiple times, provide a more specific old_string or set replace_all to true. Read the file first (the default fs-observation-policy requires it), unless you just created or edited it in this session.",
};

pub const GREP_SECTION: PromptSection = PromptSection {
    id: "tool:grep",
    order: 104,
    text: "Use the grep tool — not shell grep or rg — to search file contents. Use read on a matched file when you need surrounding context.",
};

/// `tool:glob` (order 103) depends on whether over-cap results are sampled.
pub fn glob_section_text(sampling: bool) -> String {
    let tail = if sampling {
        "while a larger one is sampled across top-level entries, so it spans the tree instead of one subtree."
    } else {
        "while a larger one keeps the modification-time-ordered head."
    };
    format!(
        "Use the glob tool — not shell find — to discover files by path pattern. A pattern with no \"/\" matches basenames at any depth, so \"*\" matches every file in the tree rather than its top level. Results are files only, never directories, and include hidden and ignored files: a result that fits comes back in modification-time order, {tail}"
    )
}

pub const GLOB_SECTION_ORDER: u32 = 103;

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// Names, types, enums and required-ness of every recorded upstream schema match ours.
    #[test]
    fn parameter_shapes_match_recorded_upstream_schemas() {
        let recorded = [
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/conformance/acp/web-fetch/upstream-tool-schemas.json"
            ),
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/conformance/acp/read-image/upstream-tool-schemas.json"
            ),
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/conformance/acp/fs-glob-sampling/upstream-tool-schemas.json"
            ),
        ];
        let ours = [
            ("read", read_parameters()),
            ("read_image", read_image_parameters()),
            ("write", write_parameters(true)),
            ("edit", edit_parameters(true)),
            ("glob", glob_parameters()),
            ("grep", grep_parameters()),
        ];
        let strip = |schema: &Value| -> Value {
            let mut schema = schema.clone();
            if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
                for prop in props.values_mut() {
                    if let Some(map) = prop.as_object_mut() {
                        map.remove("description");
                    }
                }
            }
            schema
        };
        let mut checked = 0;
        for file in recorded {
            let text = std::fs::read_to_string(file).unwrap();
            let tools: Value = serde_json::from_str(&text).unwrap();
            let tools = tools
                .as_array()
                .cloned()
                .or_else(|| tools["initial"].as_array().cloned())
                .unwrap_or_default();
            for tool in tools {
                let name = tool["name"].as_str().unwrap_or_default();
                if let Some((_, schema)) = ours.iter().find(|(n, _)| *n == name) {
                    assert_eq!(strip(schema), strip(&tool["parameters"]), "{name}");
                    checked += 1;
                }
            }
        }
        assert!(checked >= 6, "only {checked} schemas compared");
    }

    #[test]
    fn escalation_fields_only_when_confining() {
        assert!(
            write_parameters(false)["properties"]
                .get("sandbox_permissions")
                .is_none()
        );
        assert_eq!(
            edit_parameters(true)["properties"]["sandbox_permissions"]["enum"],
            json!(["workspace-write", "danger-full-access"])
        );
        assert!(grep_description(250).contains("Returns the first 250 matches inline"));
    }
}
