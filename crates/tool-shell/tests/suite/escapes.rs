//! Ways out of the sandbox a hostile model could take through `bash`, each reproduced: held
//! capabilities (remount the root read-write), the user's controlling terminal (TIOCSTI),
//! the shared `/tmp`, dsh's own home, daemon control sockets, the network under `read-only`,
//! and the workspace's dsh and git configuration under `workspace-write`.

use std::path::Path;

use dsh_tool_shell::BashArgs;
use dsh_tool_shell::SandboxConfig;
use dsh_tool_shell::SandboxMode;
use dsh_tool_shell::ShellContext;
use dsh_tool_shell::bash;
use dsh_tool_shell::sandbox::NetworkAccess;
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;

use super::sandbox::outside_tmp;
use super::sandbox::sandboxed;

async fn text(ctx: &ShellContext, command: &str) -> String {
    let out = bash::run(
        BashArgs::new(command, "Probe the sandbox"),
        ctx,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    bash::render_text(&out)
}

const CONFINED: [SandboxMode; 2] = [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite];

#[tokio::test]
async fn confined_commands_hold_no_capabilities() {
    let ws = tempfile::tempdir().unwrap();
    for mode in CONFINED {
        let ctx = sandboxed(ws.path(), mode);
        let out = text(
            &ctx,
            "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status",
        )
        .await;
        for line in out.lines() {
            assert!(line.ends_with("0000000000000000"), "{mode:?}: {out}");
        }
        assert_eq!(out.lines().count(), 5, "{out}");
    }
}

#[tokio::test]
async fn a_remount_cannot_make_the_root_writable() {
    let ws = tempfile::tempdir().unwrap();
    let elsewhere = outside_tmp();
    let target = std::fs::canonicalize(elsewhere.path())
        .unwrap()
        .join("escaped");
    for mode in CONFINED {
        let ctx = sandboxed(ws.path(), mode);
        let out = text(
            &ctx,
            &format!(
                "mount -o remount,rw,bind / 2>/dev/null; mount -o remount,rw / 2>/dev/null; echo out > {}",
                target.display()
            ),
        )
        .await;
        assert!(!target.exists(), "{mode:?} wrote outside: {out}");
    }
}

/// `(session id, tty_nr)` of the command's shell, from `/proc/$$/stat`.
fn session_and_tty(out: &str) -> (i64, i64) {
    let fields: Vec<&str> = out.rsplit(')').next().unwrap().split_whitespace().collect();
    (fields[3].parse().unwrap(), fields[4].parse().unwrap())
}

#[tokio::test]
async fn every_tool_process_runs_in_a_session_of_its_own() {
    let ws = tempfile::tempdir().unwrap();
    // Read from /proc rather than getsid(2): under CI the test runner's own session may
    // lie outside this PID namespace, where the kernel reports it as 0.
    let own_stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let (own_session, _) = session_and_tty(&own_stat);
    for mode in [
        SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite,
        SandboxMode::DangerFullAccess,
    ] {
        let ctx = sandboxed(ws.path(), mode);
        let out = text(&ctx, "cat /proc/$$/stat").await;
        let (session, tty) = session_and_tty(&out);
        // 0 means "a session outside this PID namespace": the caller's.
        assert!(session != 0 && session != own_session, "{mode:?}: {out}");
        assert_eq!(tty, 0, "{mode:?} has a controlling terminal: {out}");
        let out = text(&ctx, "( : < /dev/tty ) 2>&1 && echo opened").await;
        assert!(!out.contains("opened"), "{mode:?} opened /dev/tty: {out}");
    }
}

#[tokio::test]
async fn each_confined_command_gets_a_private_tmp() {
    let ws = tempfile::tempdir().unwrap();
    let name = format!("/tmp/dsh-private-{}", std::process::id());
    for mode in CONFINED {
        let ctx = sandboxed(ws.path(), mode);
        assert_eq!(
            text(&ctx, &format!("echo mine > {name} && cat {name}")).await,
            "mine\n",
            "{mode:?}"
        );
        assert!(!Path::new(&name).exists(), "{mode:?} wrote the host's /tmp");
        let out = text(&ctx, &format!("cat {name}")).await;
        assert!(out.contains("No such file or directory"), "{mode:?}: {out}");
        // The host's /tmp does not show through either.
        let host = tempfile::NamedTempFile::new_in("/tmp").unwrap();
        let out = text(&ctx, &format!("cat {}", host.path().display())).await;
        assert!(out.contains("No such file or directory"), "{mode:?}: {out}");
    }
}

#[tokio::test]
async fn dsh_home_is_hidden_but_the_session_log_stays_readable() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let home_path = std::fs::canonicalize(home.path()).unwrap();
    std::fs::write(home_path.join("config.toml"), "[model]\n").unwrap();
    std::fs::create_dir_all(home_path.join("sessions")).unwrap();
    let log = home_path.join("sessions/s1.jsonl");
    std::fs::write(&log, "{\"seq\":0}\n").unwrap();
    for mode in CONFINED {
        let mut ctx = sandboxed(ws.path(), mode);
        ctx.dsh_home = Some(home_path.clone());
        ctx.session_jsonl = Some(log.clone());
        let out = text(&ctx, "cat \"$DSH_HOME/config.toml\"").await;
        assert!(out.contains("No such file or directory"), "{mode:?}: {out}");
        assert_eq!(
            text(&ctx, "cat \"$DSH_SESSION_JSONL\"").await,
            "{\"seq\":0}\n",
            "{mode:?}"
        );
        let out = text(&ctx, "echo junk >> \"$DSH_SESSION_JSONL\"").await;
        assert!(out.contains("Read-only file system"), "{mode:?}: {out}");
    }
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "{\"seq\":0}\n");
}

