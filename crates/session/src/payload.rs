//! [`Payload`]: an event's `data`, kept as the JSON text it was stored as until someone reads it
//! as a tree.
//!
//! A loaded log is mostly streamed chunks that nobody reads again. A `serde_json::Value` tree
//! costs about ten times the bytes of its text (an `IndexMap` and an allocation per key and per
//! string), so a loaded event keeps only a span of the file buffer it was read from, shared by
//! every event of that load. Typed reads (`Event::decode`, `turn()`, `step()`) deserialize
//! straight from that text and keep nothing; the tree is built on the first `Deref` and cached.
//! An event appended at run time keeps its compact text too, in a string of its own.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::LazyLock;

use once_cell::race::OnceBox;

use serde::Deserialize;
use serde::Deserializer;
use serde::Serialize;
use serde::Serializer;
use serde::de::DeserializeOwned;
use serde::de::DeserializeSeed;
use serde::de::MapAccess;
use serde::de::SeqAccess;
use serde::de::Visitor;
use serde_json::Value;

/// The text of one payload inside a shared load buffer.
#[derive(Clone)]
struct Span {
    buf: Arc<String>,
    start: u32,
    len: u32,
}

impl Span {
    fn text(&self) -> &str {
        let start = self.start as usize;
        self.buf
            .get(start..start + self.len as usize)
            .unwrap_or_default()
    }
}

/// Where a payload's text lives: a span of a load's shared buffer, or (an appended event) its
/// own string. An owned text sits behind a `Box<String>`, a 32-byte block where an
/// `Arc<String>` took 48: most appended events are streamed chunks of about 75 bytes, so that
/// block is a large part of what each costs. Two variants keep `Text` two words (the box
/// lives beside the span's null niche), so an `Event` stays seven.
///
/// A payload without text (made from a tree) holds an empty span: empty text is never JSON.
#[derive(Clone)]
#[expect(
    clippy::box_collection,
    reason = "a thin pointer, so the enum fits in the span's two words"
)]
enum Text {
    Shared(Span),
    Owned(Box<String>),
}

impl Default for Text {
    fn default() -> Self {
        Self::none()
    }
}

impl Text {
    /// No text: the payload is its tree. Shares one empty buffer, so it allocates nothing.
    fn none() -> Self {
        static EMPTY: LazyLock<Arc<String>> = LazyLock::new(|| Arc::new(String::new()));
        Self::Shared(Span {
            buf: EMPTY.clone(),
            start: 0,
            len: 0,
        })
    }

    /// The stored JSON text, if there is one.
    fn get(&self) -> Option<&str> {
        let text = match self {
            Self::Shared(span) => span.text(),
            Self::Owned(text) => text.as_str(),
        };
        (!text.is_empty()).then_some(text)
    }
}

/// An event's `data`: lossless JSON, read as a [`Value`] through `Deref` (built once, on first
/// use) or decoded into a typed payload with [`Payload::decode`] (straight from the stored text
/// when the tree was never built).
///
/// Three words: a loaded log holds one per line. The tree's cell is a single atomic pointer
/// (`OnceBox`); two threads that build the same tree at once both parse, one keeps its tree.
#[derive(Default)]
pub struct Payload {
    text: Text,
    tree: OnceBox<Value>,
}

impl Payload {
    /// A payload that is the JSON text `buf[start..start + len]`, already checked to be lossless
    /// JSON that parses as a `Value`. `None` when the span does not fit the compact form.
    pub(crate) fn stored(buf: &Arc<String>, start: usize, len: usize) -> Option<Self> {
        let span = Span {
            buf: buf.clone(),
            start: u32::try_from(start).ok()?,
            len: u32::try_from(len).ok()?,
        };
        buf.get(start..start + len)?;
        Some(Self {
            text: Text::Shared(span),
            tree: OnceBox::new(),
        })
    }

    /// A payload kept as `text`, the compact JSON of a lossless `Value` (an appended event's data):
    /// a live event then costs its text, like a loaded one, instead of a tree about ten times
    /// that size that nothing reads again.
    pub(crate) fn from_text(mut text: String) -> Self {
        // `to_string` grows its buffer by doubling; the text is kept for the whole session.
        if text.capacity() - text.len() > text.len() / 8 {
            text.shrink_to_fit();
        }
        if text.is_empty() {
            // Not JSON, so not a payload's text; an empty tree-less payload reads as null.
            return Self::default();
        }
        Self {
            text: Text::Owned(Box::new(text)),
            tree: OnceBox::new(),
        }
    }

