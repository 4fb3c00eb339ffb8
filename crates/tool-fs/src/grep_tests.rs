use super::*;
use crate::policy::FilePolicy;
use crate::spill::SpillStore;
use pretty_assertions::assert_eq;

fn setup(files: &[(&str, &[u8])]) -> (tempfile::TempDir, FsContext) {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let ctx = FsContext::new(dir.path(), FilePolicy::danger_full_access(dir.path()));
    (dir, ctx)
}

fn args(pattern: &str, path: Option<&str>, include: Option<&str>) -> GrepArgs {
    GrepArgs {
        pattern: pattern.into(),
        path: path.map(str::to_owned),
        include: include.map(str::to_owned),
    }
}

/// What the pipeline would produce: render with the context's cap, then the direct-call spill.
async fn text(ctx: &FsContext, a: &GrepArgs) -> Result<String, FsError> {
    let out = run(a, ctx, CancellationToken::new()).await?;
    let config = GrepConfig {
        max_matches: ctx.limits.grep_max_matches,
    };
    let content =
        spill_content(a, &out, ctx).unwrap_or_else(|| render_with(&config, a, &out, None));
    Ok(dsh_protocol::text_of(&content))
}

#[tokio::test]
async fn groups_and_counts() {
    let (_dir, ctx) = setup(&[
        ("src/a.ts", b"const x = 1;\nlet y = x;\r\nconst z = 2;\n"),
        ("src/b.js", b"nothing\nconst q\n"),
        ("README.md", b"no match here\n"),
    ]);
    assert_eq!(
        text(&ctx, &args("const", None, None)).await.unwrap(),
        "Found 3 matches\n\nsrc/a.ts\nLine 1: const x = 1;\nLine 3: const z = 2;\n\nsrc/b.js\nLine 2: const q"
    );
    assert_eq!(
        text(&ctx, &args("let", Some("src"), None)).await.unwrap(),
        "Found 1 match\n\nsrc/a.ts\nLine 2: let y = x;"
    );
    assert_eq!(
        text(&ctx, &args("zzz", None, None)).await.unwrap(),
        "No matches found"
    );
    assert_eq!(
        text(&ctx, &args("const", None, Some("*.{ts,md}")))
            .await
            .unwrap(),
        "Found 2 matches\n\nsrc/a.ts\nLine 1: const x = 1;\nLine 3: const z = 2;"
    );
    assert_eq!(
        text(&ctx, &args("q", Some("src/b.js"), None))
            .await
            .unwrap(),
        "Found 1 match\n\nsrc/b.js\nLine 2: const q"
    );
}

#[tokio::test]
async fn respects_ignore_and_hidden_and_previews_lines() {
    let long = format!("hit {}", "é".repeat(1500));
    let (_dir, ctx) = setup(&[
        (".git/HEAD", b"ref\n"),
        (".gitignore", b"ignored.txt\n"),
        ("ignored.txt", b"hit\n"),
        (".hidden.txt", b"hit\n"),
        ("bad.txt", b"hit \xff\xfe\n"),
        ("long.txt", long.as_bytes()),
        ("bin.dat", b"hit\0\n"),
    ]);
    let out = run(&args("hit", None, None), &ctx, CancellationToken::new())
        .await
        .unwrap();
    let paths: Vec<&str> = out.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, vec!["bad.txt", "long.txt"]);
    assert_eq!(out.files[0].matches[0].line, "(line is not valid UTF-8)");
    let expected = format!("hit {} (line truncated)", "é".repeat(998));
    assert_eq!(out.files[1].matches[0].line, expected);
}

