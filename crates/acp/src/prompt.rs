//! `session/prompt`: admission (block validation, flattening) and settlement (§1A).

use agent_client_protocol::Error as RpcError;
use agent_client_protocol::v1::schema::ContentBlock as AcpBlock;
use agent_client_protocol::v1::schema::StopReason;
use dsh_session::Event;
use dsh_session::data::TurnEnd;
use dsh_session::data::TurnEndReason;

use crate::error::internal_error;
use crate::error::invalid_params;
use crate::error::texts;

/// Validates every block before anything is written and rebuilds the prompt text in wire
/// order: adjacent text and resource links join into one text.
pub(crate) fn flatten(blocks: &[AcpBlock]) -> Result<String, RpcError> {
    let mut text = String::new();
    for block in blocks {
        match block {
            AcpBlock::Text(content) => text.push_str(&content.text),
            AcpBlock::ResourceLink(link) => {
                let name = serde_json::Value::String(link.name.clone());
                let uri = serde_json::Value::String(link.uri.clone());
                text.push_str(&format!("\n[resource_link name={name} uri={uri}]\n"));
            }
            // No attachment store is wired through the bridge yet, so images are never
            // advertised at `initialize`.
            AcpBlock::Image(_) => return Err(invalid_params(texts::IMAGE_NOT_ADVERTISED)),
            AcpBlock::Audio(_) => return Err(invalid_params(texts::AUDIO)),
            AcpBlock::Resource(_) => return Err(invalid_params(texts::RESOURCE)),
            _ => return Err(invalid_params("unsupported prompt content")),
        }
    }
    if text.trim().is_empty() {
        return Err(invalid_params(texts::EMPTY_PROMPT));
    }
    Ok(text)
}

/// How a prompt settles once the agent is idle, by precedence (§1A "Settlement").
///
/// `events` are the events committed since admission; `turn` is the turn that claimed the
/// prompt's message, if any did.
pub(crate) fn settle(
    cancelled: bool,
    delivery_failure: Option<String>,
    events: &[std::sync::Arc<Event>],
    turn: Option<u64>,
) -> Result<StopReason, RpcError> {
    if cancelled {
        return Ok(StopReason::Cancelled);
    }
    if let Some(failure) = delivery_failure {
        return Err(internal_error(texts::delivery_failed(&failure)));
    }
    let ends: Vec<TurnEnd> = events
        .iter()
        .filter_map(|e| e.decode::<TurnEnd>()?.ok())
        .collect();
    for end in &ends {
        if Some(end.turn) != turn
            && let TurnEndReason::Error { error } = &end.reason
        {
            return Err(internal_error(texts::turn_failed(&error.message)));
        }
    }
    let own = turn.and_then(|turn| ends.iter().find(|end| end.turn == turn));
    match own.map(|end| &end.reason) {
        Some(TurnEndReason::Error { error }) => {
            Err(internal_error(texts::turn_failed(&error.message)))
        }
        Some(TurnEndReason::Interrupted) => Ok(StopReason::Cancelled),
        Some(
            TurnEndReason::Completed
            | TurnEndReason::MaxTokens
            | TurnEndReason::Blocked
            | TurnEndReason::Aborted { .. },
        ) => Ok(StopReason::EndTurn),
        None if ends.iter().any(|end| end.reason == TurnEndReason::Blocked) => {
            Ok(StopReason::EndTurn)
        }
        None => Ok(StopReason::Cancelled),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use agent_client_protocol::v1::schema::ResourceLink;
    use agent_client_protocol::v1::schema::TextContent;
    use dsh_protocol::LlmFailure;
    use dsh_session::data::AbortReason;
    use serde_json::json;

    use super::*;

    fn end(seq: u64, turn: u64, reason: TurnEndReason) -> Arc<Event> {
        Arc::new(Event {
            kind: "turn/end".into(),
            seq,
            time: 0,
            data: serde_json::to_value(TurnEnd { turn, reason }).unwrap(),
            ignorable: false,
            source_event_seqs: None,
            surface_op: None,
        })
    }

    #[test]
    fn flattening_joins_text_and_links_in_wire_order() {
        let blocks = vec![
            AcpBlock::Text(TextContent::new("look at")),
            AcpBlock::ResourceLink(ResourceLink::new("a.rs", "file:///ws/a.rs")),
            AcpBlock::Text(TextContent::new("please")),
        ];
        assert_eq!(
            flatten(&blocks).unwrap(),
            "look at\n[resource_link name=\"a.rs\" uri=\"file:///ws/a.rs\"]\nplease"
        );
        let empty = flatten(&[AcpBlock::Text(TextContent::new("  \n"))]).unwrap_err();
        assert_eq!(
            serde_json::to_value(&empty).unwrap(),
            json!({"code":-32602,"message":"Invalid params: empty prompt"})
        );
    }

    #[test]
    fn settlement_precedence() {
        let failure = LlmFailure::new("AUTH", "simulated provider error (HTTP 401)");
        let error = end(
            5,
            1,
            TurnEndReason::Error {
                error: failure.clone(),
            },
        );
        assert_eq!(
            settle(
                true,
                Some("x".into()),
                std::slice::from_ref(&error),
                Some(1)
            )
            .unwrap(),
            StopReason::Cancelled
        );
        let rejected = settle(false, None, std::slice::from_ref(&error), Some(1)).unwrap_err();
        assert_eq!(
            rejected.message,
            "Internal error: turn failed: simulated provider error (HTTP 401)"
        );
        let other = settle(
            false,
            None,
            &[error, end(9, 2, TurnEndReason::Completed)],
            Some(2),
        )
        .unwrap_err();
        assert_eq!(
            other.message,
            "Internal error: turn failed: simulated provider error (HTTP 401)"
        );
        assert_eq!(
            settle(false, None, &[end(3, 1, TurnEndReason::MaxTokens)], Some(1)).unwrap(),
            StopReason::EndTurn
        );
        let aborted = TurnEndReason::Aborted {
            reason: AbortReason::Hook {
                reason: "stop".into(),
            },
        };
        assert_eq!(
            settle(false, None, &[end(3, 1, aborted)], Some(1)).unwrap(),
            StopReason::EndTurn
        );
        assert_eq!(
            settle(
                false,
                None,
                &[end(3, 1, TurnEndReason::Interrupted)],
                Some(1)
            )
            .unwrap(),
            StopReason::Cancelled
        );
        assert_eq!(
            settle(false, None, &[], None).unwrap(),
            StopReason::Cancelled
        );
        assert_eq!(
            settle(false, None, &[end(3, 1, TurnEndReason::Blocked)], None).unwrap(),
            StopReason::EndTurn
        );
        let delivery = settle(false, Some("closed".into()), &[], Some(1)).unwrap_err();
        assert_eq!(
            delivery.message,
            "Internal error: assistant output delivery failed: closed"
        );
    }
}
