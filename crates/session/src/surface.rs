//! The model-visible surface (§1.6) and the append-time rules that guard it (§1.5).
//!
//! Each surface node caches its projected message once, and the derived history is kept beside
//! the nodes as a shared [`MessageList`] that grows in place on every visible append, so
//! `derive_messages` is O(1) and the messages of unchanged nodes keep their identity across a
//! `replace` (only the replacing node is new). The latest visible message per source kind and per
//! plugin is indexed the same way, for the "the newest X supersedes earlier ones" questions the
//! loop and its plugins ask every step.

use std::collections::HashMap;
use std::collections::HashSet;
use std::ops::RangeInclusive;
use std::sync::Arc;

use dsh_protocol::Message;
use dsh_protocol::MessageList;
use dsh_protocol::Role;
use serde::Deserialize;
use serde_json::Value;

use crate::error::SessionError;
use crate::event::Event;
use crate::event::SurfaceOp;
use crate::event::is_surface_kind;
use crate::event::kind;

/// Reads a committed event by seq (from memory, or back from the log's file).
pub(crate) type Lookup<'a> = dyn Fn(u64) -> Result<Option<Arc<Event>>, SessionError> + 'a;

#[derive(Debug, Clone)]
pub(crate) struct Node {
    seq: u64,
    /// `None` for an assistant message with empty content: on the surface, not in history.
    message: Option<Arc<Message>>,
}

/// What a validated event will do to the surface once committed.
#[derive(Debug)]
pub(crate) enum Plan {
    None,
    Append(Node),
    Replace(RangeInclusive<usize>, Node),
}

#[derive(Debug, Default)]
pub(crate) struct Surface {
    nodes: Vec<Node>,
    generation: u64,
    /// The visible messages of `nodes`, in order (the derived history).
    visible: MessageList,
    latest: Latest,
}

/// The latest visible message by source kind, and by plugin for `kind:"plugin"` sources.
#[derive(Debug, Default)]
struct Latest {
    by_kind: HashMap<String, Arc<Message>>,
    by_plugin: HashMap<String, Arc<Message>>,
}

impl Latest {
    fn note(&mut self, message: &Arc<Message>) {
        let kind = message.source.kind();
        match self.by_kind.get_mut(kind) {
            Some(slot) => *slot = message.clone(),
            None => {
                self.by_kind.insert(kind.to_owned(), message.clone());
            }
        }
        if kind == "plugin"
            && let Some(plugin) = message.source.get("plugin").and_then(Value::as_str)
        {
            match self.by_plugin.get_mut(plugin) {
                Some(slot) => *slot = message.clone(),
                None => {
                    self.by_plugin.insert(plugin.to_owned(), message.clone());
                }
            }
        }
    }
}

impl Surface {
    /// Checks `event` (not yet committed; `lookup` reads the log before it by seq) against every
    /// surface and shape rule. Nothing changes until [`Surface::apply`].
    pub(crate) fn plan(&self, lookup: &Lookup<'_>, event: &Event) -> Result<Plan, SessionError> {
        let k = event.kind.as_str();
        check_request_header(event)?;
        if !is_surface_kind(k) {
            if event.surface_op().is_some() || event.source_event_seqs().is_some() {
                return Err(SessionError::surface(
                    k,
                    "only surface events may carry surfaceOp or sourceEventSeqs",
                ));
            }
            return Ok(Plan::None);
        }
        let Some(op) = event.surface_op() else {
            return Err(SessionError::surface(
                k,
                "a surface event must carry surfaceOp",
            ));
        };
        if let Some(seqs) = event.source_event_seqs() {
            check_sources(k, event.seq, seqs)?;
        }
        let node = Node {
            seq: event.seq,
            message: project(event)?,
        };
        match op {
            SurfaceOp::Append => Ok(Plan::Append(node)),
            SurfaceOp::Replace { start, end } => {
                let span = self.replace_span(lookup, event, start, end)?;
                Ok(Plan::Replace(span, node))
            }
        }
    }

    pub(crate) fn apply(&mut self, plan: Plan) {
        match plan {
            Plan::None => {}
            Plan::Append(node) => {
                if let Some(message) = &node.message {
                    self.visible.push(message.clone());
                    self.latest.note(message);
                }
                self.nodes.push(node);
            }
            Plan::Replace(span, node) => {
                self.nodes.splice(span, [node]);
                self.generation += 1;
                // A replace is rare (compaction, pruning): rebuild the derived state once. The
                // new list has a new lineage but shares every unchanged message.
                self.visible = self
                    .nodes
                    .iter()
                    .filter_map(|n| n.message.clone())
                    .collect();
                self.latest = Latest::default();
                for message in self.visible.iter() {
                    self.latest.note(message);
                }
            }
        }
    }

    pub(crate) fn messages(&self) -> MessageList {
        self.visible.clone()
    }

    pub(crate) fn latest_of_kind(&self, kind: &str) -> Option<Arc<Message>> {
        self.latest.by_kind.get(kind).cloned()
    }

    pub(crate) fn latest_from_plugin(&self, plugin: &str) -> Option<Arc<Message>> {
        self.latest.by_plugin.get(plugin).cloned()
    }

