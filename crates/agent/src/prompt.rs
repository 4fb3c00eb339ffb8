//! System prompt assembly: sections, runtime contexts and strict `{{variable}}` interpolation.
//!
//! A prompt is assembled fresh for every step from registered sections (sorted by `order`,
//! stable for ties) and rendered by joining the non-empty sections with a blank line. Rendering
//! is strict so a typo in a template fails the turn before any request is sent, instead of
//! silently shipping `{{modle}}` to the model.

use dsh_sync::lock;
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
    /// A runtime-context suppressor (ALS §4.2 step 3): its section is a placeholder.
    Suppressor,
}

struct Entry {
    id: u64,
    owner: Scope,
    kind: EntryKind,
    section: Section,
}

struct SchemaEntry {
    id: u64,
    owner: Scope,
    provider: ToolSchemaProvider,
}

/// Sections and contexts registered by plugins (a kernel service). A registration made from an
/// agent scope (or below) applies to that agent only and shadows a global one of the same name.
#[derive(Default)]
pub struct PromptRegistry {
    entries: Arc<Mutex<Vec<Entry>>>,
    schemas: Arc<Mutex<Vec<SchemaEntry>>>,
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

    /// Suppresses runtime-context snapshots for the agents that see this registration (a
    /// persona with `includeRuntimeContext: false`); disposing the owner lifts it.
    pub fn suppress_contexts(&self, owner: &Scope) -> Disposer {
        self.add(
            owner,
            EntryKind::Suppressor,
            Section::new("runtime-context:suppressed", Slot::Environment, ""),
        )
    }

    /// Whether any suppressor visible to `agent` is active.
    pub fn contexts_suppressed(&self, agent: &Scope) -> bool {
        lock(&self.entries).iter().any(|entry| {
            entry.kind == EntryKind::Suppressor
                && match entry.owner.nearest_agent() {
                    None => true,
                    Some(owner_agent) => agent.is_within(&owner_agent),
                }
        })
    }

    /// Registers what goes on the wire as the tool list (a presentation such as Code Mode
    /// changes it). The newest provider visible to an agent wins, a scoped one over a global
    /// one; with none, the registry's plain schemas are offered.
    pub fn register_tool_schemas(&self, owner: &Scope, provider: ToolSchemaProvider) -> Disposer {
        let id = self.next_id();
        lock(&self.schemas).push(SchemaEntry {
            id,
            owner: owner.clone(),
            provider,
        });
        let schemas = Arc::downgrade(&self.schemas);
        owner.defer(move || {
            if let Some(schemas) = schemas.upgrade() {
                lock(&schemas).retain(|e| e.id != id);
            }
        })
    }

    /// The tool-schema provider that applies to `agent`, if any.
    pub fn tool_schemas(&self, agent: &Scope) -> Option<ToolSchemaProvider> {
        let entries = lock(&self.schemas);
        let visible = |scoped: bool| {
            entries
                .iter()
                .rev()
                .find(|entry| match entry.owner.nearest_agent() {
                    None => !scoped,
                    Some(owner_agent) => scoped && agent.is_within(&owner_agent),
                })
        };
        visible(true)
            .or_else(|| visible(false))
            .map(|entry| entry.provider.clone())
    }

    fn next_id(&self) -> u64 {
        let mut next = lock(&self.next);
        *next += 1;
        *next
    }

    fn add(&self, owner: &Scope, kind: EntryKind, section: Section) -> Disposer {
        let id = self.next_id();
        dsh_sync::lock(&self.entries).push(Entry {
            id,
            owner: owner.clone(),
            kind,
            section,
        });
        let entries = Arc::downgrade(&self.entries);
        owner.defer(move || {
            if let Some(entries) = entries.upgrade() {
                dsh_sync::lock(&entries).retain(|e| e.id != id);
            }
        })
    }

