//! The event envelope (§1.2) and the surface metadata it may carry.

use std::fmt;

use serde::Deserialize;
use serde::Deserializer;
use serde::Serialize;
use serde::Serializer;
use serde::ser::SerializeMap;

use dsh_protocol::Message;

use crate::data::EventData;
use crate::payload::Payload;

/// Event type names of the core vocabulary and of the plugin events a core port meets.
pub mod kind {
    pub const TURN_START: &str = "turn/start";
    pub const TURN_END: &str = "turn/end";
    pub const STEP_START: &str = "step/start";
    pub const STEP_END: &str = "step/end";
    pub const USER_MESSAGE: &str = "user/message";
    pub const ASSISTANT_CHUNK: &str = "assistant/chunk";
    pub const ASSISTANT_MESSAGE: &str = "assistant/message";
    pub const TOOL_CALL: &str = "tool/call";
    pub const TOOL_RESULT: &str = "tool/result";
    pub const TODO_WRITE: &str = "todo/write";
    pub const REQUEST_HEADER: &str = "request/header";
    pub const REQUEST_CONTEXT: &str = "request/context";
    pub const END_SEED: &str = "session/end-seed";
    pub const INBOX_SPLICED: &str = "agent/inbox/spliced";
    pub const LLM_RETRY: &str = "llm/retry";
    pub const LLM_RETRY_STARTED: &str = "llm/retry-started";
    pub const SESSION_TITLE: &str = "session/title";
}

/// The three types that take part in the surface (§1.6).
pub const SURFACE_KINDS: [&str; 3] = [
    kind::USER_MESSAGE,
    kind::ASSISTANT_MESSAGE,
    kind::TOOL_RESULT,
];

/// Every event type a stored log may contain without `ignorable: true` (§1.4, §1.10). The
/// most frequent types of a loop's log come first: interning a loaded event's type scans this.
static KNOWN_KINDS: [&str; 48] = [
    kind::ASSISTANT_CHUNK,
    kind::TOOL_CALL,
    kind::TOOL_RESULT,
    kind::ASSISTANT_MESSAGE,
    kind::STEP_START,
    kind::STEP_END,
    kind::REQUEST_CONTEXT,
    kind::USER_MESSAGE,
    kind::TURN_START,
    kind::TURN_END,
    kind::REQUEST_HEADER,
    kind::TODO_WRITE,
    kind::END_SEED,
    kind::INBOX_SPLICED,
    kind::LLM_RETRY,
    kind::LLM_RETRY_STARTED,
    kind::SESSION_TITLE,
    "session/title-llm-request",
    "compaction/start",
    "compaction/summary",
    "compaction/end",
    "compaction/prune",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "permission/preset",
    "sandbox/mode",
    "plan/mode",
    "hook/invoked",
    "hook/result",
    "subagent/descriptor",
    "tool/code-dispatch-start",
    "tool/code-dispatch",
    "goal/change",
    "tool-workflow/run-start",
    "tool-workflow/agent-start",
    "tool-workflow/agent-end",
    "tool-workflow/run-end",
    "feedback/record",
    "schedule/change",
    "agent-preset/selected",
    "model/selected",
    "command/run",
    "command/done",
    "web/deepseek-search-llm-request",
    "checkpoint/created",
    "checkpoint/restore-started",
    "checkpoint/restored",
];

/// `true` for a type a stored log may hold without `ignorable: true`.
pub fn is_known_kind(kind: &str) -> bool {
    kind.starts_with("team/") || KNOWN_KINDS.contains(&kind)
}

/// An event's type name (`"turn/start"`), interned: one pointer, and every event of a type
/// shares one copy of its name. Reads as a `&str` (`Deref`, [`Kind::as_str`]) and compares with
/// strings. The names of the core and plugin vocabulary are static; any other name (an
/// ignorable type of a stored log, a new plugin's type) is interned once for the life of the
/// process, so the set grows only with the number of distinct names met.
#[derive(Clone, Copy)]
pub struct Kind(&'static &'static str);

impl Kind {
    /// The interned kind named `name`.
    pub fn new(name: &str) -> Self {
        if let Some(known) = KNOWN_KINDS.iter().find(|known| **known == name) {
            return Self(known);
        }
        Self(intern(name))
    }

    /// The name.
    pub fn as_str(&self) -> &'static str {
        self.0
    }
}

