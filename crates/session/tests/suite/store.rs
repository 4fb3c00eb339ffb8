//! Store API: resume, fork, list, live ids.

use dsh_session::CreateOptions;
use dsh_session::SessionError;
use dsh_session::data::SessionTitle;
use dsh_session::data::TitleSource;
use dsh_session::data::TurnStart;
use dsh_session::kind;
use pretty_assertions::assert_eq;

use super::common::*;

#[test]
fn resume_continues_the_same_file_and_numbering() {
    let (_home, store) = store();
    let log = store
        .create(CreateOptions {
            id: Some("r".into()),
            ..Default::default()
        })
        .unwrap();
    full_turn(&log, 1);
    let history = log.derive_messages();
    let path = log.path().unwrap();
    drop(log);

    let log = store.resume("r").unwrap();
    assert_eq!(log.path().unwrap(), path);
    assert_eq!(log.first_live_seq(), 13);
    assert_eq!(log.last().unwrap().kind, kind::END_SEED);
    assert_eq!(
        log.derive_messages(),
        history,
        "derived history equals a replay of the stored events"
    );
    let next = log.turn_state().last_turn + 1;
    assert_eq!(next, 2);
    full_turn(&log, next);
    let lines = file_lines(&log);
    assert_eq!(lines.len() as u64, log.len() + 1);
    for (i, line) in lines[1..].iter().enumerate() {
        assert!(line.contains(&format!(r#","seq":{i},"#)), "{line}");
    }
}

#[test]
fn a_live_id_cannot_be_opened_twice() {
    let (_home, store) = store();
    let log = store
        .create(CreateOptions {
            id: Some("dup".into()),
            ..Default::default()
        })
        .unwrap();
    log.append_data(&TurnStart { turn: 1 }, None).unwrap();
    let err = store.resume("dup").unwrap_err();
    assert_eq!(err.code(), Some("SESSION_ALREADY_EXISTS"));
    let err = store
        .create(CreateOptions {
            id: Some("dup".into()),
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(err.code(), Some("SESSION_ALREADY_EXISTS"));
    drop(log);
    assert!(
        store.resume("dup").is_ok(),
        "dropping the last handle releases the id"
    );
    let err = store
        .create(CreateOptions {
            id: Some("dup".into()),
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(
        err.code(),
        Some("SESSION_ALREADY_EXISTS"),
        "stored ids are taken too"
    );
    assert_eq!(
        store.resume("nope").unwrap_err().code(),
        Some("SESSION_NOT_FOUND")
    );
    let err = store
        .create(CreateOptions {
            cwd: Some("relative/dir".into()),
            ..Default::default()
        })
        .unwrap_err();
    assert!(
        matches!(err, SessionError::InvalidInput { field: "cwd", .. }),
        "{err}"
    );
}

#[test]
fn fork_copies_a_closed_prefix_into_a_new_session() {
    let (_home, store) = store();
    let log = store
        .create(CreateOptions {
            id: Some("parent".into()),
            cwd: Some("/w".into()),
            ..Default::default()
        })
        .unwrap();
    full_turn(&log, 1);
    let after_first = log.len() - 1;
    let first_history = log.derive_messages();
    open_turn(&log, 2, 1);
    user(&log, "second");

    assert_eq!(
        store
            .fork("parent", Some(after_first + 2), None)
            .unwrap_err()
            .code(),
        Some("OPEN_TURN")
    );
    assert_eq!(
        store.fork("parent", None, None).unwrap_err().code(),
        Some("OPEN_TURN")
    );
    assert_eq!(
        store.fork("parent", Some(999), None).unwrap_err().code(),
        Some("INVALID_BOUNDARY")
    );
    assert_eq!(
        store.fork("ghost", None, None).unwrap_err().code(),
        Some("SESSION_NOT_FOUND")
    );

    let child = store
        .fork("parent", Some(after_first), Some("child".into()))
        .unwrap();
    let header = child.header();
    assert_eq!(header.parent_session.as_deref(), Some("parent"));
    assert_eq!(header.seed_length, Some(after_first + 1));
    assert_eq!(header.cwd.as_deref(), Some("/w"));
    assert_eq!(child.derive_messages(), first_history);
    assert_eq!(child.len(), after_first + 2);
    assert_eq!(child.last().unwrap().kind, kind::END_SEED);
    let lines = file_lines(&child);
    assert!(
        lines[0].contains(r#""parentSession":"parent","seedLength":13,"delegationDepth":0"#),
        "{}",
        lines[0]
    );
    assert_eq!(
        lines[1..].to_vec(),
        child
            .events()
            .unwrap()
            .iter()
            .map(|e| e.to_json_line())
            .collect::<Vec<_>>()
    );
    assert_eq!(lines[1], file_lines(&log)[1], "events are copied verbatim");

    assert_eq!(
        store
            .fork("parent", Some(after_first), Some("child".into()))
            .unwrap_err()
            .code(),
        Some("SESSION_ALREADY_EXISTS")
    );
    let live_fork = store.fork_log(&log, Some(after_first), None).unwrap();
    assert_eq!(live_fork.derive_messages(), first_history);
}

#[test]
fn list_shows_id_time_cwd_title_and_count() {
    let (_home, store) = store();
    assert_eq!(
        store.list().unwrap(),
        vec![],
        "a missing root lists nothing"
    );
    let a = store
        .create(CreateOptions {
            id: Some("a".into()),
            cwd: Some("/p".into()),
            ..Default::default()
        })
        .unwrap();
    full_turn(&a, 1);
    let title = SessionTitle {
        title: "Run echo hi".into(),
        message_seqs: vec![2],
        source: TitleSource::Fallback,
    };
    a.append_data(&title, None).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(3));
    let b = store
        .create(CreateOptions {
            id: Some("b".into()),
            ..Default::default()
        })
        .unwrap();
    b.append_data(&TurnStart { turn: 1 }, None).unwrap();
    let _unwritten = store
        .create(CreateOptions {
            id: Some("empty".into()),
            ..Default::default()
        })
        .unwrap();

    let list = store.list().unwrap();
    let rows: Vec<_> = list
        .iter()
        .map(|s| {
            (
                s.id.as_str(),
                s.cwd.as_deref(),
                s.title.as_deref(),
                s.event_count,
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("b", None, None, 1),
            ("a", Some("/p"), Some("Run echo hi"), 14)
        ]
    );
    assert_eq!(list[1].created_at, a.header().created_at);
    assert_eq!(list[1].path, a.path().unwrap());
}

#[test]
fn a_persisted_session_exists_before_its_first_event_and_resumes() {
    let (_home, store) = store();
    let cwd = std::env::temp_dir();
    let log = store
        .create(CreateOptions {
            id: Some("fresh".into()),
            cwd: Some(cwd.clone()),
            ..Default::default()
        })
        .unwrap();
    assert!(store.find("fresh").unwrap().is_none(), "lazy until asked");
    log.persist().unwrap();
    log.persist().unwrap();
    assert_eq!(file_lines(&log).len(), 1, "the header alone");
    let listed = store.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, "fresh");
    assert_eq!(
        listed[0].cwd.as_deref(),
        Some(cwd.to_string_lossy().as_ref())
    );
    drop(log);

    let log = store.resume("fresh").unwrap();
    assert_eq!(
        log.header().cwd.as_deref(),
        Some(cwd.to_string_lossy().as_ref())
    );
    full_turn(&log, 1);
    drop(log);
    let loaded = store.load("fresh").unwrap();
    assert!(loaded.events.iter().any(|e| e.kind == kind::TURN_END));
}
