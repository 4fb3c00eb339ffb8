//! `grep` and `glob` over a generated tree (4,000 files in 200 folders), on the parallel walker,
//! next to ripgrep on the same tree when `rg` is on PATH (`rg --sort path` is ripgrep's
//! single-threaded ordered walk; plain `rg` its parallel one). Compare ratios within one run.
//! `cargo bench -p dsh-tool-fs --bench search`.
#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark starts its own processes to measure them"
)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::path::Path;
use std::process::Command;

use criterion::Criterion;
use criterion::criterion_group;
use criterion::criterion_main;
use dsh_tool_fs::FilePolicy;
use dsh_tool_fs::FsContext;
use dsh_tool_fs::glob::GlobArgs;
use dsh_tool_fs::grep::GrepArgs;
use tokio_util::sync::CancellationToken;

const FOLDERS: usize = 200;
const FILES_PER_FOLDER: usize = 20;

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for folder in 0..FOLDERS {
        let sub = dir.path().join(format!("pkg{folder:03}/src"));
        std::fs::create_dir_all(&sub).unwrap();
        for file in 0..FILES_PER_FOLDER {
            let mut text = String::new();
            for line in 0..120 {
                text.push_str(&format!(
                    "let value_{line} = compute({folder}, {file}, {line});\n"
                ));
                if line % 40 == 7 {
                    text.push_str("// NEEDLE: a rare marker\n");
                }
            }
            std::fs::write(sub.join(format!("mod{file:02}.rs")), text).unwrap();
        }
    }
    dir
}

fn has_rg() -> bool {
    Command::new("rg")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn rg(root: &Path, args: &[&str]) {
    let out = Command::new("rg")
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    black_box(out.stdout.len());
}

fn search(c: &mut Criterion) {
    let dir = tree();
    let ctx = FsContext::new(dir.path(), FilePolicy::danger_full_access(dir.path()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("search_4000_files");
    group.sample_size(10);
    let grep_args = GrepArgs {
        pattern: "NEEDLE".into(),
        path: None,
        include: None,
    };
    group.bench_function("grep", |b| {
        b.iter(|| {
            let out = runtime
                .block_on(dsh_tool_fs::grep::run(
                    &grep_args,
                    &ctx,
                    CancellationToken::new(),
                ))
                .unwrap();
            assert_eq!(out.total as usize, FOLDERS * FILES_PER_FOLDER * 3);
            black_box(out)
        })
    });
    let glob_args = GlobArgs {
        pattern: "**/*.rs".into(),
        path: None,
    };
    group.bench_function("glob", |b| {
        b.iter(|| {
            let out = runtime
                .block_on(dsh_tool_fs::glob::run(
                    &glob_args,
                    &ctx,
                    CancellationToken::new(),
                ))
                .unwrap();
            assert_eq!(out.paths.len(), FOLDERS * FILES_PER_FOLDER);
            black_box(out)
        })
    });
    if has_rg() {
        group.bench_function("rg_sorted", |b| {
            b.iter(|| rg(dir.path(), &["-n", "--sort", "path", "NEEDLE"]))
        });
        group.bench_function("rg_parallel", |b| {
            b.iter(|| rg(dir.path(), &["-n", "NEEDLE"]))
        });
        group.bench_function("rg_files_sorted", |b| {
            b.iter(|| rg(dir.path(), &["--files", "--sort", "modified", "-g", "*.rs"]))
        });
    } else {
        eprintln!("rg is not on PATH: the ripgrep comparison is skipped");
    }
    group.finish();
}

criterion_group!(benches, search);
criterion_main!(benches);