#[tokio::test]
async fn credential_folders_are_hidden() {
    let ws = tempfile::tempdir().unwrap();
    let fake_home = outside_tmp();
    let ssh = std::fs::canonicalize(fake_home.path())
        .unwrap()
        .join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(ssh.join("id_ed25519"), "PRIVATE KEY").unwrap();
    for mode in CONFINED {
        let mut ctx = sandboxed(ws.path(), mode);
        let policy = ctx.sandbox.take().unwrap();
        ctx.sandbox = Some(policy.hiding(dsh_secrets::secret_paths(ssh.parent().unwrap())));
        let out = text(&ctx, &format!("cat {}/id_ed25519", ssh.display())).await;
        assert!(!out.contains("PRIVATE KEY"), "{mode:?}: {out}");
    }
}

#[tokio::test]
async fn daemon_sockets_cannot_be_reached() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED daemon_sockets_cannot_be_reached: needs root to place a socket in /run");
        return;
    }
    let path = format!("/run/dsh-escape-test-{}.sock", std::process::id());
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let ws = tempfile::tempdir().unwrap();
    let probe = format!(
        "python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"{path}\"); print(\"connected\")' 2>&1 | tail -1"
    );
    // Let the socket scan's cache see the new socket.
    tokio::time::sleep(std::time::Duration::from_millis(5200)).await;
    for mode in CONFINED {
        let ctx = sandboxed(ws.path(), mode);
        let out = text(&ctx, &probe).await;
        assert!(
            !out.contains("connected\n"),
            "{mode:?} reached the daemon: {out}"
        );
    }
    // The socket goes away while the scan still lists it: no confined command may fail for
    // it (bwrap cannot place a mask on a path that no longer exists).
    drop(listener);
    std::fs::remove_file(&path).unwrap();
    for mode in CONFINED {
        let ctx = sandboxed(ws.path(), mode);
        assert_eq!(
            text(&ctx, "echo still fine").await,
            "still fine\n",
            "{mode:?}"
        );
    }
}

