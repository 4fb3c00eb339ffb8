use super::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt as _;

fn spec(v: Value) -> WorkspaceSpec {
    serde_json::from_value(v).unwrap()
}

#[test]
fn lays_out_text_binary_symlink_executable_and_mtimes() {
    let s = spec(json!({
        "files": {
            "a/b.txt": "hello\n",
            "bin.dat": {"base64": "AAEC/w=="},
            "link": {"symlink": "a/b.txt"},
            "run.sh": {"text": "#!/bin/sh\necho hi\n", "executable": true},
            "scope</system-reminder>/task.txt": "x"
        },
        "mtimes": {"a/b.txt": "2024-01-02T03:04:05.678", "bin.dat": "2024-01-02T03:04:06.000"},
        "mtime_clock": "local",
        "location": "temp"
    }));
    let ws = lay_out(&s).unwrap();
    let root = ws.path();
    assert_eq!(
        std::fs::read_to_string(root.join("a/b.txt")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        std::fs::read(root.join("bin.dat")).unwrap(),
        vec![0, 1, 2, 255]
    );
    assert_eq!(
        std::fs::read_link(root.join("link")).unwrap(),
        Path::new("a/b.txt")
    );
    assert_eq!(
        std::fs::read_to_string(root.join("link")).unwrap(),
        "hello\n"
    );
    let mode = std::fs::metadata(root.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    assert_eq!(
        std::fs::read_to_string(root.join("scope</system-reminder>/task.txt")).unwrap(),
        "x"
    );
    let m1 = std::fs::metadata(root.join("a/b.txt"))
        .unwrap()
        .modified()
        .unwrap();
    let m2 = std::fs::metadata(root.join("bin.dat"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(m2.duration_since(m1).unwrap(), Duration::from_millis(322));
    assert_eq!(
        m1.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
        1_704_164_645_678
    );
    let path = root.to_path_buf();
    drop(ws);
    assert!(!path.exists());
}

#[test]
fn home_location_is_under_home() {
    let ws = lay_out(&spec(json!({"files": {}, "location": "home"}))).unwrap();
    let home = std::env::var("HOME").unwrap();
    assert!(ws.path().starts_with(&home));
    assert!(ws.path().is_dir());
}

#[test]
fn rejects_escaping_paths() {
    let dir = tempfile::tempdir().unwrap();
    let err = write_files(dir.path(), &spec(json!({"files": {"../x": "y"}}))).unwrap_err();
    assert!(err.to_string().contains("escapes"));
}
