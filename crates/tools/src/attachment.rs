//! Image attachments: the record an image content block carries, the store that keeps the
//! bytes, and header sniffing. Shared by every tool that turns bytes into an image block
//! (`read_image`, MCP image results) so the attachment wire shape has one definition.

use schemars::JsonSchema;
use serde::Deserialize;
use serde::Serialize;

use crate::AttachmentStoreError;

// The attachment of an image block: `{attachmentId:"sha256:<hex>", mediaType, bytes, width,
// height, name?}`. No doc comment on the type: it is part of `read_image`'s output schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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

/// Where image bytes are kept; the attachment block only carries the id. Saving the same
/// attachment twice must be harmless (ids are content hashes). A refusal message passes
/// through to the model unchanged.
pub trait AttachmentStore: Send + Sync {
    fn save_image(
        &self,
        attachment: &ImageAttachment,
        bytes: &[u8],
    ) -> Result<(), AttachmentStoreError>;
}

/// Media type and pixel size from the header (PNG, GIF, WebP, JPEG); `None` when the bytes
/// are no supported format.
pub fn sniff_image(bytes: &[u8]) -> Option<(&'static str, u32, u32)> {
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
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn sniffs_png_and_gif_headers() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&[0, 0, 0, 3, 0, 0, 0, 2]);
        assert_eq!(sniff_image(&png), Some(("image/png", 3, 2)));
        assert_eq!(sniff_image(&png[..20]), None);
        assert_eq!(
            sniff_image(b"GIF89a\x07\x00\x05\x00"),
            Some(("image/gif", 7, 5))
        );
    }

    #[test]
    fn sniffs_jpeg_and_webp() {
        let jpeg = [
            0xff, 0xd8, 0xff, 0xe0, 0x00, 0x04, 0, 0, 0xff, 0xc0, 0x00, 0x11, 0x08, 0x00, 0x0a,
            0x00, 0x14, 0x03, 0, 0,
        ];
        assert_eq!(sniff_image(&jpeg), Some(("image/jpeg", 20, 10)));
        let mut webp = b"RIFF\0\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0".to_vec();
        webp.extend_from_slice(&[0x09, 0, 0, 0x04, 0, 0]);
        assert_eq!(sniff_image(&webp), Some(("image/webp", 10, 5)));
        assert_eq!(sniff_image(b"not an image at all"), None);
    }

    #[test]
    fn attachment_wire_shape_omits_absent_name() {
        let attachment = ImageAttachment {
            attachment_id: "sha256:ab".into(),
            media_type: "image/png".into(),
            bytes: 69,
            width: 1,
            height: 1,
            name: None,
        };
        assert_eq!(
            serde_json::to_string(&attachment).unwrap(),
            r#"{"attachmentId":"sha256:ab","mediaType":"image/png","bytes":69,"width":1,"height":1}"#
        );
    }
}
