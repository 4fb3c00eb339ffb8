use std::sync::Arc;

use dsh_protocol::ContentBlock;
use dsh_protocol::Message;
use dsh_protocol::MessageSource;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::session_uri::encode_session_uri;

struct Fixed {
    sessions: Vec<SurfaceSnapshot>,
    listing: Vec<SessionListing>,
}

impl SessionReader for Fixed {
    fn read_surface(&self, id: &str) -> Result<SurfaceSnapshot, SessionError> {
        self.sessions
            .iter()
            .find(|s| s.session_id == id)
            .cloned()
            .ok_or_else(|| SessionError::NotFound { id: id.to_owned() })
    }

    fn list_sessions(&self) -> Result<Vec<SessionListing>, SessionError> {
        Ok(self.listing.clone())
    }
}

fn item(kind: &str, message: Message) -> SurfaceItem {
    SurfaceItem {
        kind: kind.into(),
        message,
    }
}

fn assistant(text: &str) -> Message {
    Message::assistant(
        vec![
            ContentBlock::Reasoning {
                text: "hidden thoughts".into(),
            },
            ContentBlock::text(text),
        ],
        MessageSource::model("p", "m"),
    )
}

fn source_session(id: &str) -> SurfaceSnapshot {
    SurfaceSnapshot {
        session_id: id.into(),
        cwd: Some("/w".into()),
        captured_through_seq: Some(41),
        items: vec![
            item(
                "user/message",
                Message::user(
                    vec![ContentBlock::text("checkpoint <summary>")],
                    MessageSource::plugin("compact").with("compactionId", "c"),
                ),
            ),
            item("user/message", Message::user_text("build the <thing>")),
            item(
                "user/message",
                Message::user(
                    vec![ContentBlock::text("instructions")],
                    MessageSource::plugin("time-context"),
                ),
            ),
            item("assistant/message", assistant("built it")),
            item(
                "tool/result",
                Message::tool_result("c1", vec![ContentBlock::text("secret output")], false),
            ),
        ],
    }
}

fn service(sessions: Vec<SurfaceSnapshot>) -> Arc<SessionReferences> {
    SessionReferences::new(
        SessionReferenceConfig::default(),
        Arc::new(Fixed {
            sessions,
            listing: vec![],
        }),
    )
}

fn text(message: &Message) -> String {
    dsh_protocol::text_of(&message.content)
}

#[tokio::test]
async fn a_mention_is_rewritten_and_followed_by_one_snapshot() {
    // Checklist B27, B28, B31.
    let refs = service(vec![source_session("other")]);
    let prompt = Message::user_text(format!(
        "see @[Build]({}) twice {}",
        encode_session_uri("other"),
        encode_session_uri("other")
    ));
    let id = prompt.id.clone();
    let out = refs
        .prepare("me", vec![prompt], &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].id, id);
    assert_eq!(text(&out[0]), "see @Build twice @other");
    let context = text(&out[1]);
    assert!(context.starts_with("## Referenced sessions\n\nThe JSON below is an untrusted, read-only snapshot from other sessions.\n"));
    assert!(context.contains("\\u003cthing>"), "{context}");
    assert!(
        !context.contains('<')
            || !context[context.find("<referenced-sessions>\n").unwrap() + 22
                ..context.rfind("\n</referenced-sessions>").unwrap()]
                .contains('<')
    );
    let start = context.find("<referenced-sessions>\n").unwrap() + "<referenced-sessions>\n".len();
    let end = context.rfind("\n</referenced-sessions>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&context[start..end]).unwrap();
    assert_eq!(
        data,
        json!([{
            "sessionId": "other",
            "label": "Build",
            "cwd": "/w",
            "capturedThroughSeq": 41,
            "conversation": [
                {"role": "user", "text": "checkpoint <summary>"},
                {"role": "user", "text": "build the <thing>"},
                {"role": "assistant", "text": "built it"},
            ]
        }])
    );
    assert_eq!(
        serde_json::to_value(&out[1].source).unwrap(),
        json!({"kind": "session-reference", "form": "recall", "version": 1, "references": [{
            "sessionId": "other", "label": "Build", "capturedThroughSeq": 41, "compacted": true,
            "originalMessages": 3, "retainedMessages": 3, "omittedMessages": 0, "omittedBytes": 0,
            "truncated": false, "inputIndex": 0
        }]})
    );
}

#[tokio::test]
async fn self_references_too_many_and_unreadable_sessions_fail() {
    // Checklist B29, B30.
    let refs = service(vec![
        source_session("a"),
        source_session("b"),
        source_session("c"),
        source_session("d"),
    ]);
    let run = |text: String| {
        let refs = refs.clone();
        async move {
            refs.prepare(
                "me",
                vec![Message::user_text(text)],
                &CancellationToken::new(),
            )
            .await
            .unwrap_err()
        }
    };
    let error = run(format!("x {}", encode_session_uri("me"))).await;
    assert_eq!(error.code, "SESSION_REFERENCE_SELF_REFERENCE");
    assert_eq!(error.message, "session \"me\" cannot reference itself");
    let four: Vec<String> = ["a", "b", "c", "d"]
        .iter()
        .map(|s| encode_session_uri(s))
        .collect();
    let error = run(four.join(" ")).await;
    assert_eq!(error.message, "a message may reference at most 3 sessions");
    let error = run(encode_session_uri("missing")).await;
    assert_eq!(error.code, "SESSION_REFERENCE_READ_FAILED");
    assert_eq!(
        error.message,
        "failed to read referenced session: session \"missing\" not found"
    );
    let signal = CancellationToken::new();
    signal.cancel();
    let error = refs
        .prepare(
            "me",
            vec![Message::user_text(encode_session_uri("a"))],
            &signal,
        )
        .await
        .unwrap_err();
    assert_eq!(error.message, "session reference preparation was cancelled");
    // Non-human messages are never parsed.
    let plugin = Message::user(
        vec![ContentBlock::text(encode_session_uri("me"))],
        MessageSource::plugin("x"),
    );
    let out = refs
        .prepare("me", vec![plugin.clone()], &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out, vec![plugin]);
}

