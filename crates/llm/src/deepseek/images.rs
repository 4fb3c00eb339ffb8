//! Image input for image-capable models: attachments are resolved to data URLs before the body
//! is built, oldest first dropped (as a placeholder) when the request's image budget is spent.

use std::collections::VecDeque;
use std::fmt;

use base64::Engine;
use dsh_protocol::ContentBlock;
use dsh_protocol::LlmFailure;
use dsh_protocol::Message;
use dsh_protocol::Role;
use serde_json::Value;

use crate::codes;

/// Text a tool result's images are introduced with, in the user entry that carries them.
pub(crate) const TOOL_IMAGES_PREFIX: &str = "Attached image(s) from tool result:";
/// Stands in for an image dropped to keep the request under its image budget.
pub(crate) const IMAGE_PLACEHOLDER: &str = "[image omitted: request image size limit exceeded]";

/// The bytes of one image attachment.
#[derive(Clone, PartialEq, Eq)]
pub struct ImageData {
    pub media_type: String,
    pub bytes: Vec<u8>,
}

impl fmt::Debug for ImageData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImageData")
            .field("media_type", &self.media_type)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

/// Loads the bytes behind an image block's `attachment` reference (the attachment store is
/// owned elsewhere; the adapter only reads). `Err` carries a reason for the failure message.
pub trait AttachmentResolver: Send + Sync {
    fn load(&self, attachment: &Value) -> Result<ImageData, crate::ImageLoadError>;
}

/// The image references of a user message, in wire order: its own image blocks, then the
/// images inside its tool results.
pub(crate) fn user_images(message: &Message) -> (Vec<&Value>, Vec<&Value>) {
    let mut direct = Vec::new();
    let mut from_results = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::Image { attachment } => direct.push(attachment),
            ContentBlock::ToolResult { content, .. } => {
                from_results.extend(content.iter().filter_map(|b| match b {
                    ContentBlock::Image { attachment } => Some(attachment),
                    _ => None,
                }));
            }
            _ => {}
        }
    }
    (direct, from_results)
}

/// Resolved image URLs in wire order; `None` marks an image replaced by the placeholder.
#[derive(Debug, Default)]
pub(crate) struct ImageUrls(VecDeque<Option<String>>);

impl ImageUrls {
    pub(crate) fn next_part(&mut self) -> Value {
        match self.0.pop_front().flatten() {
            Some(url) => serde_json::json!({"type": "image_url", "image_url": {"url": url}}),
            None => serde_json::json!({"type": "text", "text": IMAGE_PLACEHOLDER}),
        }
    }
}

/// Resolves every image of `messages` (user messages only) to a data URL, then replaces the
/// oldest with the placeholder until the base64 total fits `max_bytes`.
pub(crate) fn resolve(
    messages: &[std::sync::Arc<Message>],
    resolver: &dyn AttachmentResolver,
    max_bytes: usize,
) -> Result<ImageUrls, LlmFailure> {
    let mut urls = VecDeque::new();
    for message in messages.iter().filter(|m| m.role == Role::User) {
        let (direct, from_results) = user_images(message);
        for attachment in direct.into_iter().chain(from_results) {
            let data = resolver.load(attachment).map_err(|reason| {
                LlmFailure::new(
                    codes::UNSUPPORTED_CONTENT,
                    format!("cannot load image attachment: {reason}"),
                )
            })?;
            let encoded = base64::engine::general_purpose::STANDARD.encode(&data.bytes);
            urls.push_back(Some(format!("data:{};base64,{encoded}", data.media_type)));
        }
    }
    let encoded_len = |url: &Option<String>| {
        url.as_deref()
            .and_then(|u| u.split_once(";base64,"))
            .map_or(0, |(_, data)| data.len())
    };
    let mut total: usize = urls.iter().map(encoded_len).sum();
    for url in urls.iter_mut() {
        if total <= max_bytes {
            break;
        }
        total -= encoded_len(url);
        *url = None;
    }
    Ok(ImageUrls(urls))
}