    /// `(sections, contexts)` visible to `agent`: global ones first, then the agent's scoped
    /// ones, each in registration order (so scoped entries shadow global ones by name).
    pub fn visible(&self, agent: &Scope) -> (Vec<Section>, Vec<Section>) {
        let entries = dsh_sync::lock(&self.entries);
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
                        EntryKind::Suppressor => {}
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

/// Where a section's text comes from: fixed, or computed at assembly time from the scope of
/// the agent being assembled for.
#[derive(Clone)]
pub enum SectionText {
    Static(String),
    Dynamic(Arc<dyn Fn(&Scope) -> String + Send + Sync>),
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
    fn evaluate(&self, agent: &Scope) -> String {
        match self {
            Self::Static(text) => text.clone(),
            Self::Dynamic(compute) => compute(agent),
        }
    }
}

/// Where a section sits. Slots are named bands listed here in prompt order; sections in one
/// slot are ordered by name, so neither mount order nor a hot reload ever moves a section.
/// `Identity` to `Reference` are bands of the system prompt; `Sandbox` to `Environment` are
/// bands of the runtime-context snapshot (contexts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Slot {
    /// `harness:identity`: who is speaking (upstream order -100).
    Identity,
    /// `deployment:persona`: the configured persona template (upstream order 0).
    Persona,
    /// Guidance that governs the whole turn, e.g. plan mode's policy (upstream order 50).
    Policy,
    /// How tools are reached and what was referenced: Code Mode's code-only rule, `@file`
    /// references (upstream order 99).
    Preamble,
    /// Per-tool guidance, one section per tool or tool family, named `tool:<name>` (upstream
    /// orders 100-199).
    Tools,
    /// Long reference material after the guidance: Code Mode's generated SDK.
    Reference,
    /// Context: the sandbox's file policy (first in the snapshot).
    Sandbox,
    /// Context: the approval policy.
    Approval,
    /// Context: facts about the environment and the session (time, terminal, workspace).
    Environment,
}

/// A named piece of the system prompt (or of the runtime context) in its slot.
#[derive(Debug, Clone)]
pub struct Section {
    pub name: String,
    pub slot: Slot,
    pub text: SectionText,
    /// The only system-prompt section of the agents that see it (a complete persona): the
    /// identity and every other section are dropped. More than one is an assembly error.
    pub complete: bool,
}

impl Section {
    pub fn new(name: impl Into<String>, slot: Slot, text: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            slot,
            text: SectionText::Static(text.into()),
            complete: false,
        }
    }

    /// Makes this the agent's whole system prompt (ALS §4.2 step 2).
    #[must_use]
    pub fn complete(mut self) -> Self {
        self.complete = true;
        self
    }

