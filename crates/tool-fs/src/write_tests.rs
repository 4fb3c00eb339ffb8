use super::*;
use crate::policy::FilePolicy;
use crate::policy::SandboxMode;
use crate::read;
use pretty_assertions::assert_eq;

fn ctx_for(dir: &std::path::Path, mode: SandboxMode) -> FsContext {
    let mut policy = FilePolicy::new(mode, dir);
    policy.temp_roots.clear();
    FsContext::new(dir, policy)
}

fn args(path: &str, content: &str) -> WriteArgs {
    WriteArgs {
        file_path: path.into(),
        content: content.into(),
        sandbox_permissions: None,
        justification: None,
    }
}

fn process_umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Umask:")).unwrap();
    u32::from_str_radix(line["Umask:".len()..].trim(), 8).unwrap()
}

async fn read_file(ctx: &FsContext, path: &str) {
    let a = read::ReadArgs {
        file_path: path.into(),
        offset: None,
        limit: None,
    };
    read::run(&a, ctx, CancellationToken::new()).await.unwrap();
}

#[tokio::test]
async fn create_then_update_after_read() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx_for(dir.path(), SandboxMode::WorkspaceWrite);
    let a = args("sub/notes.txt", "hello world");
    let out = run(&a, &ctx, CancellationToken::new()).await.unwrap();
    let p = dir.path().join("sub/notes.txt");
    assert_eq!(
        dsh_protocol::text_of(&render(&a, &out)),
        format!(
            "<path>{}</path>\n<type>file</type>\n<content>\nCreated file\n</content>",
            p.display()
        )
    );
    assert_eq!(
        presentation_meta(&a, &out),
        serde_json::json!({"diffs": []})
    );
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "hello world");
    // Created as an editor would: 0666 less the process's umask, not 0600.
    assert_eq!(
        std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o666 & !process_umask()
    );

    // Our own write counts as observed: an immediate overwrite is allowed.
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    read_file(&ctx, "sub/notes.txt").await;
    let a = args("sub/notes.txt", "beta\r\n");
    let out = run(&a, &ctx, CancellationToken::new()).await.unwrap();
    assert_eq!(out.operation, WriteOperation::Update);
    assert_eq!(out.before.as_deref(), Some("hello world"));
    assert_eq!(out.after, "beta\n");
    assert!(dsh_protocol::text_of(&render(&a, &out)).contains("\nUpdated file\n"));
    assert_eq!(
        std::fs::read(&p).unwrap(),
        b"beta\r\n",
        "content is written verbatim"
    );
    assert_eq!(
        std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o644,
        "existing mode kept"
    );
    assert_eq!(
        presentation_meta(&a, &out),
        serde_json::json!({"diffs": [{"path": "sub/notes.txt", "oldText": "hello world", "newText": "beta"}]})
    );
}

#[tokio::test]
async fn unread_overwrite_is_refused_and_stale_detected() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let ctx = ctx_for(dir.path(), SandboxMode::WorkspaceWrite);
    let p = dir.path().join("a.txt").display().to_string();
    let err = run(&args("a.txt", "x"), &ctx, CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        FsError::coded(
            "FS_NOT_OBSERVED",
            format!(
                "cannot overwrite existing \"{p}\" without reading it first — read the file, then retry"
            )
        )
    );
    read_file(&ctx, "a.txt").await;
    std::fs::write(dir.path().join("a.txt"), "changed outside\n").unwrap();
    let err = run(&args("a.txt", "x"), &ctx, CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        format!(
            "cannot write \"{p}\": file changed since it was read — re-read the file, then retry"
        )
    );
    assert_eq!(err.code.as_deref(), Some("FS_STALE_VERSION"));
    read_file(&ctx, "a.txt").await;
    std::fs::remove_file(dir.path().join("a.txt")).unwrap();
    let err = run(&args("a.txt", "x"), &ctx, CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        format!("cannot write \"{p}\": file no longer exists — re-read the file, then retry")
    );
    // A failed read records absence: the next write is a plain create.
    let read_args = read::ReadArgs {
        file_path: "a.txt".into(),
        offset: None,
        limit: None,
    };
    assert!(
        read::run(&read_args, &ctx, CancellationToken::new())
            .await
            .is_err()
    );
    let out = run(&args("a.txt", "again"), &ctx, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.operation, WriteOperation::Create);
}

