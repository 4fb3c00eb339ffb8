use super::*;
use crate::policy::FilePolicy;
use crate::spill::SpillStore;
use pretty_assertions::assert_eq;
use std::time::Duration;

fn make(dir: &std::path::Path, files: &[&str]) {
    for (index, name) in files.iter().enumerate() {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "fixture\n").unwrap();
        let when = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + index as u64);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }
}

fn ctx(dir: &std::path::Path, max: usize, sampling: bool) -> FsContext {
    let mut ctx = FsContext::new(dir, FilePolicy::danger_full_access(dir));
    ctx.limits.glob_max_results = max;
    ctx.limits.sample_over_cap_glob_results = sampling;
    ctx
}

fn args(pattern: &str, path: Option<&str>) -> GlobArgs {
    GlobArgs {
        pattern: pattern.into(),
        path: path.map(str::to_owned),
    }
}

/// What the pipeline would produce: render with the context's config, then the direct-call spill.
async fn text(ctx: &FsContext, a: &GlobArgs) -> String {
    let out = run(a, ctx, CancellationToken::new()).await.unwrap();
    let content = spill_content(a, &out, ctx)
        .unwrap_or_else(|| render_with(&GlobConfig::from_limits(&ctx.limits), a, &out, None));
    dsh_protocol::text_of(&content)
}

const TREE: [&str; 8] = [
    "tree/archive/a.ts",
    "tree/archive/b.ts",
    "tree/archive/c.ts",
    "tree/docs/guide.md",
    "tree/src/index.ts",
    "tree/test/spec.ts",
    "tree/top.txt",
    "tree/notes.md",
];

#[tokio::test]
async fn sampling_matches_the_spec_example() {
    let dir = tempfile::tempdir().unwrap();
    make(dir.path(), &TREE);
    let c = ctx(dir.path(), 4, true);
    let a = args("*", Some("tree"));
    let out = run(&a, &c, CancellationToken::new()).await.unwrap();
    assert_eq!(out.root, "tree");
    assert_eq!(out.paths, TREE.to_vec());
    let config = GlobConfig {
        max_results: 4,
        sampling: true,
    };
    assert_eq!(
        dsh_protocol::text_of(&render_with(&config, &a, &out, None)),
        "tree/archive/a.ts\ntree/docs/guide.md\ntree/src/index.ts\ntree/test/spec.ts\n\n(Showing 4 of 8 paths, sampled across 4 of the 6 top-level entries this pattern matched instead of taken in modification-time order. Narrow path to inspect a specific subtree. The complete result could not be saved; narrow pattern or path to see more.)"
    );
    assert_eq!(
        presentation_meta_with(&config, &out, 65_536),
        serde_json::json!({"shape":"paths","paths":["tree/archive/a.ts","tree/docs/guide.md","tree/src/index.ts","tree/test/spec.ts"],"truncated":true,"total":8})
    );
    // Round-robin takes a second file of an entry once every entry had its turn; printed grouped.
    let c = ctx(dir.path(), 7, true);
    assert_eq!(
        text(&c, &a).await,
        "tree/archive/a.ts\ntree/archive/b.ts\ntree/docs/guide.md\ntree/src/index.ts\ntree/test/spec.ts\ntree/top.txt\ntree/notes.md\n\n(Showing 7 of 8 paths, sampled across 6 of the 6 top-level entries this pattern matched instead of taken in modification-time order. The complete result could not be saved; narrow pattern or path to see more.)"
    );
}

#[tokio::test]
async fn head_without_sampling_and_fitting_results() {
    let dir = tempfile::tempdir().unwrap();
    make(dir.path(), &TREE);
    let c = ctx(dir.path(), 2, false);
    assert_eq!(
        text(&c, &args("*.ts", None)).await,
        "tree/archive/a.ts\ntree/archive/b.ts\n\n(Showing 2 of 5 paths. The complete result could not be saved; narrow pattern or path to see more.)"
    );
    let c = ctx(dir.path(), 100, true);
    assert_eq!(
        text(&c, &args("*.md", Some("tree"))).await,
        "tree/docs/guide.md\ntree/notes.md"
    );
    assert_eq!(
        text(&c, &args("tree/docs/*", None)).await,
        "tree/docs/guide.md"
    );
    assert_eq!(text(&c, &args("*.nope", None)).await, "No files found");
    let abs = dir.path().join("tree/docs").display().to_string();
    assert_eq!(text(&c, &args("*", Some(&abs))).await, "tree/docs/guide.md");
}

#[tokio::test]
async fn hidden_and_ignored_included_vcs_excluded() {
    let dir = tempfile::tempdir().unwrap();
    make(
        dir.path(),
        &[
            ".git/config",
            ".hidden/x.txt",
            "ignored.txt",
            ".gitignore",
            "sub/.hg/store",
        ],
    );
    std::fs::write(dir.path().join(".gitignore"), "ignored.txt\n").unwrap();
    let c = ctx(dir.path(), 100, true);
    let out = run(&args("*", None), &c, CancellationToken::new())
        .await
        .unwrap();
    let mut paths = out.paths.clone();
    paths.sort();
    assert_eq!(paths, vec![".gitignore", ".hidden/x.txt", "ignored.txt"]);
}

