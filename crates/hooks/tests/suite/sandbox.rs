//! §A.4: hook commands run under the calling session's sandbox, like `bash`.
#![allow(
    clippy::disallowed_methods,
    reason = "tests start dsh and their helpers directly"
)]
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use dsh_hooks::ExecRequest;
use dsh_hooks::HookExecutor;
use dsh_hooks::LocalExecutor;
use dsh_hooks::session_confiner;
use dsh_plugin::Permissions;
use dsh_plugin::SessionContext;
use dsh_session::CreateOptions;
use dsh_session::JsonlStore;
use dsh_tool_shell::SandboxConfig;
use dsh_tool_shell::SandboxMode;
use dsh_tool_shell::SandboxRunner;
use tokio_util::sync::CancellationToken;

/// Fails loudly (no silent skip) when this host cannot run bubblewrap sandboxes.
fn require_bwrap() {
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

/// A workspace outside the temp areas (a confined command gets a private `/tmp`).
fn workspace() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn executor(standing: SandboxMode) -> LocalExecutor {
    LocalExecutor::new(Arc::new(|| {
        vec![("PATH".to_owned(), std::env::var("PATH").unwrap_or_default())]
    }))
    .with_confiner(session_confiner(SandboxConfig::new(standing), None))
}

fn session(ws: &Path, mode: SandboxMode) -> Arc<SessionContext> {
    let store = JsonlStore::new(ws.join(".home"));
    let log = store
        .create(CreateOptions {
            cwd: Some(ws.to_path_buf()),
            ..CreateOptions::default()
        })
        .unwrap();
    Arc::new(SessionContext::new(
        log,
        ws.to_path_buf(),
        None,
        Permissions::for_mode(mode),
    ))
}

async fn write_hook(
    executor: &LocalExecutor,
    ws: &Path,
    session: Option<Arc<SessionContext>>,
) -> (Option<i32>, bool) {
    let target = ws.join("written-by-hook");
    let _ = std::fs::remove_file(&target);
    let out = executor
        .run(ExecRequest {
            command: "cat >/dev/null; echo hi > written-by-hook".into(),
            cwd: Some(ws.to_path_buf()),
            env: Vec::new(),
            stdin: b"{}\n".to_vec(),
            timeout_ms: 10_000.0,
            signal: CancellationToken::new(),
            session,
        })
        .await
        .unwrap();
    (out.exit_code, target.exists())
}

#[tokio::test]
async fn a_read_only_session_confines_its_hooks() {
    require_bwrap();
    let ws = workspace();
    // The session's live mode wins over the standing one.
    let executor = executor(SandboxMode::DangerFullAccess);
    let (code, written) = write_hook(
        &executor,
        ws.path(),
        Some(session(ws.path(), SandboxMode::ReadOnly)),
    )
    .await;
    assert!(
        !written,
        "a read-only session's hook wrote into the workspace"
    );
    assert_ne!(code, Some(0));
    let (code, written) = write_hook(
        &executor,
        ws.path(),
        Some(session(ws.path(), SandboxMode::WorkspaceWrite)),
    )
    .await;
    assert_eq!((code, written), (Some(0), true));
    let (code, written) = write_hook(
        &executor,
        ws.path(),
        Some(session(ws.path(), SandboxMode::DangerFullAccess)),
    )
    .await;
    assert_eq!((code, written), (Some(0), true));
}

#[tokio::test]
async fn workspace_write_confines_hooks_to_the_workspace() {
    require_bwrap();
    let ws = workspace();
    let outside = workspace();
    let target = outside.path().join("escaped");
    let out = executor(SandboxMode::DangerFullAccess)
        .run(ExecRequest {
            command: format!("echo x > '{}'", target.display()),
            cwd: Some(ws.path().to_path_buf()),
            env: Vec::new(),
            stdin: Vec::new(),
            timeout_ms: 10_000.0,
            signal: CancellationToken::new(),
            session: Some(session(ws.path(), SandboxMode::WorkspaceWrite)),
        })
        .await
        .unwrap();
    assert!(!target.exists(), "{out:?}");
    assert_ne!(out.exit_code, Some(0));
}

#[tokio::test]
async fn without_a_session_the_standing_mode_confines() {
    require_bwrap();
    let ws = workspace();
    let (code, written) = write_hook(&executor(SandboxMode::ReadOnly), ws.path(), None).await;
    assert!(!written);
    assert_ne!(code, Some(0));
    let (code, written) =
        write_hook(&executor(SandboxMode::DangerFullAccess), ws.path(), None).await;
    assert_eq!((code, written), (Some(0), true));
}

#[tokio::test]
async fn a_confined_hanging_hook_is_killed_at_its_timeout() {
    require_bwrap();
    let ws = workspace();
    let started = std::time::Instant::now();
    let out = executor(SandboxMode::ReadOnly)
        .run(ExecRequest {
            command: "sleep 30 & sleep 30; echo never".into(),
            cwd: Some(ws.path().to_path_buf()),
            env: Vec::new(),
            stdin: Vec::new(),
            timeout_ms: 300.0,
            signal: CancellationToken::new(),
            session: None,
        })
        .await
        .unwrap();
    assert_eq!(out.exit_code, None);
    assert_eq!(out.stdout, "");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}
