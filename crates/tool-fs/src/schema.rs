//! What the model sees of each tool: descriptions, parameter schemas and the system-prompt
//! sections the tools contribute. Names, types, enums, required lists and property order are
//! interface and follow upstream exactly; every description and section text is our own prose.

use serde_json::Value;
use serde_json::json;

pub const READ_DESCRIPTION: &str = "Read a UTF-8 text file and get its lines back numbered from 1. A large file comes back one page at a time, and each page's footer gives the `offset` to continue from. Binary and non-UTF-8 files are refused.";
pub const READ_IMAGE_DESCRIPTION: &str = "Load a PNG, JPEG, WebP or GIF file and attach the picture itself to the conversation so you can look at it. Works only when the current model accepts image input.";
pub const WRITE_DESCRIPTION: &str =
    "Create a UTF-8 text file, or replace the entire contents of an existing one.";
pub const EDIT_DESCRIPTION: &str = "Change part of an existing UTF-8 text file by swapping an exact piece of its text for new text.";
pub const GREP_DESCRIPTION_TEMPLATE: &str = "Search inside files for a ripgrep regular expression. Matches come back grouped by file, each as its line number and the line's text; hidden and ignored files are skipped, as with plain `rg`. At most {max} matches are shown; when there are more, the result says where the complete match list was stored. To see the lines around a match, read that file.";
pub const STR_REPLACE_EDITOR_DESCRIPTION: &str = "View, create and edit files addressed by absolute path.\n* `view` on a file prints its lines numbered like `cat -n`, optionally only `view_range`; on a directory it lists files and subdirectories up to two levels deep, leaving out hidden entries, node_modules and __pycache__.\n* `create` writes a new file from `file_text` and refuses a path that already exists.\n* `str_replace` replaces `old_str` with `new_str`. `old_str` must match the file exactly, whitespace and indentation included, and occur only once: if it occurs several times nothing is changed, so include enough surrounding lines to make it unique.\n* `insert` adds `new_str` after line `insert_line`.\n* Changes are written to disk and persist between calls. Very long output is cut short and marked `<response clipped>`.";

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
                "description": "Wider sandbox mode to request for this one operation. Use it only to retry, once, an operation the sandbox has just denied; it needs a justification and the user's approval.",
                "enum": ["workspace-write", "danger-full-access"]
            }),
        );
        props.insert(
            "justification".into(),
            string("One sentence, shown to the user, on why this file operation needs the wider mode. Required whenever sandbox_permissions is set."),
        );
    }
    schema
}

pub fn read_parameters() -> Value {
    object(
        json!({
            "file_path": string("File to read. A relative path resolves against the session workspace."),
            "offset": {"type": "number", "description": "Line number to start at, counting from 1. Default 1."},
            "limit": {"type": "number", "description": "Most lines to return. Default 2000, which is also the maximum."}
        }),
        &["file_path"],
    )
}

pub fn read_image_parameters() -> Value {
    object(
        json!({"file_path": string("Image file to load (.png, .jpg, .jpeg, .webp or .gif). A relative path resolves against the session workspace.")}),
        &["file_path"],
    )
}

pub fn write_parameters(escalation: bool) -> Value {
    with_escalation(
        object(
            json!({
                "file_path": string("File to create or overwrite. A relative path resolves against the session workspace."),
                "content": string("The complete new contents of the file, as UTF-8 text.")
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
                "file_path": string("File to change. A relative path resolves against the session workspace."),
                "old_string": string("The exact text to find, whitespace and indentation included. Must not be empty."),
                "new_string": string("The text to put in its place; an empty string deletes it. Must differ from old_string."),
                "replace_all": {"type": "boolean", "description": "Replace every occurrence of old_string. Default false, in which case old_string must occur exactly once."}
            }),
            &["file_path", "old_string", "new_string"],
        ),
        escalation,
    )
}

pub fn glob_parameters() -> Value {
    object(
        json!({
            "pattern": string("Glob matched against file paths, such as \"**/*.ts\" or \"src/**/*.test.js\". A pattern without \"/\" is tested against file names at every depth, so \"*\" or \"*.ts\" covers the whole tree; put a \"/\" in the pattern to tie it to particular directory levels."),
            "path": string("Directory to search under. If omitted, the session workspace; relative paths are taken from there.")
        }),
        &["pattern"],
    )
}

