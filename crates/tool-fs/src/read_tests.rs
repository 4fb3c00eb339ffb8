use super::*;
use crate::policy::FilePolicy;
use crate::policy::SandboxMode;
use pretty_assertions::assert_eq;

fn setup(files: &[(&str, &[u8])]) -> (tempfile::TempDir, FsContext) {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in files {
        std::fs::write(dir.path().join(name), content).unwrap();
    }
    let ctx = FsContext::new(
        dir.path(),
        FilePolicy::new(SandboxMode::ReadOnly, dir.path()),
    );
    (dir, ctx)
}

fn args(path: &str, offset: Option<f64>, limit: Option<f64>) -> ReadArgs {
    ReadArgs {
        file_path: path.into(),
        offset,
        limit,
    }
}

async fn text(ctx: &FsContext, a: &ReadArgs) -> Result<String, FsError> {
    let out = run(a, ctx, CancellationToken::new()).await?;
    Ok(dsh_protocol::text_of(&render_with_limit(
        a,
        &out,
        ctx.limits.read_limit,
    )))
}

#[tokio::test]
async fn one_line_file() {
    let (dir, ctx) = setup(&[("greeting.txt", b"hello\n")]);
    let got = text(&ctx, &args("greeting.txt", None, None)).await.unwrap();
    let p = dir.path().join("greeting.txt").display().to_string();
    assert_eq!(
        got,
        format!(
            "<path>{p}</path>\n<type>file</type>\n<content>\n1: hello\n\n(End of file - total 1 lines)\n</content>"
        )
    );
}

#[tokio::test]
async fn window_offset_and_limit() {
    let body: String = (1..=12).map(|n| format!("line {n}\n")).collect();
    let (_dir, ctx) = setup(&[("twelve.txt", body.as_bytes())]);
    let got = text(&ctx, &args("twelve.txt", Some(3.0), Some(2.0)))
        .await
        .unwrap();
    assert!(got.ends_with("<content>\n3: line 3\n4: line 4\n\n(Showing lines 3-4 of 12. Use offset=5 to continue.)\n</content>"), "{got}");
}

#[tokio::test]
async fn crlf_bom_and_final_segment() {
    let (_dir, ctx) = setup(&[("w.txt", "\u{feff}a\r\nb\r\nc".as_bytes())]);
    let out = run(&args("w.txt", None, None), &ctx, CancellationToken::new())
        .await
        .unwrap();
    let texts: Vec<&str> = out.lines.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(texts, vec!["a", "b", "c"]);
    assert_eq!(out.total_lines, 3);
}

#[tokio::test]
async fn empty_file_and_offset_out_of_range() {
    let (dir, ctx) = setup(&[("empty.txt", b""), ("two.txt", b"a\nb\n")]);
    let got = text(&ctx, &args("empty.txt", None, None)).await.unwrap();
    assert!(
        got.ends_with("<content>\n(End of file - total 0 lines)\n</content>"),
        "{got}"
    );
    let err = run(
        &args("two.txt", Some(3.0), None),
        &ctx,
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    let p = dir.path().join("two.txt").display().to_string();
    assert_eq!(
        err,
        FsError::coded(
            "FS_NOT_FOUND",
            format!("offset 3 is out of range for \"{p}\" (2 lines)")
        )
    );
}

#[tokio::test]
async fn validation_and_missing_and_binary() {
    let (dir, ctx) = setup(&[("bin", b"ab\0cd"), ("bad.txt", &[0xff, 0xfe, b'a'])]);
    let c = CancellationToken::new;
    assert_eq!(
        run(&args(" ", None, None), &ctx, c())
            .await
            .unwrap_err()
            .message,
        "file_path must be a non-empty string"
    );
    assert_eq!(
        run(&args("x", Some(0.0), None), &ctx, c())
            .await
            .unwrap_err()
            .message,
        "offset must be a positive integer"
    );
    assert_eq!(
        run(&args("x", None, Some(1.5)), &ctx, c())
            .await
            .unwrap_err()
            .message,
        "limit must be a positive integer"
    );
    assert_eq!(
        run(&args("x", None, Some(2001.0)), &ctx, c())
            .await
            .unwrap_err()
            .message,
        "limit must be less than or equal to 2000"
    );
    let p = |n: &str| dir.path().join(n).display().to_string();
    let err = run(&args("missing.txt", None, None), &ctx, c())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        FsError::coded(
            "FS_NOT_FOUND",
            format!("cannot read \"{}\": not found", p("missing.txt"))
        )
    );
    assert_eq!(
        err.model_text(),
        format!("Error: cannot read \"{}\": not found", p("missing.txt"))
    );
    let err = run(&args("bin", None, None), &ctx, c()).await.unwrap_err();
    assert_eq!(
        err,
        FsError::coded(
            "FS_NOT_TEXT",
            format!("cannot read \"{}\": binary file", p("bin"))
        )
    );
    let err = run(&args("bad.txt", None, None), &ctx, c())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        FsError::coded(
            "FS_NOT_TEXT",
            format!("cannot read \"{}\": invalid UTF-8 text", p("bad.txt"))
        )
    );
    let err = run(&args(".", None, None), &ctx, c()).await.unwrap_err();
    assert_eq!(err.code.as_deref(), Some("FS_NOT_REGULAR_FILE"));
}

