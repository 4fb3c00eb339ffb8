//! The fixed heuristic (`estimate.ts`). Lengths are UTF-16 code units, as upstream measures
//! JavaScript strings, so thresholds match for CJK and astral text too.

use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::ToolSchema;
use dsh_session::data::EpochHeader;

/// Characters per token of the heuristic.
pub const CHARS_PER_TOKEN: u64 = 4;
/// Added for every content block.
pub const BLOCK_OVERHEAD: u64 = 4;
/// Added for every message.
pub const ROLE_OVERHEAD: u64 = 4;

/// UTF-16 code units of `text` (JavaScript's `length`).
pub fn utf16_len(text: &str) -> u64 {
    text.encode_utf16().count() as u64
}

/// `ceil(len / 4)` over UTF-16 code units.
pub fn estimate_text(text: &str) -> u64 {
    utf16_len(text).div_ceil(CHARS_PER_TOKEN)
}

/// One block: text and reasoning by their text, tool calls by name and raw arguments, tool
/// results by their inner content, anything else (images…) by its JSON text.
pub fn estimate_block(block: &ContentBlock) -> u64 {
    match block {
        ContentBlock::Text { text } | ContentBlock::Reasoning { text } => {
            estimate_text(text) + BLOCK_OVERHEAD
        }
        ContentBlock::ToolCall {
            name, arguments, ..
        } => estimate_text(name) + estimate_text(arguments) + BLOCK_OVERHEAD,
        ContentBlock::ToolResult { content, .. } => estimate_content(content) + BLOCK_OVERHEAD,
        other => {
            let json = serde_json::to_string(other).unwrap_or_default();
            BLOCK_OVERHEAD + estimate_text(&json)
        }
    }
}

/// The sum over `blocks`.
pub fn estimate_content(blocks: &[ContentBlock]) -> u64 {
    blocks.iter().map(estimate_block).sum()
}

/// Σ blocks + the role overhead.
pub fn estimate_message(message: &Message) -> u64 {
    estimate_content(&message.content) + ROLE_OVERHEAD
}

/// The request envelope: the system prompt and the tool list (0 for each when absent).
pub fn estimate_header(header: &EpochHeader) -> u64 {
    let system = match header.system.as_deref() {
        Some(system) if !system.is_empty() => estimate_text(system) + ROLE_OVERHEAD,
        _ => 0,
    };
    let tools = match header.tools.as_deref() {
        Some(tools) if !tools.is_empty() => estimate_tools(tools) + ROLE_OVERHEAD,
        _ => 0,
    };
    system + tools
}

fn estimate_tools(tools: &[ToolSchema]) -> u64 {
    estimate_text(&serde_json::to_string(tools).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_protocol::MessageSource;
    use dsh_session::data::HeaderConfig;
    use serde_json::json;

    #[test]
    fn a_ten_character_user_message_costs_eleven() {
        // Checklist D39: ceil(10/4) + 4 (block) + 4 (role).
        let message = Message::user_text("0123456789");
        assert_eq!(estimate_message(&message), 11);
    }

    #[test]
    fn lengths_are_utf16_code_units() {
        // One astral character is two UTF-16 units; four CJK characters are four.
        assert_eq!(utf16_len("😀"), 2);
        assert_eq!(estimate_text("😀😀😀"), 2);
        assert_eq!(estimate_text("漢字漢字"), 1);
        assert_eq!(estimate_text("漢字漢字漢"), 2);
        assert_eq!(estimate_text(""), 0);
    }

    #[test]
    fn tool_calls_results_and_other_blocks() {
        let call = ContentBlock::ToolCall {
            id: "c".into(),
            name: "bash".into(),
            arguments: "{\"command\":\"ls\"}".into(),
        };
        // ceil(4/4) + ceil(16/4) + 4
        assert_eq!(estimate_block(&call), 1 + 4 + 4);
        let result = ContentBlock::ToolResult {
            tool_call_id: "c".into(),
            content: vec![ContentBlock::text("abcde"), ContentBlock::text("x")],
            is_error: Some(false),
        };
        // (2 + 4) + (1 + 4) + 4
        assert_eq!(estimate_block(&result), 15);
        let image = ContentBlock::Image {
            attachment: json!({"id": "a"}),
        };
        let text = serde_json::to_string(&image).unwrap();
        assert_eq!(estimate_block(&image), 4 + (text.len() as u64).div_ceil(4));
        let assistant = Message::assistant(vec![call], MessageSource::model("p", "m"));
        assert_eq!(estimate_message(&assistant), 13);
    }

    #[test]
    fn header_prices_system_and_tools() {
        let mut header = EpochHeader {
            config: HeaderConfig {
                provider: "p".into(),
                model: "m".into(),
                temperature: None,
                max_tokens: None,
                reasoning_effort: None,
                stop: None,
            },
            adapter_defaults: None,
            system: None,
            tools: None,
        };
        assert_eq!(estimate_header(&header), 0);
        header.system = Some("12345678".into());
        assert_eq!(estimate_header(&header), 2 + 4);
        let tools = vec![ToolSchema {
            name: "t".into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
        }];
        let json = serde_json::to_string(&tools).unwrap();
        header.tools = Some(tools);
        assert_eq!(
            estimate_header(&header),
            6 + (json.len() as u64).div_ceil(4) + 4
        );
    }
}