    /// A copy whose text is a string of its own, when this payload's text is a span of a
    /// shared load buffer (`None` otherwise): what outlives the buffer's other users then
    /// does not keep the whole buffer alive.
    pub(crate) fn detached(&self) -> Option<Self> {
        match &self.text {
            Text::Shared(span) if span.len > 0 => Some(Self::from_text(span.text().to_owned())),
            Text::Shared(_) | Text::Owned(_) => None,
        }
    }

    /// The length of the stored text (0 for a payload that is only a tree).
    pub(crate) fn stored_len(&self) -> usize {
        self.text.get().map_or(0, str::len)
    }

    /// `true` once the tree exists (built from the text, or the payload was made from one).
    #[cfg(test)]
    pub(crate) fn has_tree(&self) -> bool {
        self.built().is_some()
    }

    /// The tree, when it has been built (or the payload was made from one).
    fn built(&self) -> Option<&Value> {
        self.tree.get()
    }

    /// The stored JSON text, while no tree has been built from it.
    fn unparsed(&self) -> Option<&str> {
        match self.built() {
            Some(_) => None,
            None => self.text.get(),
        }
    }

    /// The payload as a `Value` (the same as `*payload`).
    pub fn value(&self) -> &Value {
        self.tree.get_or_init(|| {
            let text = self.text.get().unwrap_or("null");
            Box::new(serde_json::from_str(text).unwrap_or_else(|error| {
                // Unreachable: the text was checked with the same parser when it was loaded.
                tracing::error!(%error, "stored event data no longer parses; reading it as null");
                Value::Null
            }))
        })
    }

    /// Decodes the payload as `T`, from the stored text when no tree was built (nothing is
    /// cached), else from the tree. A failure is reported as the tree reports it (no text
    /// position), so errors read the same whichever way the event was made.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        match self.unparsed() {
            Some(text) => serde_json::from_str(text).or_else(|_| {
                // A tree for the error only, dropped again: a failed read caches nothing.
                let tree: Value = serde_json::from_str(text)?;
                T::deserialize(&tree)
            }),
            None => T::deserialize(self.value()),
        }
    }

    /// `true` when the payload is a JSON object (read without building the tree).
    pub fn is_object(&self) -> bool {
        match self.unparsed() {
            Some(text) => text.trim_start().starts_with('{'),
            None => self.value().is_object(),
        }
    }

    /// Consumes the payload into its `Value`.
    pub fn into_value(self) -> Value {
        // Parsed straight into the owned tree when none was built; a built tree is copied,
        // because `OnceBox` cannot give its box back.
        if self.unparsed().is_some()
            && let Ok(tree) = self.decode::<Value>()
        {
            return tree;
        }
        self.value().clone()
    }
}

impl Deref for Payload {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.value()
    }
}

impl From<Value> for Payload {
    fn from(value: Value) -> Self {
        Self {
            text: Text::none(),
            tree: OnceBox::with_value(Box::new(value)),
        }
    }
}

impl Clone for Payload {
    fn clone(&self) -> Self {
        let tree = OnceBox::new();
        if let Some(built) = self.tree.get() {
            let _ = tree.set(Box::new(built.clone()));
        }
        Self {
            text: self.text.clone(),
            tree,
        }
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        if let (Some(a), Some(b)) = (self.text.get(), other.text.get())
            && a == b
        {
            return true;
        }
        self.value() == other.value()
    }
}

impl PartialEq<Value> for Payload {
    fn eq(&self, other: &Value) -> bool {
        self.value() == other
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.unparsed() {
            Some(text) => write!(f, "Payload({text})"),
            None => fmt::Debug::fmt(self.value(), f),
        }
    }
}

/// Compact JSON, like `Value`'s `Display` (the stored text when there is one).
impl fmt::Display for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.text.get() {
            Some(text) if !f.alternate() => f.write_str(text),
            _ => fmt::Display::fmt(self.value(), f),
        }
    }
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if let Some(text) = self.text.get() {
            // Written back verbatim (the tree, if built, is only a reading of this text).
            let raw: &serde_json::value::RawValue =
                serde_json::from_str(text).map_err(serde::ser::Error::custom)?;
            return raw.serialize(serializer);
        }
        self.value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Self::from)
    }
}