#[tokio::test]
async fn long_lines_truncate_and_byte_cap_stops() {
    let long = "é".repeat(2500);
    let (_dir, ctx) = setup(&[("long.txt", format!("{long}\nshort\n").as_bytes())]);
    let out = run(
        &args("long.txt", None, None),
        &ctx,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(
        out.lines[0].text,
        format!("{}... (line truncated to 2000 chars)", "é".repeat(2000))
    );

    // 30 lines of 2000 ASCII chars: 25 fit in 51 200 bytes (25*2000 + 24 separators).
    let body: String = (0..30).map(|_| format!("{}\n", "x".repeat(2000))).collect();
    let (_dir, ctx) = setup(&[("big.txt", body.as_bytes())]);
    let got = text(&ctx, &args("big.txt", None, None)).await.unwrap();
    assert!(
        got.ends_with(
            "\n\n(Output capped. Showing lines 1-25. Use offset=26 to continue.)\n</content>"
        ),
        "{}",
        &got[got.len() - 200..]
    );
    let out = run(
        &args("big.txt", Some(26.0), None),
        &ctx,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(out.total_lines, 30);
    assert_eq!(out.lines.len(), 5);
}

#[tokio::test]
async fn read_only_mode_still_reads_and_meta_card() {
    let (dir, ctx) = setup(&[("main.rs", b"fn main() {}\n")]);
    let a = args("main.rs", None, None);
    let out = run(&a, &ctx, CancellationToken::new()).await.unwrap();
    let meta = presentation_meta(&a, &out);
    assert_eq!(meta["lang"], "rust");
    let content = render(&a, &out);
    let view = present_result(
        &a,
        ResultInput {
            content: &content,
            is_error: false,
            meta: Some(&meta),
        },
    )
    .unwrap();
    let expected = ToolResultView::Read {
        title: None,
        path: dir.path().join("main.rs").display().to_string(),
        offset: 1,
        lines: vec![ReadFileLine {
            number: 1,
            text: "fn main() {}".into(),
        }],
        total_lines: 1,
        lang: Some("rust".into()),
        content: Some("1: fn main() {}\n\n(End of file - total 1 lines)".into()),
    };
    assert_eq!(view, expected);
    let call = serde_json::to_value(present_call(&args("a.txt", Some(3.0), Some(2.0)))).unwrap();
    assert_eq!(
        call,
        serde_json::json!({"card":"generic","title":"Read a.txt (3 - 4)","kind":"read","locations":[{"path":"a.txt","line":3}]})
    );
    let call = serde_json::to_value(present_call(&args("a.txt", Some(3.0), None))).unwrap();
    assert_eq!(call["title"], "Read a.txt (from line 3)");
}

#[tokio::test]
async fn cancelled_before_start() {
    let (_dir, ctx) = setup(&[("a.txt", b"a\n")]);
    let cancel = CancellationToken::new();
    cancel.cancel();
    let err = run(&args("a.txt", None, None), &ctx, cancel)
        .await
        .unwrap_err();
    assert_eq!(err.code.as_deref(), Some("FS_ABORTED"));
}

#[tokio::test]
async fn binary_check_covers_only_the_first_8_kib_and_blank_lines_count() {
    let mut late_nul = "a".repeat(9000).into_bytes();
    late_nul.extend_from_slice(b"\0\nb\n");
    let (_dir, ctx) = setup(&[
        ("late.txt", &late_nul),
        ("blank.txt", b"a\n\n"),
        ("bad_late.txt", b"ok\nok\n\xff\n"),
    ]);
    let out = run(
        &args("late.txt", Some(2.0), None),
        &ctx,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!((out.total_lines, out.lines[0].text.as_str()), (2, "b"));
    let out = run(
        &args("blank.txt", None, None),
        &ctx,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(out.total_lines, 2);
    // Strict decoding: invalid UTF-8 anywhere fails, even past the requested window.
    let err = run(
        &args("bad_late.txt", None, Some(1.0)),
        &ctx,
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code.as_deref(), Some("FS_NOT_TEXT"));
}
