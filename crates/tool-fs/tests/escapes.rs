//! What a hostile model could reach through the file tools, each reproduced: process secrets
//! under `/proc` (the provider key is in dsh's environment), dsh's home and credential folders
//! (directly, through a symlink, through a hard link), dsh's own and git's configuration, and a
//! write redirected by a concurrent symlink swap.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::path::PathBuf;

use dsh_tool_fs::FilePolicy;
use dsh_tool_fs::FsContext;
use dsh_tool_fs::FsError;
use dsh_tool_fs::SandboxMode;
use dsh_tool_fs::glob;
use dsh_tool_fs::grep;
use dsh_tool_fs::read;
use dsh_tool_fs::write;
use tokio_util::sync::CancellationToken;

fn real(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap()
}

async fn read_text(ctx: &FsContext, path: &str) -> Result<String, FsError> {
    let args = read::ReadArgs {
        file_path: path.into(),
        offset: None,
        limit: None,
    };
    let out = read::run(&args, ctx, CancellationToken::new()).await?;
    Ok(dsh_protocol::text_of(&read::render(&args, &out)))
}

async fn grep_in(ctx: &FsContext, pattern: &str, path: &str) -> Result<u64, FsError> {
    let args = grep::GrepArgs {
        pattern: pattern.into(),
        path: Some(path.into()),
        include: None,
    };
    Ok(grep::run(&args, ctx, CancellationToken::new()).await?.total)
}

fn refused(result: Result<impl std::fmt::Debug, FsError>) -> bool {
    match result {
        Err(error) => {
            error.code.as_deref() == Some("FS_SANDBOX_DENIED")
                && error.message.contains("is refused in every mode")
        }
        Ok(_) => false,
    }
}