/// `data.turn` and `data.step` of a payload, each when it is a non-negative integer, as
/// `data.get(k).and_then(Value::as_u64)` reads them. Stored text is read only up to where both
/// keys were seen (loop events write them first), so the call costs little on a large event.
pub(crate) fn turn_and_step(payload: &Payload) -> (Option<u64>, Option<u64>) {
    let Some(text) = payload.unparsed() else {
        let value = payload.value();
        let get = |k: &str| value.get(k).and_then(Value::as_u64);
        return (get("turn"), get("step"));
    };
    let mut found = TurnStep::default();
    let mut de = serde_json::Deserializer::from_str(text);
    // Stopping early makes the parser report an error; what was found before it stands.
    let _ = de.deserialize_any(TurnStepVisitor { found: &mut found });
    (found.turn.flatten(), found.step.flatten())
}

/// Per key: `None` while unseen, `Some(value.as_u64())` once seen.
#[derive(Default)]
struct TurnStep {
    turn: Option<Option<u64>>,
    step: Option<Option<u64>>,
}

struct TurnStepVisitor<'a> {
    found: &'a mut TurnStep,
}

impl<'de> Visitor<'de> for TurnStepVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    // Anything but an object has no `turn` or `step`.
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let slot = match key.as_ref() {
                "turn" => &mut self.found.turn,
                "step" => &mut self.found.step,
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    continue;
                }
            };
            *slot = Some(map.next_value::<AsU64>()?.0);
            if self.found.turn.is_some() && self.found.step.is_some() {
                return Err(serde::de::Error::custom("both found"));
            }
        }
        Ok(())
    }
}

/// Any value; `Some` when it is a JSON number that is a `u64` (like `Value::as_u64`).
struct AsU64(Option<u64>);

