//! System prompt assembly: sections, runtime contexts and strict `{{variable}}` interpolation.
//!
//! A prompt is assembled fresh for every step from registered sections (sorted by `order`,
//! stable for ties) and rendered by joining the non-empty sections with a blank line. Rendering
//! is strict so a typo in a template fails the turn before any request is sent, instead of
//! silently shipping `{{modle}}` to the model.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;

use dsh_kernel::Disposer;
use dsh_kernel::Scope;
use dsh_protocol::ToolSchema;

/// Text of the built-in identity section (order −100).
pub const HARNESS_IDENTITY: &str = "You are an AI agent powered by DeepSeek Harness.";

/// The opening line of a runtime-context snapshot message.
pub const RUNTIME_CONTEXT_HEADER: &str =
    "Current runtime context. This snapshot supersedes earlier runtime-context snapshots.";

/// The marker written when a previously non-empty runtime context becomes empty.
pub const RUNTIME_CONTEXT_NONE: &str =
    "Current runtime context: none. Earlier runtime-context snapshots no longer apply.";

/// The plugin name on runtime-context snapshot messages.
pub const SNAPSHOT_PLUGIN: &str = "@deepseek-ai/dsh-system-prompt";

/// The placeholder in `tool_order` where unlisted tools go (lexicographically).
pub const UNLISTED_TOOLS: &str = "<unlisted-tools>";

/// Computes the tool schemas a request offers for an agent scope; it replaces the registry's
/// plain `schemas(scope)` when a presentation (Code Mode) changes what goes on the wire.
pub type ToolSchemaProvider = Arc<dyn Fn(&Scope) -> Result<Vec<ToolSchema>, String> + Send + Sync>;

/// Per-agent prompt configuration (§4.1).
#[derive(Clone)]
pub struct PromptConfig {
    /// The `deployment:persona` template (order 0); empty renders nothing.
    pub persona: String,
    pub include_harness_identity: bool,
    pub include_runtime_context: bool,
    /// The persona is the whole system prompt: no identity, registry or agent sections.
    pub persona_complete: bool,
    /// This agent's own sections; they shadow registry sections of the same name.
    pub sections: Vec<Section>,
    /// This agent's dynamic contexts (runtime-context snapshot sections).
    pub contexts: Vec<Section>,
    /// Extra variables; the loop adds `provider`, `model` and `cwd` (which win).
    pub variables: BTreeMap<String, String>,
    /// Explicit tool order; `None` sorts tools lexicographically by name.
    pub tool_order: Option<Vec<String>>,
    /// The wire tool list; `None` offers every tool the registry shows the agent.
    pub tool_schemas: Option<ToolSchemaProvider>,
}

