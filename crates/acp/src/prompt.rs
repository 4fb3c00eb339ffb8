//! `session/prompt`: admission (block validation, image storage, content rebuild) and
//! settlement (§1A).

use agent_client_protocol::Error as RpcError;
use agent_client_protocol::v1::schema::ContentBlock as AcpBlock;
use agent_client_protocol::v1::schema::EmbeddedResourceResource;
use agent_client_protocol::v1::schema::ImageContent;
use agent_client_protocol::v1::schema::StopReason;
use base64::Engine;
use dsh_protocol::ContentBlock;
use dsh_session::Event;
use dsh_session::data::TurnEnd;
use dsh_session::data::TurnEndReason;

use crate::error::Failure;
use crate::error::internal_error;
use crate::error::invalid_params;
use crate::error::texts;
use crate::images;
use crate::images::ImageInput;
use crate::images::ImageStoreError;
use crate::images::PromptImageStore;

/// What admission needs to know about inline images.
pub(crate) struct ImageAdmission<'a> {
    /// Whether this connection's `initialize` advertised image prompts.
    pub(crate) advertised: bool,
    pub(crate) store: Option<&'a dyn PromptImageStore>,
    /// The session's current route; asked only when the prompt carries images.
    pub(crate) route: &'a dyn Fn() -> Result<ImageInput, Failure>,
}

impl ImageAdmission<'_> {
    /// No images on this connection.
    #[cfg(test)]
    pub(crate) fn none() -> ImageAdmission<'static> {
        ImageAdmission {
            advertised: false,
            store: None,
            route: &|| Ok(ImageInput::Unresolved),
        }
    }
}

/// One prompt block after validation, before images are stored.
enum Part {
    Text(String),
    Image(images::PromptImage),
}

/// Validates every block before anything is written, saves the images as one batch, and
/// rebuilds the content in wire order: adjacent text and resource links join into one text
/// block, each image becomes an image block referencing its stored attachment.
pub(crate) fn admit(
    blocks: &[AcpBlock],
    images: &ImageAdmission<'_>,
) -> Result<Vec<ContentBlock>, RpcError> {
    fn push_text(parts: &mut Vec<Part>, text: &str) {
        match parts.last_mut() {
            Some(Part::Text(run)) => run.push_str(text),
            _ => parts.push(Part::Text(text.to_owned())),
        }
    }
    let mut parts: Vec<Part> = Vec::new();
    for block in blocks {
        match block {
            AcpBlock::Text(content) => push_text(&mut parts, &content.text),
            AcpBlock::ResourceLink(link) => {
                let name = serde_json::Value::String(link.name.clone());
                let uri = serde_json::Value::String(link.uri.clone());
                push_text(
                    &mut parts,
                    &format!("\n[resource_link name={name} uri={uri}]\n"),
                );
            }
            AcpBlock::Image(image) => {
                if !images.advertised {
                    return Err(invalid_params(texts::IMAGE_NOT_ADVERTISED));
                }
                parts.push(Part::Image(images::decode(image)?));
            }
            AcpBlock::Audio(_) => return Err(invalid_params(texts::AUDIO)),
            AcpBlock::Resource(embedded) => match resource_part(&embedded.resource, images)? {
                Part::Text(text) => push_text(&mut parts, &text),
                image @ Part::Image(_) => parts.push(image),
            },
            _ => return Err(invalid_params("unsupported prompt content")),
        }
    }
    let batch: Vec<images::PromptImage> = parts
        .iter()
        .filter_map(|part| match part {
            Part::Image(image) => Some(image.clone()),
            Part::Text(_) => None,
        })
        .collect();
    let mut saved = if batch.is_empty() {
        Vec::new()
    } else {
        save(&batch, images)?
    }
    .into_iter();
    let mut content = Vec::new();
    for part in parts {
        match part {
            Part::Text(text) if text.is_empty() => {}
            Part::Text(text) => content.push(ContentBlock::text(text)),
            Part::Image(_) => {
                let attachment = saved
                    .next()
                    .ok_or_else(|| internal_error(texts::IMAGE_PERSIST))?;
                let attachment = serde_json::to_value(attachment)
                    .map_err(|_| internal_error(texts::IMAGE_PERSIST))?;
                content.push(ContentBlock::Image { attachment });
            }
        }
    }
    let has_text = content.iter().any(|block| match block {
        ContentBlock::Text { text } => !text.trim().is_empty(),
        _ => false,
    });
    if batch.is_empty() && !has_text {
        return Err(invalid_params(texts::EMPTY_PROMPT));
    }
    Ok(content)
}

