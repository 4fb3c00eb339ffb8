//! #18 item 3: no tool spawn forks dsh. A bare program name with a replaced `PATH` (or a
//! `pre_exec` hook, or a uid change) makes the standard library give up `posix_spawn` for
//! `fork`, which copies the whole process's page tables on every call. glibc's `posix_spawn`
//! creates the child with `CLONE_VM | CLONE_VFORK`; a fork shares no memory (no `CLONE_VM`).
//!
//! Traced with `strace -f`: every process creation by dsh itself, or by its process guard (the
//! `dsh-tool-guard` executable, or dsh re-executed), must share the parent's memory. bash's own
//! forks are bash's business.

use std::collections::HashMap;
use std::process::Stdio;

use serde_json::json;

use super::support::Call;
use super::support::Case;
use super::support::User;
use super::support::bash;
use super::support::dsh_for;
use super::support::scenario;
use super::support::serve;

/// One process creation seen in the trace.
#[derive(Debug)]
struct Creation {
    /// The thread that asked.
    by: u32,
    /// The new thread or process.
    child: u32,
    /// The `clone`/`clone3` flags (`fork`/`vfork` are spelled out).
    flags: String,
}

/// Reads `strace -f -o FILE` output: `PID syscall(args) = RET`, with calls split across
/// threads as `PID syscall(args <unfinished ...>` and `PID <... syscall resumed>rest) = RET`.
fn creations_and_execs(trace: &str) -> (Vec<Creation>, HashMap<u32, Vec<String>>) {
    let mut pending: HashMap<u32, String> = HashMap::new();
    let mut creations = Vec::new();
    let mut execs: HashMap<u32, Vec<String>> = HashMap::new();
    for line in trace.lines() {
        let Some((pid, rest)) = line.split_once(' ') else {
            continue;
        };
        let Ok(pid) = pid.trim().parse::<u32>() else {
            continue;
        };
        let rest = rest.trim_start();
        let whole = if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
            pending.insert(pid, head.to_owned());
            continue;
        } else if rest.starts_with("<... ") {
            let Some(head) = pending.remove(&pid) else {
                continue;
            };
            let tail = rest.split_once("resumed>").map_or("", |(_, tail)| tail);
            format!("{head}{tail}")
        } else {
            rest.to_owned()
        };
        let Some((call, ret)) = whole.rsplit_once(" = ") else {
            continue;
        };
        let ret = ret.split_whitespace().next().unwrap_or("");
        let name = call.split('(').next().unwrap_or("");
        match name {
            "clone" | "clone3" | "fork" | "vfork" => {
                if let Ok(child) = ret.parse::<u32>() {
                    let flags = match name {
                        "fork" | "vfork" => name.to_owned(),
                        _ => call
                            .split("flags=")
                            .nth(1)
                            .map_or("", |f| f.split([',', '}']).next().unwrap_or(""))
                            .to_owned(),
                    };
                    creations.push(Creation {
                        by: pid,
                        child,
                        flags,
                    });
                }
            }
            "execve" if ret == "0" => {
                let program = call.split('"').nth(1).unwrap_or_default().to_owned();
                execs.entry(pid).or_default().push(program);
            }
            _ => {}
        }
    }
    (creations, execs)
}

/// Every creation made by a process running `dsh` (dsh itself, re-executed as the guard) or the
/// guard executable that copies the address space instead of sharing it until exec.
fn forks_by_dsh(trace: &str, root: u32, dsh: &str) -> Vec<String> {
    let (creations, execs) = creations_and_execs(trace);
    // The process (thread group) of every thread, and what each process runs.
    let mut group: HashMap<u32, u32> = HashMap::from([(root, root)]);
    let mut runs: HashMap<u32, String> = HashMap::from([(root, dsh.to_owned())]);
    for creation in &creations {
        let parent_group = *group.get(&creation.by).unwrap_or(&creation.by);
        if creation.flags.contains("CLONE_THREAD") {
            group.insert(creation.child, parent_group);
        } else {
            group.insert(creation.child, creation.child);
            let program = execs
                .get(&creation.child)
                .and_then(|programs| programs.last().cloned())
                .unwrap_or_default();
            runs.insert(creation.child, program);
        }
    }
    creations
        .iter()
        .filter(|creation| !creation.flags.contains("CLONE_THREAD"))
        .filter(|creation| {
            let by_group = group.get(&creation.by).copied().unwrap_or(creation.by);
            let program = runs.get(&by_group).map_or("", String::as_str);
            program == dsh
                || program == "/proc/self/exe"
                || program.ends_with(&format!("/{}", dsh_tool_guard::BINARY_NAME))
        })
        .filter(|creation| !creation.flags.contains("CLONE_VM"))
        .map(|creation| format!("{creation:?}"))
        .collect()
}

#[test]
fn the_trace_reader_tells_a_fork_from_a_spawn() {
    let trace = "\
10 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID, child_tid=0x1, parent_tid=0x1, exit_signal=0, stack=0x1, stack_size=0x1, tls=0x1} <unfinished ...>
10 <... clone3 resumed> => {parent_tid=[11]}, 88) = 11
11 clone3({flags=CLONE_VM|CLONE_VFORK|CLONE_CLEAR_SIGHAND, exit_signal=SIGCHLD, stack=0x1, stack_size=0x9000}, 88) = 12
12 execve(\"/usr/bin/bash\", [\"bash\"], 0x1 /* 3 vars */) = 0
12 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x1) = 13
11 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x1) = 14
14 execve(\"/usr/bin/bash\", [\"bash\"], 0x1 /* 3 vars */) = 0
";
    let forks = forks_by_dsh(trace, 10, "/bin/dsh");
    // bash's own fork (13) is not dsh's; the fork by dsh's worker thread (14) is.
    assert_eq!(forks.len(), 1, "{forks:?}");
    assert!(forks[0].contains("child: 14"), "{forks:?}");
}

