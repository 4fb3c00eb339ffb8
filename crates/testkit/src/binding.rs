//! Binds chat requests to recorded sessions (conformance README "Binding requests to sessions
//! and routes"): by the `x-deepseek-harness-session-id` header in first-seen order, or, without
//! the header, by the recorded `first_user_text` found among the request's user messages.

use std::collections::HashMap;

use serde_json::Value;

use crate::scenario::SessionSpec;

#[derive(Debug)]
pub(crate) struct Binder {
    by_header: HashMap<String, usize>,
    first_texts: Vec<(usize, String)>,
}

impl Binder {
    pub(crate) fn new(sessions: &[SessionSpec]) -> Self {
        Self {
            by_header: HashMap::new(),
            first_texts: sessions
                .iter()
                .filter_map(|s| s.first_user_text.clone().map(|t| (s.session, t)))
                .collect(),
        }
    }

    /// The session index for a request. `cursor_of(session)` tells how far a session's script
    /// has advanced on the request's route, to spread interchangeable sessions.
    pub(crate) fn bind(
        &mut self,
        header_id: Option<&str>,
        request: &Value,
        cursor_of: impl Fn(usize) -> usize,
    ) -> usize {
        if let Some(id) = header_id {
            let next = self.by_header.len();
            return *self.by_header.entry(id.to_owned()).or_insert(next);
        }
        let users = user_texts(request);
        // The session whose first user text starts latest in the conversation owns it: a forked
        // child repeats its parent's history and then adds its own prompt.
        let mut best: Option<(usize, usize, usize)> = None; // (position, -, session)
        for (session, text) in &self.first_texts {
            let Some(pos) = users.iter().rposition(|u| u == text) else {
                continue;
            };
            let cursor = cursor_of(*session);
            let better = match best {
                None => true,
                Some((bp, bc, _)) => pos > bp || (pos == bp && cursor < bc),
            };
            if better {
                best = Some((pos, cursor, *session));
            }
        }
        best.map_or(0, |(_, _, s)| s)
    }
}

fn text_of_content(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

fn messages(request: &Value) -> impl Iterator<Item = &Value> {
    request
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// Texts of the request's user messages, in order.
pub(crate) fn user_texts(request: &Value) -> Vec<String> {
    messages(request)
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .map(|m| m.get("content").map(text_of_content).unwrap_or_default())
        .collect()
}

/// Text of the request's first system message ("" when none).
pub(crate) fn request_system_text(request: &Value) -> String {
    messages(request)
        .find(|m| m.get("role").and_then(Value::as_str) == Some("system"))
        .and_then(|m| m.get("content"))
        .map(text_of_content)
        .unwrap_or_default()
}
