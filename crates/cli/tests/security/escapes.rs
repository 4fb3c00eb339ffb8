//! Escapes 1 and 2: capabilities inside the sandbox, and the user's terminal.

use std::io::Read;
use std::time::Duration;
use std::time::Instant;

use portable_pty::CommandBuilder;
use portable_pty::PtySize;
use portable_pty::native_pty_system;

use super::support::Case;
use super::support::User;
use super::support::bash;
use super::support::exec;
use super::support::outside;
use super::support::scenario;
use super::support::serve;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confined_command_cannot_remount_the_root_writable() {
    for user in User::all() {
        for mode in ["read-only", "workspace-write"] {
            let case = Case::new(user);
            let elsewhere = outside(&case);
            let target = elsewhere.path().join("escaped");
            let (out, results) = exec(
                &case,
                mode,
                &[
                    bash("grep -E '^Cap(Eff|Prm|Bnd):' /proc/self/status"),
                    bash(&format!(
                        "mount -o remount,rw,bind / 2>&1; echo out > {}",
                        target.display()
                    )),
                ],
            )
            .await;
            assert!(
                out.status.success(),
                "{user:?} {mode}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(results.len(), 2, "{user:?} {mode}: {results:?}");
            for line in results[0].lines() {
                assert!(
                    line.ends_with("0000000000000000"),
                    "{user:?} {mode}: {}",
                    results[0]
                );
            }
            assert!(
                !target.exists(),
                "{user:?} {mode}: wrote outside: {}",
                results[1]
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_tool_command_can_type_into_the_users_terminal() {
    // TIOCSTI on /dev/tty pushes a line into the terminal's input queue; the user's own shell
    // would run it after dsh exits. The shell here reads one line after dsh to see.
    let inject = r#"perl -e 'open(my $t, "+<", "/dev/tty") or die "no terminal: $!\n"; ioctl($t, 0x5412, $_) or die "ioctl: $!\n" for split //, "echo INJECTED\n"' 2>&1; echo probed"#;
    for user in User::all() {
        for mode in ["read-only", "workspace-write", "danger-full-access"] {
            let case = Case::new(user);
            let task = "probe the terminal";
            let server = serve(&scenario(task, &[bash(inject)])).await;
            let events = case.workspace.path().join("events.jsonl");
            let std_command =
                case.command(&["exec", "--output", "stream-json", task], &server.url());
            let mut line = vec![std_command.get_program().to_string_lossy().into_owned()];
            line.extend(
                std_command
                    .get_args()
                    .map(|a| a.to_string_lossy().into_owned()),
            );
            let quoted: Vec<String> = line
                .iter()
                .map(|arg| format!("'{}'", arg.replace('\'', r"'\''")))
                .collect();
            let script = format!(
                "{} >'{}' 2>&1; IFS= read -r -t 3 line && echo \"GOT[$line]\"; echo END-OF-PROBE",
                quoted.join(" "),
                events.display()
            );
            let pair = native_pty_system()
                .openpty(PtySize {
                    rows: 24,
                    cols: 200,
                    pixel_width: 0,
                    pixel_height: 0,
                })
                .unwrap();
            let mut builder = CommandBuilder::new("bash");
            builder.args(["-c", &script]);
            builder.cwd(case.workspace.path());
            for (key, value) in std_command.get_envs() {
                match value {
                    Some(value) => builder.env(key, value),
                    None => builder.env_remove(key),
                }
            }
            builder.env("DSH_PERMISSION_MODE", mode);
            let mut child = pair.slave.spawn_command(builder).unwrap();
            drop(pair.slave);
            let mut reader = pair.master.try_clone_reader().unwrap();
            let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = reader.read(&mut buf) {
                    if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
            });
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut seen = String::new();
            while Instant::now() < deadline && !seen.contains("END-OF-PROBE") {
                if let Ok(chunk) = rx.recv_timeout(Duration::from_millis(100)) {
                    seen.push_str(&String::from_utf8_lossy(&chunk));
                }
            }
            let _ = child.kill();
            let _ = child.wait();
            assert!(
                seen.contains("END-OF-PROBE"),
                "{user:?} {mode}: the probe never finished: {seen}"
            );
            assert!(
                !seen.contains("GOT["),
                "{user:?} {mode}: a tool typed into the terminal: {seen}"
            );
            let output = std::process::Output {
                status: std::process::ExitStatus::default(),
                stdout: std::fs::read(&events).unwrap_or_default(),
                stderr: Vec::new(),
            };
            let results = super::support::tool_results(&output);
            assert!(
                results.len() == 1 && results[0].contains("probed"),
                "{user:?} {mode}: the probe did not run: {results:?} {seen}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_tools_refuse_dsh_through_its_thread_ids() {
    // Unconfined, bash can name dsh's threads; it plants symlinks to them in the workspace
    // for the file tools (which run inside dsh) to follow.
    let plant = || {
        bash(
            "g=$(sed 's/.*) //' /proc/$$/stat | cut -d' ' -f2); d=$(sed 's/.*) //' /proc/$g/stat | cut -d' ' -f2); \
         t=$(ls /proc/$d/task | grep -vx \"$d\" | head -1); \
         ln -s /proc/$t/status tid-status; ln -s /proc/$t/maps tid-maps; ln -s /proc/$t tid-dir; \
         ln -s /proc/$d/task/$t/status task-status; echo planted $d $t",
        )
    };
    let reads = [
        ("read", "tid-status"),
        ("read", "tid-maps"),
        ("read", "task-status"),
        ("read", "tid-dir/cmdline"),
    ];
    for user in User::all() {
        let case = Case::new(user);
        let mut calls = vec![plant()];
        for (tool, path) in reads {
            calls.push(super::support::Call {
                tool,
                args: serde_json::json!({"file_path": path}),
            });
        }
        calls.push(super::support::Call {
            tool: "grep",
            args: serde_json::json!({"pattern": "Tgid", "path": "tid-dir"}),
        });
        let (out, results) = exec(&case, "danger-full-access", &calls).await;
        assert!(out.status.success(), "{user:?}: {out:?}");
        assert!(results[0].contains("planted"), "{user:?}: {results:?}");
        for (index, result) in results.iter().enumerate().skip(1) {
            assert!(
                result.contains("is refused in every mode")
                    && result.contains("dsh's own process")
                    && !result.contains("Tgid"),
                "{user:?} call {index}: {result}"
            );
        }
    }
}