/// The names outside [`KNOWN_KINDS`], each allocated once and kept for the process's life.
fn intern(name: &str) -> &'static &'static str {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::sync::OnceLock;
    static OTHERS: OnceLock<Mutex<HashMap<&'static str, &'static &'static str>>> = OnceLock::new();
    let mut others = dsh_sync::lock(OTHERS.get_or_init(Mutex::default));
    if let Some(interned) = others.get(name) {
        return interned;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    let interned: &'static &'static str = Box::leak(Box::new(leaked));
    others.insert(leaked, interned);
    interned
}

impl std::ops::Deref for Kind {
    type Target = str;

    fn deref(&self) -> &str {
        self.0
    }
}

impl AsRef<str> for Kind {
    fn as_ref(&self) -> &str {
        self.0
    }
}

impl std::borrow::Borrow<str> for Kind {
    fn borrow(&self) -> &str {
        self.0
    }
}

impl From<&str> for Kind {
    fn from(name: &str) -> Self {
        Self::new(name)
    }
}

impl From<String> for Kind {
    fn from(name: String) -> Self {
        Self::new(&name)
    }
}

impl From<&String> for Kind {
    fn from(name: &String) -> Self {
        Self::new(name)
    }
}

impl From<Kind> for String {
    fn from(kind: Kind) -> Self {
        kind.0.to_string()
    }
}

impl PartialEq for Kind {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0) || self.0 == other.0
    }
}

impl Eq for Kind {}

impl std::hash::Hash for Kind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl PartialOrd for Kind {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Kind {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(other.0)
    }
}

impl PartialEq<str> for Kind {
    fn eq(&self, other: &str) -> bool {
        *self.0 == other
    }
}

impl PartialEq<&str> for Kind {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<String> for Kind {
    fn eq(&self, other: &String) -> bool {
        *self.0 == other.as_str()
    }
}

impl PartialEq<Kind> for str {
    fn eq(&self, other: &Kind) -> bool {
        self == *other.0
    }
}

impl PartialEq<Kind> for &str {
    fn eq(&self, other: &Kind) -> bool {
        *self == *other.0
    }
}

impl PartialEq<Kind> for String {
    fn eq(&self, other: &Kind) -> bool {
        self.as_str() == *other.0
    }
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0, f)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl Serialize for Kind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(Self::new(&name))
    }
}

/// `true` for `user/message`, `assistant/message` and `tool/result`.
pub fn is_surface_kind(kind: &str) -> bool {
    SURFACE_KINDS.contains(&kind)
}

/// How a surface event changes the model-visible surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SurfaceOp {
    /// `"append"`: push to the tail.
    Append,
    /// `{op:"replace", start, end}`: replace the span between two current surface nodes
    /// (inclusive, by surface position) with this event.
    Replace { start: u64, end: u64 },
}

impl Serialize for SurfaceOp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Append => serializer.serialize_str("append"),
            Self::Replace { start, end } => {
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("op", "replace")?;
                map.serialize_entry("start", start)?;
                map.serialize_entry("end", end)?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for SurfaceOp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Name(String),
            Replace { op: String, start: u64, end: u64 },
        }
        match Raw::deserialize(deserializer)? {
            Raw::Name(name) if name == "append" => Ok(Self::Append),
            Raw::Replace { op, start, end } if op == "replace" => Ok(Self::Replace { start, end }),
            Raw::Name(_) | Raw::Replace { .. } => Err(serde::de::Error::custom(
                r#"surfaceOp must be "append" or {op:"replace",start,end}"#,
            )),
        }
    }
}

/// What a caller passes with a surface event: the op plus the events it was derived from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SurfaceIntent {
    pub op: SurfaceOp,
    pub source_event_seqs: Option<Vec<u64>>,
}

impl SurfaceIntent {
    /// `surfaceOp:"append"` without sources (a user message).
    pub fn append() -> Self {
        Self {
            op: SurfaceOp::Append,
            source_event_seqs: None,
        }
    }

    /// `surfaceOp:"append"` citing the events it came from (chunks of an assistant message,
    /// the `tool/call` of a result).
    pub fn append_from(seqs: Vec<u64>) -> Self {
        Self {
            op: SurfaceOp::Append,
            source_event_seqs: Some(seqs),
        }
    }

    /// `{op:"replace", start, end}`; `seqs` must cover every shadowed node.
    pub fn replace(start: u64, end: u64, seqs: Vec<u64>) -> Self {
        Self {
            op: SurfaceOp::Replace { start, end },
            source_event_seqs: Some(seqs),
        }
    }
}

