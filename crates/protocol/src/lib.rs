//! `dsh-protocol`: the vocabulary every dsh crate speaks.
//!
//! Owns: content blocks, messages and their sources, tool schemas, the model stream chunk
//! protocol (chunks, finish reasons, failures, token usage). These are plain serde types whose
//! JSON shapes match upstream's session log and model requests byte for byte where key order is
//! observable.
//!
//! Must not depend on: any other dsh crate, an async runtime, HTTP. It is data only.

mod content;
mod list;
mod message;
mod stream;

pub use content::ContentBlock;
pub use content::text_of;
pub use list::MessageList;
pub use message::Message;
pub use message::MessageSource;
pub use message::Role;
pub use message::new_message_id;
pub use stream::FinishReason;
pub use stream::LlmFailure;
pub use stream::StreamChunk;
pub use stream::TokenUsage;

use serde::Deserialize;
use serde::Serialize;

/// What the model sees of a tool: exactly these three keys, in this order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}
