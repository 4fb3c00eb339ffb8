//! `MessageList`: a history shared between the log and every request built from it.
//!
//! A session's history only grows between surface replacements, and each request carries all
//! of it. Copying it per request made every step cost O(history). A `MessageList` is one shared
//! vector of shared messages: cloning it is O(1), and [`MessageList::push`] appends in place when
//! the list has a single owner (the log, once the previous request is gone).
//!
//! Each list also carries a *lineage*: a number that stays the same while the list grows in place
//! and changes whenever it is copied or built anew. Two lists of the same lineage are the same
//! list at two lengths, so the first `n` elements of the shorter are exactly the first `n` of
//! the longer. Encoders (see `dsh-llm`) use that to reuse what they encoded for an earlier
//! request in O(1), and fall back to comparing message identities when the lineage differs.

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use crate::Message;

static NEXT_LINEAGE: AtomicU64 = AtomicU64::new(1);

fn new_lineage() -> u64 {
    NEXT_LINEAGE.fetch_add(1, Ordering::Relaxed)
}

/// An immutable-looking, cheaply cloned list of shared messages (see the module docs).
#[derive(Clone)]
pub struct MessageList {
    items: Arc<Vec<Arc<Message>>>,
    lineage: u64,
}

impl MessageList {
    pub fn new() -> Self {
        Self::from_arcs(Vec::new())
    }

    /// A list of these messages, with a fresh lineage.
    pub fn from_arcs(items: Vec<Arc<Message>>) -> Self {
        Self {
            items: Arc::new(items),
            lineage: new_lineage(),
        }
    }

    /// Appends `message`. In place (same lineage) when this handle is the only one; otherwise
    /// this handle gets a copy of the element handles with a new lineage, and the other handles
    /// keep seeing the old list.
    pub fn push(&mut self, message: impl Into<Arc<Message>>) {
        let message = message.into();
        match Arc::get_mut(&mut self.items) {
            Some(items) => items.push(message),
            None => {
                let mut items = Vec::with_capacity(self.items.len() + 1);
                items.extend(self.items.iter().cloned());
                items.push(message);
                *self = Self::from_arcs(items);
            }
        }
    }

    /// Identifies this list's storage: equal lineages mean one list seen at two lengths.
    pub fn lineage(&self) -> u64 {
        self.lineage
    }

    pub fn as_slice(&self) -> &[Arc<Message>] {
        &self.items
    }

    /// Owned copies of the messages (for callers that must edit them).
    pub fn to_messages(&self) -> Vec<Message> {
        self.items.iter().map(|m| m.as_ref().clone()).collect()
    }
}

impl Default for MessageList {
    fn default() -> Self {
        Self::new()
    }
}

impl Deref for MessageList {
    type Target = [Arc<Message>];

    fn deref(&self) -> &Self::Target {
        &self.items
    }
}

impl std::fmt::Debug for MessageList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.items.iter()).finish()
    }
}

/// Equal when the messages are equal (the lineage is storage identity, not content).
impl PartialEq for MessageList {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.items, &other.items) || self.items == other.items
    }
}

impl PartialEq<Vec<Message>> for MessageList {
    fn eq(&self, other: &Vec<Message>) -> bool {
        self.items.len() == other.len() && self.items.iter().zip(other).all(|(a, b)| **a == *b)
    }
}

impl From<Vec<Message>> for MessageList {
    fn from(messages: Vec<Message>) -> Self {
        messages.into_iter().collect()
    }
}

impl From<Vec<Arc<Message>>> for MessageList {
    fn from(messages: Vec<Arc<Message>>) -> Self {
        Self::from_arcs(messages)
    }
}

impl FromIterator<Message> for MessageList {
    fn from_iter<I: IntoIterator<Item = Message>>(iter: I) -> Self {
        Self::from_arcs(iter.into_iter().map(Arc::new).collect())
    }
}

impl FromIterator<Arc<Message>> for MessageList {
    fn from_iter<I: IntoIterator<Item = Arc<Message>>>(iter: I) -> Self {
        Self::from_arcs(iter.into_iter().collect())
    }
}

/// Serialises as the array of its messages.
impl serde::Serialize for MessageList {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.items.iter().map(|m| m.as_ref()))
    }
}

impl<'a> IntoIterator for &'a MessageList {
    type Item = &'a Arc<Message>;
    type IntoIter = std::slice::Iter<'a, Arc<Message>>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_sole_owner_grows_in_place_and_keeps_its_lineage() {
        let mut list = MessageList::new();
        let lineage = list.lineage();
        list.push(Arc::new(Message::user_text("a")));
        list.push(Arc::new(Message::user_text("b")));
        assert_eq!(list.lineage(), lineage);
        assert_eq!(list.len(), 2);
    }

    #[test]
    fn a_shared_list_is_copied_on_push_and_the_other_handle_is_unchanged() {
        let mut list: MessageList = vec![Message::user_text("a")].into();
        let held = list.clone();
        let lineage = list.lineage();
        list.push(Arc::new(Message::user_text("b")));
        assert_ne!(list.lineage(), lineage);
        assert_eq!(held.lineage(), lineage);
        assert_eq!(held.len(), 1);
        assert_eq!(list.len(), 2);
        assert!(
            Arc::ptr_eq(&held[0], &list[0]),
            "elements are shared, not copied"
        );
    }

    #[test]
    fn lists_compare_by_content() {
        let a: MessageList = vec![Message::user_text("x")].into();
        let b: MessageList = a.iter().cloned().collect();
        assert_ne!(a.lineage(), b.lineage());
        assert_eq!(a, b);
        assert_eq!(a, vec![a[0].as_ref().clone()]);
    }
}