pub fn grep_parameters() -> Value {
    object(
        json!({
            "pattern": string("The regular expression to look for, in ripgrep syntax."),
            "path": string("Where to search: a single file or a directory. If omitted, the session workspace; relative paths are taken from there."),
            "include": string("A single glob limiting which files are searched, such as \"*.ts\" or \"*.{js,jsx}\". Use {a,b} alternation rather than a comma-separated list; negated (\"!\") globs are rejected.")
        }),
        &["pattern"],
    )
}

pub fn str_replace_editor_parameters() -> Value {
    object(
        json!({
            "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert"], "description": "The operation to perform."},
            "path": string("Absolute path of the file or directory."),
            "file_text": string("For `create` (required): the full contents of the new file."),
            "insert_line": {"type": "integer", "description": "For `insert` (required): the line after which `new_str` goes; 0 puts it before the first line."},
            "new_str": string("For `str_replace`: the replacement text, empty if omitted. For `insert` (required): the text to add."),
            "old_str": string("For `str_replace` (required): the exact text to replace; it must occur only once."),
            "view_range": {"type": "array", "items": {"type": "integer"}, "description": "Optional, for `view` of a file: [first, last] line numbers counting from 1; a last of -1 means through the end of the file."}
        }),
        &["command", "path"],
    )
}

/// A system-prompt section of the tool guidance slot (sections there are ordered by id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptSection {
    pub id: &'static str,
    pub text: &'static str,
}

pub const READ_SECTION: PromptSection = PromptSection {
    id: "tool:read",
    text: "Inspect text files with the read tool rather than shell commands such as cat. Its output is line-numbered; page through a large file with offset and limit.",
};

pub const WRITE_SECTION: PromptSection = PromptSection {
    id: "tool:write",
    text: "The write tool creates a file or replaces everything in it. Because it overwrites, read an existing file before replacing it (the default fs-observation-policy refuses otherwise), and use edit instead when only part of a file should change.",
};

pub const EDIT_SECTION: PromptSection = PromptSection {
    id: "tool:edit",
    text: "Make targeted changes to existing UTF-8 text files with the edit tool. It swaps the literal old_string for new_string, and old_string has to occur exactly once unless replace_all is true; when it matches in several places, lengthen it until it is unique or set replace_all. Read the file before editing it (the default fs-observation-policy enforces this), except a file you created or edited yourself earlier in this session.",
};

pub const GREP_SECTION: PromptSection = PromptSection {
    id: "tool:grep",
    text: "Search file contents with the grep tool, not shell grep or rg. When you need the lines around a match, read that file.",
};

/// `tool:glob`: its text depends on whether over-cap results are sampled.
pub fn glob_section_text(sampling: bool) -> String {
    let tail = if sampling {
        "a result over the limit is sampled across the top-level entries, so it covers the whole tree rather than one subtree."
    } else {
        "a result over the limit keeps only the oldest files in that order."
    };
    format!(
        "Find files by path pattern with the glob tool rather than shell find. A pattern without \"/\" is matched against file names at every depth, so \"*\" returns files from the whole tree, not just its top level. Only files are returned, never directories, and hidden and ignored files are included. A result within the limit is ordered by modification time, oldest first; {tail}"
    )
}

