//! The confining executor under real bubblewrap: per-mode write confinement, denial markers,
//! fail-closed runner failures, and kills that leave no survivor.
//!
//! Every confined command gets a private `/tmp`, so a workspace may live anywhere; a place
//! "outside the workspace" that the command can see (read-only) must be outside the temp
//! areas: `/var/tmp`, or Cargo's target tmp dir.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]

use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use dsh_tool_shell::BashArgs;
use dsh_tool_shell::BashOutput;
use dsh_tool_shell::SandboxConfig;
use dsh_tool_shell::SandboxMode;
use dsh_tool_shell::SandboxRunner;
use dsh_tool_shell::ShellContext;
use dsh_tool_shell::bash;
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

use super::support::alive;
use super::support::context;

pub const HINT: &str = "[sandbox: escalation available — retry this exact command once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]";

/// A directory outside `/tmp` and the OS temp dir, so that a confined command sees it.
pub fn outside_tmp() -> tempfile::TempDir {
    let tmp = std::fs::canonicalize(std::env::temp_dir()).unwrap();
    let visible = |dir: &Path| {
        std::fs::canonicalize(dir)
            .is_ok_and(|real| !real.starts_with("/tmp") && !real.starts_with(&tmp))
    };
    for base in [
        Path::new("/var/tmp"),
        Path::new(env!("CARGO_TARGET_TMPDIR")),
    ] {
        if visible(base)
            && let Ok(dir) = tempfile::tempdir_in(base)
        {
            return dir;
        }
    }
    panic!("no writable folder outside the temp areas (/var/tmp, the target tmp dir) on this host");
}

/// Fails loudly (no silent skip) when this host cannot run bubblewrap sandboxes.
pub fn require_bwrap() {
    let out = std::process::Command::new(SandboxRunner::bwrap().program())
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--unshare-pid",
            "true",
        ])
        .output();
    match out {
        Ok(out) if out.status.success() => {}
        other => panic!(
            "bubblewrap cannot create a sandbox on this host (apt-get install -y bubblewrap): {other:?}"
        ),
    }
}

pub fn sandboxed(dir: &Path, mode: SandboxMode) -> ShellContext {
    require_bwrap();
    let mut ctx = context(dir);
    ctx.sandbox = Some(SandboxConfig::new(mode).policy_for(dir));
    ctx
}

async fn run(ctx: &ShellContext, command: &str) -> BashOutput {
    bash::run(
        BashArgs::new(command, "Run a sandboxed command"),
        ctx,
        CancellationToken::new(),
    )
    .await
    .unwrap()
}

async fn text(ctx: &ShellContext, command: &str) -> String {
    bash::render_text(&run(ctx, command).await)
}

fn real(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap()
}

#[tokio::test]
async fn workspace_write_denies_outside_with_marker_and_hint() {
    let ws = outside_tmp();
    let elsewhere = outside_tmp();
    let ctx = sandboxed(ws.path(), SandboxMode::WorkspaceWrite);
    let target = real(elsewhere.path()).join("f.txt");
    let out = run(&ctx, &format!("echo x > {}", target.display())).await;
    let BashOutput::Foreground { sandbox, .. } = &out else {
        panic!("foreground expected")
    };
    let report = sandbox.clone().unwrap();
    assert_eq!(
        (report.mode, report.denied, report.enforcement.as_deref()),
        (SandboxMode::WorkspaceWrite, true, Some("bwrap"))
    );
    assert_eq!(
        bash::render_text(&out),
        format!(
            "[stderr]\nbash: line 1: {}: Read-only file system\n[sandbox: file access denied under workspace-write mode]\n{HINT}\n[exit code: 1]",
            target.display()
        )
    );
    assert!(!target.exists());
    // Without approval prompts the denial is final: no hint.
    assert!(
        !bash::render_text_with(&out, false).contains("escalation available"),
        "hint must be omitted when escalation is not advertised"
    );
}

#[tokio::test]
async fn workspace_write_allows_workspace_and_tmp() {
    let ws = outside_tmp();
    let ctx = sandboxed(ws.path(), SandboxMode::WorkspaceWrite);
    assert_eq!(
        text(&ctx, "mkdir -p sub && echo inside > sub/f && cat sub/f").await,
        "inside\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("sub/f")).unwrap(),
        "inside\n"
    );
    // `/tmp` is writable, but private to the command.
    let in_tmp = format!("/tmp/dsh-ww-{}.txt", std::process::id());
    assert_eq!(
        text(&ctx, &format!("echo temp > {in_tmp} && cat {in_tmp}")).await,
        "temp\n"
    );
    assert!(!Path::new(&in_tmp).exists());
    // Reads outside are never confined.
    assert_eq!(
        text(&ctx, "head -c 4 /etc/hostname >/dev/null && echo read").await,
        "read\n"
    );
}

#[tokio::test]
async fn read_only_denies_everything_but_dev_null() {
    let ws = outside_tmp();
    let ctx = sandboxed(ws.path(), SandboxMode::ReadOnly);
    assert_eq!(text(&ctx, "echo fine > /dev/null && echo ok").await, "ok\n");
    let out = text(&ctx, "echo x > inside.txt").await;
    assert!(
        out.ends_with(&format!(
            "Read-only file system\n[sandbox: file access denied under read-only mode]\n{HINT}\n[exit code: 1]"
        )),
        "{out}"
    );
    assert!(!ws.path().join("inside.txt").exists());
    let elsewhere = outside_tmp();
    let out = text(&ctx, &format!("touch {}/t", elsewhere.path().display())).await;
    assert!(
        out.contains("[sandbox: file access denied under read-only mode]"),
        "{out}"
    );
    assert!(!elsewhere.path().join("t").exists());
}

