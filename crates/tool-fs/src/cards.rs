//! What a presenter sees of a finished call. The cards themselves are `dsh-tools`' vocabulary
//! (`ToolCallView`, `ToolResultView`, …); the presenters build them directly.

use dsh_protocol::ContentBlock;
use serde_json::Value;

/// What a presenter sees of a finished call: only what the log keeps (replay-safe).
#[derive(Debug, Clone, Copy)]
pub struct ResultInput<'a> {
    pub content: &'a [ContentBlock],
    pub is_error: bool,
    pub meta: Option<&'a Value>,
}
