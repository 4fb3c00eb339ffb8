//! Inline prompt images end to end over the wire: advertised only with a store and an
//! image-capable route, stored as content-addressed files, and sent to the model as attachment
//! blocks; the durable log never holds the base64 payload.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_acp::FactoryError;
use dsh_acp::ImageInput;
use dsh_acp::ImageStoreError;
use dsh_acp::NewSession;
use dsh_acp::PromptImage;
use dsh_acp::PromptImageStore;
use dsh_acp::SessionFactory;
use dsh_acp::SessionParts;
use dsh_acp::StoredSession;
use dsh_agent::AgentHandle;
use dsh_agent::scripted::text_response;
use dsh_attachments::LocalAttachmentStore;
use dsh_kernel::BoxFuture;
use dsh_protocol::ContentBlock;
use dsh_tools::ImageAttachment;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::harness::TestFactory;
use super::harness::Wire;

const RED_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
const RED_ID: &str = "sha256:b1ff9c8ea3a780bad09b346c423d2d0e46815926879b18e841d928376a946640";

/// The real local store behind the bridge's seam.
struct Images(LocalAttachmentStore);

impl PromptImageStore for Images {
    fn accepted_media_types(&self) -> Vec<String> {
        self.0.accepted_media_types()
    }

    fn save_images(&self, batch: &[PromptImage]) -> Result<Vec<ImageAttachment>, ImageStoreError> {
        let reject = |e: dsh_attachments::AttachmentError| ImageStoreError::Rejected(e.to_string());
        let records = batch
            .iter()
            .map(|i| self.0.describe(&i.bytes, Some(&i.media_type), None))
            .collect::<Result<Vec<_>, _>>()
            .map_err(reject)?;
        let pairs: Vec<(ImageAttachment, &[u8])> = records
            .iter()
            .cloned()
            .zip(batch.iter().map(|i| i.bytes.as_slice()))
            .collect();
        self.0
            .save_images(&pairs)
            .map_err(|e| ImageStoreError::Failed(e.to_string()))?;
        Ok(records)
    }

    fn load_image(&self, attachment: &ImageAttachment) -> Result<Vec<u8>, String> {
        self.0.load(attachment).map_err(|e| e.to_string())
    }
}

/// The test factory with an attachment store and a route whose image input is fixed.
struct ImageFactory {
    inner: Arc<TestFactory>,
    store: Option<Arc<Images>>,
    /// Image input of the configured route (`initialize`).
    accepts_images: bool,
    /// Image input of a session's current route (admission); it can differ once switched.
    session_accepts_images: bool,
}

impl SessionFactory for ImageFactory {
    fn create(
        &self,
        request: NewSession,
    ) -> BoxFuture<'static, Result<SessionParts, FactoryError>> {
        self.inner.create(request)
    }

    fn load(
        &self,
        session_id: String,
        cwd: PathBuf,
    ) -> BoxFuture<'static, Result<SessionParts, FactoryError>> {
        self.inner.load(session_id, cwd)
    }

    fn list(
        &self,
        cwd: Option<PathBuf>,
    ) -> BoxFuture<'static, Result<Vec<StoredSession>, FactoryError>> {
        self.inner.list(cwd)
    }

    fn prompt_images(&self) -> Option<Arc<dyn PromptImageStore>> {
        self.store
            .clone()
            .map(|store| store as Arc<dyn PromptImageStore>)
    }

    fn image_input(&self, agent: Option<&AgentHandle>) -> Result<ImageInput, FactoryError> {
        Ok(ImageInput::Model {
            model: "scripted-model".into(),
            accepts_images: if agent.is_some() {
                self.session_accepts_images
            } else {
                self.accepts_images
            },
        })
    }
}

fn factory(home: &std::path::Path, store: bool, accepts_images: bool) -> Arc<ImageFactory> {
    Arc::new(ImageFactory {
        inner: TestFactory::new(home),
        store: store.then(|| {
            Arc::new(Images(LocalAttachmentStore::under_home(
                &home.join("dsh-home"),
            )))
        }),
        accepts_images,
        session_accepts_images: accepts_images,
    })
}

async fn advertised(factory: Arc<ImageFactory>) -> serde_json::Value {
    let mut wire = Wire::start(factory);
    wire.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let (_, response) = wire.until_response(1).await;
    response["result"]["agentCapabilities"]["promptCapabilities"].clone()
}

#[tokio::test]
async fn image_is_advertised_only_with_a_store_and_an_image_route() {
    let home = tempfile::tempdir().unwrap();
    assert_eq!(
        advertised(factory(home.path(), true, true)).await,
        json!({"image": true, "audio": false, "embeddedContext": false})
    );
    assert_eq!(
        advertised(factory(home.path(), false, true)).await["image"],
        false
    );
    assert_eq!(
        advertised(factory(home.path(), true, false)).await["image"],
        false
    );
}