#[tokio::test]
async fn danger_full_access_runs_unconfined() {
    let ws = outside_tmp();
    let elsewhere = outside_tmp();
    let ctx = sandboxed(ws.path(), SandboxMode::DangerFullAccess);
    let target = elsewhere.path().join("free.txt");
    let out = run(
        &ctx,
        &format!("echo free > {} && echo $$", target.display()),
    )
    .await;
    let BashOutput::Foreground {
        sandbox, stdout, ..
    } = &out
    else {
        panic!("foreground expected")
    };
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "free\n");
    let report = sandbox.clone().unwrap();
    assert_eq!((report.denied, report.enforcement), (false, None));
    // Not in a fresh PID namespace: the shell's pid is a host pid.
    let pid: u32 = stdout.text.trim().parse().unwrap();
    assert!(pid > 2);
}

#[tokio::test]
async fn missing_runner_fails_closed() {
    let ws = outside_tmp();
    let mut ctx = context(ws.path());
    ctx.sandbox = Some(
        SandboxConfig::new(SandboxMode::WorkspaceWrite)
            .policy_for(ws.path())
            .with_runner(SandboxRunner::at("/nonexistent/bwrap")),
    );
    let err = bash::run(
        BashArgs::new("touch ran.txt", "Touch a file"),
        &ctx,
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.message,
        "sandbox mode \"workspace-write\" is requested but no sandbox backend is usable on this host; refusing to run the command unconfined. Install bubblewrap or run a Landlock-enforcing kernel (Linux), ensure sandbox-exec is usable (macOS), or ensure the ACL restricted-token runner can start (Windows) — otherwise switch the consumer to danger-full-access. Runner failure: Error: spawn /nonexistent/bwrap ENOENT"
    );
    assert_eq!(err.code.as_deref(), Some("SANDBOX_UNAVAILABLE"));
    assert_eq!(err.name.as_deref(), Some("SandboxUnavailableError"));
    assert!(!ws.path().join("ran.txt").exists());
    // danger-full-access never needs the runner.
    ctx.sandbox.as_mut().unwrap().mode = SandboxMode::DangerFullAccess;
    assert_eq!(text(&ctx, "echo unconfined").await, "unconfined\n");
}

#[tokio::test]
async fn runner_that_fails_setup_fails_closed() {
    let ws = outside_tmp();
    let mut ctx = sandboxed(ws.path(), SandboxMode::WorkspaceWrite);
    // A runner that starts but fails before the command: exits 1 after a `bwrap:` line.
    let fake = ws.path().join("fake-bwrap");
    std::fs::write(&fake, "#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let policy = ctx
        .sandbox
        .take()
        .unwrap()
        .with_runner(SandboxRunner::at(&fake));
    ctx.sandbox = Some(policy);
    let err = bash::run(
        BashArgs::new("true", "Nothing"),
        &ctx,
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code.as_deref(), Some("SANDBOX_UNAVAILABLE"));
    assert!(err.message.ends_with(
        "danger-full-access. Runner failure: bwrap: Creating new namespace failed: Operation not permitted"
    ));
}

/// Host pids of every process whose command line mentions `marker`.
pub fn pids_with(marker: &str) -> Vec<u32> {
    let mine = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != mine)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|raw| String::from_utf8_lossy(&raw).contains(marker))
                .unwrap_or(false)
        })
        .filter(|pid| alive(*pid))
        .collect()
}

pub async fn wait_for_pids(marker: &str, at_least: usize) -> Vec<u32> {
    for _ in 0..200 {
        let pids = pids_with(marker);
        if pids.len() >= at_least {
            return pids;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("processes with {marker} never appeared");
}

#[tokio::test]
async fn cancel_under_bwrap_kills_everything() {
    let ws = outside_tmp();
    let ctx = sandboxed(ws.path(), SandboxMode::WorkspaceWrite);
    let marker = format!("1000.{}", std::process::id() % 100_000 + 1);
    // A detached (setsid) grandchild too: the PID namespace takes it down with the runner.
    let command = format!("sleep {marker} & setsid sleep {marker} & sleep {marker}; wait");
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let cancel = cancel.clone();
        let ctx = ctx.clone();
        async move { bash::run(BashArgs::new(command, "Sleep"), &ctx, cancel).await }
    });
    // bwrap (outer and namespace init), bash and three sleeps all mention the marker.
    let pids = wait_for_pids(&marker, 5).await;
    cancel.cancel();
    let err = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(err.message, "tool call aborted");
    assert!(
        super::support::all_dead(&pids).await,
        "survivors after cancel: {:?}",
        pids_with(&marker)
    );
}

#[tokio::test]
async fn timeout_under_bwrap_kills_everything() {
    let ws = outside_tmp();
    let ctx = sandboxed(ws.path(), SandboxMode::ReadOnly);
    let marker = format!("2000.{}", std::process::id() % 100_000 + 1);
    let mut args = BashArgs::new(format!("sleep {marker} & sleep {marker}"), "Sleep");
    args.timeout_ms = Some(300.0);
    let started = std::time::Instant::now();
    let out = bash::run(args, &ctx, CancellationToken::new())
        .await
        .unwrap();
    let BashOutput::Foreground { timed_out, .. } = &out else {
        panic!("foreground expected")
    };
    assert!(*timed_out);
    // The group's SIGTERM ends `bwrap` itself, which tears the namespace down at once.
    assert_eq!(
        bash::render_text(&out),
        "(no output)\n[timed out after 300ms]\n[killed by signal: SIGTERM]"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        super::support::all_dead(&pids_with(&marker)).await,
        "survivors after timeout"
    );
}
