//! Inline prompt images end to end over the wire: advertised only with a store and an
//! image-capable route, stored as content-addressed files, and sent to the model as attachment
//! blocks; the durable log never holds the base64 payload.

use std::sync::Arc;

use dsh_agent::scripted::text_response;
use dsh_protocol::ContentBlock;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::harness::TestHost;
use super::harness::Wire;

const RED_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
const RED_ID: &str = "sha256:b1ff9c8ea3a780bad09b346c423d2d0e46815926879b18e841d928376a946640";

/// What the scripted model declares about every model id.
fn model_info(accepts_images: bool) -> dsh_llm::ModelInfo {
    let mut input_modalities = vec!["text".to_owned()];
    if accepts_images {
        input_modalities.push("image".to_owned());
    }
    dsh_llm::ModelInfo {
        context_window: 128_000,
        default_max_tokens: None,
        efforts: Vec::new(),
        default_effort: None,
        input_modalities,
    }
}

/// The test host, with the attachments plugin (the real local store under the host's home)
/// when `store`, over a model whose image input is `accepts_images`.
fn factory(home: &std::path::Path, store: bool, accepts_images: bool) -> Arc<TestHost> {
    let plugins: &[&str] = if store { &["attachments"] } else { &[] };
    let host = TestHost::bare(home, plugins);
    host.adapter
        .set_model_info(Some(model_info(accepts_images)));
    host
}

async fn advertised(factory: Arc<TestHost>) -> serde_json::Value {
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
        json!({"image": true, "audio": false, "embeddedContext": true})
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
    factory.adapter.push_chunks(text_response("a red pixel"));
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

    let requests = factory.adapter.requests();
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
    let log = factory.store.find(&session).unwrap().unwrap();
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
    let factory = factory(home.path(), true, true);
    let mut wire = Wire::start(factory.clone());
    let session = wire.open(home.path(), false).await;
    // Images were advertised at `initialize`; the session's route no longer takes them.
    factory.adapter.set_model_info(Some(model_info(false)));
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