#[tokio::test]
async fn process_environments_and_memory_are_never_read() {
    let ws = tempfile::tempdir().unwrap();
    for mode in [SandboxMode::ReadOnly, SandboxMode::DangerFullAccess] {
        let ctx = FsContext::new(ws.path(), FilePolicy::new(mode, ws.path()));
        for path in [
            "/proc/self/environ",
            "/proc/thread-self/environ",
            "/proc/self/cmdline",
            "/proc/self/root/proc/self/environ",
            &format!("/proc/{}/environ", std::process::id()),
            "/proc/1/environ",
            "/proc/1/task/1/environ",
            "/proc/1/mem",
        ] {
            assert!(refused(read_text(&ctx, path).await), "{mode:?} read {path}");
        }
        // Search is refused too: the key is one `grep` away otherwise.
        assert!(refused(grep_in(&ctx, "PATH=", "/proc/self/environ").await));
        assert!(refused(grep_in(&ctx, "PATH=", "/proc/1/environ").await));
        assert!(refused(grep_in(&ctx, "PATH=", "/proc/self").await));
        // Harmless /proc files stay readable.
        assert!(read_text(&ctx, "/proc/version").await.is_ok());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dsh_is_refused_through_any_of_its_thread_ids() {
    // A thread of this process (standing in for one of dsh's) that lives for the whole test.
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let (told, tid) = std::sync::mpsc::channel::<String>();
    let keeper = std::thread::spawn(move || {
        let link = std::fs::read_link("/proc/thread-self").unwrap();
        told.send(link.file_name().unwrap().to_string_lossy().into_owned())
            .unwrap();
        stopped.recv()
    });
    let tids = vec![tid.recv().unwrap()];
    assert_ne!(tids[0], std::process::id().to_string());
    let pid = std::process::id();
    let ws = tempfile::tempdir().unwrap();
    for mode in [
        SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite,
        SandboxMode::DangerFullAccess,
    ] {
        let ctx = FsContext::new(ws.path(), FilePolicy::new(mode, ws.path()));
        for tid in &tids {
            for path in [
                format!("/proc/{tid}/status"),
                format!("/proc/{tid}/maps"),
                format!("/proc/{tid}/fd/0"),
                format!("/proc/{tid}/cmdline"),
                format!("/proc/{tid}/root/etc/hostname"),
                format!("/proc/{tid}/cwd"),
                format!("/proc/{pid}/task/{tid}/maps"),
                format!("/proc/{pid}/task/{tid}/status"),
                format!("/proc/1/task/{tid}/status"),
            ] {
                let result = read_text(&ctx, &path).await;
                let shown = format!("{result:?}");
                assert!(refused(result), "{mode:?} {path}: {shown}");
            }
            let listed = grep_in(&ctx, "Name", &format!("/proc/{tid}")).await;
            assert!(refused(listed), "{mode:?} grep /proc/{tid}");
        }
        // Symlinks in /proc that lead to dsh's own entry.
        for path in ["/proc/net/dev", "/proc/mounts", "/proc/self/maps"] {
            let result = read_text(&ctx, path).await;
            let shown = format!("{result:?}");
            assert!(refused(result), "{mode:?} {path}: {shown}");
        }
        // Another process's harmless files stay readable.
        assert!(read_text(&ctx, "/proc/1/status").await.is_ok());
    }
    stop.send(()).unwrap();
    keeper.join().unwrap().unwrap();
}

struct Home {
    _dir: tempfile::TempDir,
    dsh_home: PathBuf,
    user_home: PathBuf,
    spill: PathBuf,
}

fn home() -> Home {
    let dir = tempfile::tempdir().unwrap();
    let base = real(dir.path());
    let dsh_home = base.join("dsh");
    let user_home = base.join("user");
    std::fs::create_dir_all(dsh_home.join("sessions")).unwrap();
    std::fs::write(dsh_home.join("config.toml"), "key = \"sk-secret\"\n").unwrap();
    std::fs::write(dsh_home.join("sessions/other.jsonl"), "{\"seq\":0}\n").unwrap();
    let spill = dsh_home.join("sessions/s1/spill");
    std::fs::create_dir_all(&spill).unwrap();
    std::fs::write(spill.join("bash-stdout.txt"), "spilled\n").unwrap();
    std::fs::create_dir_all(user_home.join(".ssh")).unwrap();
    std::fs::write(user_home.join(".ssh/id_ed25519"), "PRIVATE KEY\n").unwrap();
    Home {
        _dir: dir,
        dsh_home,
        user_home,
        spill,
    }
}

fn guarded(ws: &Path, mode: SandboxMode, home: &Home) -> FsContext {
    let mut policy = FilePolicy::new(mode, ws)
        .with_dsh_home(&home.dsh_home)
        .allow_reading(&home.spill);
    policy.secret_roots = dsh_secrets::secret_paths(&home.user_home);
    FsContext::new(ws, policy)
}

#[tokio::test]
async fn dsh_home_and_credential_folders_are_never_read() {
    let ws = tempfile::tempdir().unwrap();
    let home = home();
    let ctx = guarded(ws.path(), SandboxMode::DangerFullAccess, &home);
    let key = home.user_home.join(".ssh/id_ed25519");
    for path in [
        home.dsh_home.join("config.toml"),
        home.dsh_home.join("sessions/other.jsonl"),
        key.clone(),
    ] {
        assert!(
            refused(read_text(&ctx, path.to_str().unwrap()).await),
            "{}",
            path.display()
        );
    }
    // The session's own spill folder is readable: results point the model at it.
    assert!(
        read_text(&ctx, home.spill.join("bash-stdout.txt").to_str().unwrap())
            .await
            .unwrap()
            .contains("spilled")
    );
    // Neither a symlink nor a hard link in the workspace opens a way in.
    std::os::unix::fs::symlink(&key, ws.path().join("link")).unwrap();
    assert!(refused(read_text(&ctx, "link").await));
    if std::fs::hard_link(&key, ws.path().join("hard")).is_ok() {
        let out = read_text(&ctx, "hard").await;
        assert!(
            matches!(&out, Err(e) if e.message.contains("hard link to a secret file")),
            "{out:?}"
        );
    }
    // Search neither enters nor lists them.
    assert_eq!(
        grep_in(&ctx, "PRIVATE", home.user_home.to_str().unwrap())
            .await
            .unwrap(),
        0
    );
    assert!(refused(
        grep_in(&ctx, "sk-secret", home.dsh_home.to_str().unwrap()).await
    ));
    let listed = glob::run(
        &glob::GlobArgs {
            pattern: "**/*".into(),
            path: Some(home.user_home.to_str().unwrap().into()),
        },
        &ctx,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert!(listed.paths.is_empty(), "{:?}", listed.paths);
}

async fn write_to(ctx: &FsContext, path: &str) -> Result<(), FsError> {
    let args = write::WriteArgs {
        file_path: path.into(),
        content: "[plugins.sandbox]\nmode = \"danger-full-access\"\n".into(),
        sandbox_permissions: None,
        justification: None,
    };
    write::run(&args, ctx, CancellationToken::new())
        .await
        .map(drop)
}

#[tokio::test]
async fn writes_never_touch_dsh_or_git_configuration_short_of_full_access() {
    let ws = tempfile::tempdir().unwrap();
    let root = real(ws.path());
    std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
    let home = home();
    let ww = guarded(&root, SandboxMode::WorkspaceWrite, &home);
    let targets = [
        root.join(".dsh/config.toml"),
        root.join("sub/.dsh/config.toml"),
        root.join(".git/hooks/pre-commit"),
        root.join(".git/config"),
        home.dsh_home.join("config.toml"),
    ];
    // The dsh home under a temp folder would otherwise be writable under workspace-write.
    let mut wide = ww.clone();
    wide.policy.temp_roots = vec![home.dsh_home.parent().unwrap().to_path_buf()];
    for target in &targets {
        for ctx in [&ww, &wide] {
            let out = write_to(ctx, target.to_str().unwrap()).await;
            assert!(
                matches!(&out, Err(e) if e.message.starts_with("[sandbox: file access denied under workspace-write mode]")),
                "{}: {out:?}",
                target.display()
            );
        }
        assert!(
            !std::fs::read_to_string(target)
                .unwrap_or_default()
                .contains("danger")
        );
    }
    // A symlink does not hide the target either.
    std::os::unix::fs::symlink(root.join(".git/hooks"), root.join("hooks")).unwrap();
    assert!(write_to(&ww, "hooks/post-checkout").await.is_err());
    let full = guarded(&root, SandboxMode::DangerFullAccess, &home);
    write_to(&full, ".dsh/config.toml").await.unwrap();
    assert!(root.join(".dsh/config.toml").exists());
}

#[test]
fn a_symlink_swap_cannot_redirect_a_write() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = real(ws.path());
    let sub = root.join("sub");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // A background job keeps exchanging `sub` (a folder) with a symlink to outside, atomically.
    let swapper = {
        let (sub, outside, stop) = (sub.clone(), real(outside.path()), stop.clone());
        std::fs::create_dir_all(&sub).unwrap();
        let spare = sub.with_file_name("spare");
        std::os::unix::fs::symlink(&outside, &spare).unwrap();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &sub,
                    rustix::fs::CWD,
                    &spare,
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
            }
        })
    };
    // The file tools' I/O deadline is a tokio timer.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut ctx = FsContext::new(&root, FilePolicy::new(SandboxMode::WorkspaceWrite, &root));
    ctx.observations = None;
    ctx.policy.temp_roots.clear();
    for i in 0..1000 {
        let args = write::WriteArgs {
            file_path: format!("sub/f{i}.txt"),
            content: "x".into(),
            sandbox_permissions: None,
            justification: None,
        };
        let _ = runtime.block_on(write::run(&args, &ctx, CancellationToken::new()));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    let escaped: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .flatten()
        .collect();
    assert!(
        escaped.is_empty(),
        "{} writes landed outside the workspace",
        escaped.len()
    );
}