/// An embedded resource (`embeddedContext`) as prompt text, named by its URI: text contents as
/// they are, a blob as text when its bytes are UTF-8, as an image when it is one this
/// connection takes; any other blob is refused, naming the resource, before anything is sent.
fn resource_part(
    resource: &EmbeddedResourceResource,
    images: &ImageAdmission<'_>,
) -> Result<Part, RpcError> {
    let (uri, mime_type, text) = match resource {
        EmbeddedResourceResource::TextResourceContents(contents) => (
            &contents.uri,
            contents.mime_type.as_deref(),
            contents.text.clone(),
        ),
        EmbeddedResourceResource::BlobResourceContents(blob) => {
            let mime_type = blob.mime_type.as_deref();
            if images.advertised
                && let Some(media_type) =
                    mime_type.filter(|m| images::PROMPT_MEDIA_TYPES.contains(m))
            {
                let image = ImageContent::new(blob.blob.clone(), media_type);
                return images::decode(&image).map(Part::Image);
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(&blob.blob)
                .map_err(|_| invalid_params(texts::resource_base64(&blob.uri)))?;
            let text = String::from_utf8(bytes)
                .map_err(|_| invalid_params(texts::binary_resource(&blob.uri, mime_type)))?;
            (&blob.uri, mime_type, text)
        }
        _ => return Err(invalid_params(texts::RESOURCE)),
    };
    let uri = serde_json::Value::String(uri.clone());
    let mime = mime_type
        .map(|m| format!(" mimeType={}", serde_json::Value::String(m.to_owned())))
        .unwrap_or_default();
    Ok(Part::Text(format!(
        "\n[resource uri={uri}{mime}]\n{}\n[/resource]\n",
        text.trim_end_matches('\n')
    )))
}

/// The command line a prompt is, when its flattened text names a slash command
/// (`/name` followed by nothing or whitespace). Other text starting with `/` (a path) is not one.
pub(crate) fn command_line(content: &[ContentBlock]) -> Option<String> {
    let text: String = content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    dsh_commands::parse_command(&text).map(|_| text.clone())
}

/// The route must declare image input; then the whole batch is stored.
fn save(
    batch: &[images::PromptImage],
    images: &ImageAdmission<'_>,
) -> Result<Vec<dsh_tools::ImageAttachment>, RpcError> {
    match (images.route)().map_err(Failure::into_rpc)? {
        ImageInput::Unresolved => return Err(invalid_params(texts::IMAGE_ROUTE_UNRESOLVED)),
        ImageInput::Model {
            model,
            accepts_images: false,
        } => return Err(invalid_params(texts::no_image_input(&model))),
        ImageInput::Model { .. } => {}
    }
    let store = images
        .store
        .ok_or_else(|| internal_error(texts::IMAGE_PERSIST))?;
    let saved = store.save_images(batch).map_err(|error| match error {
        ImageStoreError::Rejected(reason) => invalid_params(reason),
        ImageStoreError::Failed(reason) => {
            tracing::warn!(%reason, "prompt images could not be stored");
            internal_error(texts::IMAGE_PERSIST)
        }
    })?;
    if saved.len() != batch.len() {
        return Err(internal_error(texts::IMAGE_PERSIST));
    }
    Ok(saved)
}

/// How a prompt settles once the agent is idle, by precedence (§1A "Settlement").
///
/// `events` are the events committed since admission; `turn` is the turn that claimed the
/// prompt's message, if any did.
pub(crate) fn settle(
    cancelled: bool,
    delivery_failure: Option<String>,
    events: &[std::sync::Arc<Event>],
    turn: Option<u64>,
) -> Result<StopReason, RpcError> {
    if cancelled {
        return Ok(StopReason::Cancelled);
    }
    if let Some(failure) = delivery_failure {
        return Err(internal_error(texts::delivery_failed(&failure)));
    }
    let ends: Vec<TurnEnd> = events
        .iter()
        .filter_map(|e| e.decode::<TurnEnd>()?.ok())
        .collect();
    for end in &ends {
        if Some(end.turn) != turn
            && let TurnEndReason::Error { error } = &end.reason
        {
            return Err(turn_failed(error));
        }
    }
    let own = turn.and_then(|turn| ends.iter().find(|end| end.turn == turn));
    match own.map(|end| &end.reason) {
        Some(TurnEndReason::Error { error }) => Err(turn_failed(error)),
        Some(TurnEndReason::Interrupted) => Ok(StopReason::Cancelled),
        Some(
            TurnEndReason::Completed
            | TurnEndReason::MaxTokens
            | TurnEndReason::Blocked
            | TurnEndReason::Aborted { .. },
        ) => Ok(StopReason::EndTurn),
        None if ends.iter().any(|end| end.reason == TurnEndReason::Blocked) => {
            Ok(StopReason::EndTurn)
        }
        None => Ok(StopReason::Cancelled),
    }
}

/// A failed turn's answer: `auth_required` when the model refused or lacked credentials (the
/// client can then offer the advertised methods), else `turn failed: <msg>`.
fn turn_failed(error: &dsh_protocol::LlmFailure) -> RpcError {
    if crate::error::CREDENTIAL_CODES.contains(&error.code.as_str()) {
        crate::error::auth_required(&error.message)
    } else {
        internal_error(texts::turn_failed(&error.message))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use agent_client_protocol::v1::schema::ImageContent;
    use agent_client_protocol::v1::schema::ResourceLink;
    use agent_client_protocol::v1::schema::TextContent;
    use dsh_protocol::LlmFailure;
    use dsh_session::data::AbortReason;
    use serde_json::json;

    use super::*;
    use crate::images::PromptImage;

    fn end(seq: u64, turn: u64, reason: TurnEndReason) -> Arc<Event> {
        Arc::new(Event::new(
            "turn/end",
            seq,
            0,
            serde_json::to_value(TurnEnd { turn, reason }).unwrap(),
        ))
    }

    #[test]
    fn flattening_joins_text_and_links_in_wire_order() {
        let blocks = vec![
            AcpBlock::Text(TextContent::new("look at")),
            AcpBlock::ResourceLink(ResourceLink::new("a.rs", "file:///ws/a.rs")),
            AcpBlock::Text(TextContent::new("please")),
        ];
        assert_eq!(
            admit(&blocks, &ImageAdmission::none()).unwrap(),
            vec![ContentBlock::text(
                "look at\n[resource_link name=\"a.rs\" uri=\"file:///ws/a.rs\"]\nplease"
            )]
        );
        let empty = admit(
            &[AcpBlock::Text(TextContent::new("  \n"))],
            &ImageAdmission::none(),
        )
        .unwrap_err();
        assert_eq!(
            serde_json::to_value(&empty).unwrap(),
            json!({"code":-32602,"message":"Invalid params: empty prompt"})
        );
    }

    /// Records what it was asked to save; refuses or fails on demand.
    struct Store {
        saved: std::sync::Mutex<Vec<PromptImage>>,
        outcome: Option<ImageStoreError>,
    }

    impl PromptImageStore for Store {
        fn accepted_media_types(&self) -> Vec<String> {
            vec!["image/png".into()]
        }
        fn save_images(
            &self,
            batch: &[PromptImage],
        ) -> Result<Vec<dsh_tools::ImageAttachment>, ImageStoreError> {
            if let Some(outcome) = &self.outcome {
                return Err(outcome.clone());
            }
            self.saved.lock().unwrap().extend(batch.iter().cloned());
            Ok(batch
                .iter()
                .enumerate()
                .map(|(n, image)| dsh_tools::ImageAttachment {
                    attachment_id: format!("sha256:{n}"),
                    media_type: image.media_type.clone(),
                    bytes: image.bytes.len() as u64,
                    width: 1,
                    height: 1,
                    name: None,
                })
                .collect())
        }
        fn load_image(&self, _: &dsh_tools::ImageAttachment) -> Result<Vec<u8>, String> {
            Err("not kept".into())
        }
    }

    fn store(outcome: Option<ImageStoreError>) -> Store {
        Store {
            saved: std::sync::Mutex::new(Vec::new()),
            outcome,
        }
    }

    fn png() -> AcpBlock {
        AcpBlock::Image(ImageContent::new("iVBORw0KGgo=", "image/png"))
    }

    fn vision() -> Result<ImageInput, Failure> {
        Ok(ImageInput::Model {
            model: "vision".into(),
            accepts_images: true,
        })
    }

    type Route = dyn Fn() -> Result<ImageInput, Failure>;

    fn error_message(result: Result<Vec<ContentBlock>, RpcError>) -> String {
        result.unwrap_err().message
    }

    #[test]
    fn images_become_attachment_blocks_in_wire_order() {
        let store = store(None);
        let admission = ImageAdmission {
            advertised: true,
            store: Some(&store),
            route: &vision,
        };
        let blocks = vec![
            AcpBlock::Text(TextContent::new("compare")),
            png(),
            AcpBlock::Text(TextContent::new("with")),
            AcpBlock::Text(TextContent::new(" this")),
            png(),
        ];
        let content = admit(&blocks, &admission).unwrap();
        let wire = serde_json::to_value(&content).unwrap();
        assert_eq!(
            wire,
            json!([
                {"type": "text", "text": "compare"},
                {"type": "image", "attachment": {"attachmentId": "sha256:0", "mediaType": "image/png", "bytes": 8, "width": 1, "height": 1}},
                {"type": "text", "text": "with this"},
                {"type": "image", "attachment": {"attachmentId": "sha256:1", "mediaType": "image/png", "bytes": 8, "width": 1, "height": 1}}
            ])
        );
        assert!(
            !wire.to_string().contains("iVBORw0KGgo"),
            "no base64 in the message"
        );
        // An image alone is a prompt.
        assert_eq!(admit(&[png()], &admission).unwrap().len(), 1);
        assert_eq!(store.saved.lock().unwrap().len(), 3);
    }

    #[test]
    fn image_admission_errors_and_nothing_is_saved_before_validation() {
        let saved = store(None);
        let unadvertised = ImageAdmission {
            advertised: false,
            store: Some(&saved),
            route: &vision,
        };
        assert_eq!(
            error_message(admit(&[png()], &unadvertised)),
            "Invalid params: inline image prompts were not advertised by this connection"
        );
        let admission = ImageAdmission {
            advertised: true,
            store: Some(&saved),
            route: &vision,
        };
        // A bad block after a good image: the batch is never saved.
        let audio = AcpBlock::Audio(agent_client_protocol::v1::schema::AudioContent::new(
            "AAAA",
            "audio/wav",
        ));
        assert_eq!(
            error_message(admit(&[png(), audio], &admission)),
            "Invalid params: audio prompt content is not supported"
        );
        assert!(saved.saved.lock().unwrap().is_empty());

        let text_only = || {
            Ok(ImageInput::Model {
                model: "deepseek-v4-flash".into(),
                accepts_images: false,
            })
        };
        let route_checks: [(&Route, &str); 3] = [
            (
                &text_only,
                "Invalid params: model \"deepseek-v4-flash\" does not declare image input; switch to an image-capable model to send images",
            ),
            (
                &|| Ok(ImageInput::Unresolved),
                "Invalid params: inline image prompts need a model route, and the current one could not be resolved",
            ),
            (
                &|| Err(Failure::internal("catalog unavailable")),
                "Internal error: catalog unavailable",
            ),
        ];
        for (route, expected) in route_checks {
            let admission = ImageAdmission {
                advertised: true,
                store: Some(&saved),
                route,
            };
            assert_eq!(error_message(admit(&[png()], &admission)), expected);
        }
        assert!(saved.saved.lock().unwrap().is_empty());

        let refusing = store(Some(ImageStoreError::Rejected("too big".into())));
        let failing = store(Some(ImageStoreError::Failed("disk full".into())));
        for (store, expected) in [
            (&refusing, "Invalid params: too big"),
            (
                &failing,
                "Internal error: unable to persist the prompt image batch",
            ),
        ] {
            let admission = ImageAdmission {
                advertised: true,
                store: Some(store),
                route: &vision,
            };
            assert_eq!(error_message(admit(&[png()], &admission)), expected);
        }
    }

    #[test]
    fn settlement_precedence() {
        let failure = LlmFailure::new("AUTH", "simulated provider error (HTTP 401)");
        let error = end(
            5,
            1,
            TurnEndReason::Error {
                error: failure.clone(),
            },
        );
        assert_eq!(
            settle(
                true,
                Some("x".into()),
                std::slice::from_ref(&error),
                Some(1)
            )
            .unwrap(),
            StopReason::Cancelled
        );
        let rejected = settle(false, None, std::slice::from_ref(&error), Some(1)).unwrap_err();
        assert_eq!(
            rejected.message,
            "Internal error: turn failed: simulated provider error (HTTP 401)"
        );
        let other = settle(
            false,
            None,
            &[error, end(9, 2, TurnEndReason::Completed)],
            Some(2),
        )
        .unwrap_err();
        assert_eq!(
            other.message,
            "Internal error: turn failed: simulated provider error (HTTP 401)"
        );
        assert_eq!(
            settle(false, None, &[end(3, 1, TurnEndReason::MaxTokens)], Some(1)).unwrap(),
            StopReason::EndTurn
        );
        let aborted = TurnEndReason::Aborted {
            reason: AbortReason::Hook {
                reason: "stop".into(),
            },
        };
        assert_eq!(
            settle(false, None, &[end(3, 1, aborted)], Some(1)).unwrap(),
            StopReason::EndTurn
        );
        assert_eq!(
            settle(
                false,
                None,
                &[end(3, 1, TurnEndReason::Interrupted)],
                Some(1)
            )
            .unwrap(),
            StopReason::Cancelled
        );
        assert_eq!(
            settle(false, None, &[], None).unwrap(),
            StopReason::Cancelled
        );
        assert_eq!(
            settle(false, None, &[end(3, 1, TurnEndReason::Blocked)], None).unwrap(),
            StopReason::EndTurn
        );
        let delivery = settle(false, Some("closed".into()), &[], Some(1)).unwrap_err();
        assert_eq!(
            delivery.message,
            "Internal error: assistant output delivery failed: closed"
        );
    }
}
