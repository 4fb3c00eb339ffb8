//! Renders a `model.jsonl` entry as the OpenAI/DeepSeek chat-completions SSE stream
//! (conformance README "Serving a response entry").

use serde_json::{Map, Value, json};

use crate::scenario::{ModelEntry, StreamDelta};

/// One SSE event line pair for a JSON payload.
pub fn frame(payload: &Value) -> String {
    format!("data: {payload}\n\n")
}

pub const DONE_FRAME: &str = "data: [DONE]\n\n";

fn chunk(id: &str, model: &str, delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })
}

/// The content deltas of an entry (role chunk, then every stream element), without the finish
/// chunk and `[DONE]`. `hang` and `after_stream` entries stop here.
pub fn prefix_frames(entry: &ModelEntry, id: &str, model: &str) -> Vec<String> {
    let mut out = vec![frame(&chunk(
        id,
        model,
        json!({"role": "assistant", "content": ""}),
        None,
    ))];
    for delta in deltas(entry) {
        out.push(frame(&chunk(id, model, delta, None)));
    }
    out
}

/// The full stream of a `response` entry: prefix, finish chunk with usage, `[DONE]`.
pub fn response_frames(entry: &ModelEntry, id: &str, model: &str) -> Vec<String> {
    let mut out = prefix_frames(entry, id, model);
    let mut last = chunk(id, model, json!({}), entry.finish_reason.as_deref());
    if let (Some(usage), Some(obj)) = (&entry.usage, last.as_object_mut())
        && !usage.is_null()
    {
        obj.insert("usage".to_owned(), usage.clone());
    }
    out.push(frame(&last));
    out.push(DONE_FRAME.to_owned());
    out
}

/// The JSON body of an `error` entry.
pub fn error_body(entry: &ModelEntry) -> Value {
    match &entry.error {
        Some(e) => match &e.body {
            Some(body) if !body.is_null() => body.clone(),
            _ => json!({"error": {
                "message": e.message.clone().unwrap_or_default(),
                "type": "replay_error",
                "code": e.code.clone(),
            }}),
        },
        None => {
            json!({"error": {"message": "replay: error entry without error", "type": "replay_error", "code": null}})
        }
    }
}

fn tool_call_delta(k: usize, head: Option<(&str, &str)>, args: &str) -> Value {
    let mut call = Map::new();
    call.insert("index".to_owned(), Value::from(k));
    let mut function = Map::new();
    if let Some((id, name)) = head {
        call.insert("id".to_owned(), Value::from(id));
        call.insert("type".to_owned(), Value::from("function"));
        function.insert("name".to_owned(), Value::from(name));
    }
    function.insert("arguments".to_owned(), Value::from(args));
    call.insert("function".to_owned(), Value::Object(function));
    json!({"tool_calls": [Value::Object(call)]})
}

/// The delta objects of an entry, preferring the recorded fragments. A call whose recorded
/// fragments differ from its assembled text (`streamed_arguments`) is served whole, once.
fn deltas(entry: &ModelEntry) -> Vec<Value> {
    let Some(stream) = entry.stream.as_ref().filter(|s| !s.is_empty()) else {
        return whole_deltas(entry);
    };
    let mut out = Vec::new();
    let mut started = vec![false; entry.tool_calls.len()];
    for d in stream {
        match d {
            StreamDelta::Reasoning { reasoning } => {
                out.push(json!({"reasoning_content": reasoning}));
            }
            StreamDelta::Content { content } => out.push(json!({"content": content})),
            StreamDelta::ToolCall {
                tool_call,
                id,
                name,
                arguments,
            } => {
                let k = *tool_call;
                let recorded = entry.tool_calls.get(k);
                let whole = recorded.filter(|c| c.streamed_arguments.is_some());
                let first = !started.get(k).copied().unwrap_or(true);
                if let Some(slot) = started.get_mut(k) {
                    *slot = true;
                }
                match (whole, first) {
                    (Some(call), true) => {
                        out.push(tool_call_delta(
                            k,
                            Some((&call.id, &call.name)),
                            &call.arguments,
                        ));
                    }
                    (Some(_), false) => {}
                    (None, _) => {
                        let head = match (id, name) {
                            (Some(id), Some(name)) => Some((id.as_str(), name.as_str())),
                            _ => None,
                        };
                        out.push(tool_call_delta(k, head, arguments));
                    }
                }
            }
        }
    }
    out
}

fn whole_deltas(entry: &ModelEntry) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(r) = entry.reasoning.as_deref().filter(|r| !r.is_empty()) {
        out.push(json!({"reasoning_content": r}));
    }
    if let Some(c) = entry.content.as_deref().filter(|c| !c.is_empty()) {
        out.push(json!({"content": c}));
    }
    for (k, call) in entry.tool_calls.iter().enumerate() {
        out.push(tool_call_delta(
            k,
            Some((&call.id, &call.name)),
            &call.arguments,
        ));
    }
    out
}

#[cfg(test)]
#[path = "sse_tests.rs"]
mod tests;
