//! What one tool process costs to start, with a large parent heap (a long session): the
//! standard library's `fork` fallback (a bare program name with a replaced environment) copies
//! the parent's page tables on every call and makes the next writes to the heap fault; an
//! absolute program path stays on `posix_spawn` (`CLONE_VM | CLONE_VFORK`), whatever the heap.
//! Also the whole `bash` tool call: unconfined under the process guard, and confined.
//!
//! `cargo bench -p dsh-tool-shell --bench spawn`; figures in `docs/benchmarks.md`. With
//! `DSH_BENCH_NO_GUARD=1` the unconfined call runs without the process guard.
#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark starts its own processes to measure them"
)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::process::Stdio;

use criterion::Criterion;
use criterion::criterion_group;
use criterion::criterion_main;
use dsh_tool_shell::BashArgs;
use dsh_tool_shell::SandboxConfig;
use dsh_tool_shell::SandboxMode;
use dsh_tool_shell::ShellContext;
use dsh_tool_shell::bash;
use tokio_util::sync::CancellationToken;

/// The heap of a long-running dsh: touched, so that every page is mapped.
const HEAP_BYTES: usize = 512 * 1024 * 1024;

fn path() -> String {
    std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".to_owned())
}

fn spawn(c: &mut Criterion) {
    let bash_path = dsh_secrets::resolve_program("bash", Some(&path()), std::path::Path::new("/"))
        .expect("bash on PATH");
    let mut group = c.benchmark_group("spawn");
    group.sample_size(30);
    let mut heap: Vec<u8> = Vec::new();
    for (label, bytes) in [("small heap", 4096usize), ("512 MiB heap", HEAP_BYTES)] {
        heap.resize(bytes, 1);
        for page in heap.chunks_mut(4096) {
            page[0] = 2;
        }
        group.bench_function(format!("bare name, cleared env (fork), {label}"), |b| {
            b.iter(|| {
                let status = Command::new("bash")
                    .args(["-c", "true"])
                    .env_clear()
                    .env("PATH", path())
                    .stdin(Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success());
                // What the agent does next: touch its heap.
                heap[bytes / 2] ^= 1;
            });
        });
        group.bench_function(format!("absolute path (posix_spawn), {label}"), |b| {
            b.iter(|| {
                let status = Command::new(&bash_path)
                    .args(["-c", "true"])
                    .env_clear()
                    .env("PATH", path())
                    .stdin(Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success());
                heap[bytes / 2] ^= 1;
            });
        });
    }
    drop(heap);
    group.finish();

    let mut group = c.benchmark_group("bash tool call");
    group.sample_size(30);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // `DSH_BENCH_NO_GUARD=1` measures the unconfined call without the process guard.
    if std::env::var_os("DSH_BENCH_NO_GUARD").is_none() {
        dsh_tool_shell::guard::set_program(env!("CARGO_BIN_EXE_dsh-tool-guard-test"));
    }
    for mode in [SandboxMode::DangerFullAccess, SandboxMode::WorkspaceWrite] {
        let mut ctx = ShellContext::new(dir.path(), "bench");
        ctx.base_env = Some(vec![("PATH".to_owned(), path())]);
        ctx.sandbox = Some(SandboxConfig::new(mode).policy_for(dir.path()));
        group.bench_function(mode.as_str(), |b| {
            b.iter(|| {
                runtime
                    .block_on(bash::run(
                        BashArgs::new("true", "bench"),
                        &ctx,
                        CancellationToken::new(),
                    ))
                    .unwrap()
            });
        });
    }
    group.finish();
}

criterion_group!(benches, spawn);
criterion_main!(benches);