impl std::fmt::Debug for PromptConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptConfig")
            .field("persona", &self.persona)
            .field("sections", &self.sections)
            .field("contexts", &self.contexts)
            .field("tool_order", &self.tool_order)
            .field("tool_schemas", &self.tool_schemas.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for PromptConfig {
    fn default() -> Self {
        Self {
            persona: String::new(),
            include_harness_identity: true,
            include_runtime_context: true,
            persona_complete: false,
            sections: Vec::new(),
            contexts: Vec::new(),
            variables: BTreeMap::new(),
            tool_order: None,
            tool_schemas: None,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum EntryKind {
    Section,
    Context,
}

struct Entry {
    id: u64,
    owner: Scope,
    kind: EntryKind,
    section: Section,
}

/// Sections and contexts registered by plugins (a kernel service). A registration made from an
/// agent scope (or below) applies to that agent only and shadows a global one of the same name.
#[derive(Default)]
pub struct PromptRegistry {
    entries: Arc<Mutex<Vec<Entry>>>,
    next: Mutex<u64>,
}

impl std::fmt::Debug for PromptRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptRegistry").finish_non_exhaustive()
    }
}

impl PromptRegistry {
    /// Registers a system prompt section owned by `owner`; disposing the owner removes it.
    pub fn register_section(&self, owner: &Scope, section: Section) -> Disposer {
        self.add(owner, EntryKind::Section, section)
    }

    /// Registers a dynamic context (a runtime-context snapshot section).
    pub fn register_context(&self, owner: &Scope, section: Section) -> Disposer {
        self.add(owner, EntryKind::Context, section)
    }

    fn add(&self, owner: &Scope, kind: EntryKind, section: Section) -> Disposer {
        let id = {
            let mut next = self
                .next
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *next += 1;
            *next
        };
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Entry {
                id,
                owner: owner.clone(),
                kind,
                section,
            });
        let entries = Arc::downgrade(&self.entries);
        owner.defer(move || {
            if let Some(entries) = entries.upgrade() {
                entries
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .retain(|e| e.id != id);
            }
        })
    }

    /// `(sections, contexts)` visible to `agent`: global ones first, then the agent's scoped
    /// ones, each in registration order (so scoped entries shadow global ones by name).
    pub fn visible(&self, agent: &Scope) -> (Vec<Section>, Vec<Section>) {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut sections = Vec::new();
        let mut contexts = Vec::new();
        for scoped in [false, true] {
            for entry in entries.iter() {
                let owner_agent = entry.owner.nearest_agent();
                let visible = match &owner_agent {
                    None => !scoped,
                    Some(owner_agent) => scoped && agent.is_within(owner_agent),
                };
                if visible {
                    match entry.kind {
                        EntryKind::Section => sections.push(entry.section.clone()),
                        EntryKind::Context => contexts.push(entry.section.clone()),
                    }
                }
            }
        }
        (sections, contexts)
    }
}

/// Orders tool schemas: by `order` (listed names at their position, unlisted ones sorted at
/// the `<unlisted-tools>` entry, or at the end without one), else lexicographically by name.
pub fn order_tools(
    mut schemas: Vec<ToolSchema>,
    order: Option<&[String]>,
) -> Result<Vec<ToolSchema>, PromptError> {
    schemas.sort_by(|a, b| a.name.cmp(&b.name));
    let Some(order) = order else {
        return Ok(schemas);
    };
    for name in order {
        if name != UNLISTED_TOOLS && !schemas.iter().any(|s| &s.name == name) {
            return Err(PromptError::UnknownToolInOrder(name.clone()));
        }
    }
    let unlisted: Vec<ToolSchema> = schemas
        .iter()
        .filter(|s| !order.contains(&s.name))
        .cloned()
        .collect();
    let mut out = Vec::with_capacity(schemas.len());
    let mut placed_unlisted = false;
    for name in order {
        if name == UNLISTED_TOOLS {
            if !placed_unlisted {
                out.extend(unlisted.iter().cloned());
                placed_unlisted = true;
            }
        } else if let Some(schema) = schemas.iter().find(|s| &s.name == name)
            && !out.iter().any(|s: &ToolSchema| s.name == schema.name)
        {
            out.push(schema.clone());
        }
    }
    if !placed_unlisted {
        out.extend(unlisted);
    }
    Ok(out)
}

/// Where a section's text comes from: fixed, or computed at assembly time.
#[derive(Clone)]
pub enum SectionText {
    Static(String),
    Dynamic(Arc<dyn Fn() -> String + Send + Sync>),
}

impl std::fmt::Debug for SectionText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Static(text) => f.debug_tuple("Static").field(text).finish(),
            Self::Dynamic(_) => f.write_str("Dynamic(..)"),
        }
    }
}

impl SectionText {
    fn evaluate(&self) -> String {
        match self {
            Self::Static(text) => text.clone(),
            Self::Dynamic(compute) => compute(),
        }
    }
}

/// A named, ordered piece of the system prompt (or of the runtime context).
#[derive(Debug, Clone)]
pub struct Section {
    pub name: String,
    pub order: f64,
    pub text: SectionText,
}

impl Section {
    pub fn new(name: impl Into<String>, order: f64, text: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            order,
            text: SectionText::Static(text.into()),
        }
    }
}