    /// A section whose text is computed at every assembly from the agent's scope.
    pub fn dynamic(
        name: impl Into<String>,
        slot: Slot,
        text: impl Fn(&Scope) -> String + Send + Sync + 'static,
    ) -> Self {
        Self {
            name: name.into(),
            slot,
            text: SectionText::Dynamic(Arc::new(text)),
            complete: false,
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
    #[error("more than one complete system prompt section: {0}")]
    ManyComplete(String),
}

/// The complete section among `sections` after shadowing by name (a later section replaces an
/// earlier one of the same name), if any; more than one is an error.
pub fn complete_section(sections: &[Section]) -> Result<Option<Section>, PromptError> {
    let mut merged: Vec<&Section> = Vec::with_capacity(sections.len());
    for section in sections {
        match merged.iter_mut().find(|s| s.name == section.name) {
            Some(slot) => *slot = section,
            None => merged.push(section),
        }
    }
    let complete: Vec<&Section> = merged.into_iter().filter(|s| s.complete).collect();
    match complete.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some((*one).clone())),
        many => Err(PromptError::ManyComplete(
            many.iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        )),
    }
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

/// Sorts sections by slot, then name, and evaluates them for `agent`. A later section with the
/// same name replaces an earlier one, as a scoped section shadows a global one.
pub fn assemble(sections: &[Section], contexts: &[Section], agent: &Scope) -> Assembly {
    Assembly {
        sections: evaluate(sections, agent),
        contexts: evaluate(contexts, agent),
    }
}

fn evaluate(sections: &[Section], agent: &Scope) -> Vec<(String, String)> {
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
    merged.sort_by(|a, b| (a.slot, &a.name).cmp(&(b.slot, &b.name)));
    merged
        .into_iter()
        .map(|s| (s.name.clone(), s.text.evaluate(agent)))
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
            Section::new("tool:guide", Slot::Tools, "Use the noop tool wisely."),
            Section::new("empty", Slot::Policy, ""),
            Section::new(
                "deployment:persona",
                Slot::Persona,
                "You are a test agent on {{model}}.",
            ),
            Section::new("harness:identity", Slot::Identity, HARNESS_IDENTITY),
        ];
        let assembly = assemble(&sections, &[], &Scope::root());
        assert_eq!(
            render_system(&assembly, &vars()).unwrap(),
            "You are an AI agent powered by DeepSeek Harness.\n\nYou are a test agent on mock.\n\nUse the noop tool wisely."
        );
    }

    #[test]
    fn a_later_section_with_the_same_name_shadows_the_earlier_one() {
        let sections = vec![
            Section::new("a", Slot::Tools, "global"),
            Section::new("a", Slot::Tools, "scoped"),
        ];
        assert_eq!(
            render_system(&assemble(&sections, &[], &Scope::root()), &vars()).unwrap(),
            "scoped"
        );
    }

    #[test]
    fn sections_of_one_slot_are_ordered_by_name_whatever_the_registration_order() {
        let root = Scope::root();
        let sections = vec![
            Section::new("tool:write", Slot::Tools, "W"),
            Section::new("tools:sdk", Slot::Reference, "S"),
            Section::new("tool:bash", Slot::Tools, "B"),
            Section::new("tools:code-only", Slot::Preamble, "C"),
        ];
        let names: Vec<String> = assemble(&sections, &[], &root)
            .sections
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert_eq!(
            names,
            ["tools:code-only", "tool:bash", "tool:write", "tools:sdk"]
        );
    }

    #[test]
    fn a_scoped_complete_section_shadows_and_two_are_an_error() {
        let plain = Section::new("deployment:persona", Slot::Persona, "global");
        let complete = Section::new("deployment:persona", Slot::Persona, "mine").complete();
        assert!(
            complete_section(std::slice::from_ref(&complete))
                .unwrap()
                .is_some()
        );
        // The later (scoped) one of a name wins, complete or not.
        assert!(
            complete_section(&[complete.clone(), plain.clone()])
                .unwrap()
                .is_none()
        );
        let found = complete_section(&[plain, complete.clone()])
            .unwrap()
            .unwrap();
        assert!(matches!(found.text, SectionText::Static(ref t) if t == "mine"));
        let other = Section::new("other", Slot::Policy, "x").complete();
        assert_eq!(
            complete_section(&[complete, other]).unwrap_err(),
            PromptError::ManyComplete("deployment:persona, other".into())
        );
    }

    #[test]
    fn a_suppressor_applies_to_its_agent_only_until_disposed() {
        let root = Scope::root();
        let a = root.child(dsh_kernel::ScopeKind::Agent, "a").unwrap();
        let b = root.child(dsh_kernel::ScopeKind::Agent, "b").unwrap();
        let registry = PromptRegistry::default();
        let piece = a.child(dsh_kernel::ScopeKind::Plugin, "persona").unwrap();
        registry.suppress_contexts(&piece);
        assert!(registry.contexts_suppressed(&a));
        assert!(!registry.contexts_suppressed(&b));
        piece.dispose();
        assert!(!registry.contexts_suppressed(&a));
    }

    #[test]
    fn dynamic_sections_see_the_agent_they_are_assembled_for() {
        let root = Scope::root();
        let agent = root.child(dsh_kernel::ScopeKind::Agent, "agent-7").unwrap();
        let sections = vec![Section::dynamic("who", Slot::Tools, |scope: &Scope| {
            scope.name().to_owned()
        })];
        assert_eq!(
            render_system(&assemble(&sections, &[], &agent), &vars()).unwrap(),
            "agent-7"
        );
    }

    #[test]
    fn the_newest_visible_tool_schema_provider_wins_scoped_over_global() {
        use dsh_kernel::ScopeKind;
        let root = Scope::root();
        let registry = PromptRegistry::default();
        let a = root.child(ScopeKind::Agent, "a").unwrap();
        let b = root.child(ScopeKind::Agent, "b").unwrap();
        let named = |name: &'static str| -> ToolSchemaProvider {
            Arc::new(move |_: &Scope| Ok(vec![schema(name)]))
        };
        assert!(registry.tool_schemas(&a).is_none());
        let global = registry.register_tool_schemas(&root, named("global"));
        let _scoped = registry.register_tool_schemas(&a, named("scoped"));
        let first = |scope: &Scope| {
            registry.tool_schemas(scope).unwrap()(scope).unwrap()[0]
                .name
                .clone()
        };
        assert_eq!(first(&a), "scoped");
        assert_eq!(first(&b), "global");
        global.dispose();
        assert!(registry.tool_schemas(&b).is_none());
        a.dispose();
        assert!(registry.tool_schemas(&a).is_none());
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
                Section::new("sandbox:policy", Slot::Sandbox, "P"),
                Section::new("x", Slot::Approval, ""),
            ],
            &Scope::root(),
        );
        let (text, sections) = render_contexts(&assembly, &vars()).unwrap().unwrap();
        assert_eq!(text, format!("{RUNTIME_CONTEXT_HEADER}\n\nP"));
        assert_eq!(
            sections,
            vec![("sandbox:policy".to_owned(), "P".to_owned())]
        );
        assert_eq!(
            render_contexts(&assemble(&[], &[], &Scope::root()), &vars()).unwrap(),
            None
        );
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
        let _ = registry.register_section(&root, Section::new("guide", Slot::Tools, "global"));
        let _ = registry.register_section(&a, Section::new("guide", Slot::Tools, "scoped"));
        let texts = |scope: &Scope| {
            render_system(&assemble(&registry.visible(scope).0, &[], scope), &vars()).unwrap()
        };
        assert_eq!(texts(&a), "scoped");
        assert_eq!(texts(&b), "global");
        a.dispose();
        assert_eq!(registry.visible(&a).0.len(), 1);
    }
}