#[tokio::test]
async fn over_cap_spills_full_list() {
    let dir = tempfile::tempdir().unwrap();
    make(dir.path(), &TREE);
    let spill = tempfile::tempdir().unwrap();
    let mut c = ctx(dir.path(), 4, false);
    c.spill = crate::spill::SpillConfig::new(SpillStore::new(spill.path()), "s");
    let got = text(&c, &args("*", Some("tree"))).await;
    let (_, footer) = got.split_once("\n\n").unwrap();
    let locator = footer
        .strip_prefix("(Showing 4 of 8 paths. Full sorted result stored at: ")
        .unwrap();
    let locator = locator
        .strip_suffix(". Use read with offset/limit, or grep this path to search within it.)")
        .unwrap();
    assert!(locator.ends_with("-glob-results.txt"));
    assert_eq!(std::fs::read_to_string(locator).unwrap(), TREE.join("\n"));
    // Nested (run_code) calls never spill.
    c.nested = true;
    assert!(
        text(&c, &args("*", Some("tree"))).await.ends_with(
            "The complete result could not be saved; narrow pattern or path to see more.)"
        )
    );
}

#[tokio::test]
async fn errors() {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path(), 100, true);
    let t = CancellationToken::new;
    assert_eq!(
        run(&args(" ", None), &c, t()).await.unwrap_err().message,
        "pattern must be a non-empty string"
    );
    assert_eq!(
        run(&args("*", Some("")), &c, t())
            .await
            .unwrap_err()
            .message,
        "path must be a non-empty string when given"
    );
    let err = run(&args("[", None), &c, t()).await.unwrap_err();
    assert_eq!(err.code.as_deref(), Some("SEARCH_INVALID_PATTERN"));
    assert!(
        err.message
            .starts_with("glob pattern rejected by ripgrep: error parsing glob"),
        "{}",
        err.message
    );
    let err = run(&args("*", Some("nope")), &c, t()).await.unwrap_err();
    assert_eq!(err.code.as_deref(), Some("SEARCH_FAILED"));
    let cancel = CancellationToken::new();
    cancel.cancel();
    let err = run(&args("*", None), &c, cancel).await.unwrap_err();
    assert_eq!(
        err.message,
        "glob was aborted before completion (tool timeout or caller cancellation)"
    );
}

#[test]
fn cards_and_description() {
    assert_eq!(
        serde_json::to_value(present_call(&args("*.ts", Some("src")))).unwrap(),
        serde_json::json!({"card":"generic","title":"Glob *.ts in src","kind":"search","rawInput":"*.ts"})
    );
    let meta = serde_json::json!({"shape":"paths","paths":["a"],"truncated":false,"total":1});
    let view = present_result(
        &args("*", None),
        ResultInput {
            content: &[],
            is_error: false,
            meta: Some(&meta),
        },
    )
    .unwrap();
    assert_eq!(
        serde_json::to_value(view).unwrap(),
        serde_json::json!({"card":"search","shape":"paths","paths":["a"],"truncated":false,"total":1})
    );
    let sampled = description(4, true);
    for fact in [
        "never directories",
        "hidden and ignored",
        ".git",
        "oldest first",
        "At most 4 paths",
        "sampled across the top-level entries",
        "complete sorted list",
    ] {
        assert!(sampled.contains(fact), "{fact}");
    }
    let head = description(4, false);
    assert!(head.contains("the 4 oldest"));
    assert!(!head.contains("sampled"));
}

#[test]
fn meta_is_byte_bounded() {
    let out = GlobOutput {
        root: ".".into(),
        paths: (0..50).map(|n| format!("{n:0>100}")).collect(),
        skipped: Vec::new(),
    };
    let meta = presentation_meta_with(&GlobConfig::default(), &out, 1000);
    assert!(serde_json::to_string(&meta).unwrap().len() <= 1000);
    assert_eq!(meta["truncated"], true);
    assert_eq!(meta["total"], 50);
}

#[test]
fn top_level_entries_from_display_paths() {
    assert_eq!(top_level("tree", "tree/archive/a.ts"), "archive");
    assert_eq!(top_level("tree", "tree/top.txt"), "top.txt");
    assert_eq!(top_level(".", "src/a.ts"), "src");
    assert_eq!(top_level(".", "./src/a.ts"), "src");
    assert_eq!(top_level("/abs/x", "/abs/x/y/z"), "y");
}

#[tokio::test]
async fn an_unreadable_folder_is_skipped_and_named_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    make(dir.path(), &["b.txt", "a.txt"]);
    let unreadable = crate::search::fixtures::unreadable_tree(dir.path());
    let ctx = ctx(dir.path(), 100, true);
    let out = run(&args("**/*.txt", None), &ctx, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.paths, ["b.txt", "a.txt"]);
    assert_eq!(out.skipped.len(), 1, "{:?}", out.skipped);
    assert!(out.skipped[0].starts_with(&format!("{unreadable}: ")));
    let shown = text(&ctx, &args("**/*.txt", None)).await;
    assert!(
        shown.starts_with("b.txt\na.txt\n\n(Skipped 1 unreadable path: deep/ddd"),
        "{shown}"
    );
}

#[tokio::test]
async fn equal_modification_times_keep_the_path_order_of_the_parallel_walk() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..200)
        .map(|i| format!("p{}/q{}/f{i:03}.rs", i % 5, i % 4))
        .collect();
    let when = SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000);
    for name in &names {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "x").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }
    let mut expected = names.clone();
    expected.sort_by(|a, b| std::path::Path::new(a).cmp(std::path::Path::new(b)));
    let ctx = ctx(dir.path(), 1_000, false);
    for _ in 0..5 {
        let out = run(&args("*.rs", None), &ctx, CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(out.paths, expected);
    }
}
