//! MCP result content → model-facing content blocks (catalog §4 "Rendering").
//!
//! Works on the JSON wire shape of the content array (the canonical value keeps it verbatim),
//! so block types rmcp does not model still render as diagnostics instead of failing.

use std::sync::Arc;

use base64::Engine;
use dsh_protocol::ContentBlock;
use dsh_tools::AttachmentStore;
use dsh_tools::ImageAttachment;
use dsh_tools::sniff_image;
use serde_json::Value;
use sha2::Digest;
use sha2::Sha256;

/// Mounted image support. Without it every MCP image renders as a bracketed notice.
#[derive(Clone)]
pub struct ImageSupport {
    pub store: Arc<dyn AttachmentStore>,
    /// For example `["image/png", "image/jpeg", "image/webp", "image/gif"]`.
    pub accepted_media_types: Vec<String>,
    /// Whether the current model route declares image input; asked per result because the
    /// route can change during a session.
    pub accepts_images: Arc<dyn Fn() -> bool + Send + Sync>,
}

impl std::fmt::Debug for ImageSupport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageSupport")
            .field("accepted_media_types", &self.accepted_media_types)
            .finish_non_exhaustive()
    }
}

/// The four formats every store accepts.
pub fn default_media_types() -> Vec<String> {
    ["image/png", "image/jpeg", "image/webp", "image/gif"]
        .map(str::to_owned)
        .to_vec()
}

/// Renders `content` (the MCP content array). `raw` is the server-side tool name.
pub fn render_content(
    raw: &str,
    content: &[Value],
    images: Option<&ImageSupport>,
) -> Vec<ContentBlock> {
    if content.is_empty() {
        return vec![ContentBlock::text(format!(
            "({raw} returned no model-visible content)"
        ))];
    }
    let mut decisions = image_decisions(content, images).into_iter();
    let mut out = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    for block in content {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        if kind == "image" {
            match decisions.next() {
                Some(Ok(attachment)) => {
                    flush(&mut pending, &mut out);
                    let attachment = serde_json::to_value(&attachment).unwrap_or(Value::Null);
                    out.push(ContentBlock::Image { attachment });
                }
                Some(Err(reason)) => pending.push(format!(
                    "[image unavailable: {}; {reason}; raw image data remains available to programmatic callers]",
                    str_at(block, "mimeType").unwrap_or("unknown")
                )),
                None => {}
            }
            continue;
        }
        pending.push(text_of_block(kind, block));
    }
    flush(&mut pending, &mut out);
    out
}

/// The message of an `isError` result: its rendered text.
pub fn error_text(raw: &str, content: &[Value]) -> String {
    render_content(raw, content, None)
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn flush(pending: &mut Vec<String>, out: &mut Vec<ContentBlock>) {
    if !pending.is_empty() {
        out.push(ContentBlock::text(pending.join("\n")));
        pending.clear();
    }
}

fn str_at<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

fn text_of_block(kind: &str, block: &Value) -> String {
    match kind {
        "text" => str_at(block, "text").unwrap_or("").to_owned(),
        "resource_link" => format!(
            "Resource link: {} ({})",
            str_at(block, "name").unwrap_or(""),
            str_at(block, "uri").unwrap_or("")
        ),
        "audio" => format!(
            "[audio unavailable: {}; audio content is not shown to the model]",
            str_at(block, "mimeType").unwrap_or("unknown")
        ),
        "resource" => {
            let resource = block.get("resource").unwrap_or(&Value::Null);
            let uri = str_at(resource, "uri").unwrap_or("");
            let head = match str_at(resource, "mimeType") {
                Some(mime) => format!("[embedded resource: {uri} ({mime})"),
                None => format!("[embedded resource: {uri}"),
            };
            match (str_at(resource, "text"), str_at(resource, "blob")) {
                (Some(text), _) => format!("{head}]\n{text}"),
                (None, Some(blob)) => format!(
                    "{head}; {} bytes of binary data not shown]",
                    blob.len() / 4 * 3
                ),
                (None, None) => format!("{head}]"),
            }
        }
        other => format!("[unsupported MCP content block: {other}]"),
    }
}

/// One decision per image block, in order: the stored attachment or why it is unavailable.
/// All-or-nothing: one bad image makes every image of the result unavailable.
fn image_decisions(
    content: &[Value],
    images: Option<&ImageSupport>,
) -> Vec<Result<ImageAttachment, ImageUnavailable>> {
    let blocks: Vec<&Value> = content
        .iter()
        .filter(|b| str_at(b, "type") == Some("image"))
        .collect();
    if blocks.is_empty() {
        return Vec::new();
    }
    let refuse = |reason: ImageUnavailable| blocks.iter().map(|_| Err(reason.clone())).collect();
    let Some(support) = images else {
        return refuse(ImageUnavailable::NoStore);
    };
    if !(support.accepts_images)() {
        return refuse(ImageUnavailable::NoImageInput);
    }
    let checked: Vec<Result<(ImageAttachment, Vec<u8>), ImageUnavailable>> = blocks
        .iter()
        .map(|block| check_image(block, &support.accepted_media_types))
        .collect();
    if checked.iter().any(Result::is_err) {
        return checked
            .into_iter()
            .map(|c| match c {
                Ok(_) => Err(ImageUnavailable::SiblingFailed),
                Err(reason) => Err(reason),
            })
            .collect();
    }
    checked
        .into_iter()
        .flatten()
        .map(|(attachment, bytes)| {
            support
                .store
                .save_image(&attachment, &bytes)
                .map(|()| attachment)
                .map_err(ImageUnavailable::Store)
        })
        .collect()
}

/// Why an image block of a result stays text (`[image unavailable: <type>; <this>; …]`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ImageUnavailable {
    #[error("no attachment store is mounted")]
    NoStore,
    #[error("the current model route does not declare image input")]
    NoImageInput,
    #[error("another image in this result failed validation")]
    SiblingFailed,
    #[error("image data is missing")]
    Missing,
    #[error("image data is not valid base64")]
    NotBase64,
    #[error("image bytes are not PNG/JPEG/WebP/GIF")]
    Unrecognised,
    #[error("image bytes are {actual}, not the declared {declared}")]
    Mismatch { actual: String, declared: String },
    #[error("{0} images are not accepted by this deployment")]
    NotAccepted(String),
    #[error(transparent)]
    Store(dsh_tools::AttachmentStoreError),
}

fn check_image(
    block: &Value,
    accepted: &[String],
) -> Result<(ImageAttachment, Vec<u8>), ImageUnavailable> {
    let declared = str_at(block, "mimeType").unwrap_or("");
    let data = str_at(block, "data").ok_or(ImageUnavailable::Missing)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|_| ImageUnavailable::NotBase64)?;
    let (actual, width, height) = sniff_image(&bytes).ok_or(ImageUnavailable::Unrecognised)?;
    if actual != declared {
        return Err(ImageUnavailable::Mismatch {
            actual: actual.to_owned(),
            declared: declared.to_owned(),
        });
    }
    if !accepted.iter().any(|m| m == actual) {
        return Err(ImageUnavailable::NotAccepted(actual.to_owned()));
    }
    let hex: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let attachment = ImageAttachment {
        attachment_id: format!("sha256:{hex}"),
        media_type: actual.to_owned(),
        bytes: bytes.len() as u64,
        width,
        height,
        name: None,
    };
    Ok((attachment, bytes))
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
