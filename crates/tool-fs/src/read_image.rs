//! `read_image`: a PNG/JPEG/WebP/GIF file as an image attachment block (catalog §2.2b).
//! Registered only when an attachment store is mounted (`FsContext::images`).

use std::path::Path;
use std::sync::Arc;

use dsh_protocol::ContentBlock;
use dsh_tools::FileLocation;
use dsh_tools::ToolCallKind;
use dsh_tools::ToolCallView;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::Serialize;
use sha2::Digest;
use sha2::Sha256;
use tokio_util::sync::CancellationToken;

pub use dsh_tools::AttachmentStore;
pub use dsh_tools::ImageAttachment;
pub use dsh_tools::sniff_image as sniff;

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

/// Canonical value `{path, image}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReadImageOutput {
    pub path: String,
    pub image: ImageAttachment,
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
    let ctx = ctx.clone();
    let raw = raw.to_owned();
    let deadline = ctx.limits.io_timeout;
    blocking(&cancel, deadline, move || {
        let resolved = ctx.policy.check_read(&ctx.cwd, &raw)?;
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
        let io = |err: std::io::Error| FsError::io(&format!("cannot read \"{p}\""), &err);
        let file = crate::fsat::open_read(&resolved.real).map_err(io)?;
        crate::read::refuse_secret_link(&ctx, &file, &resolved.display)?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut &file, &mut bytes).map_err(io)?;
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
        support.store.save_image(&image, &bytes)
            .map_err(|e| FsError::plain(e.to_string()))?;
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

pub fn present_call(args: &ReadImageArgs) -> ToolCallView {
    ToolCallView::Generic {
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
