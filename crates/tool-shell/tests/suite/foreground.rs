//! Foreground `bash` against real processes.

use std::time::Duration;
use std::time::Instant;

use dsh_tool_shell::BashArgs;
use dsh_tool_shell::BashOutput;
use dsh_tool_shell::ShellContext;
use dsh_tool_shell::bash;
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

use super::support::all_dead;
use super::support::context;
use super::support::read_pids;

async fn text_of(ctx: &ShellContext, args: BashArgs) -> String {
    bash::render_text(
        &bash::run(args, ctx, CancellationToken::new())
            .await
            .unwrap(),
    )
}

fn with_timeout(command: &str, ms: f64) -> BashArgs {
    let mut args = BashArgs::new(command, "Run a test command");
    args.timeout_ms = Some(ms);
    args
}

#[tokio::test]
async fn exit_codes_streams_and_silence() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    assert_eq!(
        text_of(&ctx, BashArgs::new("true", "Do nothing")).await,
        "(no output)"
    );
    assert_eq!(
        text_of(
            &ctx,
            BashArgs::new("echo out; echo err >&2", "Both streams")
        )
        .await,
        "out\n[stderr]\nerr\n"
    );
    assert_eq!(
        text_of(&ctx, BashArgs::new("echo failing; exit 3", "Fail")).await,
        "failing\n[exit code: 3]"
    );
    assert_eq!(
        text_of(&ctx, BashArgs::new("printf x; exit 1", "Fail")).await,
        "x\n[exit code: 1]"
    );
    assert_eq!(
        text_of(&ctx, BashArgs::new("kill -TERM $$", "Die")).await,
        "(no output)\n[killed by signal: SIGTERM]"
    );
    let out = bash::run(
        BashArgs::new("exit 7", "Fail"),
        &ctx,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let BashOutput::Foreground {
        exit_code,
        signal,
        timed_out,
        ..
    } = out
    else {
        panic!()
    };
    assert_eq!((exit_code, signal, timed_out), (Some(7), None, false));
}

#[tokio::test]
async fn timeout_terminates_then_reports() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let started = Instant::now();
    assert_eq!(
        text_of(&ctx, with_timeout("sleep 30", 100.0)).await,
        "(no output)\n[timed out after 100ms]\n[killed by signal: SIGTERM]"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    // A command that traps SIGTERM and exits 0 still shows the timeout marker.
    assert_eq!(
        text_of(
            &ctx,
            with_timeout("trap 'exit 0' TERM; sleep 30 & wait", 200.0)
        )
        .await,
        "(no output)\n[timed out after 200ms]"
    );
}

#[tokio::test]
async fn timeout_escalates_to_sigkill_after_grace() {
    let dir = tempfile::tempdir().unwrap();
    let mut ctx = context(dir.path());
    ctx.config.grace_ms = 200;
    assert_eq!(
        text_of(
            &ctx,
            with_timeout("trap '' TERM; sleep 30; echo never", 100.0)
        )
        .await,
        "(no output)\n[timed out after 100ms]\n[killed by signal: SIGKILL]"
    );
}

#[tokio::test]
async fn timeout_is_clamped_to_the_maximum() {
    let dir = tempfile::tempdir().unwrap();
    let mut ctx = context(dir.path());
    ctx.config.max_timeout_ms = 150;
    assert_eq!(
        text_of(&ctx, with_timeout("sleep 30", 60_000.0)).await,
        "(no output)\n[timed out after 150ms]\n[killed by signal: SIGTERM]"
    );
}

#[tokio::test]
async fn cancel_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let pid_file = dir.path().join("pids");
    let command = format!(
        "sleep 1000 & echo $! >> {f}; sleep 1000 & echo $! >> {f}; echo $$ >> {f}; wait",
        f = pid_file.display()
    );
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        let ctx = ctx.clone();
        async move { bash::run(BashArgs::new(command, "Sleep twice"), &ctx, cancel).await }
    });
    let pids = read_pids(&pid_file, 3).await;
    assert!(pids.iter().all(|p| super::support::alive(*p)));
    cancel.cancel();
    let err = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(err.message, "tool call aborted");
    assert_eq!(err.code.as_deref(), Some("ABORTED"));
    assert_eq!(err.name.as_deref(), Some("AbortError"));
    assert!(
        all_dead(&pids).await,
        "a process of the group survived cancellation: {pids:?}"
    );
}