/// One committed log record. Immutable once appended (handed out as `Arc<Event>`).
///
/// Serialises with the keys `type, seq, time, data, [ignorable], [sourceEventSeqs], [surfaceOp]`,
/// byte-identical to upstream's JSONL lines.
///
/// Kept small, because a loaded log holds one per line: the type is interned, and the fields
/// most events lack (`ignorable`, `sourceEventSeqs`, `surfaceOp`) live in one box that only the
/// events carrying one of them allocate; read them with [`Event::ignorable`],
/// [`Event::source_event_seqs`] and [`Event::surface_op`].
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The `type` discriminant, e.g. `"turn/start"`.
    pub kind: Kind,
    /// Index in the log.
    pub seq: u64,
    /// Epoch milliseconds at append (not necessarily monotonic).
    pub time: u64,
    /// Type-specific lossless JSON, stored verbatim. Reads as a `Value` (`&*event.data`);
    /// prefer [`Event::decode`], which reads a loaded event without building its tree.
    pub data: Payload,
    /// `None` when the event is not ignorable and has neither sources nor a surface op.
    rare: Option<Box<Rare>>,
}

/// The envelope fields most events do not have.
#[derive(Debug, Clone, PartialEq, Default)]
struct Rare {
    ignorable: bool,
    source_event_seqs: Option<Vec<u64>>,
    surface_op: Option<SurfaceOp>,
}

impl Event {
    /// An event that is not ignorable and has no surface op or sources.
    pub fn new(kind: impl Into<Kind>, seq: u64, time: u64, data: impl Into<Payload>) -> Self {
        Self {
            kind: kind.into(),
            seq,
            time,
            data: data.into(),
            rare: None,
        }
    }

    /// A copy that does not share a load buffer (see [`Payload`]), `None` when this one does
    /// not.
    pub(crate) fn detached(&self) -> Option<Self> {
        let data = self.data.detached()?;
        Some(Self {
            kind: self.kind,
            seq: self.seq,
            time: self.time,
            data,
            rare: self.rare.clone(),
        })
    }

    /// The same event with `ignorable` set as given.
    pub fn with_ignorable(mut self, ignorable: bool) -> Self {
        self.set_rare(|rare| rare.ignorable = ignorable);
        self
    }

    /// The same event with the given surface op and sources (`None` removes them).
    pub fn with_surface(
        mut self,
        surface_op: Option<SurfaceOp>,
        source_event_seqs: Option<Vec<u64>>,
    ) -> Self {
        self.set_rare(|rare| {
            rare.surface_op = surface_op;
            rare.source_event_seqs = source_event_seqs;
        });
        self
    }

    /// The same event with the op and sources of `intent` (`None`: neither).
    pub fn with_intent(self, intent: Option<SurfaceIntent>) -> Self {
        match intent {
            Some(intent) => self.with_surface(Some(intent.op), intent.source_event_seqs),
            None => self.with_surface(None, None),
        }
    }

    fn set_rare(&mut self, change: impl FnOnce(&mut Rare)) {
        let mut rare = self.rare.take().unwrap_or_default();
        change(&mut rare);
        if *rare != Rare::default() {
            self.rare = Some(rare);
        }
    }

    /// A reader that does not know `kind` may skip the event.
    pub fn ignorable(&self) -> bool {
        self.rare.as_ref().is_some_and(|rare| rare.ignorable)
    }

    /// The events this one was derived from (only on surface types).
    pub fn source_event_seqs(&self) -> Option<&[u64]> {
        self.rare.as_ref()?.source_event_seqs.as_deref()
    }

    /// How this event changes the surface (present exactly on surface types).
    pub fn surface_op(&self) -> Option<SurfaceOp> {
        self.rare.as_ref()?.surface_op
    }

    /// Decodes the data as `T` when this event is of `T`'s type; `None` for another type.
    pub fn decode<T: EventData>(&self) -> Option<Result<T, serde_json::Error>> {
        (self.kind == T::KIND).then(|| self.data.decode())
    }

    /// The message a surface event carries (`user/message`: the data itself; `assistant/message`
    /// and `tool/result`: `data.message`), decoded without building the data's tree; `None` for
    /// any other type. A missing `data.message` is an error that says so.
    pub fn decode_message(&self) -> Option<Result<Message, serde_json::Error>> {
        #[derive(Deserialize)]
        struct Wrapped {
            message: Message,
        }
        match self.kind.as_str() {
            kind::USER_MESSAGE => Some(self.data.decode::<Message>()),
            kind::ASSISTANT_MESSAGE | kind::TOOL_RESULT => Some(if !self.data.is_object() {
                Err(serde::de::Error::missing_field("message"))
            } else {
                self.data.decode::<Wrapped>().map(|w| w.message)
            }),
            _ => None,
        }
    }

