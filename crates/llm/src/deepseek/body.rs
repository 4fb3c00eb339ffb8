//! The chat-completions request body (spec §3.6 "Body" and "Message serialization").
//! Pure: the same request always gives the same JSON, keys in the wire order.

use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::Role;
use serde_json::Map;
use serde_json::Value;
use serde_json::json;

use bytes::Bytes;

use super::Thinking;
use super::images::ImageUrls;
use super::images::TOOL_IMAGES_PREFIX;
use super::images::user_images;
use crate::ModelRequest;
use crate::RequestPurpose;
use crate::retry::js_number;
use crate::wire::HistoryEncoder;
use crate::wire::WireBody;

/// Efforts the wire accepts besides `off`.
pub(crate) const WIRE_EFFORTS: [&str; 3] = ["low", "high", "max"];

/// The body for `request` as given (no adapter defaults applied, no deployment thinking
/// setting). See [`chat_request_body_with`].
pub fn chat_request_body(request: &ModelRequest) -> Value {
    chat_request_body_with(request, None)
}

/// The body for `request`; `configured_thinking` is the deployment's `thinking` setting, sent
/// when the request names no effort. Image blocks and unknown block types are skipped (the
/// adapter resolves images itself for image-capable models and rejects them otherwise).
pub fn chat_request_body_with(
    request: &ModelRequest,
    configured_thinking: Option<Thinking>,
) -> Value {
    build(request, configured_thinking, None)
}

/// The body, with `images` (resolved in wire order) sent as `image_url` parts.
pub(crate) fn build(
    request: &ModelRequest,
    configured_thinking: Option<Thinking>,
    mut images: Option<&mut ImageUrls>,
) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::from(request.model.as_str()));
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = system_entry(request) {
        messages.push(system);
    }
    for message in &request.messages {
        push_message(message, images.as_deref_mut(), &mut messages);
    }
    body.insert("messages".into(), Value::Array(messages));
    body.extend(options(request, configured_thinking));
    Value::Object(body)
}

/// The same bytes as `serde_json::to_vec(&build(request, configured_thinking, None))`, with the
/// history's entries taken from `encoder` (keyed by session and purpose). `None` when a message
/// carries an image: image parts share one budget per request and are built whole.
pub(crate) fn encode(
    request: &ModelRequest,
    configured_thinking: Option<Thinking>,
    encoder: &HistoryEncoder,
) -> Option<WireBody> {
    let key = request
        .session_id
        .as_deref()
        .map(|id| match request.purpose {
            None => id.to_owned(),
            Some(purpose) => format!("{id}\u{0}{purpose:?}"),
        });
    let history = encoder.encode(key.as_deref(), &request.messages, &mut encode_message);
    if history.needs_whole_request {
        return None;
    }
    let mut head = Vec::with_capacity(64 + request.system.as_ref().map_or(0, String::len));
    head.extend_from_slice(b"{\"model\":");
    write_json(&mut head, &Value::from(request.model.as_str()));
    head.extend_from_slice(b",\"messages\":[");
    let system = system_entry(request);
    if let Some(system) = &system {
        write_json(&mut head, system);
    }
    let mut body = WireBody::new();
    body.push(Bytes::from(head));
    // Each history entry is written with a leading comma; without a system entry before it,
    // the first one's comma goes.
    let mut lead = system.is_none();
    for piece in history.pieces {
        if lead && !piece.is_empty() {
            lead = false;
            body.push(piece.slice(1..));
        } else {
            body.push(piece);
        }
    }
    // `{"stream":true,...}` becomes `],"stream":true,...}`.
    let mut tail = serde_json::to_vec(&Value::Object(options(request, configured_thinking)))
        .unwrap_or_default();
    if let Some(open) = tail.first_mut() {
        *open = b',';
    }
    body.push(Bytes::from_static(b"]"));
    body.push(Bytes::from(tail));
    Some(body)
}

fn write_json(out: &mut Vec<u8>, value: &Value) {
    // Writing a `Value` into a `Vec` cannot fail.
    let _ = serde_json::to_writer(out, value);
}

/// One message's wire entries, each preceded by a comma; `true` (nothing useful written) for a
/// message with images.
fn encode_message(message: &Message, out: &mut Vec<u8>) -> bool {
    if message_has_image(message) {
        return true;
    }
    let mut entries = Vec::with_capacity(1);
    push_message(message, None, &mut entries);
    for entry in &entries {
        out.push(b',');
        write_json(out, entry);
    }
    false
}

fn system_entry(request: &ModelRequest) -> Option<Value> {
    request
        .system
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(|system| json!({"role": "system", "content": system}))
}

