use super::*;
use crate::policy::FilePolicy;
use dsh_tools::AttachmentStoreError;
use pretty_assertions::assert_eq;
use std::sync::Mutex;

const RED_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

#[derive(Default)]
struct Store(Mutex<Vec<String>>, Option<String>);

impl AttachmentStore for Store {
    fn save_image(
        &self,
        attachment: &ImageAttachment,
        _bytes: &[u8],
    ) -> Result<(), AttachmentStoreError> {
        if let Some(refusal) = &self.1 {
            return Err(AttachmentStoreError::Refused(refusal.clone()));
        }
        self.0
            .lock()
            .map_err(|e| AttachmentStoreError::Refused(e.to_string()))?
            .push(attachment.attachment_id.clone());
        Ok(())
    }
}

fn ctx_with(dir: &std::path::Path, route: ImageRoute, store: Arc<Store>) -> FsContext {
    let mut ctx = FsContext::new(dir, FilePolicy::danger_full_access(dir));
    ctx.images = Some(ImageSupport {
        store,
        accepted_media_types: vec![
            "image/png".into(),
            "image/jpeg".into(),
            "image/gif".into(),
            "image/webp".into(),
        ],
        route,
    });
    ctx
}

fn vision() -> ImageRoute {
    ImageRoute::Model {
        model: "vision".into(),
        accepts_images: true,
    }
}

fn a(path: &str) -> ReadImageArgs {
    ReadImageArgs {
        file_path: path.into(),
    }
}

#[tokio::test]
async fn recorded_red_png() {
    use base64::Engine;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("red.png"),
        base64::engine::general_purpose::STANDARD
            .decode(RED_PNG)
            .unwrap(),
    )
    .unwrap();
    let store = Arc::new(Store::default());
    let ctx = ctx_with(dir.path(), vision(), store.clone());
    let out = run(&a("red.png"), &ctx, CancellationToken::new())
        .await
        .unwrap();
    let content: Vec<serde_json::Value> = render(&a("red.png"), &out)
        .iter()
        .map(ContentBlock::to_value)
        .collect();
    let cwd = dir.path().display().to_string();
    assert_eq!(
        serde_json::to_string(&content)
            .unwrap()
            .replace(&cwd, "{{cwd}}"),
        r#"[{"type":"text","text":"<path>{{cwd}}/red.png</path>\n<type>image</type>\n<content>\nimage/png image, 1x1 px, 69 bytes\n</content>"},{"type":"image","attachment":{"attachmentId":"sha256:b1ff9c8ea3a780bad09b346c423d2d0e46815926879b18e841d928376a946640","mediaType":"image/png","bytes":69,"width":1,"height":1,"name":"red.png"}}]"#
    );
    assert_eq!(store.0.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn gates_in_order_name_the_raw_path() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::default());
    let t = CancellationToken::new;
    let ctx = ctx_with(dir.path(), vision(), store.clone());
    assert_eq!(
        run(&a(""), &ctx, t()).await.unwrap_err().message,
        "file_path must be a non-empty string"
    );
    assert_eq!(
        run(&a("x.bmp"), &ctx, t()).await.unwrap_err().message,
        "cannot read \"x.bmp\": read_image only accepts PNG/JPEG/WebP/GIF paths"
    );
    let mut bare = ctx.clone();
    bare.images = None;
    assert_eq!(
        run(&a("x.png"), &bare, t()).await.unwrap_err().message,
        "cannot read \"x.png\" as an image: no attachment service is mounted"
    );
    let mut narrow = ctx.clone();
    if let Some(images) = &mut narrow.images {
        images.accepted_media_types = vec!["image/png".into()];
    }
    assert_eq!(
        run(&a("x.GIF"), &narrow, t()).await.unwrap_err().message,
        "cannot read \"x.GIF\": image/gif images are not accepted by this deployment"
    );
    let text_only = ctx_with(
        dir.path(),
        ImageRoute::Model {
            model: "flash".into(),
            accepts_images: false,
        },
        store.clone(),
    );
    assert_eq!(
        run(&a("x.png"), &text_only, t()).await.unwrap_err().message,
        "cannot read \"x.png\" as an image: model \"flash\" does not declare image input; switch to an image-capable model to read images"
    );
    let unresolved = ctx_with(dir.path(), ImageRoute::Unresolved, store);
    assert_eq!(
        run(&a("x.png"), &unresolved, t())
            .await
            .unwrap_err()
            .message,
        "cannot read \"x.png\" as an image: the current model route could not be resolved"
    );
    let err = run(&a("x.png"), &ctx, t()).await.unwrap_err();
    assert_eq!(
        err,
        FsError::coded(
            "FS_NOT_FOUND",
            format!(
                "cannot read \"{}\": not found",
                dir.path().join("x.png").display()
            )
        )
    );
}

#[tokio::test]
async fn format_mismatch_size_and_store_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let gif = b"GIF89a\x10\x00\x20\x00\x00\x00\x00;".to_vec();
    std::fs::write(dir.path().join("fake.png"), &gif).unwrap();
    std::fs::write(dir.path().join("ok.gif"), &gif).unwrap();
    let ctx = ctx_with(dir.path(), vision(), Arc::new(Store::default()));
    let p = dir.path().join("fake.png").display().to_string();
    assert_eq!(
        run(&a("fake.png"), &ctx, CancellationToken::new())
            .await
            .unwrap_err()
            .message,
        format!(
            "cannot read \"{p}\": the .png extension declares image/png, but the bytes use a different image format; rename the file to match its actual format if it is PNG/JPEG/WebP/GIF, or convert it to one of those formats"
        )
    );
    let out = run(&a("ok.gif"), &ctx, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!((out.image.width, out.image.height), (16, 32));
    let mut small = ctx.clone();
    small.limits.max_image_dimension = 20;
    assert!(
        run(&a("ok.gif"), &small, CancellationToken::new())
            .await
            .unwrap_err()
            .message
            .ends_with("exceeds the 20px limit; downscale the image and read the smaller copy")
    );
    small.limits.max_image_bytes = 4;
    let err = run(&a("ok.gif"), &small, CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err.code.as_deref(), Some("FS_TOO_LARGE"));
    assert!(
        err.message
            .ends_with(&format!("{} bytes exceeds the 4-byte limit", gif.len()))
    );
    let refusing = ctx_with(
        dir.path(),
        vision(),
        Arc::new(Store(Mutex::default(), Some("store full".into()))),
    );
    assert_eq!(
        run(&a("ok.gif"), &refusing, CancellationToken::new())
            .await
            .unwrap_err(),
        FsError::plain("store full")
    );
}
