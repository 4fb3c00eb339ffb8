use super::*;
use crate::policy::FilePolicy;
use pretty_assertions::assert_eq;

fn setup() -> (tempfile::TempDir, FsContext) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = FsContext::new(dir.path(), FilePolicy::danger_full_access(dir.path()));
    (dir, ctx)
}

fn args(command: Command, path: &str) -> StrReplaceEditorArgs {
    StrReplaceEditorArgs {
        command,
        path: path.into(),
        file_text: None,
        insert_line: None,
        new_str: None,
        old_str: None,
        view_range: None,
    }
}

async fn go(a: &StrReplaceEditorArgs, ctx: &FsContext) -> Result<String, FsError> {
    run(a, ctx, CancellationToken::new()).await.map(|o| o.0)
}

#[tokio::test]
async fn view_with_range_and_errors() {
    let (dir, ctx) = setup();
    let p = dir.path().join("f.txt").display().to_string();
    std::fs::write(&p, "one\ntwo\nthree\n").unwrap();
    let mut a = args(Command::View, &p);
    a.view_range = Some(vec![2, -1]);
    assert_eq!(
        go(&a, &ctx).await.unwrap(),
        format!(
            "Here's the content of {p} with line numbers (which has a total of 4 lines) with view_range=[2, -1]:\n     2  two\n     3  three\n     4  \n"
        )
    );
    a.view_range = Some(vec![5, 5]);
    assert_eq!(
        go(&a, &ctx).await.unwrap_err().message,
        "Invalid `view_range`: [5, 5]. Its first element `5` should be within the range of lines of the file: [1, 4]"
    );
    a.view_range = Some(vec![3, 2]);
    assert_eq!(
        go(&a, &ctx).await.unwrap_err().message,
        "Invalid `view_range`: [3, 2]. Its second element `2` should be larger or equal than its first `3`"
    );
    a.view_range = Some(vec![1]);
    assert_eq!(
        go(&a, &ctx).await.unwrap_err().message,
        "Invalid `view_range`. It should be a list of two integers."
    );
    assert_eq!(
        go(&args(Command::View, "rel.txt"), &ctx)
            .await
            .unwrap_err()
            .message,
        "The path rel.txt is not an absolute path, it should start with `/`. Maybe you meant /rel.txt?"
    );
    let missing = dir.path().join("nope").display().to_string();
    let err = go(&args(Command::View, &missing), &ctx).await.unwrap_err();
    assert_eq!(
        err,
        FsError::coded(
            "FS_NOT_FOUND",
            format!("The path {missing} does not exist. Please provide a valid path.")
        )
    );
}

#[tokio::test]
async fn view_clips_long_output() {
    let (dir, mut ctx) = setup();
    ctx.limits.str_replace_max_output_chars = 50;
    let p = dir.path().join("f.txt").display().to_string();
    std::fs::write(&p, "x".repeat(200)).unwrap();
    let got = go(&args(Command::View, &p), &ctx).await.unwrap();
    let expected_head: String =
        format!("Here's the content of {p} with line numbers (which has a total of 1 lines):\n")
            .chars()
            .take(50)
            .collect();
    assert_eq!(got, format!("{expected_head}{CLIPPED}"));
}

#[tokio::test]
async fn directory_listing() {
    let (dir, ctx) = setup();
    for path in [
        "a/b/c/deep.txt",
        "a/x.txt",
        ".hidden/h",
        "node_modules/m",
        "z.txt",
    ] {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, "").unwrap();
    }
    let root = dir.path().display().to_string();
    assert_eq!(
        go(&args(Command::View, &root), &ctx).await.unwrap(),
        format!(
            "Here're the files and directories up to 2 levels deep in {root}, excluding hidden items, node_modules, and Python cache directories:\nd\t{root}\nd\t{root}/a\nd\t{root}/a/b\nf\t{root}/a/x.txt\nf\t{root}/z.txt\n\n"
        )
    );
    assert_eq!(
        go(&args(Command::Create, &root), &ctx)
            .await
            .unwrap_err()
            .message,
        format!(
            "The path {root} is a directory and only the `view` command can be used on directories"
        )
    );
}