fn strace() -> Option<&'static str> {
    ["/usr/bin/strace", "/bin/strace"]
        .into_iter()
        .find(|path| std::path::Path::new(path).exists())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_spawn_stays_on_posix_spawn() {
    let Some(strace) = strace() else {
        eprintln!("SKIPPED every_tool_spawn_stays_on_posix_spawn: strace is not installed");
        return;
    };
    let dsh = std::fs::canonicalize(dsh_for(User::Current)).unwrap();
    let dsh = dsh.to_str().unwrap().to_owned();
    for mode in ["danger-full-access", "workspace-write"] {
        let case = Case::new(User::Current);
        let hooks = json!({"hooks": {"PreToolUse": [{"matcher": "bash", "hooks": [
            {"type": "command", "command": "true"}
        ]}]}});
        case.write_ws("hooks.json", &hooks.to_string());
        // A hook, an MCP stdio server (a bare name: resolved in the child's PATH) and bash,
        // foreground and in the background (its end must not wake the session for a turn the
        // script has no answer for: under load it may end after the turn).
        case.write_home(
            "config.toml",
            &format!(
                "[plugins.session-title]\nenabled = false\n\n\
                 [plugins.hooks-claude-code]\nconfig_path = \"{}\"\n\n\
                 [plugins.jobs]\ncompletion = \"quiet\"\n\n\
                 [[mcp.servers]]\nname = \"probe\"\ncommand = \"sh\"\nargs = [\"-c\", \"exit 0\"]\n",
                case.ws().join("hooks.json").display()
            ),
        );
        let calls = [
            bash("echo foreground"),
            Call {
                tool: "bash",
                args: json!({"command": "echo background", "description": "Probe", "run_in_background": true}),
            },
            bash("sleep 0.2; echo again"),
        ];
        let task = "spawn some tools";
        let server = serve(&scenario(task, &calls)).await;
        let trace_path = case.home_path().join("trace.txt");
        let trace_arg = trace_path.to_str().unwrap().to_owned();
        let out = tokio::task::spawn_blocking({
            let mut command = case.command_under(
                &[
                    strace,
                    "-f",
                    "-qq",
                    "-e",
                    "trace=clone,clone3,fork,vfork,execve",
                    "-e",
                    "signal=none",
                    "-o",
                    &trace_arg,
                ],
                &["exec", task],
                &server.url(),
            );
            command
                .env("DSH_PERMISSION_MODE", mode)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            move || command.output().unwrap()
        })
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let trace = std::fs::read_to_string(&trace_path).unwrap_or_default();
        if !out.status.success() && stderr.contains("ptrace") {
            eprintln!(
                "SKIPPED every_tool_spawn_stays_on_posix_spawn: ptrace is not allowed here: {stderr}"
            );
            return;
        }
        assert!(out.status.success(), "{mode}: {stderr}");
        let root = trace
            .lines()
            .find(|line| line.contains("execve(") && line.contains(&dsh))
            .and_then(|line| line.split_whitespace().next())
            .and_then(|pid| pid.parse::<u32>().ok())
            .expect("the trace shows dsh starting");
        let (creations, _) = creations_and_execs(&trace);
        assert!(
            creations.iter().any(|c| c.flags.contains("CLONE_VFORK")),
            "{mode}: no spawn traced at all:\n{trace}"
        );
        // bash (foreground, background), the hook and the MCP server, each exec'd somewhere.
        let execs = trace
            .lines()
            .filter(|line| line.contains("execve("))
            .count();
        assert!(execs >= 5, "{mode}: only {execs} programs ran:\n{trace}");
        // Unconfined commands run under the small guard installed next to dsh, not under dsh
        // re-executed.
        let guard = dsh_tool_guard::next_to(std::path::Path::new(&dsh)).unwrap();
        let guard_execs = trace
            .lines()
            .filter(|line| line.contains(&format!("execve(\"{}\"", guard.display())))
            .count();
        let self_execs = trace
            .lines()
            .filter(|line| line.contains("execve(\"/proc/self/exe\""))
            .count();
        // Confined commands start through the same executable's confinement step (limits,
        // then `exec` of bwrap), never under a guard: bwrap's namespace is their boundary.
        let confine_execs = trace
            .lines()
            .filter(|line| {
                line.contains(&format!("execve(\"{}\"", guard.display()))
                    && line.contains(&format!("\"{}\"", dsh_tool_guard::CONFINE_ARG))
            })
            .count();
        if mode == "danger-full-access" {
            assert!(guard_execs >= 2, "{mode}: the guard never ran:\n{trace}");
            assert_eq!(confine_execs, 0, "{mode}: a confinement step:\n{trace}");
        } else {
            assert!(confine_execs >= 2, "{mode}: no confinement step:\n{trace}");
            assert_eq!(
                guard_execs, confine_execs,
                "{mode}: a guard under bwrap:\n{trace}"
            );
        }
        assert_eq!(self_execs, 0, "{mode}: dsh re-executed itself:\n{trace}");
        let forks = forks_by_dsh(&trace, root, &dsh);
        assert!(
            forks.is_empty(),
            "{mode}: dsh forked instead of spawning: {forks:#?}"
        );
    }
}