#[tokio::test]
async fn writes_through_symlink_land_on_target() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("target.txt"), "old\n").unwrap();
    std::os::unix::fs::symlink("target.txt", dir.path().join("link.txt")).unwrap();
    let ctx = ctx_for(dir.path(), SandboxMode::WorkspaceWrite);
    read_file(&ctx, "target.txt").await;
    let out = run(&args("link.txt", "new\n"), &ctx, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.path, dir.path().join("link.txt").display().to_string());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("target.txt")).unwrap(),
        "new\n"
    );
    assert!(
        std::fs::symlink_metadata(dir.path().join("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[tokio::test]
async fn sandbox_denials() {
    let outer = tempfile::tempdir().unwrap();
    let ws = outer.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::os::unix::fs::symlink(outer.path(), ws.join("escape")).unwrap();
    let ctx = ctx_for(&ws, SandboxMode::WorkspaceWrite);
    let denied = "[sandbox: file access denied under workspace-write mode]\n[sandbox: escalation available — retry this exact operation once with sandbox_permissions (the narrowest wider mode that suffices) + justification; the approval prompt asks the user]";
    for path in [
        "../outside.txt",
        "escape/outside.txt",
        "sub/../../outside.txt",
    ] {
        let err = run(&args(path, "x"), &ctx, CancellationToken::new())
            .await
            .unwrap_err();
        assert_eq!(err, FsError::coded("FS_SANDBOX_DENIED", denied), "{path}");
    }
    assert!(!outer.path().join("outside.txt").exists());
    let absolute = outer.path().join("abs.txt").display().to_string();
    assert!(
        run(&args(&absolute, "x"), &ctx, CancellationToken::new())
            .await
            .is_err()
    );
    // `..` that stays inside the root is fine.
    run(
        &args("sub/../inside.txt", "x"),
        &ctx,
        CancellationToken::new(),
    )
    .await
    .unwrap();

    let ro = ctx_for(&ws, SandboxMode::ReadOnly);
    let err = run(&args("new.txt", "x"), &ro, CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        err.message
            .starts_with("[sandbox: file access denied under read-only mode]\n"),
        "{}",
        err.message
    );
    let full = ctx_for(&ws, SandboxMode::DangerFullAccess);
    run(
        &args("../outside.txt", "x"),
        &full,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert!(outer.path().join("outside.txt").exists());
}

struct Answer(
    crate::policy::ApprovalOutcome,
    std::sync::Mutex<Vec<String>>,
);

impl crate::context::EscalationApprover for Answer {
    fn approve<'a>(
        &'a self,
        tool: &'a str,
        _call: Option<&'a str>,
        reason: &'a str,
    ) -> crate::context::ApprovalFuture<'a> {
        if let Ok(mut seen) = self.1.lock() {
            seen.push(format!("{tool}: {reason}"));
        }
        let outcome = self.0;
        Box::pin(async move { Ok(outcome) })
    }
}

#[tokio::test]
async fn escalation_asks_once_and_maps_outcomes() {
    use crate::policy::ApprovalOutcome;
    use crate::policy::EscalationMode;
    let outer = tempfile::tempdir().unwrap();
    let ws = outer.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut ctx = ctx_for(&ws, SandboxMode::WorkspaceWrite);
    let escalated = |path: &str| WriteArgs {
        sandbox_permissions: Some(EscalationMode::DangerFullAccess),
        justification: Some("the user asked for it".into()),
        ..args(path, "x")
    };
    let err = run(&escalated("../o.txt"), &ctx, CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "sandbox escalation to \"danger-full-access\" requires approval, but no approval service is composed"
    );

    let rejecting = std::sync::Arc::new(Answer(ApprovalOutcome::Rejected, Default::default()));
    ctx.approver = Some(rejecting.clone());
    let err = run(&escalated("../o.txt"), &ctx, CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        FsError::plain("the user rejected escalating this operation to \"danger-full-access\"")
    );
    assert_eq!(
        rejecting.1.lock().unwrap().clone(),
        vec!["write: escalate sandbox to danger-full-access: the user asked for it".to_owned()]
    );
    assert!(!outer.path().join("o.txt").exists());

    ctx.approver = Some(std::sync::Arc::new(Answer(
        ApprovalOutcome::AllowedOnce,
        Default::default(),
    )));
    run(&escalated("../o.txt"), &ctx, CancellationToken::new())
        .await
        .unwrap();
    assert!(outer.path().join("o.txt").exists());
    // Allowed once only: the next call without escalation runs under the standing mode.
    assert!(
        run(&args("../p.txt", "x"), &ctx, CancellationToken::new())
            .await
            .is_err()
    );

    let narrow = WriteArgs {
        sandbox_permissions: Some(EscalationMode::WorkspaceWrite),
        ..escalated("x")
    };
    // The mode the call already has simply runs, asking no one (a rejecting answerer would
    // otherwise refuse it).
    let asked = std::sync::Arc::new(Answer(ApprovalOutcome::Rejected, Default::default()));
    ctx.approver = Some(asked.clone());
    run(&narrow, &ctx, CancellationToken::new()).await.unwrap();
    assert!(asked.1.lock().unwrap().is_empty());

    let half = WriteArgs {
        justification: None,
        ..escalated("x")
    };
    let err = run(&half, &ctx, CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "invalid escalation: sandbox_permissions requires a justification"
    );
    let other_half = WriteArgs {
        sandbox_permissions: None,
        ..escalated("x")
    };
    let err = run(&other_half, &ctx, CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "invalid escalation: justification is only valid together with sandbox_permissions"
    );
}

#[test]
fn cards() {
    let a = args("notes.txt", "hi");
    assert_eq!(
        serde_json::to_value(present_call(&a)).unwrap(),
        serde_json::json!({"card":"diff","title":"Write notes.txt","diffs":[{"path":"notes.txt","oldText":null,"newText":"hi"}],"locations":[{"path":"notes.txt"}]})
    );
    let meta = serde_json::json!({"diffs":[{"path":"notes.txt","oldText":"a","newText":"hi"}]});
    let view = present_result(
        &a,
        ResultInput {
            content: &[],
            is_error: false,
            meta: Some(&meta),
        },
    )
    .unwrap();
    assert_eq!(
        serde_json::to_value(view).unwrap(),
        serde_json::json!({"card":"diff","title":"Write notes.txt","diffs":[{"path":"notes.txt","oldText":"a","newText":"hi"}]})
    );
    assert_eq!(
        present_result(
            &a,
            ResultInput {
                content: &[],
                is_error: true,
                meta: None
            }
        ),
        None
    );
}
