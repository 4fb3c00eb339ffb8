//! Gap-filling tests for agent-loop-spec §10 session items the other suites pin only in part
//! (see `docs/checklists.md`): losslessness at any depth and through typed payloads, what
//! `derive_messages` never projects, the seedless/empty-seed marker rule, and the header fold.

use dsh_session::CreateOptions;
use dsh_session::SessionError;
use dsh_session::SessionHeader;
use dsh_session::SessionLog;
use dsh_session::SurfaceIntent;
use dsh_session::data::EpochHeader;
use dsh_session::data::HeaderConfig;
use dsh_session::data::HeaderReason;
use dsh_session::data::RequestHeader;
use dsh_session::kind;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::common::file_lines;
use super::common::full_turn;
use super::common::store;
use super::common::user;

fn header(model: &str, temperature: Option<f64>) -> RequestHeader {
    RequestHeader {
        header: EpochHeader {
            config: HeaderConfig {
                provider: "p".into(),
                model: model.into(),
                temperature,
                max_tokens: None,
                reasoning_effort: None,
                stop: None,
            },
            adapter_defaults: None,
            system: None,
            tools: None,
        },
        reason: HeaderReason::Initial,
    }
}

#[test]
fn item_02_negative_zero_at_any_depth_is_refused_and_nothing_is_written() {
    let (_home, store) = store();
    let log = store.create(CreateOptions::default()).unwrap();
    full_turn(&log, 1);
    let before = file_lines(&log);
    let len = log.len();
    for data in [
        json!({"a": [1, {"b": [-0.0]}]}),
        json!([[[-0.0]]]),
        json!({"deep": {"deeper": {"n": -0.0, "ok": 1}}}),
    ] {
        let err = log.append("x/probe", data, None).unwrap_err();
        assert!(matches!(err, SessionError::NotLossless { .. }), "{err}");
    }
    // A surface event is checked too, before any surface rule.
    let err = log
        .append(
            "user/message",
            json!({"role": "user", "id": "u", "content": [{"type": "text", "text": "x", "n": -0.0}], "source": {"kind": "user"}}),
            Some(SurfaceIntent::append()),
        )
        .unwrap_err();
    assert!(matches!(err, SessionError::NotLossless { .. }), "{err}");
    assert_eq!(log.len(), len);
    assert_eq!(file_lines(&log), before);
    // Positive zero and ordinary floats are fine.
    log.append("x/probe", json!({"z": 0.0, "f": 0.5}), None)
        .unwrap();
}

#[test]
fn item_02_a_non_finite_float_in_a_typed_payload_is_refused() {
    let log = SessionLog::in_memory(SessionHeader::new("s", None));
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0] {
        let err = log.append_data(&header("m", Some(bad)), None).unwrap_err();
        assert!(
            matches!(err, SessionError::NotLossless { .. }),
            "{bad}: {err}"
        );
    }
    assert!(log.is_empty());
    log.append_data(&header("m", Some(0.7)), None).unwrap();
}

#[test]
fn item_06_derive_messages_never_projects_non_surface_events() {
    let log = SessionLog::in_memory(SessionHeader::new("s", None));
    let u = user(&log, "hello");
    log.append_data(&header("m", None), None).unwrap();
    log.append(
        kind::REQUEST_CONTEXT,
        json!({"provider": "p", "model": "m"}),
        None,
    )
    .unwrap();
    log.append(
        kind::INBOX_SPLICED,
        json!({"queue": "nextTurn", "index": 0, "removedCount": 0, "inserted": [{"role": "user", "id": "q", "content": [{"type": "text", "text": "queued"}], "source": {"kind": "user"}}]}),
        None,
    )
    .unwrap();
    log.append(
        kind::LLM_RETRY,
        json!({"turn": 1, "step": 1, "attempt": 1}),
        None,
    )
    .unwrap();
    log.append(
        kind::LLM_RETRY_STARTED,
        json!({"turn": 1, "step": 1, "attempt": 1}),
        None,
    )
    .unwrap();
    log.append(kind::SESSION_TITLE, json!({"title": "t"}), None)
        .unwrap();
    let messages = log.derive_messages();
    assert_eq!(messages.len(), 1);
    assert_eq!(dsh_protocol::text_of(&messages[0].content), "hello");
    assert_eq!(log.surface_seqs(), vec![u]);
}

#[test]
fn item_09_only_seeded_sessions_get_an_end_seed_marker() {
    let (_home, store) = store();
    let plain = store.create(CreateOptions::default()).unwrap();
    full_turn(&plain, 1);
    assert!(
        plain
            .events()
            .unwrap()
            .iter()
            .all(|e| e.kind != kind::END_SEED)
    );

    let seeded = store
        .create(CreateOptions {
            seed: Some(Vec::new()),
            ..CreateOptions::default()
        })
        .unwrap();
    let kinds: Vec<_> = seeded.events().unwrap().iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [kind::END_SEED]);
    assert_eq!(seeded.get(0).unwrap().unwrap().seq, 0);

    let seed: Vec<_> = plain
        .events()
        .unwrap()
        .iter()
        .map(|e| (**e).clone())
        .collect();
    let n = seed.len();
    let child = store
        .create(CreateOptions {
            seed: Some(seed),
            ..CreateOptions::default()
        })
        .unwrap();
    assert_eq!(child.len() as usize, n + 1);
    let markers = child
        .events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == kind::END_SEED)
        .count();
    assert_eq!(markers, 1);
}

#[test]
fn the_latest_request_context_is_kept_without_a_scan() {
    use dsh_session::data::RequestContext;
    let log = SessionLog::in_memory(SessionHeader::new("s", None));
    assert!(log.request_context().is_none());
    let context = |model: &str| RequestContext {
        provider: "p".into(),
        model: model.into(),
        context_window: None,
    };
    log.append_data(&context("a"), None).unwrap();
    user(&log, "between");
    let second = log.append_data(&context("b"), None).unwrap();
    user(&log, "after");
    assert_eq!(log.request_context(), Some(second));
}

#[test]
fn item_11_the_fold_returns_the_latest_header() {
    let log = SessionLog::in_memory(SessionHeader::new("s", None));
    assert!(log.request_header().is_none());
    let first = log.append_data(&header("a", None), None).unwrap();
    assert_eq!(log.request_header(), Some(first));
    user(&log, "between");
    let second = log.append_data(&header("b", None), None).unwrap();
    user(&log, "after");
    assert_eq!(log.request_header(), Some(second.clone()));
    assert_eq!(second.data["header"]["config"]["model"], "b");
    // Canonical: absent system/tools/adapterDefaults are not written at all.
    assert_eq!(
        second.data["header"],
        json!({"config": {"provider": "p", "model": "b"}})
    );
}
