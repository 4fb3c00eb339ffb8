//! Binds chat requests to recorded sessions (conformance README "Binding requests to sessions
//! and routes"): by the `x-deepseek-harness-session-id` header in first-seen order, or, without
//! the header, by the recorded `first_user_text` found among the request's user messages.

use std::collections::HashMap;

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

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
        request: &ChatRequest<'_>,
        cursor_of: impl Fn(usize) -> usize,
    ) -> usize {
        if let Some(id) = header_id {
            let next = self.by_header.len();
            return *self.by_header.entry(id.to_owned()).or_insert(next);
        }
        let users: Vec<&str> = request.user_texts().collect();
        // The session whose first user text starts latest in the conversation owns it: a forked
        // child repeats its parent's history and then adds its own prompt.
        let mut best: Option<(usize, usize, usize)> = None; // (position, -, session)
        for (session, text) in &self.first_texts {
            let Some(pos) = users.iter().rposition(|u| *u == text) else {
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

/// What the replay server reads of a chat request: the model name and each message's role and
/// text. Everything else (tool schemas, tool calls, reasoning) is skipped without being built,
/// so a request that carries a long history costs one scan, not a tree of maps (a 2,000-step
/// session's request parsed into a `Value` cost the server more CPU than the harness spent).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ChatRequest<'a> {
    #[serde(default, borrow)]
    pub(crate) model: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    messages: Vec<ChatMessage<'a>>,
}

#[derive(Debug, Deserialize)]
struct ChatMessage<'a> {
    #[serde(default, borrow)]
    role: Cow<'a, str>,
    #[serde(default)]
    content: Text,
}

/// A message's text: a string content as is, an array of parts as their `text` fields joined,
/// anything else as "".
#[derive(Debug, Default)]
struct Text(String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TextVisitor)
    }
}

struct TextVisitor;

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
}

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a message content")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Text, E> {
        Ok(Text(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Text, E> {
        Ok(Text(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Text, A::Error> {
        let mut text = String::new();
        // A part that is not an object (a bare string, a number) holds no `text` field.
        while let Some(part) = seq.next_element::<PartOrOther<'de>>()? {
            if let PartOrOther::Part(Part { text: Some(t) }) = part {
                text.push_str(&t);
            }
        }
        Ok(Text(text))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Text, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Text::default())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Text, E> {
        Ok(Text::default())
    }

    fn visit_none<E: de::Error>(self) -> Result<Text, E> {
        Ok(Text::default())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Text, E> {
        Ok(Text::default())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Text, E> {
        Ok(Text::default())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Text, E> {
        Ok(Text::default())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Text, E> {
        Ok(Text::default())
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum PartOrOther<'a> {
    #[serde(borrow)]
    Part(Part<'a>),
    Other(IgnoredAny),
}

impl ChatRequest<'_> {
    /// Texts of the user messages, in order.
    pub(crate) fn user_texts(&self) -> impl Iterator<Item = &str> {
        self.messages
            .iter()
            .filter(|m| m.role == "user")
            .map(|m| m.content.0.as_str())
    }

    /// Text of the first system message ("" when none).
    pub(crate) fn system_text(&self) -> &str {
        self.messages
            .iter()
            .find(|m| m.role == "system")
            .map_or("", |m| m.content.0.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_roles_and_texts_and_skips_the_rest() {
        let body = r#"{"model":"m","tools":[{"type":"function","function":{"name":"bash"}}],
            "messages":[
              {"role":"system","content":"sys \"quoted\""},
              {"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]},
              {"role":"assistant","content":null,"tool_calls":[{"id":"c","function":{"name":"bash","arguments":"{}"}}]},
              {"role":"tool","tool_call_id":"c","content":"out"},
              {"role":"user","content":"second"},
              {"role":"user"}
            ]}"#;
        let request: ChatRequest = serde_json::from_str(body).unwrap();
        assert_eq!(request.model.as_deref(), Some("m"));
        assert_eq!(request.system_text(), "sys \"quoted\"");
        assert_eq!(
            request.user_texts().collect::<Vec<_>>(),
            ["ab", "second", ""]
        );
    }

    #[test]
    fn a_request_without_messages_has_no_texts() {
        let request: ChatRequest = serde_json::from_str(r#"{"model":"m"}"#).unwrap();
        assert_eq!(request.system_text(), "");
        assert_eq!(request.user_texts().count(), 0);
    }
}
