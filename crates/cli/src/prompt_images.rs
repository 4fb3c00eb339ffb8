//! The ACP bridge's prompt-image seam over the attachments plugin's store.

use std::sync::Arc;

use dsh_acp::ImageStoreError;
use dsh_acp::PromptImage;
use dsh_acp::PromptImageStore;
use dsh_attachments::AttachmentError;
use dsh_attachments::LocalAttachmentStore;
use dsh_tools::ImageAttachment;

/// The store ACP prompt images are saved to.
pub fn prompt_store(store: Arc<LocalAttachmentStore>) -> Arc<dyn PromptImageStore> {
    Arc::new(PromptImages(store))
}

/// The ACP bridge's prompt-image seam over the local store.
struct PromptImages(Arc<LocalAttachmentStore>);

impl PromptImageStore for PromptImages {
    fn accepted_media_types(&self) -> Vec<String> {
        self.0.accepted_media_types()
    }

    fn save_images(&self, batch: &[PromptImage]) -> Result<Vec<ImageAttachment>, ImageStoreError> {
        let records = batch
            .iter()
            .map(|image| self.0.describe(&image.bytes, Some(&image.media_type), None))
            .collect::<Result<Vec<_>, _>>()
            .map_err(store_error)?;
        let pairs: Vec<(ImageAttachment, &[u8])> = records
            .iter()
            .cloned()
            .zip(batch.iter().map(|image| image.bytes.as_slice()))
            .collect();
        self.0.save_images(&pairs).map_err(store_error)?;
        Ok(records)
    }

    fn load_image(&self, attachment: &ImageAttachment) -> Result<Vec<u8>, String> {
        self.0.load(attachment).map_err(|e| e.to_string())
    }
}

fn store_error(error: AttachmentError) -> ImageStoreError {
    if error.is_rejection() {
        ImageStoreError::Rejected(error.to_string())
    } else {
        ImageStoreError::Failed(error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn prompt_images_are_stored_and_refusals_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(LocalAttachmentStore::under_home(dir.path()));
        let images = prompt_store(store.clone());
        let records = images
            .save_images(&[PromptImage {
                media_type: "image/png".into(),
                bytes: RED_PNG.to_vec(),
            }])
            .unwrap();
        assert_eq!(records[0].bytes, 69);
        assert_eq!(store.load(&records[0]).unwrap(), RED_PNG);
        let refused = images
            .save_images(&[PromptImage {
                media_type: "image/png".into(),
                bytes: b"not an image".to_vec(),
            }])
            .unwrap_err();
        assert_eq!(
            refused,
            ImageStoreError::Rejected("image bytes are not PNG/JPEG/WebP/GIF".into())
        );
    }

    const RED_PNG: [u8; 69] = [
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90,
        0x77, 0x53, 0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8,
        0xcf, 0xc0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef, 0x00, 0x00, 0x00,
        0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];
}
