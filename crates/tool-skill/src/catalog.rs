//! The skill catalog: the durable `<system-reminder>` user message listing model-invocable
//! skills, re-sent only when the list changed since the newest catalog in the conversation.

use std::sync::Arc;

use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use serde_json::Value;
use serde_json::json;

use crate::Skill;
use crate::escape_text;

/// `source.kind` of a catalog message.
pub const CATALOG_KIND: &str = "skill-catalog";

/// Default `catalogDescriptionMaxLength`.
pub const DESCRIPTION_MAX_LENGTH: usize = 500;

const FIRST_INTRO: &str = "A skill is a reusable set of task-specific instructions. The following skills are available in this session:";
const UPDATE_INTRO: &str = "The available skill catalog changed. This list replaces every earlier skill catalog; the following skills are available in this session:";
const INSTRUCTIONS: &str = "If the user names a skill, or the task clearly matches a skill's description, call the `skill` tool with the exact skill name before taking task actions. Load all applicable skills, then follow their full instructions. This catalog contains summaries only; do not infer or follow a skill's instructions until it has been loaded.\nA user may also invoke a skill directly; its <skill_content> block then appears in this conversation. Follow it, and do not call the `skill` tool again for that skill.";
const EMPTY_UPDATE: &str = "The available skill catalog changed: no skills are available in this session any more. Do not call the `skill` tool with a name from an earlier catalog.";

/// One catalog line: the name and the collapsed, capped (unescaped) description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogEntry {
    pub name: String,
    pub description: String,
}

/// Whitespace collapsed to single spaces, then capped at `max` characters with `...`.
pub fn catalog_description(description: &str, max: usize) -> String {
    let collapsed = description.split_whitespace().collect::<Vec<_>>().join(" ");
    let max = max.max(3);
    if collapsed.chars().count() <= max {
        return collapsed;
    }
    let mut capped: String = collapsed.chars().take(max - 3).collect();
    capped.push_str("...");
    capped
}

/// The entries of the model-invocable skills, in the given (name) order.
pub fn entries(skills: &[Skill], max: usize) -> Vec<CatalogEntry> {
    skills
        .iter()
        .filter(|s| s.model_invocable)
        .map(|s| CatalogEntry {
            name: s.name.clone(),
            description: catalog_description(&s.description, max),
        })
        .collect()
}

fn entries_of(message: &Message) -> Option<Vec<CatalogEntry>> {
    if message.source.kind() != CATALOG_KIND {
        return None;
    }
    let list = message.source.get("entries").and_then(Value::as_array);
    Some(
        list.into_iter()
            .flatten()
            .filter_map(|e| {
                Some(CatalogEntry {
                    name: e.get("name")?.as_str()?.to_owned(),
                    description: e.get("description")?.as_str()?.to_owned(),
                })
            })
            .collect(),
    )
}

/// The catalog text for `entries`; `update` when an earlier catalog was published.
pub fn catalog_text(entries: &[CatalogEntry], update: bool) -> String {
    if entries.is_empty() {
        return format!("<system-reminder>\n{EMPTY_UPDATE}\n</system-reminder>");
    }
    let intro = if update { UPDATE_INTRO } else { FIRST_INTRO };
    let lines: String = entries
        .iter()
        .map(|e| format!("- `{}`: {}\n", e.name, escape_text(&e.description)))
        .collect();
    format!(
        "<system-reminder>\n{intro}\n\n<available_skills>\n{lines}</available_skills>\n\n{INSTRUCTIONS}\n</system-reminder>"
    )
}

/// The catalog message to add at this pre-step, if the catalog changed since the newest one in
/// `history` (plus `pending`, the messages about to be entered). `None` when unchanged, or when
/// there are no skills and no catalog was ever published.
pub fn catalog_message(
    skills: &[Skill],
    history: &[Arc<Message>],
    pending: &[Message],
    max: usize,
) -> Option<Message> {
    let current = entries(skills, max);
    let previous = pending
        .iter()
        .rev()
        .find_map(entries_of)
        .or_else(|| history.iter().rev().find_map(|m| entries_of(m)));
    match &previous {
        Some(previous) if *previous == current => return None,
        None if current.is_empty() => return None,
        _ => {}
    }
    let update = previous.is_some();
    let listed: Vec<Value> = current
        .iter()
        .map(|e| json!({"name": e.name, "description": e.description}))
        .collect();
    let mut map = serde_json::Map::new();
    map.insert("kind".into(), CATALOG_KIND.into());
    let mut source = MessageSource::from_map(map)?
        .with("form", "catalog")
        .with("entries", listed);
    if update {
        source = source.with(
            "update",
            if current.is_empty() {
                "empty"
            } else {
                "replace"
            },
        );
    }
    Some(Message::user(
        vec![ContentBlock::text(catalog_text(&current, update))],
        source,
    ))
}