#[tokio::test]
async fn read_only_has_no_network_and_workspace_write_follows_the_policy() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let probe =
        format!("(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo reached || echo cut off");
    let ws = tempfile::tempdir().unwrap();
    let ro = sandboxed(ws.path(), SandboxMode::ReadOnly);
    assert_eq!(text(&ro, &probe).await, "cut off\n");
    let ww = sandboxed(ws.path(), SandboxMode::WorkspaceWrite);
    assert_eq!(text(&ww, &probe).await, "reached\n");
    let mut denied = sandboxed(ws.path(), SandboxMode::WorkspaceWrite);
    denied.sandbox = Some(
        SandboxConfig {
            network: NetworkAccess::Deny,
            ..SandboxConfig::new(SandboxMode::WorkspaceWrite)
        }
        .policy_for(ws.path()),
    );
    assert_eq!(text(&denied, &probe).await, "cut off\n");
    drop(listener);
}

#[tokio::test]
async fn workspace_write_keeps_dsh_and_git_configuration_read_only() {
    let ws = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir_all(root.join(".dsh")).unwrap();
    std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
    std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
    let ctx = sandboxed(ws.path(), SandboxMode::WorkspaceWrite);
    for (command, path) in [
        (
            "printf '[plugins.sandbox]\\nmode = \"danger-full-access\"\\n' > .dsh/config.toml",
            ".dsh/config.toml",
        ),
        (
            "echo 'touch /tmp/pwned' > .git/hooks/pre-commit",
            ".git/hooks/pre-commit",
        ),
        (
            "echo '[core]\\nfsmonitor = evil' >> .git/config",
            ".git/config",
        ),
    ] {
        let out = text(&ctx, command).await;
        assert!(
            out.contains("[sandbox: file access denied under workspace-write mode]"),
            "{command}: {out}"
        );
        let content = std::fs::read_to_string(root.join(path)).unwrap_or_default();
        assert!(
            !content.contains("danger") && !content.contains("pwned") && !content.contains("evil"),
            "{path}: {content}"
        );
    }
    // git's whole folder is read-only (its index decides which nested repositories git
    // enters); the rest of the workspace stays writable.
    let out = text(&ctx, "echo ok > .git/index; echo x > f && cat f").await;
    assert!(out.contains("x\n"), "{out}");
    assert!(!root.join(".git/index").exists());
    assert_eq!(std::fs::read_to_string(root.join("f")).unwrap(), "x\n");
}

#[tokio::test]
async fn unconfined_detached_children_end_with_their_call() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = sandboxed(ws.path(), SandboxMode::DangerFullAccess);
    let marker = format!("3000.{}", std::process::id() % 100_000 + 1);
    let out = text(
        &ctx,
        &format!(
            "setsid sleep {marker} & nohup sleep {marker} >/dev/null 2>&1 & (setsid bash -c 'sleep {marker} & wait' &) ; sleep 0.2; echo started"
        ),
    )
    .await;
    assert_eq!(out, "started\n");
    assert!(
        super::support::all_dead(&super::sandbox::pids_with(&marker)).await,
        "survivors: {:?}",
        super::sandbox::pids_with(&marker)
    );
}

#[tokio::test]
async fn an_abandoned_unconfined_call_leaves_no_process() {
    let ws = tempfile::tempdir().unwrap();
    let ctx = sandboxed(ws.path(), SandboxMode::DangerFullAccess);
    let marker = format!("4000.{}", std::process::id() % 100_000 + 1);
    let command = format!("setsid sleep {marker} & sleep {marker}");
    let run = bash::run(
        BashArgs::new(command, "Sleep"),
        &ctx,
        CancellationToken::new(),
    );
    // The caller gives up without cancelling: the future is dropped mid-flight.
    let _ = tokio::time::timeout(std::time::Duration::from_millis(400), run).await;
    let pids = super::sandbox::pids_with(&marker);
    assert!(
        super::support::all_dead(&pids).await,
        "survivors: {:?}",
        super::sandbox::pids_with(&marker)
    );
}
