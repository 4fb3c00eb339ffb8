//! The content-addressed directory: one file per distinct image, named by its SHA-256.
//!
//! Ids are content hashes, so saving the same bytes twice is a no-op and concurrent writers of
//! one id race harmlessly: each writes a private temp file and renames it over the final name.

use std::fs;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

use dsh_llm::AttachmentResolver;
use dsh_llm::ImageData;
use dsh_llm::ImageLoadError;
use dsh_tools::AttachmentStore;
use dsh_tools::AttachmentStoreError;
use dsh_tools::ImageAttachment;
use dsh_tools::sniff_image;
use serde_json::Value;
use sha2::Digest;
use sha2::Sha256;

use crate::error::AttachmentError;

/// The formats the store keeps (and every caller may offer).
pub const ACCEPTED_MEDIA_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/webp", "image/gif"];

const ID_PREFIX: &str = "sha256:";
const FILE_PREFIX: &str = "sha256-";

/// Store-side ceilings for one image (upstream's `maxImageBytes`, `maxImageDimension`,
/// `maxImagePixels`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachmentLimits {
    pub max_image_bytes: u64,
    pub max_image_dimension: u32,
    pub max_image_pixels: u64,
}

impl Default for AttachmentLimits {
    fn default() -> Self {
        Self {
            max_image_bytes: 3_670_016,
            max_image_dimension: 2000,
            max_image_pixels: 40_000_000,
        }
    }
}

