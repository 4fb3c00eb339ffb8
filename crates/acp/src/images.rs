//! Inline prompt images (§1A admission step 3–4): the seam to the host's attachment store and
//! the checks the bridge itself makes on an ACP `image` block.
//!
//! Images are saved before the prompt is queued and enter the message (and so the durable log)
//! only as attachment references; the base64 payload never does.

use agent_client_protocol::Error as RpcError;
use agent_client_protocol::v1::schema::ImageContent;
use base64::Engine;
use dsh_tools::ImageAttachment;

use crate::error::invalid_params;
use crate::error::texts;

/// The formats an ACP client may send (and a store must accept one of to be advertised).
pub const PROMPT_MEDIA_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/webp", "image/gif"];

/// Whether a model route takes image input (upstream `resolveModelInfo(..).inputModalities`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageInput {
    /// The route names no provider or model the host knows.
    Unresolved,
    Model {
        model: String,
        accepts_images: bool,
    },
}

/// One decoded prompt image, as the client declared it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptImage {
    pub media_type: String,
    pub bytes: Vec<u8>,
}

/// Why a batch was not saved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImageStoreError {
    /// The store refused an image (format, size, limits): answered as invalid params.
    #[error("{0}")]
    Rejected(String),
    /// The store failed: answered as internal `unable to persist the prompt image batch`.
    #[error("{0}")]
    Failed(String),
}

/// Where prompt images are kept. Implemented by the host over its attachment store.
pub trait PromptImageStore: Send + Sync {
    /// The media types the store accepts.
    fn accepted_media_types(&self) -> Vec<String>;

    /// Checks every image, then saves them all; the records come back in batch order. A
    /// refusal must leave nothing half-saved that a later prompt could depend on.
    fn save_images(&self, batch: &[PromptImage]) -> Result<Vec<ImageAttachment>, ImageStoreError>;

    /// The stored bytes of `attachment`, verified (a `session/load` replay shows the user's
    /// images again). `Err` says why they are unavailable.
    fn load_image(&self, attachment: &ImageAttachment) -> Result<Vec<u8>, String>;
}

/// The bridge's own checks of one `image` block (after the capability check): a supported
/// mime type and canonical base64 that round-trips.
pub(crate) fn decode(image: &ImageContent) -> Result<PromptImage, RpcError> {
    if !PROMPT_MEDIA_TYPES.contains(&image.mime_type.as_str()) {
        return Err(invalid_params(texts::IMAGE_MIME_TYPE));
    }
    let engine = base64::engine::general_purpose::STANDARD;
    let bytes = engine
        .decode(&image.data)
        .ok()
        .filter(|bytes| engine.encode(bytes) == image.data)
        .ok_or_else(|| invalid_params(texts::IMAGE_BASE64))?;
    Ok(PromptImage {
        media_type: image.mime_type.clone(),
        bytes,
    })
}

/// Whether a store is mounted that keeps one of the prompt formats.
pub(crate) fn stores_prompt_formats(store: Option<&dyn PromptImageStore>) -> bool {
    store.is_some_and(|store| {
        store
            .accepted_media_types()
            .iter()
            .any(|m| PROMPT_MEDIA_TYPES.contains(&m.as_str()))
    })
}

/// Whether `initialize` may advertise image prompts: a store that accepts one of the prompt
/// formats and a configured route that declares image input.
pub(crate) fn advertised(
    store: Option<&dyn PromptImageStore>,
    route: Result<ImageInput, crate::error::Failure>,
) -> bool {
    stores_prompt_formats(store)
        && matches!(
            route,
            Ok(ImageInput::Model {
                accepts_images: true,
                ..
            })
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn image(data: &str, mime: &str) -> ImageContent {
        ImageContent::new(data, mime)
    }

    fn message(error: RpcError) -> String {
        error.message
    }

    #[test]
    fn mime_type_and_canonical_base64_are_checked_in_that_order() {
        let ok = decode(&image("iVBORw0KGgo=", "image/png")).unwrap();
        assert_eq!(ok.bytes, b"\x89PNG\r\n\x1a\n");
        assert_eq!(
            message(decode(&image("!!", "image/svg+xml")).unwrap_err()),
            "Invalid params: image mimeType must be image/png, image/jpeg, image/webp, or image/gif"
        );
        // Missing padding, whitespace, non-zero trailing bits: none round-trips.
        for data in [
            "iVBORw0KGgo",
            "iVBO Rw0KGgo=",
            "iVBORw0KGgp=",
            "not base64!",
        ] {
            assert_eq!(
                message(decode(&image(data, "image/png")).unwrap_err()),
                "Invalid params: image data must be canonical base64",
                "{data}"
            );
        }
    }

    struct Formats(Vec<String>);

    impl PromptImageStore for Formats {
        fn accepted_media_types(&self) -> Vec<String> {
            self.0.clone()
        }
        fn save_images(&self, _: &[PromptImage]) -> Result<Vec<ImageAttachment>, ImageStoreError> {
            Err(ImageStoreError::Failed("unused".into()))
        }
        fn load_image(&self, _: &ImageAttachment) -> Result<Vec<u8>, String> {
            Err("unused".into())
        }
    }

    #[test]
    fn advertised_only_with_a_store_a_prompt_format_and_an_image_route() {
        let vision = || {
            Ok(ImageInput::Model {
                model: "v".into(),
                accepts_images: true,
            })
        };
        let png = Formats(vec!["image/png".into()]);
        assert!(advertised(Some(&png), vision()));
        assert!(!advertised(None, vision()));
        let tiff = Formats(vec!["image/tiff".into()]);
        assert!(!advertised(Some(&tiff), vision()));
        let text_only = Ok(ImageInput::Model {
            model: "t".into(),
            accepts_images: false,
        });
        assert!(!advertised(Some(&png), text_only));
        assert!(!advertised(Some(&png), Ok(ImageInput::Unresolved)));
        let failed = Err(crate::error::Failure::internal("lookup failed"));
        assert!(!advertised(Some(&png), failed));
    }
}