#[tokio::test]
async fn create_replace_insert() {
    let (dir, ctx) = setup();
    let p = dir.path().join("n.txt").display().to_string();
    let mut a = args(Command::Create, &p);
    assert_eq!(
        go(&a, &ctx).await.unwrap_err().message,
        "Parameter `file_text` is required for command: create"
    );
    a.file_text = Some("a\nb\na\n".into());
    assert_eq!(
        go(&a, &ctx).await.unwrap(),
        format!("New file created successfully at: {p}")
    );
    assert_eq!(
        go(&a, &ctx).await.unwrap_err().message,
        format!("File already exists at: {p}. Cannot overwrite files using command `create`.")
    );
    let mut r = args(Command::StrReplace, &p);
    r.old_str = Some("a".into());
    r.new_str = Some("A".into());
    let err = go(&r, &ctx).await.unwrap_err();
    assert_eq!(
        err,
        FsError::coded(
            "FS_AMBIGUOUS_EDIT",
            "No replacement was performed. Multiple occurrences of old_str `a` in lines [1, 3]. Please ensure it is unique"
        )
    );
    r.old_str = Some("b\n".into());
    assert_eq!(
        go(&r, &ctx).await.unwrap(),
        format!("The file {p} has been edited successfully.")
    );
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "a\nAa\n");
    r.old_str = Some("zz".into());
    assert_eq!(
        go(&r, &ctx).await.unwrap_err().message,
        format!("No replacement was performed, old_str `zz` did not appear verbatim in {p}.")
    );
    let mut i = args(Command::Insert, &p);
    i.insert_line = Some(0);
    i.new_str = Some("top".into());
    go(&i, &ctx).await.unwrap();
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "top\na\nAa\n");
    i.insert_line = Some(9);
    assert_eq!(
        go(&i, &ctx).await.unwrap_err().message,
        "Invalid `insert_line` parameter: 9. It should be within the range of lines of the file: [0, 4]"
    );
}

#[tokio::test]
async fn str_replace_requires_view_and_keeps_crlf_bytes() {
    let (dir, ctx) = setup();
    let p = dir.path().join("c.txt").display().to_string();
    std::fs::write(&p, "x\r\ny\r\n").unwrap();
    let mut r = args(Command::StrReplace, &p);
    r.old_str = Some("x\r\n".into());
    r.new_str = Some("z\r\n".into());
    let err = go(&r, &ctx).await.unwrap_err();
    assert_eq!(
        err,
        FsError::coded(
            "FS_NOT_OBSERVED",
            format!("edit requires reading \"{p}\" first")
        )
    );
    go(&args(Command::View, &p), &ctx).await.unwrap();
    go(&r, &ctx).await.unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"z\r\ny\r\n");
}

#[tokio::test]
async fn sandbox_has_no_escalation_hint() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = FsContext::new(
        dir.path(),
        FilePolicy::new(crate::SandboxMode::ReadOnly, dir.path()),
    );
    let p = dir.path().join("n.txt").display().to_string();
    let mut a = args(Command::Create, &p);
    a.file_text = Some("x".into());
    let err = go(&a, &ctx).await.unwrap_err();
    assert_eq!(
        err,
        FsError::coded(
            "FS_SANDBOX_DENIED",
            "[sandbox: file access denied under read-only mode]"
        )
    );
}

#[test]
fn insert_card_points_at_line() {
    let mut a = args(Command::Insert, "/w/f");
    a.insert_line = Some(0);
    assert_eq!(
        serde_json::to_value(present_call(&a)).unwrap(),
        serde_json::json!({"card":"generic","title":"Insert into /w/f","kind":"edit","locations":[{"path":"/w/f","line":1}]})
    );
}
