//! How a person sees the audit pair in every front-end's transcript: `approval/asked` as an
//! approval awaiting an answer, `approval/decided` as its settlement (registered in the host's
//! presenter registry by the plugin; no front-end decodes these events).

use dsh_plugin::transcript::ApprovalAsked;
use dsh_plugin::transcript::ApprovalSettled;
use dsh_plugin::transcript::Event;
use dsh_plugin::transcript::Item;
use serde_json::Value;

/// The event kind of a request.
pub const ASKED: &str = "approval/asked";
/// The event kind of its outcome.
pub const DECIDED: &str = "approval/decided";

fn text(event: &Event, key: &str) -> Option<String> {
    event
        .data
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// `approval/asked {id, toolName, callId?, reason?}` → the approval awaiting an answer. A
/// record without an id or a tool name shows nothing.
pub fn asked(event: &Event) -> Vec<Item> {
    let (Some(id), Some(tool)) = (text(event, "id"), text(event, "toolName")) else {
        return Vec::new();
    };
    vec![Item::ApprovalAsked(ApprovalAsked {
        id,
        call_id: text(event, "callId"),
        tool,
        reason: text(event, "reason"),
    })]
}

/// `approval/decided {id, outcome}` → the approval settled.
pub fn decided(event: &Event) -> Vec<Item> {
    let (Some(id), Some(outcome)) = (text(event, "id"), text(event, "outcome")) else {
        return Vec::new();
    };
    vec![Item::ApprovalSettled(ApprovalSettled { id, outcome })]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_audit_pair_is_an_approval_asked_then_settled() {
        let ask = Event::new(
            ASKED,
            3,
            0,
            json!({"id": "a1", "toolName": "bash", "callId": "c1", "reason": "writes"}),
        );
        assert_eq!(
            asked(&ask),
            vec![Item::ApprovalAsked(ApprovalAsked {
                id: "a1".into(),
                call_id: Some("c1".into()),
                tool: "bash".into(),
                reason: Some("writes".into()),
            })]
        );
        let done = Event::new(DECIDED, 4, 0, json!({"id": "a1", "outcome": "approved"}));
        assert_eq!(
            decided(&done),
            vec![Item::ApprovalSettled(ApprovalSettled {
                id: "a1".into(),
                outcome: "approved".into(),
            })]
        );
    }

    #[test]
    fn an_unreadable_record_shows_nothing() {
        assert!(asked(&Event::new(ASKED, 0, 0, json!({"toolName": "bash"}))).is_empty());
        assert!(decided(&Event::new(DECIDED, 0, 0, json!({"id": 1}))).is_empty());
    }
}