    /// `true` when this is a `T` event.
    pub fn is<T: EventData>(&self) -> bool {
        self.kind == T::KIND
    }

    /// The event as one compact JSON line without the trailing newline.
    pub fn to_json_line(&self) -> String {
        // Serialising a `Value` tree with string keys cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// `data.turn` when it is a number (most loop events carry it).
    pub fn turn(&self) -> Option<u64> {
        self.turn_and_step().0
    }

    /// `data.step` when it is a number.
    pub fn step(&self) -> Option<u64> {
        self.turn_and_step().1
    }

    /// `data.turn` and `data.step`, each when it is a non-negative integer (like
    /// `Value::as_u64`), read without building the data's tree.
    pub fn turn_and_step(&self) -> (Option<u64>, Option<u64>) {
        crate::payload::turn_and_step(&self.data)
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", &self.kind)?;
        map.serialize_entry("seq", &self.seq)?;
        map.serialize_entry("time", &self.time)?;
        map.serialize_entry("data", &self.data)?;
        if self.ignorable() {
            map.serialize_entry("ignorable", &true)?;
        }
        if let Some(seqs) = self.source_event_seqs() {
            map.serialize_entry("sourceEventSeqs", seqs)?;
        }
        if let Some(op) = self.surface_op() {
            map.serialize_entry("surfaceOp", &op)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Raw {
            #[serde(rename = "type")]
            kind: Kind,
            seq: u64,
            time: u64,
            data: Payload,
            #[serde(default)]
            ignorable: bool,
            #[serde(default)]
            source_event_seqs: Option<Vec<u64>>,
            #[serde(default)]
            surface_op: Option<SurfaceOp>,
        }
        let raw = Raw::deserialize(deserializer)?;
        Ok(Self::new(raw.kind, raw.seq, raw.time, raw.data)
            .with_ignorable(raw.ignorable)
            .with_surface(raw.surface_op, raw.source_event_seqs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_stays_seven_words() {
        // A loaded log holds one per line: growing it grows every load (docs/benchmarks.md).
        assert!(
            std::mem::size_of::<Event>() <= 56,
            "{}",
            std::mem::size_of::<Event>()
        );
        assert_eq!(std::mem::size_of::<Kind>(), 8);
    }

    #[test]
    fn kinds_are_interned_and_read_as_strings() {
        let a = Kind::new("turn/start");
        assert!(std::ptr::eq(a.0, Kind::from(String::from("turn/start")).0));
        let other = Kind::new("x-plugin/thing");
        assert!(std::ptr::eq(other.0, Kind::new("x-plugin/thing").0));
        assert_eq!(other, "x-plugin/thing");
        assert_eq!("x-plugin/thing", other);
        assert_eq!(other.as_str(), "x-plugin/thing");
        assert_ne!(a, other);
        assert_eq!(format!("{a} {a:?}"), r#"turn/start "turn/start""#);
        let back: Kind = serde_json::from_str(r#""x-plugin/thing""#).unwrap();
        assert_eq!(back, other);
        assert_eq!(serde_json::to_string(&back).unwrap(), r#""x-plugin/thing""#);
    }

    #[test]
    fn rare_fields_round_trip_byte_for_byte() {
        for line in [
            r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}"#,
            r#"{"type":"x/y","seq":1,"time":6,"data":null,"ignorable":true}"#,
            r#"{"type":"assistant/message","seq":2,"time":7,"data":{},"sourceEventSeqs":[],"surfaceOp":"append"}"#,
            r#"{"type":"tool/result","seq":3,"time":8,"data":{},"sourceEventSeqs":[1,2],"surfaceOp":{"op":"replace","start":0,"end":1}}"#,
        ] {
            let event: Event = serde_json::from_str(line).unwrap();
            assert_eq!(event.to_json_line(), line);
        }
        let plain = Event::new("x/y", 0, 0, serde_json::Value::Null);
        assert!(plain.rare.is_none());
        assert_eq!(plain.clone().with_ignorable(false), plain);
        assert_eq!(plain.clone().with_surface(None, None).rare, None);
        let marked = plain.with_surface(Some(SurfaceOp::Append), Some(vec![4]));
        assert_eq!(marked.surface_op(), Some(SurfaceOp::Append));
        assert_eq!(marked.source_event_seqs(), Some(&[4][..]));
        assert!(!marked.ignorable());
    }
}
