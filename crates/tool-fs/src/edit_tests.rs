use super::*;
use crate::policy::FilePolicy;
use crate::policy::SandboxMode;
use crate::read;
use pretty_assertions::assert_eq;

fn setup(content: &[u8]) -> (tempfile::TempDir, FsContext, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.txt"), content).unwrap();
    let mut policy = FilePolicy::new(SandboxMode::WorkspaceWrite, dir.path());
    policy.temp_roots.clear();
    let ctx = FsContext::new(dir.path(), policy);
    let p = dir.path().join("f.txt").display().to_string();
    (dir, ctx, p)
}

fn args(old: &str, new: &str, replace_all: Option<bool>) -> EditArgs {
    EditArgs {
        file_path: "f.txt".into(),
        old_string: old.into(),
        new_string: new.into(),
        replace_all,
        sandbox_permissions: None,
        justification: None,
    }
}

async fn read_it(ctx: &FsContext) {
    let a = read::ReadArgs {
        file_path: "f.txt".into(),
        offset: None,
        limit: None,
    };
    read::run(&a, ctx, CancellationToken::new()).await.unwrap();
}

#[tokio::test]
async fn requires_read_then_succeeds() {
    let (dir, ctx, p) = setup(b"mode=DEBUG\nlevel=info\n");
    let a = args("DEBUG", "RELEASE", None);
    let err = run(&a, &ctx, CancellationToken::new()).await.unwrap_err();
    assert_eq!(
        err.model_text(),
        format!("Error: edit requires reading \"{p}\" first — read the file, then retry")
    );
    assert_eq!(err.code.as_deref(), Some("FS_NOT_OBSERVED"));
    read_it(&ctx).await;
    let out = run(&a, &ctx, CancellationToken::new()).await.unwrap();
    assert_eq!(
        dsh_protocol::text_of(&render(&a, &out)),
        format!("The file {p} has been updated successfully.")
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "mode=RELEASE\nlevel=info\n"
    );
    assert_eq!(
        presentation_meta(&a, &out),
        serde_json::json!({"diffs":[{"path":"f.txt","oldText":"mode=DEBUG\nlevel=info","newText":"mode=RELEASE\nlevel=info"}]})
    );
    // Our own edit keeps the file observed: a second edit needs no re-read.
    run(&args("info", "warn", None), &ctx, CancellationToken::new())
        .await
        .unwrap();
}

#[tokio::test]
async fn ambiguous_not_found_and_replace_all() {
    let (dir, ctx, p) = setup(b"a x a x\n");
    read_it(&ctx).await;
    let err = run(&args("a", "b", None), &ctx, CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        FsError::coded(
            "FS_AMBIGUOUS_EDIT",
            format!(
                "old_string matched 2 times in \"{p}\"; provide a more specific old_string or set replace_all to true"
            )
        )
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "a x a x\n"
    );
    let err = run(&args("zzz", "b", None), &ctx, CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        FsError::coded(
            "FS_EDIT_NOT_FOUND",
            format!("old_string was not found in \"{p}\"")
        )
    );
    let a = args("a", "b", Some(true));
    let out = run(&a, &ctx, CancellationToken::new()).await.unwrap();
    assert_eq!(
        dsh_protocol::text_of(&render(&a, &out)),
        format!("The file {p} has been updated. All occurrences were successfully replaced.")
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "b x b x\n"
    );
}

#[tokio::test]
async fn validation() {
    let (_dir, ctx, _p) = setup(b"x\n");
    let c = CancellationToken::new;
    assert_eq!(
        run(&args("", "b", None), &ctx, c())
            .await
            .unwrap_err()
            .message,
        "old_string must be a non-empty string"
    );
    assert_eq!(
        run(&args("a", "a", None), &ctx, c())
            .await
            .unwrap_err()
            .message,
        "old_string and new_string must differ"
    );
    let mut blank = args("a", "b", None);
    blank.file_path = "".into();
    assert_eq!(
        run(&blank, &ctx, c()).await.unwrap_err().message,
        "file_path must be a non-empty string"
    );
}

#[tokio::test]
async fn crlf_file_stays_crlf() {
    let (dir, ctx, _p) = setup(b"one\r\ntwo\r\nthree\n");
    read_it(&ctx).await;
    let out = run(
        &args("one\ntwo", "uno\ndos", None),
        &ctx,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(out.before, "one\ntwo\nthree\n");
    assert_eq!(
        std::fs::read(dir.path().join("f.txt")).unwrap(),
        b"uno\r\ndos\r\nthree\r\n"
    );
}

#[tokio::test]
async fn stale_and_absent() {
    let (dir, ctx, p) = setup(b"abc\n");
    read_it(&ctx).await;
    std::fs::write(dir.path().join("f.txt"), "abcd\n").unwrap();
    let err = run(&args("abc", "x", None), &ctx, CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        FsError::coded(
            "FS_STALE_VERSION",
            format!(
                "cannot edit \"{p}\": file changed since it was read — re-read the file, then retry"
            )
        )
    );
    std::fs::remove_file(dir.path().join("f.txt")).unwrap();
    let err = run(&args("abc", "x", None), &ctx, CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err.code.as_deref(), Some("FS_STALE_VERSION"));
    let ra = read::ReadArgs {
        file_path: "f.txt".into(),
        offset: None,
        limit: None,
    };
    assert!(
        read::run(&ra, &ctx, CancellationToken::new())
            .await
            .is_err()
    );
    let err = run(&args("abc", "x", None), &ctx, CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        FsError::coded("FS_NOT_FOUND", format!("cannot edit \"{p}\": not found"))
    );
}

#[tokio::test]
async fn read_only_denies_edit() {
    let (dir, _ctx, _p) = setup(b"abc\n");
    let ctx = FsContext::new(
        dir.path(),
        FilePolicy::new(SandboxMode::ReadOnly, dir.path()),
    );
    read_it(&ctx).await;
    let err = run(&args("abc", "x", None), &ctx, CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err.code.as_deref(), Some("FS_SANDBOX_DENIED"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "abc\n"
    );
}

#[test]
fn cards() {
    let a = args("DEBUG", "RELEASE", None);
    assert_eq!(
        serde_json::to_value(present_call(&a)).unwrap(),
        serde_json::json!({"card":"diff","title":"Edit f.txt","diffs":[{"path":"f.txt","oldText":"DEBUG","newText":"RELEASE"}],"locations":[{"path":"f.txt"}]}),
        "an edit card carries its file as a location, like write and read, so editors follow it"
    );
}