/// `sha256:<64 lowercase hex of bytes>`.
pub fn attachment_id(bytes: &[u8]) -> String {
    format!("{ID_PREFIX}{}", hex(&Sha256::digest(bytes)))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// Attachments kept as files under one directory (created 0700 on first save).
#[derive(Debug, Clone)]
pub struct LocalAttachmentStore {
    root: PathBuf,
    limits: AttachmentLimits,
}

impl LocalAttachmentStore {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            limits: AttachmentLimits::default(),
        }
    }

    /// The store of a dsh home: `<home>/attachments`.
    pub fn under_home(home: &Path) -> Self {
        Self::new(home.join("attachments"))
    }

    pub fn with_limits(mut self, limits: AttachmentLimits) -> Self {
        self.limits = limits;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn limits(&self) -> AttachmentLimits {
        self.limits
    }

    pub fn accepted_media_types(&self) -> Vec<String> {
        ACCEPTED_MEDIA_TYPES.map(str::to_owned).to_vec()
    }

    /// Where the bytes of `id` live (`<root>/sha256-<hex>`); the id must be well formed.
    pub fn path_of(&self, id: &str) -> Result<PathBuf, AttachmentError> {
        let hex = id
            .strip_prefix(ID_PREFIX)
            .filter(|hex| {
                hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            })
            .ok_or_else(|| AttachmentError::InvalidId(id.to_owned()))?;
        Ok(self.root.join(format!("{FILE_PREFIX}{hex}")))
    }

    /// The attachment record for `bytes`: sniffed format and size, content id, the store's
    /// limits applied. `declared` (a client's mime type) must match the sniffed format.
    pub fn describe(
        &self,
        bytes: &[u8],
        declared: Option<&str>,
        name: Option<String>,
    ) -> Result<ImageAttachment, AttachmentError> {
        let Some((media_type, width, height)) = sniff_image(bytes) else {
            return Err(AttachmentError::Rejected(
                "image bytes are not PNG/JPEG/WebP/GIF".to_owned(),
            ));
        };
        if let Some(declared) = declared.filter(|d| *d != media_type) {
            return Err(AttachmentError::Rejected(format!(
                "image bytes are {media_type}, not the declared {declared}"
            )));
        }
        let attachment = ImageAttachment {
            attachment_id: attachment_id(bytes),
            media_type: media_type.to_owned(),
            bytes: bytes.len() as u64,
            width,
            height,
            name,
        };
        self.admit(&attachment, bytes)?;
        Ok(attachment)
    }

    /// Checks a record against its bytes and the limits, without writing anything.
    fn admit(&self, attachment: &ImageAttachment, bytes: &[u8]) -> Result<(), AttachmentError> {
        let limits = self.limits;
        if !ACCEPTED_MEDIA_TYPES.contains(&attachment.media_type.as_str()) {
            return Err(AttachmentError::Rejected(format!(
                "{} images are not accepted by this deployment",
                attachment.media_type
            )));
        }
        if bytes.len() as u64 > limits.max_image_bytes {
            return Err(AttachmentError::Rejected(format!(
                "the image is {} bytes, over the {}-byte limit",
                bytes.len(),
                limits.max_image_bytes
            )));
        }
        if attachment.attachment_id != attachment_id(bytes) {
            return Err(AttachmentError::Rejected(format!(
                "attachment id {} does not match the image bytes",
                attachment.attachment_id
            )));
        }
        let sniffed = sniff_image(bytes);
        let (media_type, width, height) = sniffed.unwrap_or(("unknown", 0, 0));
        if media_type != attachment.media_type
            || width != attachment.width
            || height != attachment.height
            || bytes.len() as u64 != attachment.bytes
        {
            return Err(AttachmentError::Rejected(format!(
                "the attachment record ({} {}x{}, {} bytes) does not describe the image bytes",
                attachment.media_type, attachment.width, attachment.height, attachment.bytes
            )));
        }
        let max_side = limits.max_image_dimension;
        if width > max_side || height > max_side {
            return Err(AttachmentError::Rejected(format!(
                "at least one image side exceeds the {max_side}px limit"
            )));
        }
        if u64::from(width) * u64::from(height) > limits.max_image_pixels {
            return Err(AttachmentError::Rejected(format!(
                "the image exceeds the {}-pixel decoded-size limit",
                limits.max_image_pixels
            )));
        }
        Ok(())
    }

    /// Saves one image after checking its record. Already stored: nothing is written.
    pub fn save(&self, attachment: &ImageAttachment, bytes: &[u8]) -> Result<(), AttachmentError> {
        self.admit(attachment, bytes)?;
        self.write(&attachment.attachment_id, bytes)
    }

    /// Saves a batch: every image is checked before the first is written, so a rejected image
    /// leaves nothing new behind.
    pub fn save_images(&self, batch: &[(ImageAttachment, &[u8])]) -> Result<(), AttachmentError> {
        for (attachment, bytes) in batch {
            self.admit(attachment, bytes)?;
        }
        for (attachment, bytes) in batch {
            self.write(&attachment.attachment_id, bytes)?;
        }
        Ok(())
    }

    fn write(&self, id: &str, bytes: &[u8]) -> Result<(), AttachmentError> {
        let path = self.path_of(id)?;
        // An intact copy is kept; a damaged one (size or hash off) is replaced.
        if fs::read(&path).is_ok_and(|stored| stored == bytes) {
            return Ok(());
        }
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.root)
            .map_err(|e| AttachmentError::io(&self.root, e))?;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let temp = self.root.join(format!(
            ".{}.{}.{}.tmp",
            path.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)?;
            file.write_all(bytes)?;
            file.sync_all()?;
            fs::rename(&temp, &path)
        })();
        if let Err(error) = written {
            let _ = fs::remove_file(&temp);
            return Err(AttachmentError::io(&path, error));
        }
        tracing::debug!(id, bytes = bytes.len(), "attachment stored");
        Ok(())
    }

    /// The stored bytes of `attachment`, verified against its id and record.
    pub fn load(&self, attachment: &ImageAttachment) -> Result<Vec<u8>, AttachmentError> {
        let id = &attachment.attachment_id;
        let bytes = self.load_id(id)?;
        let sniffed = sniff_image(&bytes).map(|(media_type, _, _)| media_type);
        if sniffed != Some(attachment.media_type.as_str()) {
            return Err(AttachmentError::Corrupt {
                id: id.clone(),
                reason: format!("the stored bytes are not {}", attachment.media_type),
            });
        }
        Ok(bytes)
    }

    /// The stored bytes of `id`, verified against the hash the id names.
    pub fn load_id(&self, id: &str) -> Result<Vec<u8>, AttachmentError> {
        let path = self.path_of(id)?;
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(AttachmentError::NotFound(id.to_owned()));
            }
            Err(error) => return Err(AttachmentError::io(&path, error)),
        };
        if attachment_id(&bytes) != id {
            return Err(AttachmentError::Corrupt {
                id: id.to_owned(),
                reason: "the stored bytes do not hash to the id".to_owned(),
            });
        }
        Ok(bytes)
    }
}

impl AttachmentStore for LocalAttachmentStore {
    fn save_image(
        &self,
        attachment: &ImageAttachment,
        bytes: &[u8],
    ) -> Result<(), AttachmentStoreError> {
        self.save(attachment, bytes)
            .map_err(|e| AttachmentStoreError::Refused(e.to_string()))
    }
}

impl AttachmentResolver for LocalAttachmentStore {
    fn load(&self, attachment: &Value) -> Result<ImageData, ImageLoadError> {
        let record: ImageAttachment =
            serde_json::from_value(attachment.clone()).map_err(ImageLoadError::InvalidRecord)?;
        let bytes = LocalAttachmentStore::load(self, &record)
            .map_err(|e| ImageLoadError::Unavailable(e.to_string()))?;
        Ok(ImageData {
            media_type: record.media_type,
            bytes,
        })
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