impl<'de> Deserialize<'de> for AsU64 {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = AsU64;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_u64<E>(self, v: u64) -> Result<AsU64, E> {
                Ok(AsU64(Some(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<AsU64, E> {
                Ok(AsU64(u64::try_from(v).ok()))
            }
            fn visit_f64<E>(self, _: f64) -> Result<AsU64, E> {
                Ok(AsU64(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<AsU64, E> {
                Ok(AsU64(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<AsU64, E> {
                Ok(AsU64(None))
            }
            fn visit_unit<E>(self) -> Result<AsU64, E> {
                Ok(AsU64(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<AsU64, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(AsU64(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AsU64, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(AsU64(None))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// What [`check_text`] found wrong with a payload's text.
#[derive(Debug)]
pub(crate) enum TextError {
    /// Not JSON that parses as a `Value`.
    Invalid(String),
    /// Parses, but a number is negative zero or not finite (not lossless JSON).
    Lossy,
}

/// Checks that `text` parses as a `Value` with the very parser [`Payload::value`] uses, and
/// that it is lossless, without building the tree.
pub(crate) fn check_text(text: &str) -> Result<(), TextError> {
    let mut lossy = false;
    let mut de = serde_json::Deserializer::from_str(text);
    Check { lossy: &mut lossy }
        .deserialize(&mut de)
        .and_then(|()| de.end())
        .map_err(|e| TextError::Invalid(e.to_string()))?;
    if lossy {
        return Err(TextError::Lossy);
    }
    Ok(())
}

/// Walks one JSON value the way `Value`'s own visitor does (the same number and string
/// parsing), remembering a lossy number.
struct Check<'a> {
    lossy: &'a mut bool,
}

impl<'de> DeserializeSeed<'de> for Check<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Check<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        if !v.is_finite() || (v == 0.0 && v.is_sign_negative()) {
            *self.lossy = true;
        }
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        Check { lossy: self.lossy }.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(Check {
                lossy: &mut *self.lossy,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Key)?.is_some() {
            map.next_value_seed(Check {
                lossy: &mut *self.lossy,
            })?;
        }
        Ok(())
    }
}

/// A map key, read as a string like `Value` reads it.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for Key {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_is_three_words_and_an_appended_text_reads_back() {
        assert_eq!(std::mem::size_of::<Payload>(), 24);
        let appended = Payload::from_text(r#"{"delta":"hi"}"#.to_owned());
        assert!(!appended.has_tree());
        assert_eq!(appended.to_string(), r#"{"delta":"hi"}"#);
        assert_eq!(appended["delta"], "hi");
        // A tree-only payload has no text, and an empty text is no payload text.
        let tree = Payload::from(serde_json::json!({"a": 1}));
        assert_eq!(tree.to_string(), r#"{"a":1}"#);
        assert_eq!(*Payload::from_text(String::new()), Value::Null);
    }

    fn stored(text: &str) -> Payload {
        let buf = Arc::new(format!("xx{text}yy"));
        Payload::stored(&buf, 2, text.len()).unwrap()
    }

    #[test]
    fn a_stored_payload_reads_decodes_and_writes_like_its_tree() {
        let text = r#"{"turn":3,"b":[1,2.5,"x\u00e9"],"a":{"z":null,"y":true}}"#;
        let payload = stored(text);
        #[derive(Deserialize)]
        struct Turn {
            turn: u64,
        }
        assert_eq!(payload.decode::<Turn>().unwrap().turn, 3);
        assert!(payload.built().is_none(), "a typed read builds no tree");
        assert_eq!(serde_json::to_string(&payload).unwrap(), text);
        let tree: Value = serde_json::from_str(text).unwrap();
        assert_eq!(*payload, tree);
        assert!(payload.built().is_some());
        assert_eq!(serde_json::to_string(&payload).unwrap(), text);
        assert_eq!(payload, Payload::from(tree.clone()));
        assert_eq!(payload.clone().into_value(), tree);
    }

    #[test]
    fn turn_and_step_read_like_as_u64_and_stop_early() {
        let cases = [
            (r#"{"turn":2,"step":5,"big":[1,2,3]}"#, (Some(2), Some(5))),
            (r#"{"x":{"turn":9},"step":1}"#, (None, Some(1))),
            (r#"{"turn":-1,"step":1.0}"#, (None, None)),
            (r#"{"turn":"2","step":null}"#, (None, None)),
            (r#"[2,5]"#, (None, None)),
            (r#"{"turn":3}"#, (Some(3), None)),
        ];
        for (text, expected) in cases {
            let stored = stored(text);
            assert_eq!(turn_and_step(&stored), expected, "{text}");
            assert!(stored.built().is_none());
            let tree = Payload::from(serde_json::from_str::<Value>(text).unwrap());
            assert_eq!(turn_and_step(&tree), expected, "{text}");
        }
    }

    #[test]
    fn loading_and_resuming_build_no_trees() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::JsonlStore::new(dir.path());
        let log = store.create(crate::CreateOptions::default()).unwrap();
        let id = log.id().to_owned();
        log.append_data(&crate::data::TurnStart { turn: 1 }, None)
            .unwrap();
        log.append_data(&crate::data::StepStart { turn: 1, step: 1 }, None)
            .unwrap();
        let message: dsh_protocol::Message = serde_json::from_value(serde_json::json!({
            "role": "user", "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}, "id": "u1"
        }))
        .unwrap();
        log.append_data(
            &crate::data::UserMessage(message),
            Some(crate::SurfaceIntent::append()),
        )
        .unwrap();
        drop(log);
        let loaded = store.load(&id).unwrap();
        assert_eq!(loaded.events.len(), 3);
        assert!(loaded.events.iter().all(|e| e.data.built().is_none()));
        let resumed = store.resume(&id).unwrap();
        assert_eq!(resumed.derive_messages().len(), 1);
        let events = resumed.events().unwrap();
        // Crash repair closed the open step and turn; the stored events were only read.
        assert!(events[..3].iter().all(|e| e.data.built().is_none()));
        assert_eq!(events[1].turn_and_step(), (Some(1), Some(1)));
        assert_eq!(events[2].data["content"][0]["text"], "hi");
        assert!(events[2].data.built().is_some());
    }

    #[test]
    fn the_check_accepts_what_value_parses_and_refuses_the_rest() {
        for ok in [r#"{"a":[1,-2,3.5e-3,"\ud83d\ude00"]}"#, "null", "-1", "[]"] {
            assert!(check_text(ok).is_ok(), "{ok}");
            assert!(serde_json::from_str::<Value>(ok).is_ok());
        }
        for bad in [
            r#"{"a":1e400}"#,
            r#""\ud800""#,
            "{\"a\":1",
            "[1] 2",
            r#"{"a":"\q"}"#,
        ] {
            assert!(
                matches!(check_text(bad), Err(TextError::Invalid(_))),
                "{bad}"
            );
            assert!(serde_json::from_str::<Value>(bad).is_err(), "{bad}");
        }
        for lossy in [r#"{"a":-0}"#, "[-0.0]", "-1e-400"] {
            assert!(
                matches!(check_text(lossy), Err(TextError::Lossy)),
                "{lossy}"
            );
        }
    }
}
