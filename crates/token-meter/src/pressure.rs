//! The context-fill projection front-ends show (§7.4 `contextPressure`): the newest provider
//! prompt size plus the heuristic delta of every surface change since. A surface replacement is
//! priced by the shadow-price event right before it, so the projection never rescans the log.
//! UI only: behaviour never depends on it.

use dsh_session::Event;
use dsh_session::SurfaceOp;
use dsh_session::data::AssistantMessage;
use dsh_session::data::RequestContext;
use dsh_session::kind;
use serde::Serialize;
use serde_json::Value;

use crate::estimate::estimate_message;
use crate::fold::event_message;

/// What a status line shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextPressure {
    /// The newest provider prompt size (input + cache read + cache write; output excluded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pressure_tokens: Option<u64>,
    /// `pressure_tokens` plus the estimated change of the surface since that sample.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projected_tokens: Option<u64>,
    /// From the newest `request/context`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
}

impl ContextPressure {
    /// `projected / window` in `0.0..` (may exceed 1), when both are known.
    pub fn fill(&self) -> Option<f64> {
        match (self.projected_tokens, self.context_window) {
            (Some(projected), Some(window)) if window > 0 => Some(projected as f64 / window as f64),
            _ => None,
        }
    }
}

/// The incremental fold behind [`ContextPressure`].
#[derive(Debug, Clone, Default)]
pub struct PressureFold {
    next_seq: u64,
    value: ContextPressure,
    /// Signed running delta since the sample.
    delta: i64,
    /// `shadowedTokenCount` of the shadow-price event just folded, for the replacement after it.
    shadow_price: Option<u64>,
}

impl PressureFold {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    pub fn value(&self) -> ContextPressure {
        self.value
    }

    /// Folds one event (events older than `next_seq()` are ignored).
    pub fn advance(&mut self, event: &Event) {
        if event.seq < self.next_seq {
            return;
        }
        self.next_seq = event.seq + 1;
        let shadow_price = self.shadow_price.take();
        match event.kind.as_str() {
            kind::REQUEST_CONTEXT => {
                if let Ok(context) = event.data.decode::<RequestContext>() {
                    self.value.context_window = context.context_window;
                }
                return;
            }
            "compaction/summary" | "compaction/prune" => {
                // Decoded from the text: a tree cached on the event would outlive this read.
                #[derive(serde::Deserialize)]
                struct Shadow {
                    #[serde(rename = "shadowedTokenCount")]
                    tokens: Option<Value>,
                }
                self.shadow_price = event
                    .data
                    .decode::<Shadow>()
                    .ok()
                    .and_then(|shadow| shadow.tokens?.as_u64());
                return;
            }
            kind::ASSISTANT_MESSAGE => {
                if let Ok(AssistantMessage {
                    usage: Some(usage), ..
                }) = event.data.decode::<AssistantMessage>()
                {
                    let prompt = usage.input_tokens
                        + usage.cache_read_tokens.unwrap_or(0)
                        + usage.cache_write_tokens.unwrap_or(0);
                    self.value.pressure_tokens = Some(prompt);
                    self.value.projected_tokens = Some(prompt);
                    self.delta = 0;
                    return;
                }
            }
            _ => {}
        }
        let Some(op) = event.surface_op() else {
            return;
        };
        let price = event_message(event)
            .ok()
            .flatten()
            .as_ref()
            .map_or(0, estimate_message) as i64;
        let change = match op {
            SurfaceOp::Append => price,
            SurfaceOp::Replace { .. } => price - shadow_price.unwrap_or(0) as i64,
        };
        self.delta += change;
        if let Some(sample) = self.value.pressure_tokens {
            self.value.projected_tokens = Some((sample as i64 + self.delta).max(0) as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_protocol::ContentBlock;
    use dsh_protocol::Message;
    use dsh_protocol::MessageSource;
    use dsh_protocol::TokenUsage;
    use dsh_session::SessionHeader;
    use dsh_session::SessionLog;
    use dsh_session::SurfaceIntent;
    use dsh_session::data::StepStart;
    use dsh_session::data::UserMessage;
    use serde_json::json;

    #[test]
    fn projection_follows_usage_appends_and_shadow_priced_replacements() {
        let log = SessionLog::in_memory(SessionHeader::new("s", None));
        let mut fold = PressureFold::new();
        let feed = |fold: &mut PressureFold| {
            for event in log.events_since(fold.next_seq()).unwrap() {
                fold.advance(&event);
            }
        };
        log.append_data(
            &RequestContext {
                provider: "p".into(),
                model: "m".into(),
                context_window: Some(1000),
            },
            None,
        )
        .unwrap();
        let first = log
            .append_data(
                &UserMessage(Message::user_text("a".repeat(400))),
                Some(SurfaceIntent::append()),
            )
            .unwrap()
            .seq;
        feed(&mut fold);
        assert_eq!(fold.value().projected_tokens, None);
        assert_eq!(fold.value().context_window, Some(1000));
        log.append_data(&StepStart { turn: 1, step: 1 }, None)
            .unwrap();
        log.append_data(
            &AssistantMessage {
                turn: 1,
                step: 1,
                message: Message::assistant(
                    vec![ContentBlock::text("ok")],
                    MessageSource::model("p", "m"),
                ),
                interrupted: false,
                usage: Some(TokenUsage {
                    input_tokens: 150,
                    output_tokens: 9,
                    cache_read_tokens: Some(50),
                    cache_write_tokens: None,
                    reasoning_tokens: None,
                }),
            },
            Some(SurfaceIntent::append_from(vec![])),
        )
        .unwrap();
        feed(&mut fold);
        assert_eq!(fold.value().pressure_tokens, Some(200));
        assert_eq!(fold.value().projected_tokens, Some(200));
        log.append_data(
            &UserMessage(Message::user_text("0123456789")),
            Some(SurfaceIntent::append()),
        )
        .unwrap();
        feed(&mut fold);
        assert_eq!(fold.value().projected_tokens, Some(211));
        assert_eq!(fold.value().fill(), Some(0.211));
        log.append(
            "compaction/summary",
            json!({"shadowedTokenCount": 108}),
            None,
        )
        .unwrap();
        log.append_data(
            &UserMessage(Message::user(
                vec![ContentBlock::text("0123456789")],
                MessageSource::plugin("compact"),
            )),
            Some(SurfaceIntent::replace(first, first, vec![first])),
        )
        .unwrap();
        feed(&mut fold);
        assert_eq!(fold.value().projected_tokens, Some(211 - 108 + 11));
    }
}