#[tokio::test]
async fn dropping_the_call_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let pid_file = dir.path().join("pids");
    let command = format!(
        "sleep 1000 & echo $! >> {f}; echo $$ >> {f}; wait",
        f = pid_file.display()
    );
    let task = tokio::spawn(async move {
        bash::run(
            BashArgs::new(command, "Sleep"),
            &ctx,
            CancellationToken::new(),
        )
        .await
    });
    let pids = read_pids(&pid_file, 2).await;
    task.abort();
    let _ = task.await;
    assert!(all_dead(&pids).await, "survivors after drop: {pids:?}");
}

#[tokio::test]
async fn stdin_is_at_eof() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let started = Instant::now();
    assert_eq!(
        text_of(&ctx, with_timeout("cat", 10_000.0)).await,
        "(no output)"
    );
    assert_eq!(
        text_of(&ctx, with_timeout("read x; echo \"got:$x:$?\"", 10_000.0)).await,
        "got::1\n"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn environment_and_workdir() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let mut ctx = context(dir.path());
    ctx.base_env.as_mut().unwrap().extend([
        ("MY_API_TOKEN".to_owned(), "leak".to_owned()),
        ("DSH_SESSION_ID".to_owned(), "stale".to_owned()),
        ("KEEP_ME".to_owned(), "kept".to_owned()),
    ]);
    assert_eq!(
        text_of(&ctx, BashArgs::new("echo \"$DSH_SHELL:$DSH_SESSION_ID:${MY_API_TOKEN-unset}:$KEEP_ME:$TERM:$NO_COLOR\"", "Env")).await,
        "1:sess-1:unset:kept:dumb:1\n"
    );
    let root = dir.path().to_str().unwrap();
    assert_eq!(
        text_of(&ctx, BashArgs::new("pwd", "Where")).await,
        format!("{root}\n")
    );
    let mut args = BashArgs::new("pwd", "Where");
    args.workdir = Some("sub".into());
    assert_eq!(text_of(&ctx, args).await, format!("{root}/sub\n"));
    let mut args = BashArgs::new("pwd", "Where");
    args.workdir = Some("missing".into());
    let err = bash::run(args, &ctx, CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err.message, "spawn bash ENOENT");
}

#[tokio::test]
async fn long_output_keeps_tail_and_spills_full_stream() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let out = bash::run(
        BashArgs::new("seq 1 100000; echo tail >&2", "Count"),
        &ctx,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let expected: String = (1..=100_000).map(|n| format!("{n}\n")).collect();
    let BashOutput::Foreground { stdout, stderr, .. } = &out else {
        panic!()
    };
    assert!(stdout.truncated);
    assert_eq!(stdout.text.len(), 64_000);
    assert!(expected.ends_with(&stdout.text));
    let path = stdout.spill_path.clone().unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    assert!(path.starts_with(dir.path().join(".spill").to_str().unwrap()));
    assert!(path.ends_with("-bash-stdout.txt"));
    assert!(!stderr.truncated && stderr.spill_path.is_none());
    let text = bash::render_text(&out);
    assert!(text.ends_with(&format!(
        "100000\n\n[output truncated; full output: {path}]\n[stderr]\ntail\n"
    )));
}

#[tokio::test]
async fn two_hundred_megabytes_stay_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let started = Instant::now();
    let out = bash::run(
        with_timeout("yes | head -c 200000000", 120_000.0),
        &ctx,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let BashOutput::Foreground {
        stdout,
        exit_code,
        timed_out,
        ..
    } = &out
    else {
        panic!()
    };
    assert_eq!((*exit_code, *timed_out), (Some(0), false));
    assert!(stdout.truncated);
    assert_eq!(stdout.text, "y\n".repeat(32_000));
    // Past the 64 MiB spill cap the partial file is discarded, and the result says so.
    assert_eq!(stdout.spill_path, None);
    assert!(bash::render_text(&out).ends_with(
        "y\n\n[output truncated; full output: (unavailable: the stream exceeded the 64 MiB spill limit)]"
    ));
    assert!(started.elapsed() < Duration::from_secs(60));
}

#[tokio::test]
async fn leftover_pipe_holders_do_not_hang_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let pid_file = dir.path().join("pids");
    let started = Instant::now();
    let command = format!("sleep 1000 & echo $! > {}; echo hi", pid_file.display());
    assert_eq!(
        text_of(&ctx, BashArgs::new(command, "Leave a child")).await,
        "hi\n"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let pids = read_pids(&pid_file, 1).await;
    assert!(
        all_dead(&pids).await,
        "the pipe-holding child survived: {pids:?}"
    );
}
