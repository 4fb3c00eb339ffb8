use super::*;
use serde_json::json;

fn norm() -> Normalizer {
    Normalizer {
        cwd_spellings: vec!["/private/tmp/ws-1".into(), "/tmp/ws-1".into()],
    }
}

#[test]
fn workspace_path_becomes_cwd_only_at_boundaries() {
    let n = norm();
    assert_eq!(n.text("/tmp/ws-1/a.txt"), "{{cwd}}/a.txt");
    assert_eq!(n.text("cd /tmp/ws-1 && ls"), "cd {{cwd}} && ls");
    assert_eq!(n.text("/private/tmp/ws-1/x"), "{{cwd}}/x");
    assert_eq!(n.text("/tmp/ws-10/x"), "/tmp/ws-10/x");
    assert_eq!(n.text("/a/tmp/ws-1"), "/a/tmp/ws-1");
    assert_eq!(n.text("<path>/tmp/ws-1</path>"), "<path>{{cwd}}</path>");
}

#[test]
fn backslashes_after_cwd_become_slashes() {
    let n = norm();
    assert_eq!(
        n.text("/tmp/ws-1\\dir\\f.txt rest\\x"),
        "{{cwd}}/dir/f.txt rest\\x"
    );
}

#[test]
fn uuids_become_session_id() {
    let n = norm();
    assert_eq!(
        n.text("session 11111111-AAAA-4111-8111-111111111111 done"),
        "session {{sessionId}} done"
    );
    assert_eq!(n.text("1111-2222"), "1111-2222");
    assert_eq!(
        n.text("session-e128dda9-ed11-4868-8266-0ef90d03c3d6"),
        "session-{{sessionId}}"
    );
}

#[test]
fn spill_paths_become_locators() {
    let n = norm();
    let recorded = "stored at: /tmp/dsh-acp-snap-ee77dff02/session-5e53dc8acfe4/2ce9d7a31a38-bash.txt. Use read";
    assert_eq!(
        n.text(recorded),
        "stored at: {{spillLocator:bash.txt}}. Use read"
    );
    let ours = "stored at: /tmp/ws-1/.spill/session-0123456789ab/ba9876543210-bash.txt. Use read";
    assert_eq!(n.text(ours), n.text(recorded));
    assert_eq!(n.text("/x/session-12/abc"), "/x/session-12/abc");
}

#[test]
fn acp_lines_renumber_ids_and_normalise_strings() {
    let n = norm();
    let lines = vec![
        json!({"jsonrpc":"2.0","id":7,"result":{"sessionId":"e128dda9-ed11-4868-8266-0ef90d03c3d6"}}),
        json!({"jsonrpc":"2.0","id":"x","method":"session/request_permission","params":{"cwd":"/tmp/ws-1"}}),
        json!({"jsonrpc":"2.0","id":7,"result":{"text":"héllo"}}),
    ];
    assert_eq!(
        normalize_acp_lines(&n, &lines),
        vec![
            r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"{{sessionId}}"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"session/request_permission","params":{"cwd":"{{cwd}}"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"text":"héllo"}}"#,
        ]
    );
}

#[test]
fn new_collects_real_and_private_spellings() {
    let dir = tempfile::tempdir().unwrap();
    let n = Normalizer::new(dir.path());
    let given = dir.path().to_string_lossy().into_owned();
    assert_eq!(n.text(&format!("{given}/f")), "{{cwd}}/f");
    assert_eq!(n.text(&format!("/private{given}/f")), "{{cwd}}/f");
}
