//! MCP result content → model-facing content blocks (catalog §4 "Rendering").
//!
//! Works on the JSON wire shape of the content array (the canonical value keeps it verbatim),
//! so block types rmcp does not model still render as diagnostics instead of failing.

use std::sync::Arc;

use base64::Engine;
use dsh_protocol::ContentBlock;
use serde::Deserialize;
use serde::Serialize;
use serde_json::Value;
use sha2::Digest;
use sha2::Sha256;

/// An image attachment record: the same wire shape `read_image` produces
/// (`{attachmentId:"sha256:<hex>", mediaType, bytes, width, height, name?}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageAttachment {
    /// `sha256:<64 lowercase hex of the decoded bytes>`
    pub attachment_id: String,
    pub media_type: String,
    pub bytes: u64,
    pub width: u32,
    pub height: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Where image bytes are kept; the attachment block only carries the id. Saving the same
/// attachment twice must be harmless (ids are content hashes).
pub trait AttachmentStore: Send + Sync {
    fn save_image(&self, attachment: &ImageAttachment, bytes: &[u8]) -> Result<(), String>;
}

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
) -> Vec<Result<ImageAttachment, String>> {
    let blocks: Vec<&Value> = content
        .iter()
        .filter(|b| str_at(b, "type") == Some("image"))
        .collect();
    if blocks.is_empty() {
        return Vec::new();
    }
    let refuse = |reason: &str| blocks.iter().map(|_| Err(reason.to_owned())).collect();
    let Some(support) = images else {
        return refuse("no attachment store is mounted");
    };
    if !(support.accepts_images)() {
        return refuse("the current model route does not declare image input");
    }
    let checked: Vec<Result<(ImageAttachment, Vec<u8>), String>> = blocks
        .iter()
        .map(|block| check_image(block, &support.accepted_media_types))
        .collect();
    if checked.iter().any(Result::is_err) {
        return checked
            .into_iter()
            .map(|c| match c {
                Ok(_) => Err("another image in this result failed validation".to_owned()),
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
        })
        .collect()
}

fn check_image(block: &Value, accepted: &[String]) -> Result<(ImageAttachment, Vec<u8>), String> {
    let declared = str_at(block, "mimeType").unwrap_or("");
    let data = str_at(block, "data").ok_or("image data is missing")?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|_| "image data is not valid base64".to_owned())?;
    let (actual, width, height) = sniff(&bytes).ok_or("image bytes are not PNG/JPEG/WebP/GIF")?;
    if actual != declared {
        return Err(format!(
            "image bytes are {actual}, not the declared {declared}"
        ));
    }
    if !accepted.iter().any(|m| m == actual) {
        return Err(format!(
            "{actual} images are not accepted by this deployment"
        ));
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

/// Media type and pixel size from the header (the same sniffing `read_image` does).
pub fn sniff(bytes: &[u8]) -> Option<(&'static str, u32, u32)> {
    let be32 = |at: usize| Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
    let le16 = |at: usize| {
        Some(u32::from(u16::from_le_bytes(
            bytes.get(at..at + 2)?.try_into().ok()?,
        )))
    };
    let le24 = |at: usize| {
        let b = bytes.get(at..at + 3)?;
        Some(u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16)
    };
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Some(("image/png", be32(16)?, be32(20)?));
    }
    if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        return Some(("image/gif", le16(6)?, le16(8)?));
    }
    if bytes.len() >= 30 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        return match &bytes[12..16] {
            b"VP8 " => Some(("image/webp", le16(26)? & 0x3fff, le16(28)? & 0x3fff)),
            b"VP8L" => {
                let bits = u32::from_le_bytes(bytes.get(21..25)?.try_into().ok()?);
                Some((
                    "image/webp",
                    (bits & 0x3fff) + 1,
                    ((bits >> 14) & 0x3fff) + 1,
                ))
            }
            b"VP8X" => Some(("image/webp", le24(24)? + 1, le24(27)? + 1)),
            _ => None,
        };
    }
    if bytes.starts_with(&[0xff, 0xd8]) {
        let mut at = 2;
        while at + 9 < bytes.len() {
            if bytes[at] != 0xff {
                return None;
            }
            let marker = bytes[at + 1];
            let len = usize::from(u16::from_be_bytes([bytes[at + 2], bytes[at + 3]]));
            let is_sof = matches!(marker, 0xc0..=0xcf) && !matches!(marker, 0xc4 | 0xc8 | 0xcc);
            if is_sof {
                let h = u32::from(u16::from_be_bytes([bytes[at + 5], bytes[at + 6]]));
                let w = u32::from(u16::from_be_bytes([bytes[at + 7], bytes[at + 8]]));
                return Some(("image/jpeg", w, h));
            }
            at += 2 + len;
        }
    }
    None
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
