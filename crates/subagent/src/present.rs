//! How a person sees a delegated child in every front-end's transcript: the child's
//! `subagent/descriptor` as a progress line naming the provider, the mode and the label
//! (registered in the host's presenter registry by the plugin; no front-end decodes it).

use dsh_plugin::transcript::ChildProgress;
use dsh_plugin::transcript::Event;
use dsh_plugin::transcript::Item;

use crate::descriptor::DESCRIPTOR_KIND;
use crate::descriptor::Descriptor;

/// The event kind this presenter reads.
pub const KIND: &str = DESCRIPTOR_KIND;

/// `subagent/descriptor` → `delegated child (<provider>, <mode>): <label>`. A descriptor of
/// another version, or an unreadable one, shows nothing (resume ignores it too).
pub fn present(event: &Event) -> Vec<Item> {
    let Ok(Some(descriptor)) = Descriptor::parse(&event.data) else {
        return Vec::new();
    };
    let mut text = format!(
        "delegated child ({}, {})",
        descriptor.provider(),
        descriptor.mode()
    );
    if let Some(label) = descriptor.label() {
        text.push_str(": ");
        text.push_str(label);
    }
    vec![Item::Child(ChildProgress {
        session_id: None,
        text,
    })]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_descriptor_is_one_child_progress_line() {
        let event = Event::new(
            KIND,
            0,
            0,
            json!({"version": 2, "mode": "one-shot", "provider": "spawn", "label": "tests"}),
        );
        assert_eq!(
            present(&event),
            vec![Item::Child(ChildProgress {
                session_id: None,
                text: "delegated child (spawn, one-shot): tests".into(),
            })]
        );
        let future = Event::new(KIND, 0, 0, json!({"version": 99, "mode": "one-shot"}));
        assert!(present(&future).is_empty());
        assert!(present(&Event::new(KIND, 0, 0, json!("x"))).is_empty());
    }
}
