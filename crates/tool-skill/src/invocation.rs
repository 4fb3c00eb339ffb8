//! The user gesture: `/<name>` in a user's own message loads a user-invocable skill into the
//! conversation as an extra user message, so the model does not have to call the tool.

use std::path::Path;

use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use dsh_protocol::text_of;

use crate::Guidance;
use crate::SkillRoots;
use crate::discovery;
use crate::render;

/// `source.kind` of an invocation message.
pub const INVOCATION_KIND: &str = "skill-invocation";

/// Skill names invoked as whitespace-bounded `/<name>` words, first mention order, no repeats.
pub fn invoked_names(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        let Some(name) = word.strip_prefix('/') else {
            continue;
        };
        if discovery::is_valid_name(name) && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    names
}

/// One message per user-invocable skill a claimed user message names, in mention order.
pub fn invocation_messages(roots: &SkillRoots, cwd: &Path, claimed: &[Message]) -> Vec<Message> {
    let mut names: Vec<String> = Vec::new();
    for message in claimed.iter().filter(|m| m.source.kind() == "user") {
        for name in invoked_names(&text_of(&message.content)) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    if names.is_empty() {
        return Vec::new();
    }
    let skills = roots.discover(cwd);
    names
        .iter()
        .filter_map(|name| {
            let skill = skills
                .iter()
                .find(|s| &s.name == name && s.user_invocable)?;
            let text = std::fs::read_to_string(&skill.file).ok()?;
            let body = discovery::skill_body(&text)?;
            let guidance = Guidance::Directory(skill.base_dir.to_string_lossy().into_owned());
            let mut map = serde_json::Map::new();
            map.insert("kind".into(), INVOCATION_KIND.into());
            let source = MessageSource::from_map(map)?
                .with("name", name.as_str())
                .with("form", "instructions");
            Some(Message::user(
                vec![ContentBlock::text(render(name, &guidance, &body))],
                source,
            ))
        })
        .collect()
}
