use super::*;
use pretty_assertions::assert_eq;
use std::os::unix::fs::PermissionsExt;

/// The recorded `red.png` of scenario `acp/read-image` (1×1, 69 bytes).
const RED_PNG: [u8; 69] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
    0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];
const RED_ID: &str = "sha256:b1ff9c8ea3a780bad09b346c423d2d0e46815926879b18e841d928376a946640";

fn gif(width: u16, height: u16) -> Vec<u8> {
    let mut bytes = b"GIF89a".to_vec();
    bytes.extend_from_slice(&width.to_le_bytes());
    bytes.extend_from_slice(&height.to_le_bytes());
    bytes.extend_from_slice(&[0, 0, 0, 0x3b]);
    bytes
}

#[test]
fn describes_the_recorded_png_with_its_content_id() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalAttachmentStore::under_home(dir.path());
    let record = store
        .describe(&RED_PNG, Some("image/png"), Some("red.png".into()))
        .unwrap();
    assert_eq!(
        serde_json::to_value(&record).unwrap(),
        serde_json::json!({"attachmentId": RED_ID, "mediaType": "image/png", "bytes": 69,
            "width": 1, "height": 1, "name": "red.png"})
    );
    let refused = store
        .describe(&RED_PNG, Some("image/gif"), None)
        .unwrap_err();
    assert!(refused.is_rejection());
    assert_eq!(
        refused.to_string(),
        "image bytes are image/png, not the declared image/gif"
    );
    assert!(
        store
            .describe(b"plain text", None, None)
            .unwrap_err()
            .is_rejection()
    );
}

#[test]
fn saves_atomically_as_a_private_content_addressed_file_and_loads_verified() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalAttachmentStore::under_home(dir.path());
    let record = store.describe(&RED_PNG, None, None).unwrap();
    store.save(&record, &RED_PNG).unwrap();
    store.save(&record, &RED_PNG).unwrap();
    let path = dir
        .path()
        .join("attachments")
        .join(format!("sha256-{}", RED_ID.trim_start_matches("sha256:")));
    assert_eq!(store.path_of(RED_ID).unwrap(), path);
    assert_eq!(std::fs::read(&path).unwrap(), RED_PNG);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let names: Vec<String> = std::fs::read_dir(store.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "no temp files left: {names:?}");
    assert_eq!(store.load(&record).unwrap(), RED_PNG);

    // The resolver seam the model adapter uses.
    let resolver: &dyn AttachmentResolver = &store;
    let data = resolver
        .load(&serde_json::to_value(&record).unwrap())
        .unwrap();
    assert_eq!(data.media_type, "image/png");
    assert_eq!(data.bytes, RED_PNG);
}

#[test]
fn loading_detects_missing_corrupt_and_malformed_ids() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalAttachmentStore::new(dir.path().join("a"));
    let record = store.describe(&RED_PNG, None, None).unwrap();
    assert!(matches!(
        store.load(&record).unwrap_err(),
        AttachmentError::NotFound(_)
    ));
    store.save(&record, &RED_PNG).unwrap();
    let path = store.path_of(RED_ID).unwrap();
    let mut tampered = RED_PNG.to_vec();
    tampered[40] ^= 1;
    std::fs::write(&path, &tampered).unwrap();
    assert!(matches!(
        store.load(&record).unwrap_err(),
        AttachmentError::Corrupt { .. }
    ));
    // Saving again repairs a damaged copy, whether its size changed or not.
    store.save(&record, &RED_PNG).unwrap();
    assert_eq!(store.load(&record).unwrap(), RED_PNG);
    std::fs::write(&path, &RED_PNG[..10]).unwrap();
    store.save(&record, &RED_PNG).unwrap();
    assert_eq!(store.load(&record).unwrap(), RED_PNG);
    for bad in ["sha256:ABC", "md5:00", "sha256:../../etc/passwd"] {
        assert!(matches!(
            store.path_of(bad).unwrap_err(),
            AttachmentError::InvalidId(_)
        ));
    }
    let resolver: &dyn AttachmentResolver = &store;
    let refused = resolver
        .load(&serde_json::json!({"attachmentId": 3}))
        .unwrap_err();
    assert!(matches!(refused, dsh_llm::ImageLoadError::InvalidRecord(_)));
    assert!(
        refused
            .to_string()
            .starts_with("invalid image attachment record")
    );
}

#[test]
fn limits_and_mismatched_records_are_rejections_and_a_batch_is_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalAttachmentStore::new(dir.path()).with_limits(AttachmentLimits {
        max_image_dimension: 100,
        max_image_pixels: 5_000,
        ..AttachmentLimits::default()
    });
    let wide = gif(101, 1);
    assert_eq!(
        store.describe(&wide, None, None).unwrap_err().to_string(),
        "at least one image side exceeds the 100px limit"
    );
    let big = gif(100, 100);
    assert_eq!(
        store.describe(&big, None, None).unwrap_err().to_string(),
        "the image exceeds the 5000-pixel decoded-size limit"
    );
    let small = gif(2, 3);
    let good = store.describe(&small, Some("image/gif"), None).unwrap();
    let mut lying = good.clone();
    lying.width = 9;
    assert!(store.save(&lying, &small).unwrap_err().is_rejection());
    let png = store.describe(&RED_PNG, None, None).unwrap();
    let batch = [(png.clone(), &RED_PNG[..]), (lying, &small[..])];
    assert!(store.save_images(&batch).unwrap_err().is_rejection());
    assert!(
        store.load(&png).is_err(),
        "nothing of a refused batch is written"
    );
    store
        .save_images(&[(png.clone(), &RED_PNG[..]), (good.clone(), &small[..])])
        .unwrap();
    assert_eq!(store.load(&good).unwrap(), small);
    let tool_store: &dyn AttachmentStore = &store;
    assert_eq!(
        tool_store
            .save_image(&png, &small)
            .unwrap_err()
            .to_string()
            .starts_with("attachment id"),
        true
    );
}