/// Why a prompt could not be rendered. The turn fails before any request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromptError {
    #[error("system prompt variable \"{0}\" is not defined")]
    UnknownVariable(String),
    #[error("system prompt has a malformed variable group near \"{0}\"")]
    Malformed(String),
    #[error("toolOrder lists unregistered tool \"{0}\"")]
    UnknownToolInOrder(String),
}

/// The assembled, evaluated prompt inputs of one step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Assembly {
    /// `(name, text)` in render order; empty texts are kept here and dropped at render time.
    pub sections: Vec<(String, String)>,
    /// Runtime contexts `(name, text)` in order; they become the snapshot message, never the
    /// system prompt.
    pub contexts: Vec<(String, String)>,
}

/// Sorts sections by `order` (stable: ties keep merge order) and evaluates them. A later
/// section with the same name replaces an earlier one in place, as a scoped section shadows a
/// global one.
pub fn assemble(sections: &[Section], contexts: &[Section]) -> Assembly {
    Assembly {
        sections: evaluate(sections),
        contexts: evaluate(contexts),
    }
}

fn evaluate(sections: &[Section]) -> Vec<(String, String)> {
    let mut merged: Vec<&Section> = Vec::with_capacity(sections.len());
    for section in sections {
        match merged
            .iter_mut()
            .find(|existing| existing.name == section.name)
        {
            Some(slot) => *slot = section,
            None => merged.push(section),
        }
    }
    merged.sort_by(|a, b| a.order.total_cmp(&b.order));
    merged
        .into_iter()
        .map(|s| (s.name.clone(), s.text.evaluate()))
        .collect()
}

/// Renders the system prompt: interpolate each section, drop empty results, join with `\n\n`.
pub fn render_system(
    assembly: &Assembly,
    vars: &BTreeMap<String, String>,
) -> Result<String, PromptError> {
    let mut parts = Vec::with_capacity(assembly.sections.len());
    for (_, text) in &assembly.sections {
        let rendered = interpolate(text, vars)?;
        if !rendered.is_empty() {
            parts.push(rendered);
        }
    }
    Ok(parts.join("\n\n"))
}

/// A rendered snapshot: the joined text and its non-empty `(name, text)` sections.
pub type RenderedContexts = (String, Vec<(String, String)>);

/// Renders the runtime-context snapshot text and its `(name, text)` sections; `None` when no
/// context has any text.
pub fn render_contexts(
    assembly: &Assembly,
    vars: &BTreeMap<String, String>,
) -> Result<Option<RenderedContexts>, PromptError> {
    let mut sections = Vec::new();
    for (name, text) in &assembly.contexts {
        let rendered = interpolate(text, vars)?;
        if !rendered.is_empty() {
            sections.push((name.clone(), rendered));
        }
    }
    if sections.is_empty() {
        return Ok(None);
    }
    let mut text = String::from(RUNTIME_CONTEXT_HEADER);
    for (_, section) in &sections {
        text.push_str("\n\n");
        text.push_str(section);
    }
    Ok(Some((text, sections)))
}