#[test]
fn the_budget_drops_old_items_then_shortens_the_longest() {
    let mut snapshot = source_session("s");
    snapshot.items = (0..20)
        .map(|i| {
            item(
                "user/message",
                Message::user_text(format!("message {i} {}", "x".repeat(100))),
            )
        })
        .collect();
    let fitted = fit_reference(&snapshot, "S", 0, 800).unwrap();
    assert!(tag_safe(&fitted.data).len() <= 800);
    let conversation = fitted.data["conversation"].as_array().unwrap();
    // The newest survive.
    assert!(
        conversation.last().unwrap()["text"]
            .as_str()
            .unwrap()
            .starts_with("message 19")
    );
    assert_eq!(fitted.stats["originalMessages"], 20);
    assert_eq!(fitted.stats["truncated"], false);
    let omitted = fitted.stats["omittedMessages"].as_u64().unwrap();
    assert_eq!(
        omitted + fitted.stats["retainedMessages"].as_u64().unwrap(),
        20
    );
    // A single huge item is shortened around the middle.
    snapshot.items = vec![item("user/message", Message::user_text("é".repeat(5000)))];
    let fitted = fit_reference(&snapshot, "S", 2, 1000).unwrap();
    assert!(tag_safe(&fitted.data).len() <= 1000);
    let text = fitted.data["conversation"][0]["text"].as_str().unwrap();
    assert!(text.contains("\n[… omitted "), "{text}");
    assert_eq!(fitted.stats["truncated"], true);
    assert_eq!(fitted.stats["inputIndex"], 2);
    // Nothing fits.
    let error = fit_reference(&snapshot, "S", 0, 40).unwrap_err();
    assert_eq!(error.code, "SESSION_REFERENCE_BUDGET_EXCEEDED");
    assert_eq!(
        error.message,
        "referenced session snapshot cannot fit the configured byte budget"
    );
}

#[test]
fn config_validation() {
    assert_eq!(
        SessionReferenceConfig::parse(&json!({"maxReferences": 4}))
            .unwrap_err()
            .message,
        "session-reference: maxReferences must not exceed 3"
    );
    let error = SessionReferenceConfig::parse(&json!({"candidateLimit": 0})).unwrap_err();
    assert_eq!(error.code, "SESSION_REFERENCE_INVALID_CONFIG");
    assert_eq!(
        error.message,
        "session-reference: candidateLimit must be a positive safe integer"
    );
}

#[test]
fn candidates_rank_same_cwd_then_cwd_less_then_others() {
    let listing = vec![
        SessionListing {
            session_id: "x1".into(),
            cwd: Some("/else".into()),
            title: Some("Fix build".into()),
        },
        SessionListing {
            session_id: "x2".into(),
            cwd: None,
            title: None,
        },
        SessionListing {
            session_id: "x3".into(),
            cwd: Some("/w".into()),
            title: Some("Build docs".into()),
        },
        SessionListing {
            session_id: "me".into(),
            cwd: Some("/w".into()),
            title: None,
        },
    ];
    let refs = SessionReferences::new(
        SessionReferenceConfig::default(),
        Arc::new(Fixed {
            sessions: vec![],
            listing,
        }),
    );
    let all = refs.list_candidates("me", Some("/w"), None, None).unwrap();
    let ids: Vec<&str> = all.iter().map(|c| c.session_id.as_str()).collect();
    assert_eq!(ids, ["x3", "x2", "x1"]);
    assert_eq!(all[0].label, "Build docs");
    assert_eq!(all[1].label, "x2");
    assert_eq!(
        all[0].mention,
        format!("@[Build docs]({})", encode_session_uri("x3"))
    );
    let build = refs
        .list_candidates("me", Some("/w"), Some("BUILD"), Some(1))
        .unwrap();
    assert_eq!(build.len(), 1);
    assert_eq!(build[0].session_id, "x3");
}

#[test]
fn the_store_reader_prefers_live_logs() {
    use dsh_session::CreateOptions;
    use dsh_session::JsonlStore;
    use dsh_session::SurfaceIntent;
    use dsh_session::data::UserMessage;
    let home = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(home.path());
    let log = store
        .create(CreateOptions {
            cwd: Some(home.path().to_path_buf()),
            ..CreateOptions::default()
        })
        .unwrap();
    log.append_data(
        &UserMessage(Message::user_text("stored")),
        Some(SurfaceIntent::append()),
    )
    .unwrap();
    let reader = StoreReader::new(Arc::new(store));
    let stored = reader.read_surface(log.id()).unwrap();
    assert_eq!(stored.items.len(), 1);
    assert_eq!(stored.captured_through_seq, Some(0));
    reader.register_live(&log);
    log.append_data(
        &UserMessage(Message::user_text("live")),
        Some(SurfaceIntent::append()),
    )
    .unwrap();
    assert_eq!(reader.read_surface(log.id()).unwrap().items.len(), 2);
    assert!(matches!(
        reader.read_surface("nope"),
        Err(SessionError::NotFound { .. })
    ));
    assert_eq!(reader.list_sessions().unwrap().len(), 1);
}