pub const GLOB_SECTION: &str = "tool:glob";

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const CONFORMANCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/conformance");

    /// Every recorded scenario directory (`<surface>/<scenario>`).
    fn scenario_dirs() -> Vec<std::path::PathBuf> {
        let mut dirs = Vec::new();
        for surface in std::fs::read_dir(CONFORMANCE).unwrap() {
            let surface = surface.unwrap().path();
            if surface.is_dir() {
                for scenario in std::fs::read_dir(&surface).unwrap() {
                    dirs.push(scenario.unwrap().path());
                }
            }
        }
        dirs.sort();
        dirs
    }

    /// The schema with every prose `description` string removed; names, types, enums,
    /// required lists and key order stay. (A property named `description` is an object.)
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

    fn descriptions(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, v) in map {
                    match v {
                        Value::String(text) if key == "description" => out.push(text.clone()),
                        other => descriptions(other, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| descriptions(v, out)),
            _ => {}
        }
    }

    fn recorded_tools(file: &std::path::Path) -> Vec<Value> {
        let tools: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        tools
            .as_array()
            .cloned()
            .or_else(|| tools["initial"].as_array().cloned())
            .unwrap_or_default()
    }

    /// Names, types, enums, required lists and property order of every recorded upstream
    /// schema match ours; only the prose differs.
    #[test]
    fn parameter_shapes_match_recorded_upstream_schemas() {
        let recorded = ["acp/web-fetch", "acp/read-image", "acp/fs-glob-sampling"]
            .map(|dir| format!("{CONFORMANCE}/{dir}/upstream-tool-schemas.json"));
        let ours = [
            ("read", read_parameters()),
            ("read_image", read_image_parameters()),
            ("write", write_parameters(true)),
            ("edit", edit_parameters(true)),
            ("glob", glob_parameters()),
            ("grep", grep_parameters()),
        ];
        let mut checked = 0;
        for file in recorded {
            for tool in recorded_tools(std::path::Path::new(&file)) {
                let name = tool["name"].as_str().unwrap_or_default();
                if let Some((_, schema)) = ours.iter().find(|(n, _)| *n == name) {
                    assert_eq!(
                        serde_json::to_string(&shape(schema)).unwrap(),
                        serde_json::to_string(&shape(&tool["parameters"])).unwrap(),
                        "{name}"
                    );
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
        let justification = edit_parameters(true)["properties"]["justification"]["description"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(justification.contains("sandbox_permissions"));
    }

    #[test]
    fn prose_states_the_facts_the_model_needs() {
        assert!(grep_description(250).contains("At most 250 matches"));
        assert!(READ_DESCRIPTION.contains("`offset`"));
        let edit = edit_parameters(false);
        assert!(
            edit["properties"]["replace_all"]["description"]
                .as_str()
                .unwrap()
                .contains("exactly once")
        );
        for fact in ["exactly once", "replace_all", "fs-observation-policy"] {
            assert!(EDIT_SECTION.text.contains(fact), "{fact}");
        }
        assert!(WRITE_SECTION.text.contains("read an existing file"));
        for sampling in [true, false] {
            let section = glob_section_text(sampling);
            for fact in [
                "never directories",
                "hidden and ignored",
                "\"*\"",
                "oldest first",
            ] {
                assert!(section.contains(fact), "{fact} ({sampling})");
            }
        }
        assert!(glob_section_text(true).contains("sampled across the top-level entries"));
        assert!(!glob_section_text(false).contains("sampled"));
        for fact in [
            "absolute path",
            "<response clipped>",
            "only once",
            "`cat -n`",
        ] {
            assert!(STR_REPLACE_EDITOR_DESCRIPTION.contains(fact), "{fact}");
        }
    }

    /// Descriptions and sections are our own prose: none may be a verbatim copy of a recorded
    /// upstream description or system-prompt paragraph.
    #[test]
    fn no_prose_is_copied_from_upstream() {
        let mut upstream = Vec::new();
        for dir in scenario_dirs() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if name.starts_with("upstream-tool-schemas") {
                    let value: Value =
                        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
                    descriptions(&value, &mut upstream);
                } else if name.starts_with("upstream-system-prompt") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    upstream.extend(text.split("\n\n").map(|p| p.trim().to_owned()));
                }
            }
        }
        assert!(
            upstream.len() > 50,
            "only {} upstream texts",
            upstream.len()
        );
        let mut ours: Vec<String> = [
            READ_DESCRIPTION,
            READ_IMAGE_DESCRIPTION,
            WRITE_DESCRIPTION,
            EDIT_DESCRIPTION,
            STR_REPLACE_EDITOR_DESCRIPTION,
            READ_SECTION.text,
            WRITE_SECTION.text,
            EDIT_SECTION.text,
            GREP_SECTION.text,
        ]
        .map(str::to_owned)
        .into();
        ours.extend([
            grep_description(250),
            glob_description(4, true),
            glob_description(100, false),
            glob_section_text(true),
            glob_section_text(false),
        ]);
        for schema in [
            read_parameters(),
            read_image_parameters(),
            write_parameters(true),
            edit_parameters(true),
            glob_parameters(),
            grep_parameters(),
            str_replace_editor_parameters(),
        ] {
            descriptions(&schema, &mut ours);
        }
        for text in &ours {
            assert!(!upstream.contains(text), "copied from upstream: {text}");
        }
    }
}
