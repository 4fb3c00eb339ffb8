//! The event envelope (§1.2) and the surface metadata it may carry.

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

/// Every event type a stored log may contain without `ignorable: true` (§1.4, §1.10).
const KNOWN_KINDS: &[&str] = &[
    kind::TURN_START,
    kind::TURN_END,
    kind::STEP_START,
    kind::STEP_END,
    kind::USER_MESSAGE,
    kind::ASSISTANT_CHUNK,
    kind::ASSISTANT_MESSAGE,
    kind::TOOL_CALL,
    kind::TOOL_RESULT,
    kind::TODO_WRITE,
    kind::REQUEST_HEADER,
    kind::REQUEST_CONTEXT,
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
];

/// `true` for a type a stored log may hold without `ignorable: true`.
pub fn is_known_kind(kind: &str) -> bool {
    KNOWN_KINDS.contains(&kind) || kind.starts_with("team/")
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
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The `type` discriminant, e.g. `"turn/start"`.
    pub kind: String,
    /// Index in the log.
    pub seq: u64,
    /// Epoch milliseconds at append (not necessarily monotonic).
    pub time: u64,
    /// Type-specific lossless JSON, stored verbatim. Reads as a `Value` (`&*event.data`);
    /// prefer [`Event::decode`], which reads a loaded event without building its tree.
    pub data: Payload,
    /// A reader that does not know `kind` may skip the event.
    pub ignorable: bool,
    /// Only on surface types.
    pub source_event_seqs: Option<Vec<u64>>,
    /// Present exactly on surface types.
    pub surface_op: Option<SurfaceOp>,
}

impl Event {
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
        if self.ignorable {
            map.serialize_entry("ignorable", &true)?;
        }
        if let Some(seqs) = &self.source_event_seqs {
            map.serialize_entry("sourceEventSeqs", seqs)?;
        }
        if let Some(op) = &self.surface_op {
            map.serialize_entry("surfaceOp", op)?;
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
            kind: String,
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
        Ok(Self {
            kind: raw.kind,
            seq: raw.seq,
            time: raw.time,
            data: raw.data,
            ignorable: raw.ignorable,
            source_event_seqs: raw.source_event_seqs,
            surface_op: raw.surface_op,
        })
    }
}
