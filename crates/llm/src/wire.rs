//! Request bodies assembled from cached pieces.
//!
//! Every request of a session carries its whole history, and all but the newest messages were
//! already encoded for the request before. [`HistoryEncoder`] keeps, per session, each message's
//! encoded wire bytes and hands out a body as a list of shared [`Bytes`] pieces, so a request
//! costs the encoding of what is new plus a handful of reference-count bumps — not a copy, let
//! alone a re-serialisation, of the history.
//!
//! How the cache knows what it may reuse:
//! - A request whose [`MessageList`] has the lineage of the list the cache saw last (the log's
//!   history, grown in place) extends it: the cached prefix is reused as is, in O(1), and only
//!   the messages past it are encoded.
//! - Any other list (a surface `replace` — a compaction checkpoint, a pruned tool result — or a
//!   list built by hand) is matched message by message on `Arc` identity: a message the cache
//!   holds keeps its bytes, and only messages it has never seen are encoded. A compaction that
//!   replaces a span with one summary therefore encodes exactly the summary.
//!
//! The cache holds the `Arc<Message>`s it encoded, so an identity can never be reused by another
//! message while its bytes are cached. Bytes live in frozen chunks of about [`CHUNK_BYTES`] plus
//! one open tail, so a body is a few pieces however long the session is.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

use bytes::Bytes;
use dsh_protocol::Message;
use dsh_protocol::MessageList;

/// Encoded history is frozen into shared chunks of at least this size.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// Sessions whose encoded history is kept (least recently used beyond this are dropped).
const DEFAULT_SLOTS: usize = 16;

/// A request body as a sequence of byte pieces (sent back to back; no copy is made to join
/// them).
#[derive(Debug, Clone, Default)]
pub struct WireBody {
    pieces: Vec<Bytes>,
    len: usize,
}

impl WireBody {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, piece: Bytes) {
        if !piece.is_empty() {
            self.len += piece.len();
            self.pieces.push(piece);
        }
    }

    /// Total length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn pieces(&self) -> &[Bytes] {
        &self.pieces
    }

    /// The body as one contiguous buffer (tests, diagnostics).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for piece in &self.pieces {
            out.extend_from_slice(piece);
        }
        out
    }

    /// A streaming HTTP body; the caller sets `Content-Length` to [`WireBody::len`].
    pub(crate) fn into_http(self) -> reqwest::Body {
        let pieces = self
            .pieces
            .into_iter()
            .map(Ok::<Bytes, std::convert::Infallible>);
        reqwest::Body::wrap_stream(futures::stream::iter(pieces))
    }
}

/// The encoded messages of one request.
#[derive(Debug, Clone, Default)]
pub struct EncodedHistory {
    /// The messages' bytes in order; each encoded entry is *preceded* by a comma.
    pub pieces: Vec<Bytes>,
    /// Whether any message reported request-wide content (images), which a per-message cache
    /// cannot encode on its own.
    pub needs_whole_request: bool,
}

/// Encodes one message: appends its wire entries to `out`, each preceded by `,`, and returns
/// `true` when the message has content that needs request-wide handling (then its bytes are
/// not used).
pub type EncodeMessage<'a> = dyn FnMut(&Message, &mut Vec<u8>) -> bool + 'a;

/// Per-session caches of encoded messages (see the module docs).
#[derive(Debug)]
pub struct HistoryEncoder {
    slots: Mutex<Slots>,
}

#[derive(Debug)]
struct Slots {
    capacity: usize,
    clock: u64,
    slots: Vec<Slot>,
}

#[derive(Debug, Default)]
struct Slot {
    key: String,
    used: u64,
    lineage: u64,
    entries: Vec<Entry>,
    chunks: Vec<Bytes>,
    open: Vec<u8>,
    /// Entries whose message needs request-wide handling.
    special: usize,
}

#[derive(Debug)]
struct Entry {
    message: Arc<Message>,
    /// Index of the chunk holding the bytes; `chunks.len()` means the open tail.
    chunk: usize,
    start: usize,
    end: usize,
    special: bool,
}