#[tokio::test]
async fn argument_and_pattern_errors() {
    let (_dir, ctx) = setup(&[("a.txt", b"a\n")]);
    let t = CancellationToken::new;
    let msg = |r: Result<GrepOutput, FsError>| r.unwrap_err().message;
    assert_eq!(
        msg(run(&args("", None, None), &ctx, t()).await),
        "pattern must be a non-empty string"
    );
    assert_eq!(
        msg(run(&args("a", None, Some(" ")), &ctx, t()).await),
        "include must be a non-empty glob when given"
    );
    assert_eq!(
        msg(run(&args("a", None, Some("!*.ts")), &ctx, t()).await),
        "include must be a positive glob filter; negated patterns (\"!…\") are not supported"
    );
    assert_eq!(
        msg(run(&args("a", None, Some("*.ts,*.js")), &ctx, t()).await),
        "include must be one glob, not a comma-separated list (use {a,b} alternation instead)"
    );
    assert!(
        run(&args("a", None, Some("*.{ts,js}")), &ctx, t())
            .await
            .is_ok()
    );
    let err = run(&args("(", None, None), &ctx, t()).await.unwrap_err();
    assert_eq!(err.code.as_deref(), Some("SEARCH_INVALID_PATTERN"));
    assert!(
        err.message
            .starts_with("grep pattern rejected by ripgrep: regex parse error"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn capped_result_spills_full_list() {
    let body: String = (1..=6).map(|n| format!("match {n}\n")).collect();
    let (_dir, mut ctx) = setup(&[("a.txt", body.as_bytes()), ("b.txt", b"match b\n")]);
    ctx.limits.grep_max_matches = 3;
    let a = args("match", None, None);
    assert_eq!(
        text(&ctx, &a).await.unwrap(),
        "Found 3 of 7 matches\n\na.txt\nLine 1: match 1\nLine 2: match 2\nLine 3: match 3\n\n(The complete result could not be saved; narrow pattern, path, or include to see more.)"
    );
    let spill = tempfile::tempdir().unwrap();
    ctx.spill = crate::spill::SpillConfig::new(SpillStore::new(spill.path()), "sess");
    let out = run(&a, &ctx, CancellationToken::new()).await.unwrap();
    let got = dsh_protocol::text_of(&spill_content(&a, &out, &ctx).unwrap());
    let locator = got
        .split("stored at: ")
        .nth(1)
        .unwrap()
        .split(". Use read")
        .next()
        .unwrap()
        .to_owned();
    assert!(locator.ends_with("-grep-results.txt"));
    assert_eq!(
        got,
        format!(
            "Found 3 of 7 matches\n\na.txt\nLine 1: match 1\nLine 2: match 2\nLine 3: match 3\n\n(Full grep result stored at: {locator}. Use read with offset/limit, or grep this path to search within it.)"
        )
    );
    let mut nested = ctx.clone();
    nested.nested = true;
    assert_eq!(spill_content(&a, &out, &nested), None);
    assert_eq!(
        std::fs::read_to_string(&locator).unwrap(),
        "Found 7 matches\n\na.txt\nLine 1: match 1\nLine 2: match 2\nLine 3: match 3\nLine 4: match 4\nLine 5: match 5\nLine 6: match 6\n\nb.txt\nLine 1: match b"
    );
    assert_eq!(
        presentation_meta_with(&GrepConfig { max_matches: 3 }, &out, 65_536),
        serde_json::json!({"shape":"matches","files":[{"path":"a.txt","matches":[{"lineNumber":1,"line":"match 1"},{"lineNumber":2,"line":"match 2"},{"lineNumber":3,"line":"match 3"}]}],"truncated":true,"total":7})
    );
}

#[test]
fn cards() {
    assert_eq!(
        serde_json::to_value(present_call(&args("foo", Some("src"), Some("*.ts")))).unwrap(),
        serde_json::json!({"card":"generic","title":"Grep foo in src (*.ts)","kind":"search","rawInput":"foo"})
    );
    let meta = serde_json::json!({"shape":"matches","files":[{"path":"a","matches":[{"lineNumber":1,"line":"x"}]}],"truncated":false,"total":1});
    let view = present_result(
        &args("x", None, None),
        ResultInput {
            content: &[],
            is_error: false,
            meta: Some(&meta),
        },
    )
    .unwrap();
    assert_eq!(
        serde_json::to_value(view).unwrap(),
        serde_json::json!({"card":"search","shape":"matches","files":[{"path":"a","matches":[{"lineNumber":1,"line":"x"}]}],"truncated":false,"total":1})
    );
}

#[tokio::test]
async fn an_unreadable_folder_is_skipped_and_named_not_fatal() {
    let (dir, ctx) = setup(&[("a.txt", b"needle one\n"), ("z/b.txt", b"needle two\n")]);
    let unreadable = crate::search::fixtures::unreadable_tree(dir.path());
    let out = run(&args("needle", None, None), &ctx, CancellationToken::new())
        .await
        .unwrap();
    let paths: Vec<&str> = out.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["a.txt", "z/b.txt"]);
    assert_eq!(out.skipped.len(), 1, "{:?}", out.skipped);
    assert!(
        out.skipped[0].starts_with(&format!("{unreadable}: ")),
        "{:?}",
        out.skipped
    );
    let shown = text(&ctx, &args("needle", None, None)).await.unwrap();
    assert!(
        shown.starts_with("Found 2 matches\n\na.txt\nLine 1: needle one\n\nz/b.txt\nLine 1: needle two\n\n(Skipped 1 unreadable path: deep/"),
        "{shown}"
    );
}

#[tokio::test]
async fn the_parallel_walk_reports_files_in_path_order_every_time() {
    let names: Vec<String> = (0..300)
        .map(|i| format!("d{}/s{}/f{i:03}.txt", i % 7, i % 3))
        .collect();
    let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b"hit\n"[..])).collect();
    let (_dir, ctx) = setup(&files);
    let mut expected = names.clone();
    expected.sort_by(|a, b| std::path::Path::new(a).cmp(std::path::Path::new(b)));
    for _ in 0..5 {
        let out = run(&args("hit", None, None), &ctx, CancellationToken::new())
            .await
            .unwrap();
        let paths: Vec<&str> = out.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, expected);
        assert!(out.skipped.is_empty());
    }
}
