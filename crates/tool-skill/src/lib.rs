//! `dsh-tool-skill`: the `skill` tool and the session skill catalog.
//!
//! Owns: filesystem skill discovery (ranked roots, `<name>/SKILL.md` and `<name>.md`, the
//! frontmatter rules), the tool's schema, checks, result text and card, and the catalog
//! message the composition adds at each pre-step ([`catalog::catalog_message`]) and the
//! `/<name>` user gesture ([`invocation::invocation_messages`]), and [`SkillPlugin`]
//! (`[plugins.skill]`), which wires both into the agent loop's pre-step hook.
//! Must not depend on: other capability crates, the host, a front-end.

pub mod catalog;
pub mod discovery;
pub mod invocation;
mod plugin;

pub use plugin::SkillPlugin;
pub use plugin::SkillSettings;

use std::path::PathBuf;
use std::sync::Arc;

use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_protocol::ContentBlock;
use dsh_tools::DefineError;
use dsh_tools::Tool;
use dsh_tools::ToolCallKind;
use dsh_tools::ToolCallView;
use dsh_tools::ToolDefinition;
use dsh_tools::ToolError;
use dsh_tools::ToolRegistry;
use dsh_tools::ToolRun;
use serde_json::Value;
use serde_json::json;

pub use discovery::Skill;
pub use discovery::SkillRoots;

/// The tool's name, as the model calls it.
pub const NAME: &str = "skill";

/// Provider name of filesystem skills (the canonical value's `provider`).
pub const FILESYSTEM_PROVIDER: &str = "filesystem";

const DESCRIPTION: &str = "Read the complete instructions of a skill listed in this session's skill catalog. Pass the skill's exact name; do this before starting work on a task that names the skill or plainly fits its description.";

/// Gives the tool the working directory of the calling session.
pub type CwdResolver = Arc<dyn Fn(&ToolRun) -> Result<PathBuf, ToolError> + Send + Sync>;

/// `&`, `<`, `>` escaped (element text).
pub fn escape_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `&`, `"`, `<` escaped (a double-quoted attribute).
pub fn escape_attr(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
}

/// How a loaded skill tells the model where its resources live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guidance {
    Directory(String),
    Url(String),
    Opaque(String),
    Provider(String),
}

impl Guidance {
    pub fn text(&self) -> String {
        match self {
            Self::Directory(path) => format!(
                "Base directory for this skill: {}\nResolve relative paths mentioned by this skill against the base directory before using them. Load referenced resources only as needed.",
                escape_text(path)
            ),
            Self::Url(url) => format!(
                "Base URL for this skill: {url}\nResolve relative URLs mentioned by this skill against the base URL before using them. Load referenced resources only as needed."
            ),
            Self::Opaque(description) => format!(
                "Resources for this skill: {description}\nLoad referenced resources only as needed."
            ),
            Self::Provider(provider) => format!(
                "Resources for this skill are managed by provider \"{provider}\".\nLoad referenced resources only as needed."
            ),
        }
    }
}

/// The `<skill_content>` block (no trailing newline; the body is inserted as is).
pub fn render(name: &str, guidance: &Guidance, body: &str) -> String {
    [
        format!("<skill_content name=\"{}\">", escape_attr(name)),
        "<skill_resources>".to_owned(),
        guidance.text(),
        "</skill_resources>".to_owned(),
        String::new(),
        "<skill_instructions>".to_owned(),
        body.to_owned(),
        "</skill_instructions>".to_owned(),
        "</skill_content>".to_owned(),
    ]
    .join("\n")
}

fn unknown(name: &str) -> ToolError {
    ToolError::new(format!(
        "skill \"{name}\" is unknown or no longer available"
    ))
}

fn not_model_invocable(name: &str) -> ToolError {
    ToolError::new(format!(
        "skill \"{name}\" is not available for model invocation"
    ))
}

/// Finds, checks and reads `name` for a session in `cwd`: the canonical value
/// `{name, provider, resourceBase, content}`.
pub fn load(roots: &SkillRoots, cwd: &std::path::Path, name: &str) -> Result<Value, ToolError> {
    if !discovery::is_valid_name(name) {
        return Err(ToolError::new(format!("invalid skill name \"{name}\"")));
    }
    let listed = roots
        .discover(cwd)
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| unknown(name))?;
    if !listed.model_invocable {
        return Err(not_model_invocable(name));
    }
    // The file may have changed since it was listed: re-read and re-check.
    let text = std::fs::read_to_string(&listed.file).map_err(|_| unknown(name))?;
    let meta = discovery::parse_skill(&text).map_err(|_| unknown(name))?;
    if meta.name != name {
        return Err(unknown(name));
    }
    if !meta.model_invocable {
        return Err(not_model_invocable(name));
    }
    let content = discovery::skill_body(&text).unwrap_or_default();
    Ok(json!({
        "name": name,
        "provider": FILESYSTEM_PROVIDER,
        "resourceBase": listed.base_dir.to_string_lossy(),
        "content": content,
    }))
}

fn render_value(value: &Value) -> String {
    let field = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default();
    let guidance = match value.get("resourceBase").and_then(Value::as_str) {
        Some(base) => Guidance::Directory(base.to_owned()),
        None => Guidance::Provider(field("provider").to_owned()),
    };
    render(field("name"), &guidance, field("content"))
}

fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "description": "Name of the skill to load, exactly as the skill catalog lists it."
            }
        },
        "required": ["name"]
    })
}

fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "provider": {"type": "string"},
            "resourceBase": {"type": "string"},
            "content": {"type": "string"}
        },
        "required": ["name", "provider", "content"]
    })
}

/// The `skill` definition: skills are looked up under `roots` and the caller's cwd.
pub fn definition(roots: SkillRoots, cwd: CwdResolver) -> Result<ToolDefinition, DefineError> {
    let roots = Arc::new(roots);
    Tool::builder(NAME)
        .description(DESCRIPTION)
        .validated_parameters(parameters())
        .raw_output(output_schema(), |_args, value| {
            Ok(vec![ContentBlock::text(render_value(value))])
        })
        .present_call(|args: &Value| {
            let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
            Some(
                ToolCallView::generic(format!("Load skill {name}"))
                    .kind(ToolCallKind::Read)
                    .raw_input(Value::String(name.to_owned())),
            )
        })
        .run(move |args: Value, run: ToolRun| {
            let roots = roots.clone();
            let cwd = cwd(&run);
            async move {
                let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
                load(&roots, &cwd?, name)
            }
        })
        .build()
}

/// Why the tools could not be set up (kept as a name for callers).
pub type SkillRegisterError = dsh_tools::SetupError;

/// Registers `skill` in `scope`'s layer.
pub fn register(
    registry: &ToolRegistry,
    scope: &Scope,
    roots: SkillRoots,
    cwd: CwdResolver,
) -> Result<Disposer, SkillRegisterError> {
    Ok(registry.register(scope, definition(roots, cwd)?)?)
}

#[cfg(test)]
mod tests;
