//! Issue #27 §1: the kernel's tunables and triggers. Run as root, bubblewrap's user namespace
//! maps uid 0 to the host's uid 0, and its `--proc` left `/proc/sys` writable: a `read-only`
//! command wrote `kernel.core_pattern` and the kernel ran its command as host root. Every
//! kernel-tunable and kernel-trigger path must be read-only or absent, whoever runs dsh.
//!
//! The probes only *open* each path for appending (`: >> path`) and write nothing, so they
//! cannot change the host even where a fix is missing. A path masked by `/dev/null` (a
//! character device: writes reach nothing) counts as closed.

use super::support::Case;
use super::support::User;
use super::support::bash;
use super::support::exec;

/// Single files that tune or trigger the kernel, or leak it.
const KERNEL_FILES: &[&str] = &[
    "/proc/sys/kernel/core_pattern",
    "/proc/sys/kernel/hostname",
    "/proc/sys/kernel/modprobe",
    "/proc/sys/vm/drop_caches",
    "/proc/sys/fs/binfmt_misc/register",
    "/proc/sysrq-trigger",
    "/proc/kcore",
    "/proc/kmsg",
    "/proc/kallsyms",
    "/proc/timer_list",
    "/proc/keys",
    "/proc/sys/kernel/ns_last_pid",
    "/sys/kernel/mm/ksm/run",
    "/sys/kernel/uevent_helper",
    "/sys/fs/cgroup/pids/release_agent",
    "/sys/fs/cgroup/release_agent",
    "/sys/fs/cgroup/cgroup.procs",
    "/sys/power/state",
];

/// Folders whose every owner-writable file (a bounded sample) must refuse a write.
const KERNEL_TREES: &[&str] = &[
    "/proc/sys",
    "/proc/irq",
    "/proc/bus",
    "/proc/fs",
    "/proc/acpi",
    "/proc/driver",
    "/proc/tty",
    "/sys/kernel",
    "/sys/fs",
    "/sys/module",
    "/sys/class",
    "/sys/devices",
    "/sys/firmware",
    "/sys/power",
];

/// A shell probe printing `WRITABLE <path>` for each kernel path it could open for writing.
fn write_probe() -> String {
    let files = KERNEL_FILES.join(" ");
    let trees = KERNEL_TREES.join(" ");
    format!(
        "for p in {files}; do [ -e \"$p\" ] && ! [ -c \"$p\" ] && ( : >> \"$p\" ) 2>/dev/null && echo \"WRITABLE $p\"; done; \
         for t in {trees}; do [ -d \"$t\" ] || continue; \
           find \"$t\" -xdev -maxdepth 4 -type f -perm -u+w 2>/dev/null | head -n 300 | \
           while IFS= read -r p; do ( : >> \"$p\" ) 2>/dev/null && echo \"WRITABLE $p\"; done; done; \
         echo probed"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_confined_command_can_write_a_kernel_tunable_or_trigger() {
    for user in User::all() {
        for mode in ["read-only", "workspace-write"] {
            let case = Case::new(user);
            let (out, results) = exec(&case, mode, &[bash(&write_probe())]).await;
            assert!(
                out.status.success(),
                "{user:?} {mode}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(results.len(), 1, "{user:?} {mode}: {results:?}");
            assert!(
                results[0].contains("probed"),
                "{user:?} {mode}: the probe did not run: {}",
                results[0]
            );
            let writable: Vec<&str> = results[0]
                .lines()
                .filter(|line| line.starts_with("WRITABLE "))
                .collect();
            assert!(
                writable.is_empty(),
                "{user:?} {mode}: kernel paths open for writing: {writable:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_leaks_read_nothing_and_never_block() {
    // `/proc/kmsg` blocks a reader forever and `/proc/kcore` maps the kernel's memory: both,
    // and the kernel's symbol table, are masked by an empty file.
    for user in User::all() {
        for mode in ["read-only", "workspace-write"] {
            let case = Case::new(user);
            let (out, results) = exec(
                &case,
                mode,
                &[bash(
                    "for p in /proc/kmsg /proc/kcore /proc/kallsyms /proc/timer_list; do \
                       [ -e \"$p\" ] || continue; n=$(timeout 5 head -c 64 \"$p\" 2>/dev/null | wc -c); \
                       echo \"$p $n\"; done; echo probed",
                )],
            )
            .await;
            assert!(out.status.success(), "{user:?} {mode}");
            assert!(
                results[0].contains("probed"),
                "{user:?} {mode}: {results:?}"
            );
            for line in results[0].lines().filter(|l| l.starts_with("/proc/")) {
                assert!(
                    line.ends_with(" 0"),
                    "{user:?} {mode}: a kernel leak is readable: {line}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confined_commands_share_no_ipc_with_the_host() {
    // SysV shared memory, semaphores and message queues are checked by uid alone: a command
    // left in the host's IPC namespace as (host) root could attach to root's segments.
    for user in User::all() {
        for mode in ["read-only", "workspace-write"] {
            let case = Case::new(user);
            let (out, results) = exec(
                &case,
                mode,
                &[bash("readlink /proc/self/ns/ipc; echo probed")],
            )
            .await;
            assert!(out.status.success(), "{user:?} {mode}");
            assert!(
                results[0].contains("probed"),
                "{user:?} {mode}: {results:?}"
            );
            let host = std::fs::read_link("/proc/self/ns/ipc").unwrap();
            assert!(
                !results[0].contains(host.to_string_lossy().as_ref()),
                "{user:?} {mode}: the command shares the host's IPC namespace: {}",
                results[0]
            );
        }
    }
}