impl Default for HistoryEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl HistoryEncoder {
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_SLOTS)
    }

    /// Keeps at most `sessions` encoded histories.
    pub fn with_capacity(sessions: usize) -> Self {
        Self {
            slots: Mutex::new(Slots {
                capacity: sessions.max(1),
                clock: 0,
                slots: Vec::new(),
            }),
        }
    }

    /// Encodes `messages`, reusing what was encoded for `key` before. Without a key nothing is
    /// cached.
    pub fn encode(
        &self,
        key: Option<&str>,
        messages: &MessageList,
        encode: &mut EncodeMessage<'_>,
    ) -> EncodedHistory {
        let Some(key) = key else {
            let mut slot = Slot::default();
            slot.rebuild(messages, encode);
            return slot.history();
        };
        // One lock for the whole encoding: a session's requests do not overlap, and other
        // sessions only wait for the new messages of this one.
        let mut guard = dsh_sync::lock(&self.slots);
        let slots = &mut *guard;
        slots.clock += 1;
        let index = match slots.slots.iter().position(|s| s.key == key) {
            Some(index) => index,
            None => {
                if slots.slots.len() >= slots.capacity
                    && let Some(oldest) =
                        (0..slots.slots.len()).min_by_key(|&i| slots.slots[i].used)
                {
                    slots.slots.swap_remove(oldest);
                }
                slots.slots.push(Slot {
                    key: key.to_owned(),
                    ..Slot::default()
                });
                slots.slots.len() - 1
            }
        };
        let slot = &mut slots.slots[index];
        slot.used = slots.clock;
        if slot.extends(messages) {
            for message in &messages[slot.entries.len()..] {
                slot.add(message, encode, None);
            }
            slot.lineage = messages.lineage();
        } else {
            slot.rebuild(messages, encode);
        }
        slot.history()
    }
}

impl Slot {
    /// `messages` is the list this slot encoded, grown by appends.
    fn extends(&self, messages: &MessageList) -> bool {
        let cached = self.entries.len();
        self.lineage == messages.lineage()
            && messages.len() >= cached
            && (cached == 0
                || Arc::ptr_eq(&self.entries[cached - 1].message, &messages[cached - 1]))
    }

    /// Re-encodes for a list of another lineage, keeping the bytes of every message it holds.
    fn rebuild(&mut self, messages: &MessageList, encode: &mut EncodeMessage<'_>) {
        let old = std::mem::take(self);
        let known: HashMap<*const Message, usize> = old
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| (Arc::as_ptr(&e.message), i))
            .collect();
        self.key = old.key.clone();
        self.used = old.used;
        self.lineage = messages.lineage();
        for message in messages.iter() {
            let reuse = known
                .get(&Arc::as_ptr(message))
                .map(|&i| (old.bytes_of(&old.entries[i]), old.entries[i].special));
            self.add(message, encode, reuse);
        }
    }

    /// Appends one message's entry, from `reuse`d bytes or freshly encoded.
    fn add(
        &mut self,
        message: &Arc<Message>,
        encode: &mut EncodeMessage<'_>,
        reuse: Option<(&[u8], bool)>,
    ) {
        let start = self.open.len();
        let special = match reuse {
            Some((bytes, special)) => {
                self.open.extend_from_slice(bytes);
                special
            }
            None => encode(message, &mut self.open),
        };
        self.special += usize::from(special);
        self.entries.push(Entry {
            message: message.clone(),
            chunk: self.chunks.len(),
            start,
            end: self.open.len(),
            special,
        });
        if self.open.len() >= CHUNK_BYTES {
            let mut full = std::mem::take(&mut self.open);
            // The tail grew by doubling: a frozen chunk is kept for the whole session, so it
            // gives back the up to half of its capacity it does not use.
            full.shrink_to_fit();
            self.chunks.push(Bytes::from(full));
        }
    }

    fn bytes_of(&self, entry: &Entry) -> &[u8] {
        match self.chunks.get(entry.chunk) {
            Some(chunk) => &chunk[entry.start..entry.end],
            None => &self.open[entry.start..entry.end],
        }
    }

    fn history(&self) -> EncodedHistory {
        let mut pieces = Vec::with_capacity(self.chunks.len() + 1);
        pieces.extend(self.chunks.iter().cloned());
        if !self.open.is_empty() {
            pieces.push(Bytes::copy_from_slice(&self.open));
        }
        EncodedHistory {
            pieces,
            needs_whole_request: self.special > 0,
        }
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
