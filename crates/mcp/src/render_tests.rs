use std::sync::Arc;
use std::sync::Mutex;

use base64::Engine;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

/// The first 24 bytes of a PNG (signature + IHDR with the size): enough for sniffing.
fn png(width: u32, height: u32) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    bytes.extend(width.to_be_bytes());
    bytes.extend(height.to_be_bytes());
    bytes
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[derive(Default)]
struct Memory(Mutex<Vec<(ImageAttachment, Vec<u8>)>>);
impl AttachmentStore for Memory {
    fn save_image(
        &self,
        attachment: &ImageAttachment,
        bytes: &[u8],
    ) -> Result<(), dsh_tools::AttachmentStoreError> {
        self.0
            .lock()
            .unwrap()
            .push((attachment.clone(), bytes.to_vec()));
        Ok(())
    }
}

fn support(store: Arc<Memory>, accepts: bool) -> ImageSupport {
    ImageSupport {
        store,
        accepted_media_types: default_media_types(),
        accepts_images: Arc::new(move || accepts),
    }
}

#[test]
fn text_blocks_join_with_newlines_and_links_render() {
    let content = [
        json!({"type": "text", "text": "a"}),
        json!({"type": "resource_link", "name": "README", "uri": "file:///r.md"}),
        json!({"type": "text", "text": "b"}),
    ];
    assert_eq!(
        render_content("t", &content, None),
        vec![ContentBlock::text(
            "a\nResource link: README (file:///r.md)\nb"
        )]
    );
}

#[test]
fn empty_content_says_so() {
    assert_eq!(
        render_content("get-sum", &[], None),
        vec![ContentBlock::text(
            "(get-sum returned no model-visible content)"
        )]
    );
}

#[test]
fn resources_audio_and_unknown_blocks_are_bracketed() {
    let content = [
        json!({"type": "resource", "resource": {"uri": "demo://1", "mimeType": "text/plain", "text": "hello"}}),
        json!({"type": "resource", "resource": {"uri": "demo://2", "blob": "AAAA"}}),
        json!({"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}),
        json!({"type": "hologram"}),
    ];
    assert_eq!(
        render_content("t", &content, None),
        vec![ContentBlock::text(
            "[embedded resource: demo://1 (text/plain)]\nhello\n\
             [embedded resource: demo://2; 3 bytes of binary data not shown]\n\
             [audio unavailable: audio/wav; audio content is not shown to the model]\n\
             [unsupported MCP content block: hologram]"
        )]
    );
}

#[test]
fn images_become_stored_attachments_in_order() {
    let store = Arc::new(Memory::default());
    let bytes = png(20, 10);
    let content = [
        json!({"type": "text", "text": "before"}),
        json!({"type": "image", "data": b64(&bytes), "mimeType": "image/png"}),
        json!({"type": "text", "text": "after"}),
    ];
    let blocks = render_content("img", &content, Some(&support(store.clone(), true)));
    let digest = Sha256::digest(&bytes);
    let id = format!(
        "sha256:{}",
        digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    assert_eq!(
        blocks,
        vec![
            ContentBlock::text("before"),
            ContentBlock::Image {
                attachment: json!({"attachmentId": id, "mediaType": "image/png", "bytes": 24, "width": 20, "height": 10})
            },
            ContentBlock::text("after"),
        ]
    );
    let saved = store.0.lock().unwrap();
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0].1, bytes);
}

#[test]
fn images_fall_back_to_a_notice_with_the_reason() {
    let data = b64(&png(1, 1));
    let content = [json!({"type": "image", "data": data, "mimeType": "image/png"})];
    let notice = |reason: &str| {
        vec![ContentBlock::text(format!(
            "[image unavailable: image/png; {reason}; raw image data remains available to programmatic callers]"
        ))]
    };
    assert_eq!(
        render_content("t", &content, None),
        notice("no attachment store is mounted")
    );
    let store = Arc::new(Memory::default());
    assert_eq!(
        render_content("t", &content, Some(&support(store.clone(), false))),
        notice("the current model route does not declare image input")
    );

    // One bad image spoils the batch: nothing is stored.
    let batch = [
        content[0].clone(),
        json!({"type": "image", "data": data, "mimeType": "image/jpeg"}),
    ];
    let blocks = render_content("t", &batch, Some(&support(store.clone(), true)));
    assert_eq!(
        blocks,
        vec![ContentBlock::text(
            "[image unavailable: image/png; another image in this result failed validation; raw image data remains available to programmatic callers]\n\
             [image unavailable: image/jpeg; image bytes are image/png, not the declared image/jpeg; raw image data remains available to programmatic callers]"
        )]
    );
    assert!(store.0.lock().unwrap().is_empty());
}

#[test]
fn error_text_is_the_rendered_text() {
    let content = [
        json!({"type": "text", "text": "bad input"}),
        json!({"type": "text", "text": "try again"}),
    ];
    assert_eq!(error_text("t", &content), "bad input\ntry again");
}
