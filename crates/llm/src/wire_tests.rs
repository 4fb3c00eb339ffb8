#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageList;
use dsh_protocol::MessageSource;
use pretty_assertions::assert_eq;

use super::*;

/// A stand-in wire format: `,"<text>"` per message; counts what it encodes.
struct Counting {
    encoded: Vec<String>,
}

impl Counting {
    fn new() -> Self {
        Self {
            encoded: Vec::new(),
        }
    }

    fn run(&mut self, encoder: &HistoryEncoder, key: Option<&str>, list: &MessageList) -> String {
        let history = encoder.encode(key, list, &mut |m: &Message, out: &mut Vec<u8>| {
            let text = dsh_protocol::text_of(&m.content);
            out.extend_from_slice(format!(",\"{text}\"").as_bytes());
            self.encoded.push(text.clone());
            text.starts_with("img")
        });
        let mut body = WireBody::new();
        for piece in history.pieces {
            body.push(piece);
        }
        String::from_utf8(body.to_vec()).unwrap()
    }
}

fn user(text: &str) -> Arc<Message> {
    Arc::new(Message::user(
        vec![ContentBlock::text(text)],
        MessageSource::user(),
    ))
}

fn expected(list: &MessageList) -> String {
    list.iter()
        .map(|m| format!(",\"{}\"", dsh_protocol::text_of(&m.content)))
        .collect()
}

#[test]
fn a_grown_list_encodes_only_its_new_messages() {
    let encoder = HistoryEncoder::new();
    let mut counting = Counting::new();
    let mut list = MessageList::new();
    list.push(user("a"));
    list.push(user("b"));
    assert_eq!(counting.run(&encoder, Some("s"), &list), r#","a","b""#);
    list.push(user("c"));
    assert_eq!(counting.run(&encoder, Some("s"), &list), r#","a","b","c""#);
    // Same list again (a retry): nothing new.
    assert_eq!(counting.run(&encoder, Some("s"), &list), r#","a","b","c""#);
    assert_eq!(counting.encoded, ["a", "b", "c"]);
}

#[test]
fn a_replaced_span_costs_only_the_replacement() {
    let encoder = HistoryEncoder::new();
    let mut counting = Counting::new();
    let messages: Vec<Arc<Message>> = ["a", "b", "c", "d"].map(user).to_vec();
    let list = MessageList::from_arcs(messages.clone());
    counting.run(&encoder, Some("s"), &list);
    // A compaction checkpoint: the first three become one summary; "d" stays the same object.
    let compacted = MessageList::from_arcs(vec![user("summary"), messages[3].clone()]);
    assert_ne!(compacted.lineage(), list.lineage());
    assert_eq!(
        counting.run(&encoder, Some("s"), &compacted),
        expected(&compacted)
    );
    assert_eq!(counting.encoded, ["a", "b", "c", "d", "summary"]);
    // A pruned tool result in the middle: only the new version is encoded.
    let pruned = MessageList::from_arcs(vec![compacted[0].clone(), user("d-pruned")]);
    counting.run(&encoder, Some("s"), &pruned);
    assert_eq!(
        counting.encoded.last().map(String::as_str),
        Some("d-pruned")
    );
    assert_eq!(counting.encoded.len(), 6);
}

#[test]
fn a_list_that_diverged_from_the_cached_one_is_not_taken_for_it() {
    let encoder = HistoryEncoder::new();
    let mut counting = Counting::new();
    let mut list = MessageList::new();
    list.push(user("a"));
    let held = list.clone();
    counting.run(&encoder, Some("s"), &held);
    // The log appends while a request still holds the list: the log's copy gets a new lineage.
    list.push(user("b"));
    assert_eq!(counting.run(&encoder, Some("s"), &list), expected(&list));
    assert_eq!(counting.encoded, ["a", "b"]);
}

#[test]
fn long_histories_are_a_few_shared_chunks() {
    let encoder = HistoryEncoder::new();
    let text = "x".repeat(1000);
    let list: MessageList = (0..500).map(|i| user(&format!("{i}{text}"))).collect();
    let history = encoder.encode(Some("s"), &list, &mut |m: &Message, out: &mut Vec<u8>| {
        out.push(b',');
        out.extend_from_slice(dsh_protocol::text_of(&m.content).as_bytes());
        false
    });
    let total: usize = history.pieces.iter().map(Bytes::len).sum();
    assert!(total > 500_000);
    assert!(
        history.pieces.len() <= total / CHUNK_BYTES + 1,
        "{} pieces",
        history.pieces.len()
    );
    // Reused chunks are the same allocation, not copies.
    let again = encoder.encode(Some("s"), &list, &mut |_: &Message, _: &mut Vec<u8>| {
        panic!("nothing is new")
    });
    assert_eq!(again.pieces[0].as_ptr(), history.pieces[0].as_ptr());
}

#[test]
fn request_wide_content_is_reported_and_sessions_are_kept_apart() {
    let encoder = HistoryEncoder::with_capacity(2);
    let mut counting = Counting::new();
    let list: MessageList = vec![user("a"), user("img-1")].into();
    let history = encoder.encode(Some("s"), &list, &mut |m: &Message, _: &mut Vec<u8>| {
        dsh_protocol::text_of(&m.content).starts_with("img")
    });
    assert!(history.needs_whole_request);
    // Without a key nothing is kept; with two slots a third session evicts the oldest.
    let other: MessageList = vec![user("o")].into();
    counting.run(&encoder, None, &other);
    counting.run(&encoder, None, &other);
    assert_eq!(counting.encoded, ["o", "o"]);
    counting.run(&encoder, Some("t"), &other);
    counting.run(&encoder, Some("u"), &other);
    counting.run(&encoder, Some("t"), &other);
    assert_eq!(counting.encoded, ["o", "o", "o", "o"], "t is still cached");
    counting.run(&encoder, Some("s"), &list);
    assert_eq!(counting.encoded.len(), 6, "s was evicted by u");
}