/// The keys after `messages`, in wire order.
fn options(request: &ModelRequest, configured_thinking: Option<Thinking>) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("stream".into(), Value::Bool(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    let (thinking, effort) = match request.purpose {
        Some(RequestPurpose::SessionTitle) => (Some(Thinking::Disabled), None),
        _ => match request.reasoning_effort.as_deref() {
            Some("off") => (Some(Thinking::Disabled), None),
            Some(effort) if WIRE_EFFORTS.contains(&effort) => {
                (Some(Thinking::Enabled), Some(effort))
            }
            _ => (configured_thinking, None),
        },
    };
    if let Some(thinking) = thinking {
        body.insert("thinking".into(), json!({"type": thinking.as_str()}));
    }
    if let Some(effort) = effort {
        body.insert("reasoning_effort".into(), Value::from(effort));
    }
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({"type": "function", "function": {
                    "name": tool.name, "description": tool.description, "parameters": tool.parameters,
                }})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(temperature) = request.temperature {
        body.insert("temperature".into(), js_number(temperature));
    }
    if let Some(max_tokens) = request.max_tokens {
        body.insert("max_tokens".into(), Value::from(max_tokens));
    }
    if !request.stop.is_empty() {
        body.insert("stop".into(), Value::from(request.stop.clone()));
    }
    body
}

fn push_message(message: &Message, images: Option<&mut ImageUrls>, out: &mut Vec<Value>) {
    match message.role {
        Role::System => {
            out.push(json!({"role": "system", "content": concat_text(&message.content)}))
        }
        Role::User => {
            let text = concat_text(&message.content);
            let results: Vec<&ContentBlock> = message
                .content
                .iter()
                .filter(|block| matches!(block, ContentBlock::ToolResult { .. }))
                .collect();
            let (direct, from_results) = user_images(message);
            let mut images = images.filter(|_| !direct.is_empty() || !from_results.is_empty());
            match images.as_deref_mut().filter(|_| !direct.is_empty()) {
                // With images the content becomes ordered parts: text and images as written.
                Some(urls) => {
                    let parts: Vec<Value> = message
                        .content
                        .iter()
                        .filter_map(|block| match block {
                            ContentBlock::Text { text } => {
                                Some(json!({"type": "text", "text": text}))
                            }
                            ContentBlock::Image { .. } => Some(urls.next_part()),
                            _ => None,
                        })
                        .collect();
                    out.push(json!({"role": "user", "content": parts}));
                }
                None if !text.is_empty() || results.is_empty() => {
                    out.push(json!({"role": "user", "content": text}));
                }
                None => {}
            }
            for result in results {
                if let ContentBlock::ToolResult {
                    tool_call_id,
                    content,
                    ..
                } = result
                {
                    let text = concat_text(content);
                    let text = if text.is_empty() {
                        "(no output)".to_owned()
                    } else {
                        text
                    };
                    out.push(
                        json!({"role": "tool", "tool_call_id": tool_call_id, "content": text}),
                    );
                }
            }
            // Tool entries carry text only, so their images follow in one user entry.
            if let Some(urls) = images.filter(|_| !from_results.is_empty()) {
                let mut parts = vec![json!({"type": "text", "text": TOOL_IMAGES_PREFIX})];
                parts.extend(from_results.iter().map(|_| urls.next_part()));
                out.push(json!({"role": "user", "content": parts}));
            }
        }
        Role::Assistant => {
            let mut entry = Map::new();
            entry.insert("role".into(), Value::from("assistant"));
            entry.insert("content".into(), Value::from(concat_text(&message.content)));
            let mut reasoning: Option<String> = None;
            let mut calls = Vec::new();
            for block in &message.content {
                match block {
                    ContentBlock::Reasoning { text } => reasoning.get_or_insert_with(String::new).push_str(text),
                    ContentBlock::ToolCall { id, name, arguments } => calls.push(json!({
                        "id": id, "type": "function", "function": {"name": name, "arguments": arguments},
                    })),
                    _ => {}
                }
            }
            if let Some(reasoning) = reasoning {
                entry.insert("reasoning_content".into(), Value::from(reasoning));
            }
            if !calls.is_empty() {
                entry.insert("tool_calls".into(), Value::Array(calls));
            }
            out.push(Value::Object(entry));
        }
    }
}

fn concat_text(blocks: &[ContentBlock]) -> String {
    dsh_protocol::text_of(blocks)
}

/// Whether the message carries an image (directly or inside a tool result).
fn message_has_image(message: &Message) -> bool {
    fn any_image(blocks: &[ContentBlock]) -> bool {
        blocks.iter().any(|block| match block {
            ContentBlock::Image { .. } => true,
            ContentBlock::ToolResult { content, .. } => any_image(content),
            _ => false,
        })
    }
    any_image(&message.content)
}

/// Whether any message carries an image (then the body is built whole, images resolved).
pub(crate) fn has_image(messages: &[std::sync::Arc<Message>]) -> bool {
    fn any_image(blocks: &[ContentBlock]) -> bool {
        blocks.iter().any(|block| match block {
            ContentBlock::Image { .. } => true,
            ContentBlock::ToolResult { content, .. } => any_image(content),
            _ => false,
        })
    }
    messages.iter().any(|message| any_image(&message.content))
}

#[cfg(test)]
#[path = "body_tests.rs"]
mod tests;