    pub(crate) fn seqs(&self) -> Vec<u64> {
        self.nodes.iter().map(|n| n.seq).collect()
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    fn position(&self, seq: u64) -> Option<usize> {
        self.nodes.iter().rposition(|n| n.seq == seq)
    }

    fn replace_span(
        &self,
        lookup: &Lookup<'_>,
        event: &Event,
        start: u64,
        end: u64,
    ) -> Result<RangeInclusive<usize>, SessionError> {
        let k = event.kind.as_str();
        let (Some(from), Some(to)) = (self.position(start), self.position(end)) else {
            return Err(SessionError::surface(
                k,
                format!("replace {start}..{end}: both ends must be current surface nodes"),
            ));
        };
        if from > to {
            return Err(SessionError::surface(
                k,
                format!("replace {start}..{end}: start is after end in surface order"),
            ));
        }
        let sources = event.source_event_seqs().unwrap_or_default();
        if let Some(missing) = self.nodes[from..=to]
            .iter()
            .find(|n| !sources.contains(&n.seq))
        {
            return Err(SessionError::surface(
                k,
                format!(
                    "replace: shadowed seq {} is missing from sourceEventSeqs",
                    missing.seq
                ),
            ));
        }
        if k == kind::TOOL_RESULT {
            let old = lookup(self.nodes[from].seq)?;
            if from != to || old.as_ref().is_none_or(|old| old.kind != kind::TOOL_RESULT) {
                return Err(SessionError::surface(
                    k,
                    "a tool/result replacement must replace exactly one tool/result",
                ));
            }
            if let Some(old) = old
                && without_content(&old.data)? != without_content(&event.data)?
            {
                return Err(SessionError::surface(
                    k,
                    "a tool/result replacement may change only the message content",
                ));
            }
        }
        Ok(from..=to)
    }
}

fn check_sources(k: &str, seq: u64, seqs: &[u64]) -> Result<(), SessionError> {
    if seqs.is_empty() && k != kind::ASSISTANT_MESSAGE {
        return Err(SessionError::surface(
            k,
            "sourceEventSeqs must not be empty",
        ));
    }
    if let Some(bad) = seqs.iter().find(|&&s| s >= seq) {
        return Err(SessionError::surface(
            k,
            format!("sourceEventSeqs entry {bad} is not earlier than seq {seq}"),
        ));
    }
    // Chunk lists arrive sorted; only fall back to a set when they are not.
    let distinct = seqs.windows(2).all(|w| w[0] < w[1]) || {
        let mut seen = HashSet::with_capacity(seqs.len());
        seqs.iter().all(|s| seen.insert(*s))
    };
    if !distinct {
        return Err(SessionError::surface(
            k,
            "sourceEventSeqs entries must be distinct",
        ));
    }
    Ok(())
}

/// The message a surface event projects to (§1.6 `deriveEventMessage`), checking its shape.
fn project(event: &Event) -> Result<Option<Arc<Message>>, SessionError> {
    /// `data.message`, decoded from the stored text without building the data's tree.
    #[derive(Deserialize)]
    struct WrappedMessage {
        message: Message,
    }
    let k = event.kind.as_str();
    let not_a_message =
        |e: serde_json::Error| SessionError::invalid(k, format!("not a message: {e}"));
    let message = if k == kind::USER_MESSAGE {
        event.data.decode::<Message>().map_err(not_a_message)?
    } else {
        let decoded = match event.data.is_object() {
            true => event.data.decode::<WrappedMessage>(),
            false => Err(serde::de::Error::custom("data is not an object")),
        };
        match decoded {
            Ok(wrapped) => wrapped.message,
            // Only a malformed event gets here: tell a missing message from a bad one.
            Err(e) => match event.data.get("message") {
                Some(_) => return Err(not_a_message(e)),
                None => return Err(SessionError::invalid(k, "data.message is missing")),
            },
        }
    };
    let expected = if k == kind::ASSISTANT_MESSAGE {
        Role::Assistant
    } else {
        Role::User
    };
    if message.role != expected {
        return Err(SessionError::invalid(
            k,
            format!("message role must be {expected:?}"),
        ));
    }
    if k == kind::ASSISTANT_MESSAGE {
        let has = |f: &str| message.source.get(f).is_some_and(Value::is_string);
        if !has("provider") || !has("model") {
            return Err(SessionError::invalid(
                k,
                "assistant message source must carry provider and model",
            ));
        }
        if message.content.is_empty() {
            return Ok(None);
        }
    }
    Ok(Some(Arc::new(message)))
}

/// Legacy headers without a route are refused (§1.5 step 2).
fn check_request_header(event: &Event) -> Result<(), SessionError> {
    if event.kind != kind::REQUEST_HEADER {
        return Ok(());
    }
    /// `header.config`, read from the stored text without building (and caching) the tree.
    #[derive(Deserialize)]
    struct Header {
        header: Option<Config>,
    }
    #[derive(Deserialize)]
    struct Config {
        config: Option<serde_json::Map<String, Value>>,
    }
    let config = match event.data.is_object() {
        true => event.data.decode::<Header>().ok(),
        false => None,
    };
    let config = config.and_then(|h| h.header).and_then(|h| h.config);
    let has = |f: &str| {
        config
            .as_ref()
            .and_then(|c| c.get(f))
            .is_some_and(Value::is_string)
    };
    if has("provider") && has("model") {
        Ok(())
    } else {
        Err(SessionError::invalid(
            kind::REQUEST_HEADER,
            "header.config must carry provider and model",
        ))
    }
}

/// `data` without `message.content`, read from the stored text into a tree of its own (a tree
/// cached on the event would stay as long as the event; tool results are the largest events).
fn without_content(data: &crate::payload::Payload) -> Result<Value, SessionError> {
    let mut copy: Value = data
        .decode()
        .map_err(|e| SessionError::invalid(kind::TOOL_RESULT, e.to_string()))?;
    if let Some(message) = copy.get_mut("message").and_then(Value::as_object_mut) {
        message.remove("content");
    }
    Ok(copy)
}