#[tokio::test]
async fn an_image_prompt_is_stored_and_reaches_the_model_as_an_attachment() {
    let home = tempfile::tempdir().unwrap();
    let factory = factory(home.path(), true, true);
    factory
        .inner
        .adapter
        .push_chunks(text_response("a red pixel"));
    let mut wire = Wire::start(factory.clone());
    let session = wire.open(home.path(), false).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "what is this?"},
            {"type": "image", "data": RED_PNG, "mimeType": "image/png"}
        ]}),
    );
    let (_, response) = wire.until_response(3).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));

    let stored = home
        .path()
        .join("dsh-home/attachments")
        .join(format!("sha256-{}", &RED_ID[7..]));
    assert_eq!(std::fs::metadata(&stored).unwrap().len(), 69);

    let requests = factory.inner.adapter.requests();
    let user = &requests[0].messages[0];
    assert_eq!(
        serde_json::to_value(&user.content).unwrap(),
        json!([
            {"type": "text", "text": "what is this?"},
            {"type": "image", "attachment": {"attachmentId": RED_ID, "mediaType": "image/png",
                "bytes": 69, "width": 1, "height": 1}}
        ])
    );
    assert!(matches!(user.content[1], ContentBlock::Image { .. }));
    let log = factory.inner.store.find(&session).unwrap().unwrap();
    let text = std::fs::read_to_string(log).unwrap();
    assert!(text.contains(RED_ID), "the log references the attachment");
    assert!(
        !text.contains(RED_PNG),
        "base64 never enters the durable log"
    );

    // A new connection loading the session replays the prompt, image re-read from the store.
    wire.close();
    let _ = wire.task.await;
    let mut wire = Wire::start(factory.clone());
    wire.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    wire.until_response(1).await;
    wire.request(
        2,
        "session/load",
        json!({"sessionId": session, "cwd": home.path(), "mcpServers": []}),
    );
    let (frames, loaded) = wire.until_response(2).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let user: Vec<&serde_json::Value> = frames
        .iter()
        .filter(|f| f["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .map(|f| &f["params"]["update"]["content"])
        .collect();
    assert_eq!(
        user,
        vec![
            &json!({"type": "text", "text": "what is this?"}),
            &json!({"type": "image", "data": RED_PNG, "mimeType": "image/png"}),
        ]
    );
}

#[tokio::test]
async fn malformed_or_mislabelled_images_are_refused_before_anything_is_stored() {
    let home = tempfile::tempdir().unwrap();
    let mut wire = Wire::start(factory(home.path(), true, true));
    let session = wire.open(home.path(), false).await;
    let refusals = [
        (
            json!({"type": "image", "data": "iVBORw0KGgo", "mimeType": "image/png"}),
            "Invalid params: image data must be canonical base64",
        ),
        (
            json!({"type": "image", "data": RED_PNG, "mimeType": "image/bmp"}),
            "Invalid params: image mimeType must be image/png, image/jpeg, image/webp, or image/gif",
        ),
        // Bytes of another format than declared: the store's refusal, still invalid params.
        (
            json!({"type": "image", "data": RED_PNG, "mimeType": "image/gif"}),
            "Invalid params: image bytes are image/png, not the declared image/gif",
        ),
    ];
    for (n, (block, message)) in refusals.into_iter().enumerate() {
        let id = 3 + n as u64;
        wire.request(
            id,
            "session/prompt",
            json!({"sessionId": session, "prompt": [block]}),
        );
        let (_, response) = wire.until_response(id).await;
        assert_eq!(
            response["error"],
            json!({"code": -32602, "message": message})
        );
    }
    assert!(!home.path().join("dsh-home/attachments").exists());
}

#[tokio::test]
async fn a_session_route_without_image_input_refuses_image_prompts() {
    let home = tempfile::tempdir().unwrap();
    let factory = Arc::new(ImageFactory {
        session_accepts_images: false,
        ..Arc::into_inner(factory(home.path(), true, true)).unwrap()
    });
    let mut wire = Wire::start(factory);
    let session = wire.open(home.path(), false).await;
    wire.request(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [
            {"type": "image", "data": RED_PNG, "mimeType": "image/png"}
        ]}),
    );
    let (_, response) = wire.until_response(3).await;
    assert_eq!(
        response["error"],
        json!({"code": -32602, "message": "Invalid params: model \"scripted-model\" does not declare image input; switch to an image-capable model to send images"})
    );
    assert!(!home.path().join("dsh-home/attachments").exists());
}