/// Strict `{{name}}` interpolation. A `{{` with no later `}}` is literal text; substituted values
/// are not re-scanned.
pub fn interpolate(template: &str, vars: &BTreeMap<String, String>) -> Result<String, PromptError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            break;
        };
        let name = &after[..close];
        if !is_variable_name(name) {
            return Err(PromptError::Malformed(format!("{{{{{name}}}}}")));
        }
        let value = vars
            .get(name)
            .ok_or_else(|| PromptError::UnknownVariable(name.to_owned()))?;
        out.push_str(&rest[..open]);
        out.push_str(value);
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z'))
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn vars() -> BTreeMap<String, String> {
        BTreeMap::from([("model".to_owned(), "mock".to_owned())])
    }

    #[test]
    fn sections_render_in_order_and_drop_empty_ones() {
        let sections = vec![
            Section::new("guide", 150.0, "Use the noop tool wisely."),
            Section::new("empty", 50.0, ""),
            Section::new(
                "deployment:persona",
                0.0,
                "You are a test agent on {{model}}.",
            ),
            Section::new("harness:identity", -100.0, HARNESS_IDENTITY),
        ];
        let assembly = assemble(&sections, &[]);
        assert_eq!(
            render_system(&assembly, &vars()).unwrap(),
            "You are an AI agent powered by DeepSeek Harness.\n\nYou are a test agent on mock.\n\nUse the noop tool wisely."
        );
    }

    #[test]
    fn a_later_section_with_the_same_name_shadows_the_earlier_one() {
        let sections = vec![
            Section::new("a", 1.0, "global"),
            Section::new("a", 1.0, "scoped"),
        ];
        assert_eq!(
            render_system(&assemble(&sections, &[]), &vars()).unwrap(),
            "scoped"
        );
    }

    #[test]
    fn unknown_and_malformed_variables_fail() {
        assert_eq!(
            interpolate("{{nope}}", &vars()),
            Err(PromptError::UnknownVariable("nope".into()))
        );
        assert!(matches!(
            interpolate("{{Bad}} x }}", &vars()),
            Err(PromptError::Malformed(_))
        ));
        assert_eq!(
            interpolate("literal {{ only", &vars()).unwrap(),
            "literal {{ only"
        );
        assert_eq!(
            interpolate("{{model}}{{model}}", &vars()).unwrap(),
            "mockmock"
        );
    }

    #[test]
    fn contexts_render_under_the_snapshot_header() {
        let assembly = assemble(
            &[],
            &[
                Section::new("sandbox:policy", 1.0, "P"),
                Section::new("x", 2.0, ""),
            ],
        );
        let (text, sections) = render_contexts(&assembly, &vars()).unwrap().unwrap();
        assert_eq!(text, format!("{RUNTIME_CONTEXT_HEADER}\n\nP"));
        assert_eq!(
            sections,
            vec![("sandbox:policy".to_owned(), "P".to_owned())]
        );
        assert_eq!(render_contexts(&assemble(&[], &[]), &vars()).unwrap(), None);
    }

    fn schema(name: &str) -> ToolSchema {
        ToolSchema {
            name: name.into(),
            description: String::new(),
            parameters: serde_json::json!({}),
        }
    }

    #[test]
    fn tool_order_places_listed_names_and_sorts_the_rest() {
        let names = |v: Vec<ToolSchema>| v.into_iter().map(|s| s.name).collect::<Vec<_>>();
        let all = || vec![schema("b"), schema("c"), schema("a")];
        assert_eq!(names(order_tools(all(), None).unwrap()), ["a", "b", "c"]);
        let order = vec!["c".to_owned(), UNLISTED_TOOLS.to_owned(), "a".to_owned()];
        assert_eq!(
            names(order_tools(all(), Some(&order)).unwrap()),
            ["c", "b", "a"]
        );
        let order = vec!["b".to_owned()];
        assert_eq!(
            names(order_tools(all(), Some(&order)).unwrap()),
            ["b", "a", "c"]
        );
        let order = vec!["echo".to_owned()];
        assert_eq!(
            order_tools(all(), Some(&order)).unwrap_err().to_string(),
            "toolOrder lists unregistered tool \"echo\""
        );
    }

    #[test]
    fn scoped_registrations_apply_to_their_agent_only_and_vanish_with_it() {
        use dsh_kernel::ScopeKind;
        let root = Scope::root();
        let registry = PromptRegistry::default();
        let a = root.child(ScopeKind::Agent, "a").unwrap();
        let b = root.child(ScopeKind::Agent, "b").unwrap();
        let _ = registry.register_section(&root, Section::new("guide", 1.0, "global"));
        let _ = registry.register_section(&a, Section::new("guide", 1.0, "scoped"));
        let texts = |scope: &Scope| {
            render_system(&assemble(&registry.visible(scope).0, &[]), &vars()).unwrap()
        };
        assert_eq!(texts(&a), "scoped");
        assert_eq!(texts(&b), "global");
        a.dispose();
        assert_eq!(registry.visible(&a).0.len(), 1);
    }
}
