//! `read_image`: a PNG/JPEG/WebP/GIF file as an image attachment block (catalog §2.2b).
//! Registered only when an attachment store is mounted (`FsContext::images`).

use std::path::Path;
use std::sync::Arc;

use dsh_protocol::ContentBlock;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::Serialize;
use sha2::Digest;
use sha2::Sha256;
use tokio_util::sync::CancellationToken;

use crate::cards::CallView;
use crate::cards::FileLocation;
use crate::cards::ToolCallKind;
use crate::context::FileVersion;
use crate::context::FsContext;
use crate::context::Observation;
use crate::error::FsError;
use crate::error::codes;
use crate::exec::blocking;
use crate::exec::display;
use crate::exec::require_path;
use crate::text::envelope;

pub const NAME: &str = "read_image";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReadImageArgs {
    /// Path to the image file, resolved against the session workspace.
    pub file_path: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageAttachment {
    /// `sha256:<64 lowercase hex of the file bytes>`
    pub attachment_id: String,
    pub media_type: String,
    pub bytes: u64,
    pub width: u32,
    pub height: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Canonical value `{path, image}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReadImageOutput {
    pub path: String,
    pub image: ImageAttachment,
}

/// Where image bytes are kept; a refusal message passes through to the model unchanged.
pub trait AttachmentStore: Send + Sync {
    fn save_image(&self, attachment: &ImageAttachment, bytes: &[u8]) -> Result<(), String>;
}

/// The model route as far as image input is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageRoute {
    Unresolved,
    Model { model: String, accepts_images: bool },
}

/// Mounted attachment support: present only when `read_image` is registered.
#[derive(Clone)]
pub struct ImageSupport {
    pub store: Arc<dyn AttachmentStore>,
    pub accepted_media_types: Vec<String>,
    pub route: ImageRoute,
}

impl std::fmt::Debug for ImageSupport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageSupport")
            .field("accepted_media_types", &self.accepted_media_types)
            .field("route", &self.route)
            .finish_non_exhaustive()
    }
}

fn media_type_for(path: &str) -> Option<(&'static str, String)> {
    let ext = Path::new(path).extension()?.to_str()?.to_ascii_lowercase();
    let media = match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "gif" => "image/gif",
        _ => return None,
    };
    Some((media, ext))
}

pub async fn run(
    args: &ReadImageArgs,
    ctx: &FsContext,
    cancel: CancellationToken,
) -> Result<ReadImageOutput, FsError> {
    require_path(&args.file_path, "file_path")?;
    let raw = args.file_path.as_str();
    let Some((media_type, ext)) = media_type_for(raw) else {
        return Err(FsError::plain(format!(
            "cannot read \"{raw}\": read_image only accepts PNG/JPEG/WebP/GIF paths"
        )));
    };
    let Some(support) = ctx.images.clone() else {
        return Err(FsError::plain(format!(
            "cannot read \"{raw}\" as an image: no attachment service is mounted"
        )));
    };
    if !support.accepted_media_types.iter().any(|m| m == media_type) {
        return Err(FsError::plain(format!(
            "cannot read \"{raw}\": {media_type} images are not accepted by this deployment"
        )));
    }
    match &support.route {
        ImageRoute::Unresolved => {
            return Err(FsError::plain(format!(
                "cannot read \"{raw}\" as an image: the current model route could not be resolved"
            )));
        }
        ImageRoute::Model {
            model,
            accepts_images: false,
        } => {
            return Err(FsError::plain(format!(
                "cannot read \"{raw}\" as an image: model \"{model}\" does not declare image input; switch to an image-capable model to read images"
            )));
        }
        ImageRoute::Model { .. } => {}
    }
    let resolved = ctx.policy.check_read(&ctx.cwd, raw);
    let ctx = ctx.clone();
    blocking(&cancel, move || {
        let p = display(&resolved.display);
        let meta = match std::fs::metadata(&resolved.display) {
            Ok(meta) => meta,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                ctx.observe(&resolved.real, Observation::Absent);
                return Err(FsError::coded(codes::FS_NOT_FOUND, format!("cannot read \"{p}\": not found")));
            }
            Err(err) => return Err(FsError::io(&format!("cannot read \"{p}\""), &err)),
        };
        if !meta.is_file() {
            return Err(FsError::coded(codes::FS_NOT_REGULAR_FILE, format!("cannot read \"{p}\": not a regular file")));
        }
        let cap = ctx.limits.max_image_bytes;
        if meta.len() > cap {
            return Err(FsError::coded(
                codes::FS_TOO_LARGE,
                format!("cannot read \"{p}\": {} bytes exceeds the {cap}-byte limit", meta.len()),
            ));
        }
        let bytes = std::fs::read(&resolved.display).map_err(|err| FsError::io(&format!("cannot read \"{p}\""), &err))?;
        let Some((actual, width, height)) = sniff(&bytes) else {
            return Err(mismatch(&p, &ext, media_type));
        };
        if actual != media_type {
            return Err(mismatch(&p, &ext, media_type));
        }
        let max_side = ctx.limits.max_image_dimension;
        if width > max_side || height > max_side {
            return Err(FsError::plain(format!(
                "cannot read \"{p}\": at least one image side exceeds the {max_side}px limit; downscale the image and read the smaller copy"
            )));
        }
        let max_pixels = ctx.limits.max_image_pixels;
        if u64::from(width) * u64::from(height) > max_pixels {
            return Err(FsError::plain(format!(
                "cannot read \"{p}\": the image exceeds the {max_pixels}-pixel decoded-size limit; downscale the image and read the smaller copy"
            )));
        }
        let image = ImageAttachment {
            attachment_id: format!("sha256:{}", crate::text::hex(&Sha256::digest(&bytes))),
            media_type: media_type.to_owned(),
            bytes: bytes.len() as u64,
            width,
            height,
            name: resolved.display.file_name().map(|n| n.to_string_lossy().into_owned()),
        };
        support.store.save_image(&image, &bytes).map_err(FsError::plain)?;
        ctx.observe(&resolved.real, Observation::Present(FileVersion::of(&meta)));
        Ok(ReadImageOutput { path: p, image })
    })
    .await
}

fn mismatch(p: &str, ext: &str, media_type: &str) -> FsError {
    FsError::plain(format!(
        "cannot read \"{p}\": the .{ext} extension declares {media_type}, but the bytes use a different image format; rename the file to match its actual format if it is PNG/JPEG/WebP/GIF, or convert it to one of those formats"
    ))
}

/// Media type and pixel size from the file header; `None` when it is no supported format.
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

/// The envelope text, then the image block.
pub fn render(_args: &ReadImageArgs, out: &ReadImageOutput) -> Vec<ContentBlock> {
    let img = &out.image;
    let body = format!(
        "{} image, {}x{} px, {} bytes",
        img.media_type, img.width, img.height, img.bytes
    );
    let attachment = serde_json::to_value(img).unwrap_or(serde_json::Value::Null);
    vec![
        ContentBlock::text(envelope(&out.path, "image", &body)),
        ContentBlock::Image { attachment },
    ]
}

pub fn present_call(args: &ReadImageArgs) -> CallView {
    CallView::Generic {
        title: format!("Read image {}", args.file_path),
        kind: Some(ToolCallKind::Read),
        raw_input: None,
        content: None,
        locations: Some(vec![FileLocation::path(args.file_path.clone())]),
    }
}

#[cfg(test)]
#[path = "read_image_tests.rs"]
mod tests;
